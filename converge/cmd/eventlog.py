"""Events in `openstack stack event list`'s default format, `log`: one
line per event, "TIME ID [RESOURCE]: STATUS  REASON" (heatclient's
common/utils.py event_log_formatter)."""

from cliff.formatters import base


def line(event):
    """One event (a dict of the event list's columns) as a log line."""
    return '%s %s [%s]: %s  %s' % (
        (event.get('event_time') or '').replace('T', ' '),
        event.get('id') or '', event.get('resource_name') or '',
        event.get('resource_status') or '',
        event.get('resource_status_reason') or '')


class LogFormatter(base.ListFormatter):
    """`-f log`: the rows as log lines (no columns to choose)."""

    def add_argument_group(self, parser):
        pass

    def emit_list(self, column_names, data, stdout, parsed_args):
        lines = [line(dict(zip(column_names, row))) for row in data]
        stdout.write('\n'.join(lines))
        stdout.write('\n')

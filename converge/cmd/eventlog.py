"""Events in `openstack stack event list`'s default format, `log`: one
line per event, "TIME ID [RESOURCE]: STATUS  REASON" (heatclient's
common/utils.py event_log_formatter)."""

from cliff.formatters import base


class Paths:
    """Each event's resource as OSC's log names it with --nested-depth:
    a nested stack's resource by its path from the top (`inner.word`),
    learnt from the events of the resources that own nested stacks
    (their physical id is the nested stack's id)."""

    def __init__(self):
        self.owner = {}   # a nested stack's id -> (its owner's stack, name)

    def learn(self, event):
        phys, stack_id = event.get('physical_resource_id'), \
            event.get('stack_id')
        if phys and stack_id and phys != stack_id:
            self.owner.setdefault(phys, (stack_id, event['resource_name']))

    def name(self, event):
        path = [event['resource_name']]
        stack_id, seen = event.get('stack_id'), set()
        while stack_id in self.owner and stack_id not in seen:
            seen.add(stack_id)
            stack_id, owner = self.owner[stack_id]
            path.insert(0, owner)
        return '.'.join(path)


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

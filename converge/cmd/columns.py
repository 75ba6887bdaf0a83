"""How `openstack stack …` prints what is not a plain value: a map or a
list is YAML in a table, JSON text in `value` and `shell`, and stays
data in `json` and `yaml` (python-heatclient's osc/v1/common.py); a
deployment's long outputs are indented and cut to their last lines
(heatclient/common/format_utils.py)."""

import json

from cliff import columns


class YamlColumn(columns.FormattableColumn):
    def human_readable(self):
        # PyYAML imported here: most commands print no map or list in a
        # table, and each is a process of its own (issue 41)
        import yaml
        return yaml.safe_dump(self._value, default_flow_style=False)


class JsonColumn(columns.FormattableColumn):
    def human_readable(self):
        return json.dumps(self._value, indent=2, ensure_ascii=False,
                          separators=(', ', ': '))


class JsonTextColumn(JsonColumn):
    """JSON text in the formats of text (value, shell, csv), which print
    a column's machine-readable value: a Python repr otherwise."""

    def machine_readable(self):
        return self.human_readable()


def complex_column(formatter):
    """The column class a map or list is printed with in that output
    format, or None where it stays data (json, yaml)."""
    if formatter == 'table':
        return YamlColumn
    if formatter in ('shell', 'value', 'html', 'csv'):
        return JsonTextColumn
    return None


def json_column(formatter, value):
    """`value` as JSON text in a table and the formats of text, data in
    json and yaml (OSC's update --dry-run columns)."""
    if complex_column(formatter) is JsonTextColumn:
        return JsonTextColumn(value)
    return JsonColumn(value)


def values(formatter, data, keys):
    """Each key's value in `data`, its maps and lists as `formatter`
    prints them."""
    return [wrap(formatter, data.get(k))
            if isinstance(data.get(k), (dict, list)) else data.get(k)
            for k in keys]


def wrap(formatter, value):
    """`value` as `formatter` prints a complex value (None stays None)."""
    cls = complex_column(formatter)
    if cls is None or value is None:
        return value
    return cls(value)


#: lines of a deployment's stdout or stderr shown without --long
TRUNCATE_LINES = 10


def indent_and_truncate(text, spaces=0, truncate=False, prefix=None,
                        postfix=None):
    """`text` indented; with `truncate`, only its last lines, between
    `prefix` and `postfix` where it was cut."""
    if text is None:
        return None
    lines = str(text).splitlines()
    if truncate and len(lines) > TRUNCATE_LINES:
        lines = lines[-TRUNCATE_LINES:]
        if prefix is not None:
            lines.insert(0, prefix)
        if postfix is not None:
            lines.append(postfix)
    return '\n'.join(' ' * spaces + line for line in lines)


def deployment_output(out, data, name, long=False):
    """One output of a deployment, as `openstack software deployment
    output show` and `stack failures list` print it (YAML-like)."""
    data = data or {}
    if name in ('deploy_stdout', 'deploy_stderr'):
        text = indent_and_truncate(
            data.get(name), spaces=4, truncate=not long, prefix='...',
            postfix='(truncated, view all with --long)')
        out.write('  %s: |\n%s\n' % (name, text))
    else:
        out.write('  %s: %s\n' % (name, data.get(name)))

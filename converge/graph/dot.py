"""DOT rendering of a stack's dependency graph (`converge stack graph`)."""

COLOURS = {'COMPLETE': 'palegreen', 'FAILED': 'salmon',
           'IN_PROGRESS': 'lightgoldenrod'}


def _q(s):
    return '"%s"' % str(s).replace('\\', '\\\\').replace('"', '\\"')


def render(name, requires, types=None, states=None):
    """:param requires: resource -> set of resources it depends on"""
    types = types or {}
    states = states or {}
    lines = ['digraph %s {' % _q(name), '  rankdir=BT;',
             '  node [shape=box, style="rounded,filled", fillcolor=white];']
    for res in requires:
        label = res
        if res in types:
            label += '\\n' + types[res]
        attrs = ['label=%s' % _q(label).replace('\\\\n', '\\n')]
        state = states.get(res)
        if state:
            status = state.split('_', 1)[-1]
            attrs.append('fillcolor=%s' % COLOURS.get(status, 'white'))
            attrs.append('tooltip=%s' % _q(state))
        lines.append('  %s [%s];' % (_q(res), ', '.join(attrs)))
    for res, deps in requires.items():
        for dep in sorted(deps):
            lines.append('  %s -> %s;' % (_q(res), _q(dep)))
    lines.append('}')
    return '\n'.join(lines) + '\n'

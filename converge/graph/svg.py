"""SVG of a stack's dependency graph without Graphviz (`converge stack
graph --format svg` when `dot` is not on PATH).

A layered layout: a resource's layer is its dependency depth (0 for one
that needs nothing, else one more than the deepest it needs), layer 0 at
the top, so the graph reads in the order a create walks it; the arrows
go from a resource to what it needs, as in the DOT. Resources of a layer
are side by side in name order. No crossing reduction: the picture is for
a glance, Graphviz draws better ones when it is installed.

The input is the DOT that converge.graph.dot writes (the service layer's
answer, embedded and remote alike), read back by `parse`.
"""

import re
from xml.sax import saxutils

BOX_W, BOX_H = 200, 46
GAP_X, GAP_Y = 24, 56
MARGIN = 20

#: a resource's fill by its status (the DOT's colours, in SVG's names)
COLOURS = {'COMPLETE': '#98fb98', 'FAILED': '#fa8072',
           'IN_PROGRESS': '#eedd82'}

_QUOTED = r'"((?:[^"\\]|\\.)*)"'
_NODE = re.compile(r'^\s*' + _QUOTED + r'\s*\[(.*)\];\s*$')
_EDGE = re.compile(r'^\s*' + _QUOTED + r'\s*->\s*' + _QUOTED + r';\s*$')
_ATTR = re.compile(r'(\w+)=(' + _QUOTED + r'|[^,\s]+)')
_NAME = re.compile(r'^digraph\s+' + _QUOTED)


def _unq(text):
    return re.sub(r'\\(.)', r'\1', text)


def parse(text):
    """(name, requires, types, states) of converge's DOT: the arguments
    converge.graph.dot.render was given."""
    name, requires, types, states = '', {}, {}, {}
    for line in text.splitlines():
        m = _NAME.match(line)
        if m:
            name = _unq(m.group(1))
            continue
        m = _EDGE.match(line)
        if m:
            requires.setdefault(_unq(m.group(1)), set()).add(
                _unq(m.group(2)))
            continue
        m = _NODE.match(line)
        if m and m.group(1) not in ('node', 'edge', 'graph'):
            res = _unq(m.group(1))
            requires.setdefault(res, set())
            for key, value, quoted in _ATTR.findall(m.group(2)):
                if key == 'label' and quoted:
                    # "name\ntype": the type after the first \n
                    parts = quoted.split('\\n', 1)
                    if len(parts) == 2:
                        types[res] = _unq(parts[1])
                elif key == 'tooltip' and quoted:
                    states[res] = _unq(quoted)
    return name, requires, types, states


def layers(requires):
    """Each resource's dependency depth (a cycle, which a stored stack
    cannot have, is cut where it closes)."""
    depth = {}

    def visit(res, seen):
        if res in depth:
            return depth[res]
        if res in seen:
            return 0
        seen.add(res)
        deps = [d for d in requires.get(res, ()) if d in requires]
        depth[res] = 1 + max((visit(d, seen) for d in deps), default=-1)
        return depth[res]

    for res in sorted(requires):
        visit(res, set())
    return depth


def layout(requires, box=(BOX_W, BOX_H), gap=(GAP_X, GAP_Y), top=24,
           columns=None, key=None, wrap_gap=None):
    """Where each resource's box goes: ({resource: (x, y)}, width,
    height). Layer by layer (`layers`), each centred; a layer of more
    than `columns` resources is cut into rows of that many (a group's
    nested stack of 1,000 members side by side would be 200,000 px
    wide), `wrap_gap` apart (default: as layers are). `top`: room above
    the first row (a title); `key`: the order of a layer's resources
    (default: by name)."""
    (box_w, box_h), (gap_x, gap_y) = box, gap
    wrap_gap = gap_y if wrap_gap is None else wrap_gap
    depth = layers(requires)
    by_layer = {}
    for res in sorted(depth, key=key):
        by_layer.setdefault(depth[res], []).append(res)
    rows = []   # (the row's resources, the gap above it)
    for level in sorted(by_layer):
        members = by_layer[level]
        step = columns or len(members) or 1
        rows += [(members[i:i + step], gap_y if i == 0 else wrap_gap)
                 for i in range(0, len(members), step)]
    widest = max((len(r) for r, _ in rows), default=0)
    width = 2 * MARGIN + max(widest, 1) * (box_w + gap_x) - gap_x
    where = {}
    y = MARGIN + top
    for n, (members, above) in enumerate(rows):
        y += above if n else 0
        row_w = len(members) * (box_w + gap_x) - gap_x
        x0 = (width - row_w) / 2
        for i, res in enumerate(members):
            where[res] = (x0 + i * (box_w + gap_x), y)
        y += box_h
    return where, width, max(y, MARGIN + top + box_h) + MARGIN


def render(name, requires, types=None, states=None):
    """The graph as an SVG document (text). Each resource is a <g
    class="node"> with data-resource (its name), its box and its name and
    type; each dependency a <g class="edge"> with data-from/data-to."""
    types = types or {}
    states = states or {}
    where, width, height = layout(requires)
    q, e = saxutils.quoteattr, saxutils.escape
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">'
           % (width, height, width, height),
           '<title>%s</title>' % e(name),
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" '
           'refY="5" markerWidth="8" markerHeight="8" orient="auto">'
           '<path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>',
           '<text x="%d" y="%d" font-size="14" font-weight="bold">%s</text>'
           % (MARGIN, MARGIN + 4, e(name))]
    for res in sorted(requires):
        x1, y1 = where[res]
        for dep in sorted(requires[res]):
            if dep not in where:
                continue
            x2, y2 = where[dep]
            # from the top of the dependent to the bottom of what it needs
            out.append('<g class="edge" data-from=%s data-to=%s><line '
                       'x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" '
                       'stroke="#555" marker-end="url(#arrow)"/></g>'
                       % (q(res), q(dep), x1 + BOX_W / 2, y1,
                          x2 + BOX_W / 2, y2 + BOX_H))
    for res in sorted(where):
        x, y = where[res]
        state = states.get(res)
        fill = COLOURS.get(state.split('_', 1)[-1], 'white') \
            if state else 'white'
        label = res if len(res) <= 30 else res[:29] + '\u2026'
        kind = types.get(res, '')
        out.append(
            '<g class="node" data-resource=%s%s><title>%s</title>'
            '<rect x="%.1f" y="%.1f" width="%d" height="%d" rx="6" '
            'fill="%s" stroke="#333"/>'
            '<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>'
            '<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555" '
            'font-size="10">%s</text></g>' % (
                q(res), ' data-status=%s' % q(state) if state else '',
                e(res + ('\n' + kind if kind else '') +
                  ('\n' + state if state else '')),
                x, y, BOX_W, BOX_H, fill,
                x + BOX_W / 2, y + 19, e(label),
                x + BOX_W / 2, y + 35, e(kind)))
    out.append('</svg>')
    return '\n'.join(out) + '\n'


def from_dot(text):
    """converge's DOT of a stack as SVG."""
    return render(*parse(text))

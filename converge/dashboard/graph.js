// One stack's dependency graph as SVG, drawn where converge-api laid it
// out (GET .../layout: converge/engine/live.py, converge/graph/svg.py):
// a box per resource, a line from each to what it needs. A box's fill
// is its status, a dashed purple border its drift; the box of a nested
// stack or group (folded) has a bar of its members' statuses.
'use strict';

const Graph = (() => {
  const NS = 'http://www.w3.org/2000/svg';

  function el(name, attrs, parent) {
    const node = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (parent) parent.appendChild(node);
    return node;
  }

  // 'UPDATE_IN_PROGRESS' -> 'IN_PROGRESS'; what was never made or is
  // gone has a class of its own
  function statusClass(status) {
    if (!status) return 'st-other';
    if (status.startsWith('INIT')) return 'st-INIT';
    if (status === 'DELETE_COMPLETE') return 'st-DELETED';
    return 'st-' + status.slice(status.indexOf('_') + 1);
  }

  function short(text, room) {
    return text.length <= room ? text : text.slice(0, room - 1) + '\u2026';
  }

  // Draw `layout` into `container`; info(name) -> {status, reason, type,
  // drift, counts} (counts: a folded node's members by status class).
  // Returns update(name), which redraws one box from info(name).
  function draw(container, layout, info, onClick) {
    container.textContent = '';
    const [w, h] = layout.box;
    const svg = el('svg', {
      width: layout.width, height: layout.height,
      viewBox: `0 0 ${layout.width} ${layout.height}`,
      'font-family': 'sans-serif'}, container);
    const defs = el('defs', {}, svg);
    const marker = el('marker', {id: 'arrow', viewBox: '0 0 10 10', refX: 10,
                                 refY: 5, markerWidth: 6, markerHeight: 6,
                                 orient: 'auto'}, defs);
    el('path', {d: 'M0,0 L10,5 L0,10 z', fill: '#777'}, marker);
    const at = new Map(layout.nodes.map((n) => [n.name, n]));
    const edges = el('g', {}, svg);
    for (const [from, to] of layout.edges) {
      const a = at.get(from), b = at.get(to);
      if (!a || !b) continue;
      el('line', {class: 'edge', x1: a.x + w / 2, y1: a.y, x2: b.x + w / 2,
                  y2: b.y + h, 'marker-end': 'url(#arrow)'}, edges);
    }
    const boxes = new Map();
    for (const n of layout.nodes) {
      const g = el('g', {class: 'node', 'data-resource': n.name}, svg);
      const title = el('title', {}, g);
      el('rect', {class: 'box', x: n.x, y: n.y, width: w, height: h, rx: 4}, g);
      const label = el('text', {x: n.x + w / 2, y: n.y + (layout.compact ? h / 2 + 4 : 18),
                                'text-anchor': 'middle'}, g);
      if (layout.compact) label.setAttribute('font-size', '10');
      label.textContent = short(n.name, layout.compact ? 9 : 22);
      let type = null;
      if (!layout.compact) {
        type = el('text', {class: 'type', x: n.x + w / 2, y: n.y + 32,
                           'text-anchor': 'middle'}, g);
      }
      const bar = el('g', {}, g);
      g.addEventListener('click', () => onClick(n.name));
      boxes.set(n.name, {g, title, type, bar, n});
    }

    function update(name) {
      const b = boxes.get(name);
      if (!b) return;
      const i = info(name) || {};
      const classes = ['node', statusClass(i.status)];
      if (i.drift) classes.push('drift');
      if (i.counts) classes.push('nested');
      if (i.selected) classes.push('selected');
      if (i.waiting) classes.push('waiting');
      b.g.setAttribute('class', classes.join(' '));
      b.g.setAttribute('data-status', i.status || '');
      b.g.setAttribute('data-drift', i.drift ? 'true' : 'false');
      b.title.textContent = [name, i.type, i.status, i.reason,
                             i.drift ? 'drifted: ' + i.drift : '']
        .filter(Boolean).join('\n');
      if (b.type) b.type.textContent = short(i.type || '', 26);
      b.bar.textContent = '';
      if (i.counts) {
        // the members by status, left to right, along the box's foot
        const total = Object.values(i.counts).reduce((s, c) => s + c, 0);
        let x = b.n.x + 3;
        const room = w - 6, y = b.n.y + h - (layout.compact ? 5 : 7);
        for (const k of ['COMPLETE', 'IN_PROGRESS', 'FAILED', 'other']) {
          const c = i.counts[k] || 0;
          if (!c || !total) continue;
          el('rect', {class: 'bar-' + k, x, y, width: room * c / total,
                      height: layout.compact ? 3 : 4}, b.bar);
          x += room * c / total;
        }
        b.g.setAttribute('data-members', total);
      }
    }
    for (const name of boxes.keys()) update(name);
    return update;
  }

  return {draw, statusClass};
})();

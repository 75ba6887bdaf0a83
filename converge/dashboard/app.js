// converge's dashboard (docs/dashboard.md): the project's stacks, and
// one stack live — its graph, its rollouts, a resource's details, its
// events. Everything is read from converge-api's orchestration API with
// the user's token, as any client reads it; the stack view follows the
// stack's event stream (GET .../event_stream, server-sent events) and
// changes what it shows event by event, reading nothing per resource.
'use strict';

const $ = (id) => document.getElementById(id);
const API = new URL('../v1/', location.href);  // served beside the API
const KEEP_EVENTS = 2000;   // events kept in the log
const SHOW_EVENTS = 400;    // rows of the log drawn
const LIST_EVERY = 5000;    // ms between two reads of the stack list

// -- who: the project and token, kept in this tab only ------------------------
const who = {
  get project() { return sessionStorage.getItem('project'); },
  get token() { return sessionStorage.getItem('token'); },
  set(project, token) {
    sessionStorage.setItem('project', project);
    sessionStorage.setItem('token', token);
  },
  clear() { sessionStorage.removeItem('token'); },
};

class Refused extends Error {}

function url(path) {
  return new URL(encodeURIComponent(who.project) + path, API);
}

async function api(path, signal) {
  const r = await fetch(url(path), {signal, headers: {
    'X-Auth-Token': who.token, Accept: 'application/json'}});
  if (r.status === 401) {
    who.clear();
    show('login', 'The token was refused (expired, revoked, or of another project).');
    throw new Refused('401');
  }
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.explanation || r.statusText);
  return body;
}

function stackPath(name, id) {
  return `/stacks/${encodeURIComponent(name)}/${encodeURIComponent(id)}`;
}

function cell(tr, text, cls) {
  const td = tr.insertCell();
  td.textContent = text == null ? '' : text;
  if (cls) td.className = cls;
  return td;
}

// -- pages ---------------------------------------------------------------------
let leave = () => {};   // what the page shown stops when another is

function show(page, message) {
  leave();
  leave = () => {};
  for (const p of document.querySelectorAll('.page')) p.hidden = p.id !== page;
  $('signout').hidden = page === 'login';
  $('whoami').textContent = page === 'login' ? '' : 'project ' + who.project;
  if (page === 'login') {
    $('project').value = who.project || '';
    $('login-error').textContent = message || '';
  }
}

function route() {
  if (!who.token || !who.project) return show('login');
  const m = location.hash.match(/^#\/stacks\/([^/]+)\/([^/]+)(?:\/in\/([^/]+))?$/);
  if (m) return openStack(decodeURIComponent(m[1]), decodeURIComponent(m[2]),
                          m[3] && decodeURIComponent(m[3]));
  return listStacks();
}

$('login-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  who.set($('project').value.trim(), $('token').value.trim());
  $('token').value = '';
  try {
    await api('/stacks?limit=1');
  } catch (err) {
    if (!(err instanceof Refused)) show('login', String(err.message || err));
    return;
  }
  if (!location.hash || location.hash === '#/login') location.hash = '#/stacks';
  else route();
});
$('signout').addEventListener('click', () => { who.clear(); show('login'); });
window.addEventListener('hashchange', route);
window.addEventListener('DOMContentLoaded', route);

// -- the project's stacks: read again every few seconds (one request) -----------
function listStacks() {
  show('stacks');
  let timer = null, stopped = false;
  leave = () => { stopped = true; clearTimeout(timer); };
  const read = async () => {
    try {
      const {stacks} = await api('/stacks?sort_keys=stack_name&sort_dir=asc');
      const body = $('stack-rows');
      body.textContent = '';
      for (const s of stacks) {
        const tr = body.insertRow();
        const a = document.createElement('a');
        a.href = `#/stacks/${encodeURIComponent(s.stack_name)}/${encodeURIComponent(s.id)}`;
        a.textContent = s.stack_name;
        tr.insertCell().appendChild(a);
        cell(tr, s.stack_status, 'status ' + Graph.statusClass(s.stack_status));
        cell(tr, s.stack_status_reason);
        cell(tr, s.updated_time || s.creation_time);
        tr.dataset.stack = s.stack_name;
      }
      $('stacks-note').textContent = stacks.length ? '' : 'No stacks yet.';
    } catch (err) {
      if (err instanceof Refused) return;
      $('stacks-note').textContent = 'Could not read the stacks: ' + err.message;
    }
    if (!stopped) timer = setTimeout(read, LIST_EVERY);
  };
  read();
}

// -- one stack, live --------------------------------------------------------------
// The model: the tree's stacks by id, each resource's state by
// "stack id/name", the events; changed by each event of the stream.
let view = null;

function openStack(name, id, focus) {
  if (view && view.id === id) {
    // the same stack, another of its nested stacks in front
    view.focus = focus || id;
    return view.drawGraph();
  }
  show('stack');
  view = new StackView(name, id, focus || id);
  const v = view;
  leave = () => { v.close(); if (view === v) view = null; };
  v.start();
}

class StackView {
  constructor(name, id, focus) {
    this.name = name;
    this.id = id;
    this.focus = focus;
    this.stacks = new Map();
    this.res = new Map();
    this.applied = new Map();   // key -> id of the event last applied
    this.events = [];
    this.lastId = 0;
    this.layouts = new Map();
    this.selected = null;
    this.abort = new AbortController();
    this.dirty = new Set();
    this.later = {};
    $('stack-name').textContent = name;
    $('graph').textContent = '';
    $('rollouts').textContent = '';
    $('event-rows').textContent = '';
    $('detail').textContent = 'Click a resource to see it; a nested stack or group opens.';
  }

  close() { this.abort.abort(); for (const t of Object.values(this.later)) clearTimeout(t); }

  async start() {
    try {
      await this.load();
    } catch (err) {
      if (!(err instanceof Refused)) $('stack-reason').textContent = 'Could not read the stack: ' + err.message;
      return;
    }
    this.follow();
  }

  // the tree, its resources and last events at once (GET .../overview)
  async load() {
    const {overview} = await api(stackPath(this.name, this.id) + '/overview',
                                 this.abort.signal);
    this.stacks = new Map(overview.stacks.map((s) => [s.id, s]));
    this.res = new Map(overview.resources.map((r) => [r.stack_id + '/' + r.resource_name, r]));
    this.counts = null;
    this.applied = new Map();
    if (!this.lastId) {
      this.events = overview.events.reverse();
      this.lastId = overview.last_event_id;
    }
    // what the stream said since the rows were read is newer than them
    for (const ev of this.events.filter((e) => e.id > overview.last_event_id).reverse()) this.apply(ev);
    if (this.streamed) this.stacks.set(this.id, Object.assign({}, this.stacks.get(this.id), this.streamed));
    this.layouts.clear();
    this.showStack(this.stacks.get(this.id));
    this.drawGraph();
    this.drawEvents();
    this.readRollouts();
  }

  soon(what, ms, fn) {
    if (this.later[what]) return;
    this.later[what] = setTimeout(() => { delete this.later[what]; fn(); }, ms);
  }

  // -- the stream: fetch() rather than EventSource, which cannot send the
  // token; resumed from the last event id after any break
  async follow() {
    let retry = 1000;
    const path = stackPath(this.name, this.id) + '/event_stream';
    while (!this.abort.signal.aborted) {
      try {
        const r = await fetch(url(path), {signal: this.abort.signal, headers: {
          'X-Auth-Token': who.token, Accept: 'text/event-stream',
          'Last-Event-ID': String(this.lastId)}});
        if (r.status === 401) { who.clear(); show('login', 'The token was refused.'); return; }
        if (r.status === 404) { this.gone(); return; }
        if (!r.ok) throw new Error(r.statusText);
        this.live(true);
        const reader = r.body.getReader();
        const text = new TextDecoder();
        let buf = '';
        for (;;) {
          const {value, done} = await reader.read();
          if (done) break;
          buf += text.decode(value, {stream: true});
          let end;
          while ((end = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, end);
            buf = buf.slice(end + 2);
            const hint = this.received(block);
            if (hint) retry = hint;
          }
        }
      } catch (err) {
        if (this.abort.signal.aborted) return;
      }
      this.live(false);
      await new Promise((ok) => setTimeout(ok, retry));
    }
  }

  // one server-sent event: its id, kind and JSON data
  received(block) {
    let kind = 'message', id = null, retry = null;
    const data = [];
    for (const line of block.split('\n')) {
      if (!line || line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'id') id = Number(value);
      else if (field === 'event') kind = value;
      else if (field === 'data') data.push(value);
      else if (field === 'retry') retry = Number(value);
    }
    if (id !== null && id > this.lastId) this.lastId = id;
    if (data.length) {
      const body = JSON.parse(data.join('\n'));
      if (kind === 'resource') this.onEvent(body);
      else if (kind === 'stack') this.onStack(body);
    }
    return retry;
  }

  live(on) {
    $('live').className = on ? 'live on' : 'live';
    $('live').textContent = on ? 'live' : 'reconnecting';
  }

  gone() {
    this.live(false);
    $('live').textContent = 'stack gone';
  }

  onStack(s) {
    if (s.deleted) return this.gone();
    const before = this.stacks.get(this.id) || {};
    this.streamed = s;
    this.stacks.set(this.id, Object.assign({}, before, s));
    this.showStack(this.stacks.get(this.id));
    // a traversal started or ended: its rows and graph as they are now
    if (before.stack_status !== s.stack_status ||
        before.current_traversal !== s.current_traversal) {
      this.soon('load', 300, () => this.load().catch(() => {}));
    }
  }

  onEvent(ev) {
    const key = ev.stack_id + '/' + ev.resource_name;
    if (!this.stacks.has(ev.stack_id) || !this.res.has(key)) {
      // a nested stack or a resource this view has not seen: read the
      // tree again (once, whatever the number of such events)
      this.soon('load', 500, () => this.load().catch(() => {}));
    }
    this.apply(ev);
    this.events.unshift(ev);
    if (this.events.length > KEEP_EVENTS) this.events.length = KEEP_EVENTS;
    this.dirty.add(key);
    this.soon('draw', 100, () => this.redraw());
    if (/Group|Chain/.test(ev.resource_type) || /^(rolling update|batch create|canary|pausing|resumed)/.test(ev.resource_status_reason || '')) {
      this.soon('rollouts', 400, () => this.readRollouts());
    }
    if (this.selected === key) this.soon('detail', 400, () => this.readDetail(key));
  }

  // what an event says of its resource's state
  apply(ev) {
    this.counts = null;
    const key = ev.stack_id + '/' + ev.resource_name;
    let r = this.res.get(key);
    if (!r) {
      r = {stack_id: ev.stack_id, resource_name: ev.resource_name,
           resource_type: ev.resource_type, nested: null};
      this.res.set(key, r);
    }
    // a resource's events are written in order under its lock: an older
    // one arriving late (a resumed stream) changes nothing
    if ((this.applied.get(key) || 0) >= ev.id) return;
    this.applied.set(key, ev.id);
    if (ev.action === 'OBSERVE') {
      r.drift = ev.status === 'DRIFTED' ? (ev.resource_status_reason || 'drifted') : null;
      return;
    }
    r.resource_status = ev.resource_status;
    r.status = ev.status;
    r.updated_time = ev.event_time;
    r.resource_status_reason = ev.resource_status_reason;
    if (ev.physical_resource_id) r.physical_resource_id = ev.physical_resource_id;
    // acted on or checked, and seen: as applied (the engine clears its
    // drift so)
    if (ev.status === 'COMPLETE') r.drift = null;
  }

  redraw() {
    const stacks = new Set();
    for (const key of this.dirty) {
      const r = this.res.get(key);
      if (!r) continue;
      if (r.stack_id === this.focus && this.update) this.update(r.resource_name);
      stacks.add(r.stack_id);
    }
    // a folded box counts its members
    if (this.update) {
      for (const r of this.res.values()) {
        if (r.stack_id === this.focus && r.nested && stacks.has(r.nested)) this.update(r.resource_name);
      }
    }
    this.dirty.clear();
    this.drawEvents();
  }

  showStack(s) {
    if (!s) return;
    $('stack-name').textContent = s.stack_name;
    const st = $('stack-status');
    st.textContent = s.stack_status;
    st.className = 'status ' + Graph.statusClass(s.stack_status);
    $('stack-reason').textContent = s.stack_status_reason || '';
  }

  // -- the graph of the stack in front (the stack itself, or one of its
  // nested stacks opened)
  async drawGraph() {
    const focus = this.stacks.has(this.focus) ? this.focus : this.id;
    this.drawCrumbs(focus);
    let layout = this.layouts.get(focus);
    if (!layout) {
      const s = this.stacks.get(focus);
      try {
        layout = (await api(stackPath(s.stack_name, s.id) + '/layout', this.abort.signal)).layout;
      } catch (err) {
        if (!(err instanceof Refused)) $('graph').textContent = 'Could not read the graph: ' + err.message;
        return;
      }
      this.layouts.set(focus, layout);
    }
    if (focus !== (this.stacks.has(this.focus) ? this.focus : this.id)) return;  // moved on meanwhile
    this.focus = focus;
    $('graph').className = $('fit').checked ? 'graph fit' : 'graph';
    // the same picture as drawn (the stack read again after a traversal):
    // its boxes recoloured, not drawn anew under the user's pointer
    const drawn = focus + JSON.stringify(layout);
    if (this.drawn === drawn && this.update) {
      for (const n of layout.nodes) this.update(n.name);
      return;
    }
    this.drawn = drawn;
    this.update = Graph.draw($('graph'), layout, (name) => this.info(focus, name),
                             (name) => this.clicked(focus, name));
  }

  info(stackId, name) {
    const key = stackId + '/' + name;
    const r = this.res.get(key);
    if (!r) return {status: null};
    const i = {status: r.resource_status, reason: r.resource_status_reason,
               type: r.resource_type, drift: r.drift, selected: this.selected === key};
    // while the stack is in progress: not changed yet by what goes on
    const top = this.stacks.get(this.id);
    if (top && top.stack_status.endsWith('_IN_PROGRESS') && r.updated_time &&
        Date.parse(r.updated_time) < Date.parse(top.updated_time)) i.waiting = true;
    if (r.nested) i.counts = this.counted().get(r.nested) || {};
    return i;
  }

  // each stack's resources by status, counted in one pass over them all
  // (again after any change): what a folded box shows
  counted() {
    if (!this.counts) {
      this.counts = new Map();
      for (const m of this.res.values()) {
        const c = Graph.statusClass(m.resource_status).slice(3);
        const k = ['COMPLETE', 'IN_PROGRESS', 'FAILED'].includes(c) ? c : 'other';
        if (!this.counts.has(m.stack_id)) this.counts.set(m.stack_id, {});
        const counts = this.counts.get(m.stack_id);
        counts[k] = (counts[k] || 0) + 1;
      }
    }
    return this.counts;
  }

  drawCrumbs(focus) {
    const nav = $('crumbs');
    nav.textContent = '';
    const path = [];
    for (let s = this.stacks.get(focus); s; s = this.stacks.get(s.parent)) {
      path.unshift(s);
      if (s.id === this.id) break;
    }
    if (path.length < 2) return;
    for (const s of path) {
      const span = document.createElement('span');
      const a = document.createElement('a');
      a.textContent = s.id === this.id ? s.stack_name : (s.parent_resource || s.stack_name);
      a.addEventListener('click', () => this.open(s.id));
      span.appendChild(a);
      nav.appendChild(span);
    }
  }

  open(stackId) {
    location.hash = `#/stacks/${encodeURIComponent(this.name)}/${encodeURIComponent(this.id)}` +
      (stackId === this.id ? '' : '/in/' + encodeURIComponent(stackId));
  }

  clicked(stackId, name) {
    const key = stackId + '/' + name;
    const before = this.selected;
    this.selected = key;
    if (before && this.update) this.update(before.slice(before.indexOf('/') + 1));
    if (this.update) this.update(name);
    this.readDetail(key);
    const r = this.res.get(key);
    if (r && r.nested && this.stacks.has(r.nested)) this.open(r.nested);
  }

  // -- a resource's details: Heat's resource show (properties, attributes,
  // masked as the API masks them for this token)
  async readDetail(key) {
    const r = this.res.get(key);
    const s = r && this.stacks.get(r.stack_id);
    if (!s) return;
    let res;
    try {
      ({resource: res} = await api(stackPath(s.stack_name, s.id) + '/resources/' +
                                   encodeURIComponent(r.resource_name), this.abort.signal));
    } catch (err) {
      if (!(err instanceof Refused)) $('detail').textContent = 'Could not read ' + r.resource_name + ': ' + err.message;
      return;
    }
    if (this.selected !== key) return;
    const box = $('detail');
    box.textContent = '';
    const h = document.createElement('h2');
    h.textContent = res.resource_name;
    box.appendChild(h);
    const dl = document.createElement('dl');
    const fact = (k, v) => {
      if (v == null || v === '') return;
      const dt = document.createElement('dt'), dd = document.createElement('dd');
      dt.textContent = k;
      dd.textContent = v;
      dl.append(dt, dd);
    };
    fact('type', res.resource_type);
    fact('status', res.resource_status);
    fact('reason', res.resource_status_reason);
    fact('physical id', res.physical_resource_id);
    fact('drift', res.drift);
    fact('observed', res.observed_time);
    fact('updated', res.updated_time);
    fact('stack', s.stack_name);
    fact('requires', (res.requires || []).join(', '));
    fact('required by', (res.required_by || []).join(', '));
    box.appendChild(dl);
    // a deployment's attributes are its outputs: what its config's run
    // said back (deploy_stdout, deploy_stderr, deploy_status_code, ...)
    const deployment = /Deployment/.test(res.resource_type);
    if (deployment) this.section(box, 'Outputs', res.attributes);
    this.section(box, 'Properties', res.properties);
    if (!deployment) this.section(box, 'Attributes', res.attributes);
    if (res.members) this.section(box, 'Members', res.members);
  }

  section(box, title, value) {
    if (!value || !Object.keys(value).length) return;
    const h = document.createElement('h3');
    h.textContent = title;
    const pre = document.createElement('pre');
    pre.className = title.toLowerCase();
    pre.textContent = JSON.stringify(value, null, 2);
    box.append(h, pre);
  }

  // -- rollouts: batches, the health gate, the failure budget
  async readRollouts() {
    let rollouts;
    try {
      ({rollouts} = await api(stackPath(this.name, this.id) + '/rollouts', this.abort.signal));
    } catch (err) {
      return;
    }
    const box = $('rollouts');
    box.textContent = '';
    for (const r of rollouts) {
      const div = document.createElement('div');
      div.className = 'rollout';
      div.dataset.resource = r.resource;
      const h = document.createElement('strong');
      h.textContent = `${r.resource}: ${r.kind}, batch ${r.batch} of ${r.batches}`;
      div.appendChild(h);
      const strip = document.createElement('div');
      strip.className = 'batches';
      r.sizes.forEach((size, i) => {
        const b = document.createElement('span');
        b.style.flexGrow = String(size);
        if (i < r.batch - 1) b.className = 'done';
        else if (i === r.batch - 1) b.className = r.phase === 'checking' ? 'checking' : 'now';
        b.title = `batch ${i + 1}: ${size} members`;
        strip.appendChild(b);
      });
      div.appendChild(strip);
      const facts = document.createElement('div');
      facts.className = 'facts';
      const fact = (text, cls) => {
        const sp = document.createElement('span');
        sp.textContent = text;
        if (cls) sp.className = cls;
        facts.appendChild(sp);
      };
      fact('phase: ' + ({running: 'updating the batch', checking: 'health gate: checking the batch',
                         pause: 'pausing', canary: 'canary done, waiting for the operator',
                         start: 'starting the batch', final: 'applying the rest'}[r.phase] || r.phase));
      fact('health gate: ' + (r.health_check ? 'each batch is checked' : 'the batch\u2019s traversal'));
      fact(`failure budget: ${r.failed.length} of ${r.budget} used` +
           (r.failed.length ? ` (failed: ${r.failed.join(', ')})` : ''),
           r.failed.length > r.budget ? 'over' : '');
      fact(`this batch: ${r.current.length} members (` + r.current.slice(0, 8).join(', ') +
           (r.current.length > 8 ? ', \u2026' : '') + ')');
      div.appendChild(facts);
      const p = document.createElement('div');
      p.className = 'note';
      p.textContent = r.progress;
      div.appendChild(p);
      box.appendChild(div);
    }
  }

  // -- the event log, newest first, with its filters
  drawEvents() {
    const name = $('f-name').value.trim().toLowerCase();
    const status = $('f-status').value;
    const here = $('f-here').checked;
    const body = $('event-rows');
    body.textContent = '';
    let shown = 0, matched = 0;
    for (const ev of this.events) {
      if (name && !ev.resource_name.toLowerCase().includes(name)) continue;
      if (status && ev.status !== status) continue;
      if (here && ev.stack_id !== this.focus) continue;
      matched++;
      if (shown >= SHOW_EVENTS) continue;
      shown++;
      const tr = body.insertRow();
      tr.className = Graph.statusClass(ev.resource_status) + '-row';
      cell(tr, ev.event_time.replace('T', ' ').slice(0, 23));
      const s = this.stacks.get(ev.stack_id);
      cell(tr, ev.stack_id === this.id ? '' : (s ? (s.parent_resource || s.stack_name) : ev.stack_name));
      cell(tr, ev.resource_name);
      cell(tr, ev.resource_status, 'status ' + Graph.statusClass(ev.resource_status));
      cell(tr, ev.resource_status_reason);
    }
    $('f-count').textContent = `${matched} of ${this.events.length} events`;
  }
}

for (const id of ['f-name', 'f-status', 'f-here']) {
  $(id).addEventListener('input', () => view && view.drawEvents());
}
$('filters').addEventListener('submit', (e) => e.preventDefault());
$('fit').addEventListener('change', () => {
  $('graph').className = $('fit').checked ? 'graph fit' : 'graph';
});

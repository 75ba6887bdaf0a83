"""converge's routes for a live view of a stack: what the dashboard
(converge/api/dashboard.py, docs/dashboard.md) reads, under the API's
own authentication and policy (readers read them all).

- `GET …/overview`: the stack's tree at a glance (its nested stacks,
  each resource's state and drift, the last events, the highest event
  id);
- `GET …/layout`: the stack's dependency graph laid out;
- `GET …/rollouts`: its groups' rollouts (batches, health gate, failure
  budget);
- `GET …/event_stream`: server-sent events (text/event-stream) of the
  stack's tree as they are written: `event: resource` for each event
  (its `id:` the event's id), `event: stack` when the stack's status
  changes. A client resuming sends the last id it had in `Last-Event-ID`
  (or `?last_event_id=`), and gets every event of the tree after it;
  without one, the events from now on. Each event is read once from
  the database's events table (converge/following.py), a few queries
  every POLL seconds whatever the size of the stack; no resource is
  looked at. A stream ends after [api] max_stream_time (the client
  resumes), or when converge-api stops; it runs on threads of its own
  ([api] stream_threads: converge/api/server.py).
"""

import json
import threading
import time

import webob

from converge import conf as conf_mod
from converge import exception
from converge import following
from converge.api import server
from converge.api.v1 import common
from converge.api.v1.common import action
from converge.engine import views

#: seconds between two reads of the stream (the events, the stack's row)
POLL = 0.5
#: seconds without an event after which a comment is sent: a client gone
#: is found by the write that fails, and proxies keep the connection
HEARTBEAT = 15.0
#: what a client waits before it resumes a stream that ended (ms)
RETRY_MS = 1000
#: events read at one look at most: a client resuming far behind (or from
#: 0) catches up a batch a look, never the whole events table at once
BATCH = 2000

#: the stream's path ends so, and so its own pool serves it
STREAM = server.STREAM_SUFFIX


def _last_id(req):
    for value in (req.headers.get('Last-Event-ID'),
                  req.GET.get('last_event_id')):
        if value not in (None, ''):
            return common.integer(value, 'Last-Event-ID')
    return None


def _sse(kind, data, event_id=None):
    lines = ['event: %s' % kind]
    if event_id is not None:
        lines.insert(0, 'id: %d' % event_id)
    lines.append('data: %s' % json.dumps(data, separators=(',', ':')))
    return ('\n'.join(lines) + '\n\n').encode()


def _stack(st):
    return {'id': st.id, 'stack_name': st.name,
            'stack_status': '%s_%s' % (st.action, st.status),
            'stack_status_reason': st.status_reason or '',
            'current_traversal': st.current_traversal,
            'updated_time': views.iso(st.updated_at or st.created_at),
            'deleted': st.deleted_at is not None}


class Controller(common.Controller):
    def __init__(self, engine, stacks, stopping=None):
        super().__init__(engine)
        #: Heat's stacks controller: its stack lookup
        self.stacks = stacks
        #: set when converge-api stops: the streams end
        self.stopping = stopping or threading.Event()

    def _identify(self, ctx, stack_name, stack_id):
        return self.stacks._identify(ctx, stack_name, stack_id)

    @action('converge:stack_overview')
    def overview(self, req, ctx, stack_name, stack_id):
        ident = self._identify(ctx, stack_name, stack_id)
        last = common.integer(req.GET.get('events'), 'events',
                              maximum=5000)
        return common.reply({'overview': self.service.stack_overview(
            ctx, ident, last=200 if last is None else last)})

    @action('converge:stack_graph')
    def layout(self, req, ctx, stack_name, stack_id):
        return common.reply({'layout': self.service.stack_layout(
            ctx, self._identify(ctx, stack_name, stack_id))})

    @action('stacks:show')
    def rollouts(self, req, ctx, stack_name, stack_id):
        return common.reply({'rollouts': self.service.stack_rollouts(
            ctx, self._identify(ctx, stack_name, stack_id))})

    @action('converge:event_stream')
    def stream(self, req, ctx, stack_name, stack_id):
        ident = self._identify(ctx, stack_name, stack_id)
        after = _last_id(req)
        if after is None:
            after = self.service.tree_last_event_id(ctx, ident)
        resp = webob.Response(
            app_iter=self._events(ctx, ident, after),
            content_type='text/event-stream', charset='utf-8')
        resp.headers['Cache-Control'] = 'no-cache'
        # a proxy in front (nginx) sends each event as it comes
        resp.headers['X-Accel-Buffering'] = 'no'
        return resp

    def _events(self, ctx, stack_id, after):
        """The stream's body: written as it is read, until the stack is
        gone, the stream's time is up or converge-api stops."""
        svc = self.service
        follow = following.EventStream(
            lambda above, ids=None: svc.tree_events_since(
                ctx, stack_id, above, ids=ids, limit=BATCH),
            lambda above: svc.tree_event_ids_since(ctx, stack_id, above))
        follow.floor = follow.high = after
        ends = time.monotonic() + conf_mod.CONF.api.max_stream_time
        yield ('retry: %d\n\n' % RETRY_MS).encode()
        shown, quiet = None, time.monotonic()
        while True:
            try:
                st = svc.stack_status(ctx, stack_id)
                events = follow.poll()
            except exception.StackNotFound:
                yield _sse('stack', {'id': stack_id, 'deleted': True})
                return
            for ev in events:
                yield _sse('resource', ev, ev['id'])
            now, sent = _stack(st), bool(events)
            if now != shown:
                yield _sse('stack', now)
                shown, sent = now, True
            if sent:
                quiet = time.monotonic()
            elif time.monotonic() - quiet >= HEARTBEAT:
                yield b': still here\n\n'
                quiet = time.monotonic()
            if st.deleted_at is not None or \
                    time.monotonic() >= ends or self.stopping.wait(POLL):
                return


def add_routes(route, engine, stacks, stopping=None):
    """Connect the live view's routes with `route(url, handler,
    *methods)`."""
    lv = Controller(engine, stacks, stopping)
    stack = '/v1/{project_id}/stacks/{stack_name}/{stack_id}'
    route(stack + '/overview', lv.overview, 'GET')
    route(stack + '/layout', lv.layout, 'GET')
    route(stack + '/rollouts', lv.rollouts, 'GET')
    route(stack + STREAM, lv.stream, 'GET')

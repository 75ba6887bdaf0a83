"""OpenTelemetry traces (converge/tracing.py): one stack update is one
trace, from the API request through the traversal it starts to every
unit of work, linked by the context the messages carry and the
traversal keeps, never by this process's memory.

In process: an InMemorySpanExporter, converge-api served on loopback and
driven by python-heatclient, the embedded engine's workers taking the
messages off its bus; each message is taken as a process that never saw
the traversal would (the tracing module's memory emptied first).
Distributed: converge-api and converge-worker processes sending their
spans over OTLP/HTTP to a collector in the test."""

import gzip
import http.server
import os
import subprocess
import sys
import threading

import pytest

from converge import conf
from converge import tracing
from converge.api import server as api_server
from converge.engine import api_tokens
from converge.workers import pool
from tests.distributed import wait_for

pytest.importorskip('opentelemetry.sdk')

TEMPLATE = {
    'heat_template_version': '2018-08-31',
    'parameters': {'word': {'type': 'string', 'default': 'one'},
                   'image': {'type': 'string', 'default': 'cirros'}},
    'resources': dict(
        {'v%d' % i: {'type': 'OS::Heat::Value',
                     'properties': {'value': {'get_param': 'word'}}}
         for i in range(4)},
        alone={'type': 'OS::Heat::Value', 'properties': {'value': 'same'}},
        box={'type': 'OS::Nova::Server',
             'properties': {'image': {'get_param': 'image'},
                            'flavor': 'm1.small'}}),
}


def _settled(hc, name, timeout=60):
    def done():
        st = hc.stacks.get(name)
        return st if not st.stack_status.endswith('IN_PROGRESS') else None
    return wait_for(done, timeout=timeout, interval=0.05)


class Collector:
    """An OTLP/HTTP collector on loopback: the spans posted to it,
    decoded with OpenTelemetry's own protobuf messages, as dicts
    (service, name, trace, id, parent, attrs)."""

    def __init__(self):
        from opentelemetry.proto.collector.trace.v1 import \
            trace_service_pb2 as pb
        self.spans, lock = [], threading.Lock()
        spans = self.spans

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers['Content-Length']))
                if self.headers.get('Content-Encoding') == 'gzip':
                    body = gzip.decompress(body)
                got = pb.ExportTraceServiceRequest.FromString(body)
                with lock:
                    for rs in got.resource_spans:
                        service = {a.key: a.value.string_value for a in
                                   rs.resource.attributes}['service.name']
                        for scope in rs.scope_spans:
                            spans.extend(_decoded(service, sp)
                                         for sp in scope.spans)
                answer = pb.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header('Content-Type', 'application/x-protobuf')
                self.send_header('Content-Length', str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass
        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0),
                                                      Handler)
        self.url = 'http://127.0.0.1:%d/v1/traces' % \
            self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever,
                         daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def _decoded(service, sp):
    attrs = {}
    for a in sp.attributes:
        kind = a.value.WhichOneof('value')
        attrs[a.key] = getattr(a.value, kind) if kind else None
    return {'service': service, 'name': sp.name, 'trace': sp.trace_id.hex(),
            'id': sp.span_id.hex(), 'parent': sp.parent_span_id.hex(),
            'attrs': attrs}


@pytest.fixture
def spans():
    from opentelemetry.sdk.trace.export import in_memory_span_exporter
    exporter = in_memory_span_exporter.InMemorySpanExporter()
    tracing.setup('api', exporter=exporter)
    yield exporter
    tracing.shutdown()


@pytest.fixture
def carried(monkeypatch):
    """The context of every message the workers took, and each taken
    with the tracing module's memory emptied first."""
    seen = []

    def taking(method):
        def taken(self, ctxt, *args, **kwargs):
            if ctxt is not pool.LOCAL:
                seen.append(dict(ctxt))
                tracing._TRAVERSALS.clear()
            return method(self, ctxt, *args, **kwargs)
        return taken
    for name in ('check_resource', 'check_resources'):
        monkeypatch.setattr(pool.Endpoint, name,
                            taking(getattr(pool.Endpoint, name)))
    return seen


def _hex(value, width):
    return format(value, '0%dx' % width)


def test_one_stack_update_is_one_trace(engine, spans, carried):
    served = api_server.Served(engine, '127.0.0.1', 0)
    try:
        _id, token = api_tokens.create(engine.db, 'traced', roles=['member'])
        from heatclient import client as heat_client
        hc = heat_client.Client('1', endpoint='%s/v1/traced' % served.url,
                                token=token)
        hc.stacks.create(stack_name='t', template=TEMPLATE)
        assert _settled(hc, 't').stack_status == 'CREATE_COMPLETE'
        wait_for(lambda: engine.idle.is_set(), timeout=30, interval=0.05)
        spans.clear()
        del carried[:]
        hc.stacks.update(hc.stacks.get('t').id, existing=True,
                         parameters={'word': 'two', 'image': 'fedora'})
        st = _settled(hc, 't')
        assert st.stack_status == 'UPDATE_COMPLETE', st.stack_status_reason
        # the last unit's span ends after the stack says complete
        wait_for(lambda: engine.idle.is_set() and any(
            s.name == tracing.TRAVERSAL_END
            for s in spans.get_finished_spans()), timeout=30, interval=0.05)
    finally:
        served.stop()
    finished = spans.get_finished_spans()
    by_id = {s.context.span_id: s for s in finished}
    # heatclient's PATCH of the stack's id is redirected to its name/id
    [patch] = [s for s in finished if s.name.startswith('PATCH ') and
               s.attributes['http.response.status_code'] == 202]
    trace_id = patch.context.trace_id
    assert patch.name == 'PATCH /v1/{project_id}/stacks/{stack_name}/' \
        '{stack_id}'
    # the update: the traversal, a child of the request
    [trav] = [s for s in finished if s.name == tracing.TRAVERSAL]
    assert trav.parent.span_id == patch.context.span_id
    assert trav.attributes['converge.traversal.action'] == 'UPDATE'
    trav_id = trav.attributes['converge.traversal.id']
    # the units of every resource the update visits, each in that trace
    # and a child of the traversal (or of the message it came in)
    units = [s for s in finished if s.name == tracing.UNIT]
    assert {u.attributes['converge.resource.name'] for u in units} >= \
        {'v0', 'v1', 'v2', 'v3', 'box'}
    assert 'alone' not in {u.attributes['converge.resource.name']
                           for u in units}
    for unit in units:
        assert unit.context.trace_id == trace_id
        parent = by_id[unit.parent.span_id]
        assert parent is trav or (parent.name == tracing.UNITS and
                                  parent.parent.span_id ==
                                  trav.context.span_id), parent.name
        assert unit.attributes['converge.traversal.id'] == trav_id or \
            parent.attributes['converge.traversal.id'] == trav_id
    done = [u for u in units if u.attributes['converge.outcome'] == 'done']
    assert {u.attributes['converge.resource.name'] for u in done} >= \
        {'v0', 'v1', 'v2', 'v3', 'box'}
    assert {u.attributes.get('converge.action') for u in done
            if u.attributes['converge.resource.name'] == 'box'} & \
        {'UPDATE'}
    # its end, from whichever unit reached the stack's node
    [end] = [s for s in finished if s.name == tracing.TRAVERSAL_END]
    assert end.parent.span_id == trav.context.span_id
    assert end.attributes['converge.traversal.state'] == 'complete'
    # one trace: every span made from the request on (the client's
    # polls of the stack are traces of their own)
    ours = {s.context.span_id for s in finished
            if s.context.trace_id == trace_id}
    assert ours >= {patch.context.span_id, trav.context.span_id,
                    end.context.span_id} | {u.context.span_id
                                            for u in units}
    # linked by the messages: each that came from the bus carried the
    # traversal's context (the timer's, sent without, found it kept in
    # the traversal)
    expected = [_hex(trace_id, 32), _hex(trav.context.span_id, 16)]
    assert any(carried) and all(
        c['traceparent'].split('-')[1:3] == expected
        for c in carried if c), carried


@pytest.mark.parametrize('batch', [False, True], ids=['alone', 'batched'])
def test_an_agents_signal_joins_its_stack_operations_trace(
        engine, spans, tmp_path, batch):
    """A software deployment's run is given to its agent with the trace
    of the operation it belongs to; the agent's signal (alone, or an
    agent host's batch) carries it back as its traceparent header, and
    converge-api's span of that request is in the operation's trace."""
    from converge import userdata
    from converge.agent import runner
    from converge.engine import stacks
    from tests import enginetools as et
    from tests.test_software_deployment import _servers, _template
    served = api_server.Served(engine, '127.0.0.1', 0, threads=8)
    conf.CONF.set_override('public_endpoint', served.url, 'api')
    conf.CONF.set_override('boot_agents', False, 'sim')
    host = runner.Host(batch=batch, wait=2)
    try:
        stack_id, trav_id = stacks.create(
            engine, 'sw', et.bundle(tmp_path, _template()), {})
        [server] = _servers(engine, 1)
        host.start(userdata.decode(server['user_data']),
                   str(tmp_path / 'disk'))
        assert et.status(et.wait(engine, stack_id, trav_id).stack) == \
            'CREATE_COMPLETE'
    finally:
        host.stop()
        served.stop()
        conf.CONF.clear_override('boot_agents', 'sim')
        conf.CONF.clear_override('public_endpoint', 'api')
    finished = spans.get_finished_spans()
    [trav] = [s for s in finished if s.name == tracing.TRAVERSAL]
    route = '/v1/agent/signals' if batch else \
        '/v1/agent/deployments/{deployment_id}/signal'
    [signal] = [s for s in finished if s.name == 'POST ' + route]
    assert signal.context.trace_id == trav.context.trace_id
    assert signal.parent.span_id == trav.context.span_id
    assert signal.attributes['http.response.status_code'] == 200
    # the agent's polls, which carry no trace, make no span
    assert not [s for s in finished
                if s.attributes.get('http.route', '').endswith(
                    ('/poll', '/v1/agent/deployments'))]
    # the unit the signal woke is in the trace too
    [deployed] = [s for s in finished if s.name == tracing.UNIT and
                  s.attributes['converge.resource.name'] == 'deployment' and
                  s.attributes['converge.outcome'] == 'done']
    assert deployed.context.trace_id == trav.context.trace_id


def test_a_failed_update_and_its_rollback_are_one_trace(
        engine, spans, tmp_path):
    """Where no request starts it (the CLI's engine), the traversal's
    span starts the trace; the unit that fails it is an error, the
    traversal's end says failed, and the rollback it starts is in the
    same trace, to its own end."""
    from converge.engine import stacks
    from tests import enginetools as et

    def version(a, b):
        return et.bundle(tmp_path, et.hot({
            'a': {'type': 'OS::Heat::TestResource',
                  'properties': {'value': a}},
            'b': {'type': 'OS::Heat::TestResource', 'properties': b,
                  'depends_on': 'a'}}), 'v%s.yaml' % a)
    stack = et.run(engine, stacks.create, 'rb', version('one', {}), {})
    wait_for(lambda: engine.idle.is_set(), timeout=30, interval=0.05)
    spans.clear()
    stack = et.run(engine, stacks.update, stack.id,
                   version('two', {'fail': True}), {}, rollback=True)
    assert et.status(stack) == 'ROLLBACK_COMPLETE'
    wait_for(lambda: engine.idle.is_set() and len([
        s for s in spans.get_finished_spans()
        if s.name == tracing.TRAVERSAL_END]) == 2, timeout=30,
        interval=0.05)
    finished = spans.get_finished_spans()
    travs = {s.attributes['converge.traversal.action']: s for s in finished
             if s.name == tracing.TRAVERSAL}
    update, rollback = travs['UPDATE'], travs['ROLLBACK']
    assert update.parent is None   # the trace's root
    assert {s.context.trace_id for s in finished} == \
        {update.context.trace_id}
    [failed] = [s for s in finished if s.name == tracing.UNIT and
                s.attributes.get('converge.outcome') == 'failed']
    assert failed.attributes['converge.resource.name'] == 'b'
    assert not failed.status.is_ok
    ends = {s.attributes['converge.traversal.state']: s for s in finished
            if s.name == tracing.TRAVERSAL_END}
    assert ends['failed'].parent.span_id == update.context.span_id
    assert ends['complete'].parent.span_id == rollback.context.span_id
    # the rollback was started by the unit that settled the failure
    by_id = {s.context.span_id: s for s in finished}
    assert by_id[rollback.parent.span_id].name == tracing.UNIT


def test_off_makes_no_span_and_carries_nothing(engine, carried, tmp_path):
    """The default: no span, no context in the messages, and the
    traversal keeps none."""
    from converge.engine import stacks
    from tests import enginetools as et
    assert not tracing.enabled
    stack_id, trav = stacks.create(engine, 'quiet', et.bundle(
        tmp_path, et.hot({'v%d' % i: {'type': 'OS::Heat::Value',
                                      'properties': {'value': i}}
                          for i in range(3)})), {})
    assert et.status(et.wait(engine, stack_id, trav).stack) == \
        'CREATE_COMPLETE'
    assert carried and all(c == {} for c in carried)
    from converge.db import api
    with engine.db.read() as s:
        assert 'trace' not in (api.traversal_get(s, trav).options or {})
    # nor is OpenTelemetry imported by what makes spans when on
    subprocess.run([sys.executable, '-c', (
        'import sys\n'
        'import converge.api.app, converge.workers.pool, converge.tracing\n'
        'import converge.engine.traversal, converge.agent.runner\n'
        'assert not [m for m in sys.modules '
        'if m.startswith("opentelemetry")]')], check=True)


@pytest.mark.distributed
@pytest.mark.long
def test_one_update_is_one_trace_across_processes(dist, tmp_path):
    """converge-api and a converge-worker, each a process of its own
    sending its spans over OTLP: the update's request, its traversal and
    its units are one trace, the units the worker's."""
    from tests.test_heat_api import API, _start_api
    collector = Collector()
    try:
        with open(dist.conf, 'a') as f:
            f.write('[tracing]\nenabled = true\notlp_endpoint = %s\n'
                    % collector.url)
        # their batches sent every tenth of a second, not every five
        dist.env = dict(dist.env or {}, OTEL_BSP_SCHEDULE_DELAY='100')
        dist.start_worker()
        log = str(tmp_path / 'api.log')
        proc, url = _start_api(dist.conf, log, env=dict(os.environ,
                                                         **dist.env))
        dist.apis.append((proc, log))
        api = API(dist.conf, url)
        hc = api.client('d', api.token('d')['token'])
        hc.stacks.create(stack_name='d', template=TEMPLATE)
        assert _settled(hc, 'd', 120).stack_status == 'CREATE_COMPLETE'
        hc.stacks.update(hc.stacks.get('d').id, existing=True,
                         parameters={'word': 'two'})
        assert _settled(hc, 'd', 120).stack_status == 'UPDATE_COMPLETE'

        def update_trace():
            spans = list(collector.spans)
            patch = [s for s in spans if s['name'].startswith('PATCH ') and
                     s['attrs'].get('http.response.status_code') == 202]
            if not patch:
                return None
            ours = [s for s in spans if s['trace'] == patch[0]['trace']]
            names = {s['attrs'].get('converge.resource.name')
                     for s in ours if s['name'] == tracing.UNIT}
            ended = any(s['name'] == tracing.TRAVERSAL_END for s in ours)
            return (patch[0], ours) if ended and names >= {
                'v0', 'v1', 'v2', 'v3'} else None
        patch, ours = wait_for(update_trace, timeout=60)
    finally:
        collector.stop()
    assert patch['service'] == 'converge-api'
    [trav] = [s for s in ours if s['name'] == tracing.TRAVERSAL]
    assert trav['service'] == 'converge-api'
    assert trav['parent'] == patch['id']
    units = [s for s in ours if s['name'] in (tracing.UNIT, tracing.UNITS)]
    assert {s['service'] for s in units} == {'converge-worker'}
    by_id = {s['id']: s for s in ours}
    for unit in units:   # each the traversal's child, or its message's
        assert unit['parent'] == trav['id'] or \
            by_id[unit['parent']]['parent'] == trav['id'], unit
    [end] = [s for s in ours if s['name'] == tracing.TRAVERSAL_END]
    assert end['service'] == 'converge-worker'
    assert end['attrs']['converge.traversal.state'] == 'complete'

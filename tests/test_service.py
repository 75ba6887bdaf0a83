"""The service layer in-process: project scoping of every operation,
Heat's stack-name rule and the timeout check in the engine, and following
a traversal (events committed out of id order, progress after a
takeover)."""

import io
import threading
import time

import pytest
import sqlalchemy as sa

from converge import exception
from converge.cmd import progress
from converge.db import api
from converge.db import models
from converge.engine import request
from converge.engine import service
from converge.engine import stacks
from converge.workers import pool
from tests import enginetools as et

NONES = et.hot({'a': {'type': 'OS::Heat::None'},
                'b': {'type': 'OS::Heat::None', 'depends_on': 'a'},
                'c': {'type': 'OS::Heat::None'}},
               outputs={'o': {'value': 'x'}})


@pytest.fixture
def idle_engine(tmp_path):
    """An embedded engine whose workers are not running: a traversal it
    starts stays IN_PROGRESS until the test starts them."""
    from converge import conf
    from converge.db import session
    from converge.engine import context
    conf.setup([], home=str(tmp_path / 'home'), log=False)
    eng = context.Engine()
    yield eng
    eng.close()
    session.forget()


def _wait_for(predicate, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


# -- projects -----------------------------------------------------------------

def test_another_projects_stack_is_not_found_by_any_operation(
        engine, tmp_path):
    svc = service.Service(engine)
    a, b = request.make('project-a'), request.make('project-b')
    bundle = et.bundle(tmp_path, NONES)
    started = svc.stack_create(a, 'app', bundle, {})
    et.follow(engine, started['id'], started['traversal_id'], ctx=a,
              out=io.StringIO(), tty=False)
    stack_id = started['id']
    for ident in ('app', stack_id):
        for call in (
                lambda: svc.stack_show(b, ident),
                lambda: svc.stack_update(b, ident, existing=True),
                lambda: svc.stack_delete(b, ident),
                lambda: svc.stack_check(b, ident),
                lambda: svc.stack_converge(b, ident),
                lambda: svc.stack_cancel(b, ident),
                lambda: svc.stack_graph(b, ident),
                lambda: svc.stack_drift(b, ident),
                lambda: svc.resource_list(b, ident),
                lambda: svc.resource_show(b, ident, 'a'),
                lambda: svc.output_list(b, ident),
                lambda: svc.output_show(b, ident, 'o'),
                lambda: svc.event_list(b, ident)):
            with pytest.raises(exception.StackNotFound):
                call()
    # what following reads is scoped too
    for call in (lambda: svc.stack_status(b, stack_id),
                 lambda: svc.traversal_status(b, stack_id, 'x'),
                 lambda: svc.traversal_progress(b, stack_id, 'x'),
                 lambda: svc.events_since(b, stack_id, ['x']),
                 lambda: svc.event_ids_since(b, stack_id, ['x'], 0)):
        with pytest.raises(exception.StackNotFound):
            call()
    assert svc.stack_list(b) == []
    assert [s['stack_name'] for s in svc.stack_list(a)] == ['app']
    # the same name in another project is another stack
    other = svc.stack_create(b, 'app', bundle, {})
    assert other['id'] != stack_id
    assert svc.stack_show(b, 'app')['project'] == 'project-b'
    assert svc.stack_show(a, 'app')['id'] == stack_id
    with pytest.raises(exception.Conflict):
        svc.stack_create(a, 'app', bundle, {})


def test_a_request_without_a_project_is_refused(engine):
    svc = service.Service(engine)
    ctx = request.RequestContext(project_id=None, overwrite=False)
    with pytest.raises(exception.ConvergeError, match='no project'):
        svc.stack_list(ctx)


# -- guard rails in the engine ------------------------------------------------

@pytest.mark.parametrize('name', [
    '', 'a' * 256, 'a/b', 'my stack', '1abc', '-x', 'a\n', 'é'])
def test_heats_stack_name_rule_is_enforced_in_the_engine(engine, tmp_path,
                                                         name):
    bundle = et.bundle(tmp_path, NONES)
    with pytest.raises(exception.InvalidInput, match='Invalid stack name'):
        stacks.create(engine, name, bundle, {})
    with pytest.raises(exception.InvalidInput):
        service.Service(engine).stack_preview(request.make(), name, bundle,
                                              {})
    with engine.db.read() as s:
        assert api.stack_list(s) == []


@pytest.mark.parametrize('name', ['a', 'A' + 'b' * 254, 'x_1.2-3'])
def test_names_heat_accepts_are_accepted(engine, tmp_path, name):
    stack = et.run(engine, stacks.create, name, et.bundle(tmp_path, NONES),
                   {})
    assert et.status(stack) == 'CREATE_COMPLETE' and stack.name == name


@pytest.mark.parametrize('timeout', [0, -1, -60])
def test_a_timeout_that_is_not_positive_is_refused(engine, tmp_path,
                                                   timeout):
    bundle = et.bundle(tmp_path, NONES)
    with pytest.raises(exception.InvalidInput, match='timeout'):
        stacks.create(engine, 'to', bundle, {}, timeout=timeout)
    with engine.db.read() as s:
        assert api.stack_list(s) == []
    stack = et.run(engine, stacks.create, 'to', bundle, {}, timeout=5)
    with pytest.raises(exception.InvalidInput, match='timeout'):
        stacks.update(engine, stack.id, None, {}, existing=True,
                      timeout=timeout)
    with engine.db.read() as s:
        stored = api.stack_get(s, stack.id)
        assert stored.timeout_mins == 5 and stored.action == 'CREATE'


# -- following ----------------------------------------------------------------

def _add_event(engine, stack_id, traversal_id, event_id, name, **stack):
    with engine.db.write() as s:
        event = api.event(stack_id, traversal_id, name, 'OS::Heat::None',
                          None, 'CREATE', 'COMPLETE', 'late')
        api.events_add(s, dict(event, id=event_id))
        if stack:
            s.execute(sa.update(models.Stack)
                      .where(models.Stack.id == stack_id).values(**stack))


def test_events_that_commit_out_of_id_order_are_printed_once(
        idle_engine, tmp_path, monkeypatch):
    """Ids are given at INSERT, commits come in another order: an event
    whose id is below one already printed must still be printed, once."""
    monkeypatch.setattr(progress, 'POLL', 0.01)
    monkeypatch.setattr(progress.EventStream, 'RESCAN', 0.05)
    stack_id, trav = stacks.create(idle_engine, 'ooo',
                                   et.bundle(tmp_path, NONES), {})
    out = io.StringIO()
    result = {}

    def follow():
        result['outcome'] = progress.follow(
            service.Service(idle_engine), request.make(), stack_id, trav,
            out=out, tty=False)

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    _add_event(idle_engine, stack_id, trav, 1000, 'high')
    assert _wait_for(lambda: '[high]' in out.getvalue())
    # committed after 1000 was printed, with a lower id
    _add_event(idle_engine, stack_id, trav, 990, 'low')
    assert _wait_for(lambda: '[low]' in out.getvalue()), out.getvalue()
    # and one that commits with the end of the traversal, below both
    _add_event(idle_engine, stack_id, trav, 980, 'last', status='COMPLETE')
    follower.join(timeout=20)
    assert not follower.is_alive()
    lines = out.getvalue().splitlines()
    for name in ('high', 'low', 'last'):
        assert sum('[%s]' % name in line for line in lines) == 1, lines
    assert result['outcome'].stack.status == 'COMPLETE'


def test_event_stream_lets_go_of_ids_only_after_the_grace_period():
    """The low-water mark passes an id only GRACE seconds after it was
    seen; below the mark nothing is read again."""
    now = [0.0]
    visible = []

    def fetch(after, ids=None):
        return [e for e in visible if e['id'] > after
                and (ids is None or e['id'] in ids)]

    def fetch_ids(after):
        return [e['id'] for e in visible if e['id'] > after]

    stream = progress.EventStream(fetch, fetch_ids, clock=lambda: now[0])
    visible.append({'id': 5})
    assert [e['id'] for e in stream.poll()] == [5]
    now[0] += stream.RESCAN
    visible.append({'id': 3})
    assert [e['id'] for e in stream.poll()] == [3]
    assert stream.floor == 0
    now[0] += stream.GRACE
    assert stream.poll() == []
    assert stream.floor == 5 and stream.seen == {}
    visible.append({'id': 7})
    assert [e['id'] for e in stream.poll(final=True)] == [7]
    assert stream.poll(final=True) == []


def test_progress_counts_resources_after_a_takeover(idle_engine, tmp_path):
    """A traversal that takes over a stack whose rows exist has an update
    and a cleanup node per resource: the line counts resources (3/3),
    not nodes (6/6)."""
    stack_id, _ = stacks.create(idle_engine, 'take',
                                et.bundle(tmp_path, NONES), {})
    _, trav = stacks.converge(idle_engine, stack_id)  # another engine's
    svc = service.Service(idle_engine)
    ctx = request.make()
    p = svc.traversal_progress(ctx, stack_id, trav)
    assert (p['done'], p['total']) == (0, 3)
    pool.start(idle_engine)
    out = io.StringIO()
    outcome = progress.follow(svc, ctx, stack_id, trav, out=out, tty=True,
                              local_workers=True)
    assert outcome.stack.status == 'COMPLETE'
    last = out.getvalue().strip().split('\r')[-1]
    assert 'CREATE_COMPLETE  3/3 done, 0 in progress, 0 failed' in last, \
        out.getvalue()
    assert '/6' not in out.getvalue()


def test_a_resource_list_says_what_needs_each_resource(engine, tmp_path):
    """Heat's required_by on every resource of a listing (its needed_by),
    the same as a resource's show says; after an update that moves a
    dependency, the new one."""
    svc, ctx = service.Service(engine), request.make()
    chain = et.hot({'a': {'type': 'OS::Heat::None'},
                    'b': {'type': 'OS::Heat::Value',
                          'properties': {'value': {'get_resource': 'a'}}},
                    'c': {'type': 'OS::Heat::None',
                          'depends_on': ['a', 'b']}})
    started = svc.stack_create(ctx, 's', et.bundle(tmp_path, chain), {})
    et.wait(engine, started['id'], started['traversal_id'])

    def listed():
        return {r['resource_name']: r['required_by']
                for r in svc.resource_list(ctx, 's')}
    assert listed() == {'a': ['b', 'c'], 'b': ['c'], 'c': []}
    assert {n: svc.resource_show(ctx, 's', n)['required_by']
            for n in 'abc'} == listed()
    chain['resources']['c']['depends_on'] = ['b']
    chain['resources']['b'] = {'type': 'OS::Heat::Value',
                               'properties': {'value': 'plain'}}
    started = svc.stack_update(ctx, 's', et.bundle(tmp_path, chain, 'u.yaml'),
                               {})
    et.wait(engine, started['id'], started['traversal_id'])
    assert listed() == {'a': [], 'b': ['c'], 'c': []}

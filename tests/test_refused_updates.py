"""Updates Heat refuses, as Heat refuses them: the stack's update fails
and the resource is left as it was, with an UPDATE FAILED event saying
why. Heat's ``restricted_actions`` (an environment's resource_registry
``resources`` entries: an update or a replacement the operator forbids;
what is not forbidden goes ahead), the cases of Heat's functional test
test_update_restricted.py, in-process, and the CLI's view of one; and a
changed ``external_id`` (test_external_ref.py)."""

import pytest

from converge import exception
from converge import template
from converge.engine import stacks
from tests import enginetools as et

HOT = '''heat_template_version: 2013-05-23
resources:
  bar:
    type: %s
    properties: %s
'''
FIRST = HOT % ('OS::Heat::TestResource',
               '{value: "1234", update_replace: false}')
CHANGED = HOT % ('OS::Heat::TestResource',
                 '{value: "4567", update_replace: false}')
REPLACED = HOT % ('OS::Heat::TestResource',
                  '{value: "4567", update_replace: true}')
OTHER_TYPE = HOT % ('OS::Heat::None', '{}')

BOTH = ('resource_registry:\n  resources:\n'
        '    bar: {restricted_actions: [update, replace]}\n')
REPLACE_ONLY = ('resource_registry:\n  resources:\n'
                "    '*ar': {restricted_actions: replace}\n")

UPDATE_REASON = 'update is restricted for resource.'
REPLACE_REASON = 'replace is restricted for resource.'


def _bundle(tmp_path, text, env, name):
    (tmp_path / (name + '.yaml')).write_text(text)
    (tmp_path / (name + '-env.yaml')).write_text(env)
    return template.load_bundle(str(tmp_path / (name + '.yaml')),
                                [str(tmp_path / (name + '-env.yaml'))])


def _bar(engine, stack):
    return et.resources(engine, stack)['bar']


def _reasons(engine, stack):
    return [e.reason for e in et.events(engine, stack.id)
            if e.resource_name == 'bar' and e.action == 'UPDATE'
            and e.status == 'FAILED']


@pytest.fixture
def made(engine, tmp_path):
    stack = et.run(engine, stacks.create, 'r', et.bundle(tmp_path, FIRST), {})
    assert et.status(stack) == 'CREATE_COMPLETE'
    return stack, _bar(engine, stack)


def test_an_update_restricted_leaves_the_resource_as_it_was(
        engine, tmp_path, made):
    stack, before = made
    stack = et.run(engine, stacks.update, stack.id,
                   _bundle(tmp_path, CHANGED, BOTH, 'both'), {})
    assert et.status(stack) == 'UPDATE_FAILED'
    assert UPDATE_REASON in stack.status_reason
    bar = _bar(engine, stack)
    assert ('%s_%s' % (bar.action, bar.status), bar.physical_id,
            bar.properties['value']) == (
        'CREATE_COMPLETE', before.physical_id, '1234')
    assert bar.attributes['output'] == '1234'
    assert _reasons(engine, stack) == [UPDATE_REASON]
    # only replacement restricted: the update in place goes ahead
    stack = et.run(engine, stacks.update, stack.id,
                   _bundle(tmp_path, CHANGED, REPLACE_ONLY, 'replace'), {})
    assert et.status(stack) == 'UPDATE_COMPLETE'
    bar = _bar(engine, stack)
    assert ('%s_%s' % (bar.action, bar.status), bar.physical_id,
            bar.attributes['output']) == (
        'UPDATE_COMPLETE', before.physical_id, '4567')
    assert _reasons(engine, stack) == [UPDATE_REASON]


@pytest.mark.parametrize('text', [REPLACED, OTHER_TYPE],
                         ids=['replaced', 'type changed'])
def test_a_replacement_restricted_leaves_the_resource_as_it_was(
        engine, tmp_path, made, text):
    stack, before = made
    for env, name in ((BOTH, 'both'), (REPLACE_ONLY, 'replace')):
        stack = et.run(engine, stacks.update, stack.id,
                       _bundle(tmp_path, text, env, name), {})
        assert et.status(stack) == 'UPDATE_FAILED'
        bar = _bar(engine, stack)
        assert ('%s_%s' % (bar.action, bar.status), bar.physical_id,
                bar.type) == ('CREATE_COMPLETE', before.physical_id,
                              'OS::Heat::TestResource')
    # twice for replace, never for update (Heat's counts)
    assert _reasons(engine, stack) == [REPLACE_REASON] * 2
    # nothing was made beside it, nothing is left to clean up
    assert [r.name for r in et.resources(engine, stack).values()] == ['bar']


def test_an_unknown_restricted_action_is_refused_naming_it(tmp_path):
    with pytest.raises(exception.InvalidTemplate) as err:
        _bundle(tmp_path, FIRST, 'resource_registry:\n  resources:\n'
                '    bar: {restricted_actions: [update, delete]}\n', 'bad')
    text = str(err.value)
    assert 'Invalid restricted_action type "delete" for resource, ' \
        'acceptable restricted_action types are: update, replace' in text
    assert 'bad-env.yaml' in text and \
        'resource_registry.resources.bar.restricted_actions' in text


def test_the_cli_shows_the_refused_update(cli, write):
    cli.run('stack', 'create', 'r', '-t', write('t.yaml', FIRST), '--wait')
    proc = cli.run('stack', 'update', 'r', '-t', write('c.yaml', CHANGED),
                   '-e', write('env.yaml', BOTH), '--wait', check=False)
    assert proc.returncode != 0
    assert cli.json('stack', 'show', 'r')['stack_status'] == 'UPDATE_FAILED'
    assert cli.json('stack', 'resource', 'show', 'r', 'bar')[
        'resource_status'] == 'CREATE_COMPLETE'
    events = cli.json('stack', 'event', 'list', 'r', '--resource', 'bar')
    assert [e['resource_status_reason'] for e in events
            if e['resource_status'] == 'UPDATE_FAILED'] == [UPDATE_REASON]


SERVER = '''heat_template_version: 2018-08-31
resources:
  web:
    type: OS::Nova::Server
    properties:
      image: cirros
      flavor: m1.tiny
      image_update_policy: REPLACE
'''
NO_REPLACING_WEB = ('resource_registry:\n  resources:\n'
                    '    web: {restricted_actions: replace}\n')


def test_a_replacement_found_while_updating_is_refused_too(engine,
                                                           tmp_path):
    """A server rebuilt behind the engine's back, with the REPLACE image
    policy, is found to need replacing only once its update has begun
    (claimed, IN_PROGRESS): refused, it is left as it was."""
    plain = et.bundle(tmp_path, SERVER)
    stack = et.run(engine, stacks.create, 's', plain, {})
    web = et.resources(engine, stack)['web']
    engine.clients.compute.admin().rebuild_server(web.physical_id, 'fedora')
    # `stack update --converge`: against what is really there
    stack = et.run(engine, stacks.update, stack.id,
                   _bundle(tmp_path, SERVER, NO_REPLACING_WEB, 'web'), {},
                   converge=True)
    assert et.status(stack) == 'UPDATE_FAILED'
    after = et.resources(engine, stack)['web']
    assert ('%s_%s' % (after.action, after.status), after.physical_id) == (
        'CREATE_COMPLETE', web.physical_id)
    assert [(e.action, e.status, e.reason) for e in et.events(
        engine, stack.id) if e.resource_name == 'web'][-2:] == [
        ('UPDATE', 'IN_PROGRESS', 'state changed'),
        ('UPDATE', 'FAILED', REPLACE_REASON)]
    # allowed again, the same update replaces it
    stack = et.run(engine, stacks.update, stack.id, plain, {}, converge=True)
    assert et.status(stack) == 'UPDATE_COMPLETE'
    assert et.resources(engine, stack)['web'].physical_id != web.physical_id


PLAIN = """heat_template_version: 2016-10-14
resources:
  test1:
    type: OS::Heat::TestResource
"""
WITH_REF = PLAIN + """    external_id: %s
outputs:
  str:
    value: {get_resource: test1}
"""


def test_an_external_id_is_not_given_to_a_resource_made_here(engine,
                                                             tmp_path):
    stack = et.run(engine, stacks.create, 'e', et.bundle(tmp_path, PLAIN),
                   {})
    made = et.resources(engine, stack)['test1']
    stack = et.run(engine, stacks.update, stack.id,
                   et.bundle(tmp_path, WITH_REF % 'foobar'), {})
    assert et.status(stack) == 'UPDATE_FAILED'
    reason = ('Update to property external_id of test1 '
              '(OS::Heat::TestResource) is not supported.')
    assert reason in stack.status_reason
    kept = et.resources(engine, stack)['test1']
    assert ('%s_%s' % (kept.action, kept.status), kept.physical_id) == (
        'CREATE_COMPLETE', made.physical_id)


def test_an_external_id_is_kept_or_refused_when_changed(engine, tmp_path):
    stack = et.run(engine, stacks.create, 'e',
                   et.bundle(tmp_path, WITH_REF % 'foobar'), {})
    assert et.status(stack) == 'CREATE_COMPLETE'
    # the same id again: nothing to do
    stack = et.run(engine, stacks.update, stack.id,
                   et.bundle(tmp_path, WITH_REF % 'foobar', 'same.yaml'), {})
    assert et.status(stack) == 'UPDATE_COMPLETE'
    assert et.resources(engine, stack)['test1'].physical_id == 'foobar'
    stack = et.run(engine, stacks.update, stack.id,
                   et.bundle(tmp_path, WITH_REF % 'other', 'other.yaml'), {})
    assert et.status(stack) == 'UPDATE_FAILED'
    assert et.resources(engine, stack)['test1'].physical_id == 'foobar'

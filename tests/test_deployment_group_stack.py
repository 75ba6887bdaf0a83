"""A deployment group's nested stack through Heat's API (python-heatclient
against converge-api), as Heat's functional test of
OS::Heat::SoftwareDeploymentGroup uses it: the group's physical id is a
stack that can be shown, whose resources are the members, each shown and
signalled through it; a signal completes the member's deployment once.
Its servers are plain strings: nothing but those signals ever completes
the members."""

import time

import pytest

from tests.test_heat_api import api, _settled  # noqa: F401

TEMPLATE = '''
heat_template_version: 2016-10-14
parameters:
  input:
    type: string
    default: foo_input
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs:
      - name: foo
  deployment:
    type: OS::Heat::SoftwareDeploymentGroup
    properties:
      config: {get_resource: config}
      input_values:
        foo: {get_param: input}
      servers:
        '0': dummy0
        '1': dummy1
        '2': dummy2
        '3': dummy3
'''
MEMBERS = ['0', '1', '2', '3']
#: the same group rolling its updates out two members at a time
ROLLING = TEMPLATE.replace(
    '    type: OS::Heat::SoftwareDeploymentGroup\n',
    '    type: OS::Heat::SoftwareDeploymentGroup\n'
    '    update_policy:\n'
    '      rolling_update: {max_batch_size: 2, pause_time: 0.5}\n')


def _until(what, timeout=60):
    """Poll `what()` until it answers something true; that answer."""
    deadline = time.monotonic() + timeout
    while True:
        found = what()
        if found:
            return found
        assert time.monotonic() < deadline, 'timed out'
        time.sleep(0.05)


def _nested(hc, stack):
    """The group's nested stack as Heat's test finds it: (its name/id,
    the group resource)."""
    def linked():
        res = hc.resources.get(stack, 'deployment')
        links = [lk['href'] for lk in res.links if lk['rel'] == 'nested']
        return res.resource_status == 'CREATE_IN_PROGRESS' and links and \
            (res, links[0])
    res, href = _until(linked)
    assert href.split('/')[-1] == res.physical_resource_id
    return '/'.join(href.split('/')[-2:]), res


def _members(hc, nested, status):
    """The members once every one of them is `status`."""
    def all_there():
        found = hc.resources.list(nested)
        return len(found) == len(MEMBERS) and all(
            r.resource_status == status for r in found) and found
    return _until(all_there)


def _signal_until(hc, stack, nested, status, members):
    """Signal `members` (a listing made once, as Heat's test does: every
    member listed IN_PROGRESS, through its stack link, whatever it is
    now: a member done or not started yet ignores it) until the stack is
    `status`; the most members seen running at once."""
    nested_id = nested.split('/')[-1]
    most = [0]

    def signalled():
        st = hc.stacks.get(stack)
        if st.stack_status == status:
            return st
        assert not st.stack_status.endswith('FAILED'), st.stack_status_reason
        most[0] = max(most[0], sum(
            r.resource_status.endswith('IN_PROGRESS')
            for r in hc.resources.list(nested)))
        for r in members:
            stack_link = [lk['href'] for lk in r.links
                          if lk['rel'] == 'stack'][0]
            assert stack_link.endswith('/' + nested_id)
            if r.resource_status.endswith('IN_PROGRESS'):
                hc.resources.signal(stack_link.split('/')[-1],
                                    r.resource_name)
        return None
    _until(signalled)
    return most[0]


def _inputs(hc, members):
    """{member: (its deployment's input foo, its derived config's)}."""
    out = {}
    for r in members:
        dep = hc.software_deployments.get(r.physical_resource_id)
        config = hc.software_configs.get(dep.config_id)
        out[r.resource_name] = (dep.input_values['foo'], [
            i.get('value') for i in config.inputs if i['name'] == 'foo'][0])
    return out


@pytest.mark.parametrize('template,batch', [(TEMPLATE, 4), (ROLLING, 2)],
                         ids=['at-once', 'rolling'])
def test_deployment_group_nested_stack_through_heatclient(
        api, template, batch):  # noqa: F811
    """Heat's test_software_deployment_group: create, the members
    signalled through the nested stack, update (a rolling one: two
    members at a time), signalled again, delete."""
    from heatclient import exc
    hc = api.client('sdg', api.token('sdg')['token'])
    made = hc.stacks.create(stack_name='sdg', template=template,
                            parameters={}, disable_rollback=True)
    top_id = made['stack']['id']
    nested, group = _nested(hc, 'sdg')
    nested_id = nested.split('/')[-1]

    st = hc.stacks.get(nested_id, resolve_outputs=False)
    assert '%s/%s' % (st.stack_name, st.id) == nested
    assert st.parent == top_id
    assert st.stack_status == 'CREATE_IN_PROGRESS'
    assert hc.stacks.get(nested).id == nested_id

    members = _members(hc, nested, 'CREATE_IN_PROGRESS')
    assert sorted(r.resource_name for r in members) == MEMBERS
    one = hc.resources.get(nested_id, '1')
    assert one.resource_status == 'CREATE_IN_PROGRESS'
    assert one.resource_type == 'OS::Heat::SoftwareDeployment'
    assert one.properties['server'] == 'dummy1'
    assert one.physical_resource_id == [
        r.physical_resource_id for r in members if r.resource_name == '1'][0]

    _signal_until(hc, 'sdg', nested, 'CREATE_COMPLETE', members)
    assert hc.stacks.get(nested_id).stack_status == 'CREATE_COMPLETE'
    done = _members(hc, nested, 'CREATE_COMPLETE')
    assert _inputs(hc, done) == {m: ('foo_input', 'foo_input')
                                 for m in MEMBERS}

    # a second signal of a completed member changes nothing
    before = hc.software_deployments.get(one.physical_resource_id)
    hc.resources.signal(nested_id, '1')
    after = hc.software_deployments.get(one.physical_resource_id)
    assert (after.status, after.status_reason, after.updated_time) == (
        before.status, before.status_reason, before.updated_time)
    assert hc.stacks.get('sdg').stack_status == 'CREATE_COMPLETE'
    with pytest.raises(exc.HTTPNotFound):
        hc.resources.get(nested_id, 'nobody')

    hc.stacks.update(top_id, template=template,
                     environment={'parameters': {'input': 'input2'}},
                     parameters={}, disable_rollback=True)
    _until(lambda: hc.stacks.get(nested_id).stack_status ==
           'UPDATE_IN_PROGRESS')
    # (a listing may come while a batch's deployments are being written)
    assert 1 <= _signal_until(hc, 'sdg', nested, 'UPDATE_COMPLETE',
                              members) <= batch
    # updated in place: the same deployments, their new input
    assert _inputs(hc, done) == {m: ('input2', 'input2') for m in MEMBERS}
    events = hc.events.list(nested_id)
    assert {(e.resource_name, e.resource_status) for e in events} >= {
        (m, s) for m in MEMBERS for s in ('CREATE_IN_PROGRESS',
                                          'CREATE_COMPLETE',
                                          'UPDATE_COMPLETE')}

    hc.stacks.delete(top_id)
    assert _settled(hc, top_id).stack_status == 'DELETE_COMPLETE'
    with pytest.raises(exc.HTTPNotFound):
        hc.stacks.get(nested_id)


def test_another_project_cannot_see_a_groups_nested_stack(
        api):  # noqa: F811
    """Project B, by the nested stack's id: not found, whatever it asks;
    A's member is left running. Deleted while its members still run, the
    nested stack is gone for A too."""
    from heatclient import exc
    a = api.client('sdg-a', api.token('sdg-a')['token'])
    made = a.stacks.create(stack_name='mine', template=TEMPLATE,
                           parameters={}, disable_rollback=True)
    nested, _ = _nested(a, 'mine')
    nested_id = nested.split('/')[-1]
    _members(a, nested, 'CREATE_IN_PROGRESS')
    b = api.client('sdg-b', api.token('sdg-b')['token'])
    for ident in (nested_id, nested):
        for attempt in (lambda: b.stacks.get(ident),
                        lambda: b.resources.list(ident),
                        lambda: b.resources.get(ident, '0'),
                        lambda: b.resources.signal(ident, '0'),
                        lambda: b.events.list(ident)):
            with pytest.raises(exc.HTTPNotFound):
                attempt()
    assert a.resources.get(nested_id, '0').resource_status == \
        'CREATE_IN_PROGRESS'

    a.stacks.delete(made['stack']['id'])
    assert _settled(a, made['stack']['id']).stack_status == \
        'DELETE_COMPLETE'
    with pytest.raises(exc.HTTPNotFound):
        a.stacks.get(nested_id)

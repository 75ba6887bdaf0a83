"""An admin acts on another project's stack by its id, as Heat lets one
(heat_integrationtests test_admin_actions): show, update, suspend,
resume, list its resources (a group's nested stack grown), delete. Any
other caller of another project finds it nowhere (404), by id or name.
"""

import pytest
from heatclient import exc

from tests.test_heat_api import api  # noqa: F401
from tests.test_heat_api import _settled

GROUP = {'heat_template_version': '2013-05-23', 'resources': {
    'random_group': {'type': 'OS::Heat::ResourceGroup', 'properties': {
        'count': 2, 'resource_def': {
            'type': 'OS::Heat::RandomString',
            'properties': {'length': 30, 'salt': 'initial'}}}}}}


def test_an_admin_acts_on_another_projects_stack_by_id(api):  # noqa: F811
    owner = api.client('owner', api.token('owner')['token'])
    admin = api.client('ops', api.token('ops', '--role', 'admin')['token'])
    other = api.client('other', api.token('other')['token'])
    owner.stacks.create(stack_name='grp', template=GROUP)
    assert _settled(owner, 'grp').stack_status == 'CREATE_COMPLETE'
    sid = owner.stacks.get('grp').id
    ident = 'grp/%s' % sid
    for client in (other, admin):   # a name alone is the caller's own
        with pytest.raises(exc.HTTPNotFound):
            client.stacks.get('grp')
    for what in (ident, sid):
        with pytest.raises(exc.HTTPNotFound):
            other.stacks.get(what)
    with pytest.raises(exc.HTTPNotFound):
        other.stacks.delete(ident)
    assert admin.stacks.get(ident).stack_status == 'CREATE_COMPLETE'

    grown = {'heat_template_version': '2013-05-23', 'resources': {
        'random_group': dict(GROUP['resources']['random_group'])}}
    grown['resources']['random_group']['properties'] = dict(
        GROUP['resources']['random_group']['properties'], count=3)
    admin.stacks.update(ident, template=grown)
    assert _settled(admin, ident).stack_status == 'UPDATE_COMPLETE'
    admin.actions.suspend(ident)
    assert _settled(admin, ident).stack_status == 'SUSPEND_COMPLETE'
    admin.actions.resume(ident)
    assert _settled(admin, ident).stack_status == 'RESUME_COMPLETE'
    assert [(r.resource_name, r.resource_type)
            for r in admin.resources.list(ident)] == [
        ('random_group', 'OS::Heat::ResourceGroup')]
    nested = admin.resources.get(ident, 'random_group').physical_resource_id
    assert len(owner.resources.list(nested)) == 3   # still the owner's
    assert list(admin.stacks.list()) == []   # its own listing is its own
    admin.stacks.delete(ident)
    assert _settled(owner, sid).stack_status in ('DELETE_COMPLETE',)

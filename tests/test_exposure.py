"""Which resource types a caller sees and may use, through the API as
heatclient reaches it (heat_integrationtests test_conditional_exposure):
Heat's admin-only types (OS::Nova::Flavor, OS::Cinder::VolumeType ...)
are neither listed for nor usable by a project member, in a template or
inside a provider template it sends; an admin uses them. A type of an
OpenStack service converge does not drive (OS::Manila::Share) is refused
as Heat refuses it on a cloud without that service: ResourceTypeUnavailable.
"""

import pytest
import yaml
from heatclient import exc

from tests.test_heat_api import api  # noqa: F401
from tests.test_heat_api import _settled

FLAVOR = yaml.safe_load('''
heat_template_version: 2015-10-15
resources:
  not4everyone:
    type: OS::Nova::Flavor
    properties: {ram: 20000, vcpus: 10}
''')

WRAPPED = yaml.safe_load('''
heat_template_version: 2015-10-15
resources:
  inside: {type: flavor.yaml}
''')

MANILA = yaml.safe_load('''
heat_template_version: 2015-10-15
resources:
  not_available:
    type: OS::Manila::Share
    properties: {name: not_available, share_protocol: NFS, size: 1}
''')


@pytest.fixture(scope='module')
def member(api):  # noqa: F811
    return api.client('demo', api.token('demo')['token'])


@pytest.fixture(scope='module')
def admin(api):  # noqa: F811
    return api.client('ops', api.token('ops', '--role', 'admin')['token'])


def _types(client):
    return {t.resource_type for t in client.resource_types.list()}


def test_admin_types_are_not_listed_for_a_member(member, admin):
    admin_only = {'OS::Nova::Flavor', 'OS::Nova::HostAggregate',
                  'OS::Cinder::VolumeType', 'OS::Cinder::EncryptedVolumeType',
                  'OS::Keystone::Domain', 'OS::Keystone::User'}
    assert not admin_only & _types(member)
    assert 'OS::Nova::Server' in _types(member)
    assert admin_only <= _types(admin)   # OS::Keystone::* by its wildcard
    with pytest.raises(exc.HTTPForbidden):
        member.resource_types.get('OS::Nova::Flavor')


def test_a_member_may_not_use_an_admin_type(member, admin):
    for name, template, files in (
            ('direct', FLAVOR, {}),
            ('wrapped', WRAPPED, {'flavor.yaml': yaml.safe_dump(FLAVOR)})):
        with pytest.raises(exc.HTTPForbidden) as err:
            member.stacks.create(stack_name=name, template=template,
                                 files=files)
        assert 'You are not authorized to use OS::Nova::Flavor.' in \
            err.value.message.decode('utf-8')
    assert list(member.stacks.list()) == []
    admin.stacks.create(stack_name='flavors', template=FLAVOR)
    assert _settled(admin, 'flavors').stack_status == 'CREATE_COMPLETE'


def test_a_type_of_an_absent_service_is_unavailable(member):
    assert not any('Manila' in t for t in _types(member))
    with pytest.raises(exc.HTTPBadRequest) as err:
        member.stacks.create(stack_name='share', template=MANILA)
    message = err.value.message.decode('utf-8')
    assert 'ResourceTypeUnavailable' in message
    assert 'Service manila is not available for resource type ' \
        'OS::Manila::Share' in message

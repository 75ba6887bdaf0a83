"""OS::Nova::KeyPair, OS::Nova::ServerGroup and OS::Nova::Flavor on the
in-memory cloud and on the simulator."""

import pytest

from converge import exception
from converge.resources import nova
from tests.cloud_fakes import FakeClients, changed, gone, made, settle
from tests.cloud_fakes import clients, cloud  # noqa: F401 (fixtures)
from tests.resource_fakes import again, make

PUBLIC = ('ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQDx8nkQv/zgGgB4rMYmIf+6A4'
          'l6Rr+o/6lHBQdW5aYd44bd8JttDCE/F/pNRr0lRE+PiqSPO8nDPHw0010JeMH9'
          'gYgnnFlyY3/OcJ02RhIPyyxYpv9FhY+2YiUkpwFOcLImyrxEsYXpD/0d3ac30b'
          'NH6Sw9JD9UZHYcpSxsIbECHw== alice@example')


# -- key pairs -----------------------------------------------------------

def test_keypair_generated_private_key_saved(clients, cloud):
    kp = made(nova.KeyPair, clients, 'kp', name='k1', save_private_key=True)
    assert kp.physical_id == 'k1' and kp.reference_id() == 'k1'
    attrs = kp.get_attributes(kp.observe())
    assert attrs['private_key'].startswith('-----BEGIN')
    assert attrs['public_key']
    assert kp.data['private_key'] == attrs['private_key']
    assert 'private_key' not in (attrs['show'] or {})
    assert cloud.resolve('keypair', 'k1') == 'k1'
    # the create repeated finds it by its name
    again(kp).create()
    assert [k['name'] for k in cloud.list('keypair')] == ['k1']
    gone(kp)


def test_keypair_private_key_only_when_saved(clients):
    kp = made(nova.KeyPair, clients, 'kp', name='k1')
    assert kp.get_attributes(kp.observe())['private_key'] == ''
    assert 'private_key' not in kp.data


def test_keypair_from_a_public_key(clients):
    kp = made(nova.KeyPair, clients, 'kp', name='k1', public_key=PUBLIC,
              save_private_key=True)
    attrs = kp.get_attributes(kp.observe())
    assert attrs['public_key'] == PUBLIC
    assert attrs['private_key'] == ''


def test_keypair_changed_is_made_again_under_its_name(clients, cloud):
    kp = made(nova.KeyPair, clients, 'kp', name='k1', save_private_key=True)
    first = kp.observe()['public_key']
    kp2, prior = changed(kp, public_key=PUBLIC)
    assert not kp2.needs_replace(prior)     # the same name: in place
    assert kp2.update(prior, kp2.observe()) is None
    assert kp2.observe()['public_key'] == PUBLIC != first
    assert kp2.get_attributes(kp2.observe())['private_key'] == ''
    kp3, prior = changed(kp2, name='k2')
    assert kp3.needs_replace(prior)         # another name: another pair


def test_keypair_of_another_with_that_name_is_refused(clients, cloud):
    made(nova.KeyPair, clients, 'theirs', name='k1')
    mine = make(nova.KeyPair, 'mine', {'name': 'k1', 'public_key': PUBLIC},
                clients=clients)
    # (refused by the plug-in, or by a cloud that compares them itself)
    with pytest.raises(exception.ConvergeError) as e:
        mine.create()
    assert "Key pair 'k1' already exists." in str(e.value)


def test_keypair_validation():
    with pytest.raises(exception.InvalidTemplate):
        nova.KeyPair.validate_properties({})
    with pytest.raises(exception.InvalidTemplate):
        nova.KeyPair.validate_properties({'name': ''})
    with pytest.raises(exception.InvalidTemplate):
        nova.KeyPair.validate_properties({'name': 'k', 'type': 'pgp'})


# -- server groups -------------------------------------------------------

def test_server_group_lifecycle(clients, cloud):
    group = made(nova.ServerGroup, clients, 'group', policies=['affinity'])
    seen = group.observe()
    assert seen['policy'] == 'affinity'
    assert seen['name'].startswith('mystack-group-')
    again(group).create()
    assert [g['id'] for g in cloud.list('server_group')] == \
        [group.physical_id]
    new, prior = changed(group, policies=['anti-affinity'])
    assert new.needs_replace(prior)
    gone(group)


def test_server_group_default_policy_and_rules(clients):
    group = made(nova.ServerGroup, clients, 'group', name='g',
                 rules={'max_server_per_host': 2})
    seen = group.observe()
    assert seen['policy'] == 'anti-affinity'
    assert seen['rules'] == {'max_server_per_host': 2}


def test_server_group_validation():
    with pytest.raises(exception.InvalidTemplate) as e:
        nova.ServerGroup.validate_properties({'policies': ['spread']})
    assert e.value.path == ['policies', 0]


# -- flavors -------------------------------------------------------------

def test_flavor_lifecycle(clients, cloud):
    fl = made(nova.Flavor, clients, 'fl', ram=1024, vcpus=2, disk=10,
              extra_specs={'hw:cpu_policy': 'dedicated'})
    seen = fl.observe()
    assert seen['ram'] == 1024 and seen['vcpus'] == 2
    attrs = fl.get_attributes(seen)
    assert attrs['is_public'] is True
    assert attrs['extra_specs'] == {'hw:cpu_policy': 'dedicated'}
    assert cloud.resolve('flavor', seen['name']) == fl.physical_id
    again(fl).create()
    assert [f['id'] for f in cloud.list('flavor')
            if f['name'] == seen['name']] == [fl.physical_id]
    fl2, prior = changed(fl, extra_specs={'hw:mem_page_size': 'large'})
    assert not fl2.needs_replace(prior)
    assert settle(fl2.update, prior, fl2.observe()) is None
    assert fl2.get_attributes(fl2.observe())['extra_specs'] == \
        {'hw:mem_page_size': 'large'}
    new, prior = changed(fl2, ram=2048)
    assert new.needs_replace(prior)
    gone(fl2)


def test_private_flavor_is_the_projects_own():
    clients = FakeClients()
    fl = made(nova.Flavor, clients, 'fl', ram=512, vcpus=1,
              is_public=False)
    assert fl.data['applied']['tenants'] == [clients.cloud.project_id]


def test_flavor_of_another_with_that_name_is_refused(clients):
    made(nova.Flavor, clients, 'theirs', name='big', ram=4096, vcpus=4)
    mine = make(nova.Flavor, 'mine', {'name': 'big', 'ram': 512,
                                      'vcpus': 1}, clients=clients)
    with pytest.raises(exception.ConvergeError) as e:
        mine.create()
    assert 'Flavor with name big already exists.' in str(e.value)


def test_heat_update_allowed():
    def allowed(cls):
        return {k for k, s in cls.properties_schema.items()
                if s.update_allowed}
    assert allowed(nova.KeyPair) == set()
    assert allowed(nova.ServerGroup) == set()
    assert allowed(nova.Flavor) == {'tenants', 'extra_specs'}

"""CloudObject, the base of the plug-ins over ``clients.cloud``: what every
kind does alike, on the in-memory cloud (tests/cloud_fakes.py), where a
failure or a refusal can be made to happen exactly once."""

import pytest

from converge import exception
from converge.resources import base
from converge.resources import cloud_object as co
from converge.resources import neutron
from converge.resources import volume
from tests.cloud_fakes import FakeClients, settle
from tests.resource_fakes import again, make


@pytest.fixture
def clients():
    return FakeClients()


def net(clients, rname='net', **props):
    return make(neutron.Net, rname, props, clients=clients)


def vol(clients, rname='vol', **props):
    props.setdefault('size', 1)
    return make(volume.Volume, rname, props, clients=clients)


# -- create: exactly once ------------------------------------------------

def test_create_marks_the_object_with_the_key_and_records_the_body(clients):
    n = net(clients, name='n1')
    assert n.create() is None
    cloud = clients.cloud
    assert cloud.keys[('network', n.physical_id)] == n.idempotency_key
    assert n.data['applied']['name'] == 'n1'
    assert n.seen['id'] == n.physical_id
    assert n.reference_id() == n.physical_id


def test_create_repeated_makes_no_second_object(clients):
    n = net(clients)
    n.create()
    first = n.physical_id
    n.create()
    assert n.physical_id == first
    # the engine died after the cloud's answer, before recording it
    lost = again(n)
    lost.physical_id = None
    lost.data = {}
    lost.create()
    assert lost.physical_id == first
    assert len([o for o in clients.cloud.of('network')
                if o.get('name', '').startswith('mystack-net')]) == 1


def test_a_fresh_create_looks_nothing_up_and_a_retried_one_does(clients):
    """A create the engine claimed before its first try (``fresh``) asks
    the cloud to make the object and nothing more; a create tried again
    (the engine died after the claim) looks for its key first and makes
    no second object."""
    cloud = clients.cloud
    cloud.in_process = False         # a real cloud: a look-up is a call
    n = net(clients)
    assert n.looks_up_remotely
    n.fresh = True
    n.create()
    assert [c[0] for c in cloud.calls if c[1] == 'network'] == ['create']
    lost = again(n)
    lost.physical_id = None
    lost.data = {}
    lost.create()
    assert lost.physical_id == n.physical_id
    assert [o['id'] for o in cloud.of('network')
            if o['id'] == n.physical_id] == [n.physical_id]
    assert len([o for o in cloud.of('network')
                if o.get('name', '').startswith('mystack-net')]) == 1


def test_an_object_gone_at_once_is_deleted_with_one_call(clients):
    """A kind with no status that settles (Neutron's) is deleted with the
    delete call only, no look before or after; one already gone is
    deleted all the same."""
    n = net(clients)
    n.create()
    clients.cloud.calls.clear()
    assert n.delete() is None
    assert [c[0] for c in clients.cloud.calls] == ['delete']
    assert n.physical_id not in [o['id'] for o in clients.cloud.of('network')]
    assert n.delete() is None


def test_observe_finds_an_unrecorded_create_by_its_key(clients):
    n = net(clients)
    n.create()
    lost = again(n)
    lost.physical_id = None
    seen = lost.observe()
    assert seen['id'] == n.physical_id
    assert lost.physical_id == n.physical_id
    other = net(clients, rname='other')
    assert other.observe() is None and other.physical_id is None


def test_observe_gone(clients):
    n = net(clients)
    n.create()
    del clients.cloud.objects[('network', n.physical_id)]
    assert n.observe() is None


def test_a_cloud_error_reaches_the_caller_with_its_message(clients):
    clients.cloud.fail_next['create'] = exception.CloudError(
        'Quota exceeded for resources: [network].', 409)
    n = net(clients)
    with pytest.raises(exception.CloudError) as e:
        n.create()
    assert 'Quota exceeded' in str(e.value)
    assert n.physical_id is None
    n.create()   # tried again, it is made once
    assert n.physical_id


def test_a_name_that_does_not_resolve_names_resource_and_property(clients):
    s = make(neutron.Subnet, 'sub', {'network': 'nope',
                                     'cidr': '10.0.0.0/24'},
             clients=clients)
    with pytest.raises(exception.ResourceFailure) as e:
        s.create()
    assert str(e.value).startswith('sub: property network: ')
    assert 'nope' in str(e.value)


# -- settling ------------------------------------------------------------

def test_create_waits_until_the_status_settles(clients):
    clients.cloud.settle_after = 3
    v = vol(clients)
    first = v.create()
    assert isinstance(first, base.Wait) and first.after > 0
    assert 'creating' in first.reason
    assert v.physical_id and v.data['waiting']['action'] == 'create'
    # the engine calls the same step again, on a new plug-in
    v2 = again(v)
    assert settle(v2.create) is None
    assert 'waiting' not in v2.data
    assert v2.seen['status'] == 'available'
    assert len(clients.cloud.ops('create', 'volume')) == 1


def test_waits_grow(clients):
    clients.cloud.settle_after = 10
    v = vol(clients)
    waits = [v.create().after for _ in range(5)]
    assert waits[-1] > waits[0]
    assert max(waits) <= v.poll_max * (1 + v.poll_jitter)


def test_error_status_fails_with_the_reason_then_a_retry_discards(clients):
    cloud = clients.cloud
    cloud.statuses['volume'] = 'error'
    v = vol(clients)
    with pytest.raises(exception.ResourceFailure) as e:
        settle(v.create)
    assert 'went to status error during create' in str(e.value)
    assert v.label() in str(e.value)
    broken = v.physical_id
    cloud.objects[('volume', broken)]['status_reason'] = 'no valid host'
    cloud.statuses['volume'] = 'available'
    v2 = again(v)
    assert settle(v2.create) is None
    assert v2.physical_id != broken
    assert [o['id'] for o in cloud.of('volume')] == [v2.physical_id]


def test_error_reason_is_the_clouds():
    assert co.status_reason({'status_reason': 'no host'}) == 'no host'
    assert co.status_reason({'fault': {'message': 'boom'}}) == 'boom'
    assert co.status_reason({}) == 'Unknown'


# -- delete --------------------------------------------------------------

def test_delete_asks_once_and_waits_until_gone(clients):
    v = vol(clients)
    settle(v.create)
    assert v.delete() is None
    assert clients.cloud.of('volume') == []
    assert len(clients.cloud.ops('delete', 'volume')) == 1
    assert v.delete() is None    # gone is success
    assert len(clients.cloud.ops('delete', 'volume')) == 1


def test_delete_of_something_never_recorded_finds_it_by_key(clients):
    n = net(clients)
    n.create()
    lost = again(n)
    lost.physical_id = None
    lost.observe()          # the engine's cleanup looks first
    assert lost.delete() is None
    assert not [o for o in clients.cloud.of('network')
                if o['id'] == n.physical_id]


def test_delete_in_use_is_asked_again_then_succeeds(clients):
    n = net(clients)
    n.create()
    clients.cloud.in_use[n.physical_id] = 2
    first = n.delete()
    assert isinstance(first, base.Wait)
    assert 'in use' in first.reason
    assert settle(again(n).delete) is None
    assert len(clients.cloud.ops('delete', 'network')) == 3


def test_delete_in_use_for_too_long_fails_with_the_clouds_message(clients):
    n = net(clients)
    n.create()
    clients.cloud.in_use[n.physical_id] = 99
    n.in_use_timeout = 0.0
    assert isinstance(n.delete(), base.Wait)
    n.data['waiting']['since'] -= 1
    with pytest.raises(exception.ResourceFailure) as e:
        n.delete()
    assert 'Cannot delete Network net' in str(e.value)
    assert 'is in use' in str(e.value)


def test_delete_in_use_is_bounded_by_the_setting(clients):
    from converge import conf
    n = net(clients)
    n.create()
    clients.cloud.in_use[n.physical_id] = 99
    assert isinstance(n.delete(), base.Wait)
    n.data['waiting']['since'] -= 60   # a minute of asking again
    assert isinstance(again(n).delete(), base.Wait)   # 120 s by default
    conf.CONF.set_override('in_use_timeout', 30, group='worker')
    try:
        with pytest.raises(exception.ResourceFailure) as e:
            again(n).delete()
    finally:
        conf.CONF.clear_override('in_use_timeout', group='worker')
    assert 'Cannot delete Network net' in str(e.value)


def test_delete_other_errors_reach_the_caller(clients):
    n = net(clients)
    n.create()
    clients.cloud.fail_next['delete'] = exception.CloudError('forbidden',
                                                             403)
    with pytest.raises(exception.CloudError):
        n.delete()
    clients.cloud.fail_next['delete'] = exception.CloudTransient('503')
    with pytest.raises(exception.CloudTransient):
        n.delete()


# -- update and drift ----------------------------------------------------

def test_update_sends_only_what_changed(clients):
    n = net(clients, name='a')
    n.create()
    n2 = again(n, {'name': 'b'})
    assert not n2.needs_replace(n.properties)
    assert n2.update(n.properties, n2.observe()) is None
    (_, kind, _, body), = clients.cloud.ops('update')
    assert body == {'name': 'b'}
    assert n2.data['applied']['name'] == 'b'


def test_update_with_nothing_changed_sends_nothing(clients):
    n = net(clients, name='a')
    n.create()
    n.update(n.properties, n.observe())
    assert clients.cloud.ops('update') == []


def test_drift_is_seen_and_put_back(clients):
    n = net(clients, name='a')
    n.create()
    assert n.drift(n.observe()) == {}
    clients.cloud.objects[('network', n.physical_id)]['name'] = 'changed'
    clients.cloud.objects[('network', n.physical_id)][
        'admin_state_up'] = False
    assert n.drift(n.observe()) == {'name': ('changed', 'a'),
                                    'admin_state_up': (False, True)}
    n.update(n.properties, n.observe())
    assert n.drift(n.observe()) == {}


def test_drift_ignores_the_key_tag(clients):
    n = net(clients, tags=['a'])
    n.create()
    obj = clients.cloud.objects[('network', n.physical_id)]
    obj['tags'] = ['a', 'converge-key=%s' % n.idempotency_key]
    assert n.drift(n.observe()) == {}
    obj['tags'] = ['converge-key=%s' % n.idempotency_key]
    assert 'tags' in n.drift(n.observe())


def test_update_of_something_gone_replaces(clients):
    n = net(clients)
    n.create()
    del clients.cloud.objects[('network', n.physical_id)]
    with pytest.raises(exception.UpdateReplace):
        n.update(n.properties, None)


def test_update_of_a_failed_object_replaces(clients):
    v = vol(clients)
    settle(v.create)
    clients.cloud.objects[('volume', v.physical_id)]['status'] = 'error'
    with pytest.raises(exception.UpdateReplace):
        v.update(v.properties, v.observe())


def test_check(clients):
    v = vol(clients)
    settle(v.create)
    v.check(v.observe())
    clients.cloud.objects[('volume', v.physical_id)]['status'] = 'error'
    with pytest.raises(exception.ResourceFailure) as e:
        v.check(v.observe())
    assert 'is in status error' in str(e.value)
    del clients.cloud.objects[('volume', v.physical_id)]
    with pytest.raises(exception.ResourceFailure) as e:
        v.check(v.observe())
    assert 'does not exist' in str(e.value)


def test_attributes_and_show(clients):
    n = net(clients, name='a')
    n.create()
    attrs = n.get_attributes(n.observe())
    assert attrs['name'] == 'a'
    assert attrs['show']['id'] == n.physical_id
    assert set(attrs) == neutron.Net.attribute_names()
    gone = n.get_attributes(None)
    assert gone['show'] is None and gone['name'] is None


def test_every_type_adopts_by_key():
    from converge.resources import floating_ip, image, nova, port, router
    from converge.resources import security_group
    for cls in (neutron.Net, neutron.Subnet, port.Port, router.Router,
                router.RouterInterface, security_group.SecurityGroup,
                security_group.SecurityGroupRule, floating_ip.FloatingIP,
                floating_ip.FloatingIPAssociation, volume.Volume,
                volume.VolumeAttachment, image.WebImage, nova.KeyPair,
                nova.ServerGroup, nova.Flavor):
        assert cls.adopts_by_key, cls

"""OS::Cinder::Volume and OS::Cinder::VolumeAttachment on the in-memory
cloud and on the simulator: create (waiting while Cinder works), observe,
update in place (extend, rename, metadata) and by replacement, delete,
drift; an attachment moved from server to server."""

import pytest

from converge import exception
from converge.resources import base
from converge.resources import volume
from tests.cloud_fakes import FakeClients, FakeCloud, changed, gone, made
from tests.cloud_fakes import settle
from tests.cloud_fakes import clients, cloud  # noqa: F401 (fixtures)
from tests.resource_fakes import again, make


def server(cloud, name):
    """A server to attach to: one booted on the simulator (its compute
    shares the cloud's database), any id on the in-memory cloud."""
    if isinstance(cloud, FakeCloud):
        return 'server-' + name
    from converge.drivers import sim
    compute = sim.SimCompute(cloud.url)
    return settle_server(compute, compute.create_server(
        name, 'cirros', 'm1.tiny', idempotency_key='test-' + name))


def settle_server(compute, server):
    import time
    deadline = time.time() + 30
    while server['status'] != 'ACTIVE' and time.time() < deadline:
        time.sleep(0.05)
        server = compute.get_server(server['id'])
    return server['id']


def test_volume_lifecycle(clients, cloud):
    vol = make(volume.Volume, 'vol', {'size': 1, 'description': 'data',
                                      'metadata': {'role': 'db'}},
               clients=clients)
    first = vol.create()
    assert vol.physical_id
    if isinstance(first, base.Wait):
        assert 'Volume vol' in first.reason
    assert settle(again(vol).create) is None
    seen = vol.observe()
    assert seen['status'] == 'available' and seen['size'] == 1
    attrs = vol.get_attributes(seen)
    assert attrs['size'] == '1' and attrs['status'] == 'available'
    assert attrs['display_description'] == 'data'
    assert attrs['metadata_values'] == {'role': 'db'}   # not the key
    assert attrs['display_name'].startswith('mystack-vol-')
    # repeated with the same key: one volume
    again(vol).create()
    assert [v['id'] for v in cloud.list('volume')] == [vol.physical_id]
    # in place: extend, rename, metadata
    vol2, prior = changed(vol, size=2, name='big', metadata={'role': 'x'})
    assert not vol2.needs_replace(prior)
    assert settle(vol2.update, prior, vol2.observe()) is None
    seen = vol2.observe()
    assert seen['size'] == 2 and seen['name'] == 'big'
    assert vol2.get_attributes(seen)['metadata_values'] == {'role': 'x'}
    assert vol2.physical_id == vol.physical_id
    # what it is made from, its type: replaced
    for props in ({'image': 'cirros'}, {'volume_type': 'fast'},
                  {'availability_zone': 'az2'}):
        new, prior = changed(vol2, **props)
        assert new.needs_replace(prior), props
    gone(vol2)
    assert cloud.list('volume') == []


def test_volume_cannot_shrink(clients, cloud):
    vol = made(volume.Volume, clients, 'vol', size=2)
    small, prior = changed(vol, size=1)
    with pytest.raises(exception.ResourceFailure) as e:
        small.update(prior, small.observe())
    assert 'Shrinking volume is not supported' in str(e.value)
    assert 'Volume vol' in str(e.value)


def test_volume_drift(clients, cloud):
    vol = made(volume.Volume, clients, 'vol', size=1, name='v1')
    assert vol.drift(vol.observe()) == {}
    cloud.update('volume', vol.physical_id, {'name': 'theirs'})
    assert vol.drift(vol.observe()) == {'name': ('theirs', 'v1')}
    settle(vol.update, vol.properties, vol.observe())
    assert vol.observe()['name'] == 'v1'


def test_volume_from_an_image_by_name(clients, cloud):
    vol = made(volume.Volume, clients, 'vol', size=1, image='cirros')
    assert vol.observe()['status'] == 'available'


def test_volume_that_fails_reports_it_and_is_made_again():
    clients = FakeClients()
    clients.cloud.statuses['volume'] = 'error'
    vol = make(volume.Volume, 'vol', {'size': 1}, clients=clients)
    with pytest.raises(exception.ResourceFailure) as e:
        settle(vol.create)
    assert 'went to status error during create' in str(e.value)
    clients.cloud.statuses.pop('volume')
    vol2 = again(vol)
    assert settle(vol2.create) is None
    assert len(clients.cloud.of('volume')) == 1


@pytest.mark.parametrize('props,words', [
    ({}, 'If neither "backup_id" nor "size" is provided'),
    ({'size': 1, 'image': 'a', 'snapshot_id': 'b'},
     'If "size" is provided, only one of'),
    ({'size': 1, 'image': 'a', 'imageRef': 'b'}, 'image, imageRef'),
    ({'size': 0}, 'out of range'),
    ({'size': 1, 'read_only': True}, 'not supported'),
])
def test_volume_validation(props, words):
    with pytest.raises(exception.InvalidTemplate) as e:
        volume.Volume.validate_properties(props)
    assert words in str(e.value)


def test_volume_validation_accepts_heats_sources():
    volume.Volume.validate_properties({'snapshot_id': 's'})
    volume.Volume.validate_properties({'backup_id': 'b'})
    volume.Volume.validate_properties({'size': 1, 'image': 'cirros'})


# -- attachments ---------------------------------------------------------

def test_attachment_lifecycle(clients, cloud):
    vol = made(volume.Volume, clients, 'vol', size=1)
    one, two = server(cloud, 'one'), server(cloud, 'two')
    att = make(volume.VolumeAttachment, 'att', {
        'instance_uuid': one, 'volume_id': vol.physical_id,
        'mountpoint': '/dev/vdb'}, clients=clients)
    assert settle(att.create) is None
    assert att.physical_id == vol.physical_id
    seen = att.observe()
    assert seen['server_id'] == one and seen['status'] == 'attached'
    assert vol.observe()['status'] == 'in-use'
    assert vol.get_attributes(vol.observe())['attachments_list']
    # the volume cannot go while attached: its delete waits
    waiting = again(vol).delete()
    assert isinstance(waiting, base.Wait) and 'in use' in waiting.reason
    # repeated with the same server and volume: still one attachment
    again(att).create()
    # another server: detached, then attached there (Heat's update)
    att2, prior = changed(att, instance_uuid=two)
    assert not att2.needs_replace(prior)
    assert settle(att2.update, prior, att2.observe()) is None
    seen = att2.observe()
    assert seen['server_id'] == two and seen['status'] == 'attached'
    if isinstance(cloud, FakeCloud):
        assert ('delete', 'volume_attachment', vol.physical_id) in \
            cloud.calls
    gone(att2)
    gone(again(vol))


def test_attachment_moved_behind_our_back_is_not_ours_to_delete():
    clients = FakeClients()
    cloud = clients.cloud
    vol = made(volume.Volume, clients, 'vol', size=1)
    att = made(volume.VolumeAttachment, clients, 'att',
               instance_uuid='srv-a', volume_id=vol.physical_id)
    cloud.objects[('volume_attachment', att.physical_id)]['server_id'] = \
        'srv-b'
    assert att.observe() is None
    assert att.delete() is None
    assert cloud.ops('delete', 'volume_attachment') == []


def test_heat_update_allowed():
    def allowed(cls):
        return {k for k, s in cls.properties_schema.items()
                if s.update_allowed}
    assert allowed(volume.Volume) == {
        'size', 'backup_id', 'name', 'description', 'volume_type',
        'metadata', 'read_only'}
    assert allowed(volume.VolumeAttachment) == {
        'instance_uuid', 'volume_id', 'mountpoint'}

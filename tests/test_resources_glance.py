"""OS::Glance::WebImage on the in-memory cloud and on the simulator."""

import pytest

from converge import exception
from converge.resources import image
from tests.cloud_fakes import FakeClients, changed, gone, made, settle
from tests.cloud_fakes import clients, cloud  # noqa: F401 (fixtures)
from tests.resource_fakes import again, make

BASE = {'disk_format': 'qcow2', 'container_format': 'bare',
        'location': 'http://images.example.com/fedora.qcow2'}


def props(**kw):
    return dict(BASE, **kw)


def test_image_lifecycle(clients, cloud):
    img = make(image.WebImage, 'img', props(
        name='my-fedora', tags=['a'], os_distro='fedora',
        extra_properties={'hw_disk_bus': 'scsi'}), clients=clients)
    assert settle(img.create) is None
    seen = img.observe()
    assert seen['status'] == 'active' and seen['name'] == 'my-fedora'
    assert seen['os_distro'] == 'fedora' and seen['hw_disk_bus'] == 'scsi'
    assert img.get_attributes(seen)['show']['id'] == img.physical_id
    assert cloud.resolve('image', 'my-fedora') == img.physical_id
    again(img).create()
    assert [i['id'] for i in cloud.list('image', name='my-fedora')] == \
        [img.physical_id]
    # in place: tags, os_*, extra properties (one taken out is removed)
    img2, prior = changed(img, tags=['b'], os_version='40',
                          extra_properties={'hw_vif_model': 'virtio'})
    assert not img2.needs_replace(prior)
    assert settle(img2.update, prior, img2.observe()) is None
    seen = img2.observe()
    assert [t for t in seen['tags'] if not t.startswith('converge-key')] \
        == ['b']
    assert seen['os_version'] == '40' and seen['hw_vif_model'] == 'virtio'
    assert 'hw_disk_bus' not in seen or seen['hw_disk_bus'] is None
    # Heat replaces an image whose name, formats or location change
    for change in ({'name': 'other'}, {'min_disk': 2},
                   {'location': 'http://elsewhere/x.qcow2'}):
        new, prior = changed(img2, **change)
        assert new.needs_replace(prior), change
    gone(img2)


def test_image_drift(clients, cloud):
    img = made(image.WebImage, clients, 'img', **props(os_distro='fedora'))
    cloud.update('image', img.physical_id, {'os_distro': 'ubuntu'})
    assert img.drift(img.observe()) == {'os_distro': ('ubuntu', 'fedora')}
    settle(img.update, img.properties, img.observe())
    assert img.observe()['os_distro'] == 'fedora'


def test_image_that_fails_to_import():
    clients = FakeClients()
    clients.cloud.statuses['image'] = 'killed'
    img = make(image.WebImage, 'img', dict(BASE), clients=clients)
    with pytest.raises(exception.ResourceFailure) as e:
        settle(img.create)
    assert 'went to status killed during create' in str(e.value)


@pytest.mark.parametrize('extra,words', [
    ({'container_format': 'ami'}, 'Invalid mix of disk and container'),
    ({'members': ['p1']}, 'members property should only be specified for '
     'visibility with value shared.'),
    ({'members': ['p1'], 'visibility': 'shared'}, 'not supported'),
    ({'active': False}, 'not supported'),
    ({'kernel_id': 'nope'}, 'does not match pattern'),
    ({'disk_format': 'tar'}, 'is not an allowed value'),
])
def test_image_validation(extra, words):
    with pytest.raises(exception.InvalidTemplate) as e:
        image.WebImage.validate_properties(props(**extra))
    assert words in str(e.value)


def test_heat_update_allowed():
    allowed = {k for k, s in image.WebImage.properties_schema.items()
               if s.update_allowed}
    assert allowed == {'protected', 'tags', 'architecture', 'kernel_id',
                       'os_distro', 'os_version', 'owner',
                       'extra_properties', 'visibility', 'ramdisk_id',
                       'active', 'members'}
    out = image.WebImage.validate_properties(dict(BASE))
    assert out['visibility'] == 'private' and out['min_disk'] == 0

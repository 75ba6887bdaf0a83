"""Stack snapshots on a real OpenStack (tools/devcloud), through the
OpenStack driver: the server's snapshot is a Nova image (createImage)
that Glance has active; restore rebuilds the same server from it;
deleting the snapshot deletes the image (issue 39)."""

import pytest

from tests import realcloud
from tests.test_realcloud import ONE_SERVER

pytestmark = [pytest.mark.realcloud, pytest.mark.soak, pytest.mark.slow,
              pytest.mark.xdist_group('realcloud')]


@pytest.fixture(scope='module')
def cloud_env():
    env = realcloud.up('--with-converge')
    realcloud.purge(realcloud.connect(env, 'devcloud-alice'))
    return env


def test_snapshot_makes_an_image_and_restore_rebuilds_from_it(
        tmp_path, cloud_env):
    alice = realcloud.connect(cloud_env, 'devcloud-alice')
    cli = realcloud.CloudCLI(str(tmp_path / 'home'), cloud_env)

    def run(*args, **kw):
        return cli.run('--os-cloud', 'devcloud-alice', *args,
                       timeout=600, **kw)

    def json(*args):
        return cli.json('--os-cloud', 'devcloud-alice', *args, timeout=600)

    template = tmp_path / 'one.yaml'
    template.write_text(ONE_SERVER)
    run('stack', 'create', 'snapped', '-t', str(template), '--wait')
    server = json('stack', 'resource', 'show', 'snapped', 'only')[
        'physical_resource_id']
    boot = alice.compute.get_server(server).image['id']

    made = json('stack', 'snapshot', 'create', 'snapped', '--name', 'one')
    assert made['status'] == 'COMPLETE', made
    assert json('stack', 'show', 'snapped')['stack_status'] == \
        'SNAPSHOT_COMPLETE'
    image_id = made['data']['resources']['only']['resource_data'][
        'snapshot_image_id']
    image = alice.image.get_image(image_id)
    assert image.status == 'active'
    assert image.properties.get('instance_uuid') == server or \
        getattr(image, 'instance_uuid', None) == server

    run('stack', 'snapshot', 'restore', 'snapped', made['ID'])
    assert json('stack', 'show', 'snapped')['stack_status'] == \
        'RESTORE_COMPLETE'
    assert json('stack', 'resource', 'show', 'snapped', 'only')[
        'physical_resource_id'] == server
    assert alice.compute.get_server(server).image['id'] == image_id != boot

    run('stack', 'snapshot', 'delete', 'snapped', made['ID'], '--yes')
    assert alice.image.find_image(image_id) is None
    run('stack', 'delete', 'snapped', '--yes', '--wait')
    assert [s for s in alice.compute.servers()
            if s.name.startswith('snapped-')] == []

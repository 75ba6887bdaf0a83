"""Stack snapshots as Heat makes them, on the simulated cloud through the
CLI (subprocesses): each resource snapshots itself (a server: an image of
it; a volume: a backup), the stack goes SNAPSHOT_IN_PROGRESS ->
SNAPSHOT_COMPLETE; restore rebuilds the server from its image and makes
the volume again from its backup, the stack ending RESTORE_COMPLETE;
deleting the snapshot, or the stack, deletes what it made (issue 39)."""

import signal

import pytest

from tests.distributed import wait_for

STACK = '''\
heat_template_version: 2018-08-31
parameters:
  word: {type: string, default: one}
resources:
  box:
    type: OS::Nova::Server
    properties: {image: cirros, flavor: m1.small}
  disk:
    type: OS::Cinder::Volume
    properties: {size: 1}
  v:
    type: OS::Heat::Value
    properties: {value: {get_param: word}}
outputs:
  o: {value: {get_attr: [v, value]}}
'''


def _resources(cli, stack):
    return {r['resource_name']: r
            for r in cli.json('stack', 'resource', 'list', stack)}


def _images(cli):
    return {i['ID']: i for i in cli.json('sim', 'object', 'list', 'image')}


def _backups(cli):
    return {b['ID']: b for b in cli.json('sim', 'object', 'list',
                                         'volume_backup')}


@pytest.mark.long
def test_snapshot_restore_and_delete_on_the_sim(cli, write):
    cli.run('stack', 'create', '-t', write('s.yaml', STACK), 's', '--wait')
    before = _resources(cli, 's')
    server = before['box']['physical_resource_id']
    boot_image = cli.json('sim', 'server', 'show', server)['image']
    images = set(_images(cli))

    made = cli.json('stack', 'snapshot', 'create', 's', '--name', 'first')
    assert (made['name'], made['status']) == ('first', 'COMPLETE'), made
    shown = cli.json('stack', 'show', 's')
    assert shown['stack_status'] == 'SNAPSHOT_COMPLETE', shown
    # each resource took its own snapshot, with Heat's event names
    events = cli.run('stack', 'event', 'list', 's').stdout
    assert 'box' in events and 'SNAPSHOT_COMPLETE' in events
    data = made['data']['resources']
    image = data['box']['resource_data']['snapshot_image_id']
    backup = data['disk']['resource_data']['backup_id']
    assert set(_images(cli)) - images == {image}
    got = cli.json('sim', 'object', 'show', 'image', image)
    assert (got['status'], got['instance_uuid'], got['image_type']) == (
        'active', server, 'snapshot'), got
    assert _backups(cli)[backup]['Status'] == 'available'
    assert 'resource_data' not in data['v'] or \
        not data['v']['resource_data'].get('snapshot_image_id')

    # changed since: a parameter, the server rebuilt from another image
    cli.run('stack', 'update', 's', '--existing', '--parameter',
            'word=two', '--wait')
    restored = cli.run('stack', 'snapshot', 'restore', 's', made['ID'])
    assert 'RESTORE_COMPLETE' in restored.stdout + restored.stderr or \
        cli.json('stack', 'show', 's')['stack_status'] == 'RESTORE_COMPLETE'
    assert cli.json('stack', 'show', 's')['stack_status'] == \
        'RESTORE_COMPLETE'
    assert cli.json('stack', 'output', 'show', 's', 'o')[
        'output_value'] == 'one'
    after = _resources(cli, 's')
    # the same server, rebuilt from its snapshot's image
    assert after['box']['physical_resource_id'] == server
    rebuilt = cli.json('sim', 'server', 'show', server)['image']
    assert rebuilt == image != boot_image
    # the volume made again from its backup
    volume = after['disk']['physical_resource_id']
    assert volume != before['disk']['physical_resource_id']
    assert cli.json('sim', 'object', 'show', 'volume', volume)[
        'backup_id'] == backup

    # deleting the snapshot deletes its image and its backup
    cli.run('stack', 'snapshot', 'delete', 's', made['ID'], '--yes')
    assert image not in _images(cli)
    assert backup not in _backups(cli) or \
        _backups(cli)[backup]['Status'] == 'deleting'
    gone = cli.run('stack', 'snapshot', 'show', 's', made['ID'], check=False)
    assert gone.returncode == 3, gone.stderr

    # deleting the stack deletes its snapshots' too
    second = cli.json('stack', 'snapshot', 'create', 's')
    image = second['data']['resources']['box']['resource_data'][
        'snapshot_image_id']
    assert image in _images(cli)
    cli.run('stack', 'delete', 's', '--yes', '--wait')
    assert image not in _images(cli)


@pytest.mark.long
def test_a_failed_snapshot_says_why(cli, write):
    cli.run('stack', 'create', '-t', write('s.yaml', STACK), 's', '--wait')
    cli.run('sim', 'fault', 'set', 'volume_backup.create', '--fail-count',
            '1', '--code', '400')
    failed = cli.run('stack', 'snapshot', 'create', 's', check=False)
    assert failed.returncode != 0
    shown = cli.json('stack', 'show', 's')
    assert shown['stack_status'] == 'SNAPSHOT_FAILED', shown
    assert 'Injected failure' in shown['stack_status_reason']
    # the resource whose step failed says so
    [event] = [e for e in cli.json('stack', 'event', 'list', 's')
               if e['resource_status'] == 'SNAPSHOT_FAILED']
    assert event['resource_name'] == 'disk', event
    [snap] = cli.json('stack', 'snapshot', 'list', 's')
    assert snap['status'] == 'FAILED'
    assert snap['status_reason'] == shown['stack_status_reason']
    refused = cli.run('stack', 'snapshot', 'restore', 's', snap['id'],
                      check=False)
    assert refused.returncode == 2, refused.stderr
    assert 'FAILED' in refused.stderr


@pytest.mark.long
def test_a_killed_snapshot_goes_on(cli, write):
    """The process taking the snapshot dies while the image is being
    made; `stack converge` carries the same snapshot on to its end."""
    cli.run('stack', 'create', '-t', write('s.yaml', STACK), 's', '--wait')
    cli.run('sim', 'fault', 'set', 'server_image.create', '--latency', '3')
    proc = cli.popen('stack', 'snapshot', 'create', 's')
    try:
        wait_for(lambda: any(
            i['Status'] == 'queued' for i in _images(cli).values()),
            timeout=120)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert cli.json('stack', 'show', 's')['stack_status'] == \
        'SNAPSHOT_IN_PROGRESS'
    # Heat refuses to delete a snapshot in progress
    [snap] = cli.json('stack', 'snapshot', 'list', 's')
    refused = cli.run('stack', 'snapshot', 'delete', 's', snap['id'],
                      '--yes', check=False)
    assert refused.returncode == 2, refused.stderr
    assert 'IN_PROGRESS' in refused.stderr
    cli.run('stack', 'converge', 's', '--wait')
    assert cli.json('stack', 'show', 's')['stack_status'] == \
        'SNAPSHOT_COMPLETE'
    [snap] = cli.json('stack', 'snapshot', 'list', 's')
    assert snap['status'] == 'COMPLETE'
    shown = cli.json('stack', 'snapshot', 'show', 's', snap['id'])
    image = shown['data']['resources']['box']['resource_data'][
        'snapshot_image_id']
    # one image, made once
    snaps = [i for i in _images(cli).values() if i['ID'] == image]
    assert len(snaps) == 1 and snaps[0]['Status'] == 'active'
    assert len([i for i in _images(cli).values()
                if '-' + snap['id'][:8] in (i['Name'] or '')]) == 1


@pytest.mark.long
def test_deleting_a_stack_mid_snapshot_deletes_its_image(cli, write):
    """The image a snapshot in progress has asked for so far goes with
    the stack (it is named in the resource's row only, not yet in the
    snapshot)."""
    cli.run('stack', 'create', '-t', write('s.yaml', STACK), 's', '--wait')
    images = set(_images(cli))
    cli.run('sim', 'fault', 'set', 'server_image.create', '--latency', '60')
    proc = cli.popen('stack', 'snapshot', 'create', 's')
    try:
        wait_for(lambda: set(_images(cli)) - images, timeout=120)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    cli.run('stack', 'delete', 's', '--yes', '--wait')
    assert set(_images(cli)) == images
    assert _backups(cli) == {} or all(
        b['Status'] == 'deleting' for b in _backups(cli).values())

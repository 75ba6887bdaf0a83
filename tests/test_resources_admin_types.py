"""OS::Cinder::VolumeType, OS::Cinder::EncryptedVolumeType and
OS::Nova::HostAggregate on the simulated cloud through the service
layer, as heat-tempest-plugin's test_encryption_vol_type uses them:
made, changed in place (a type's encryption's cipher and key size, an
aggregate's zone and hosts), seen in the cloud as the template says,
and deleted with the stack.
"""

import copy

from converge.engine import request
from converge.engine import service
from tests import enginetools as et

TEMPLATE = {
    'heat_template_version': '2015-04-30',
    'resources': {
        'my_volume_type': {'type': 'OS::Cinder::VolumeType',
                           'properties': {'name': 'LUKS',
                                          'metadata': {'backend': 'lvm'}}},
        'my_encrypted_vol_type': {
            'type': 'OS::Cinder::EncryptedVolumeType',
            'properties': {
                'provider': 'nova.volume.encryptors.luks.LuksEncryptor',
                'control_location': 'front-end',
                'cipher': 'aes-xts-plain64', 'key_size': 512,
                'volume_type': {'get_resource': 'my_volume_type'}}},
        'aggregate': {'type': 'OS::Nova::HostAggregate', 'properties': {
            'name': 'aggregate_test', 'availability_zone': 'nova',
            'hosts': ['compute-1']}},
        'vol': {'type': 'OS::Cinder::Volume', 'properties': {
            'size': 1, 'volume_type': 'LUKS'},
            'depends_on': 'my_encrypted_vol_type'}}}


def _ids(svc, ctx, name):
    return {r['resource_name']: r['physical_resource_id']
            for r in svc.resource_list(ctx, name)}


def test_volume_types_their_encryption_and_aggregates(engine, tmp_path):
    svc, ctx = service.Service(engine), request.make()
    cloud = engine.clients.cloud
    started = svc.stack_create(ctx, 'vt', et.bundle(tmp_path, TEMPLATE), {})
    stack = et.wait(engine, started['id'], started['traversal_id']).stack
    assert et.status(stack) == 'CREATE_COMPLETE', stack.status_reason
    ids = _ids(svc, ctx, 'vt')
    vtype = cloud.get('volume_type', ids['my_volume_type'])
    assert (vtype['name'], vtype['extra_specs']) == ('LUKS',
                                                     {'backend': 'lvm'})
    # Heat's physical id of an encryption is its volume type's
    assert ids['my_encrypted_vol_type'] == ids['my_volume_type']
    enc = cloud.get('volume_encryption_type', ids['my_encrypted_vol_type'])
    assert (enc['provider'], enc['cipher'], enc['key_size'],
            enc['control_location']) == (
        'nova.volume.encryptors.luks.LuksEncryptor', 'aes-xts-plain64', 512,
        'front-end')
    agg = cloud.get('host_aggregate', ids['aggregate'])
    assert (agg['name'], agg['availability_zone'], agg['hosts']) == (
        'aggregate_test', 'nova', ['compute-1'])

    changed = copy.deepcopy(TEMPLATE)
    props = changed['resources']['my_encrypted_vol_type']['properties']
    props.update(key_size=256, cipher='aes-cbc-essiv')
    changed['resources']['aggregate']['properties'].update(
        availability_zone='az2', hosts=[])
    started = svc.stack_update(ctx, 'vt', et.bundle(tmp_path, changed), {})
    stack = et.wait(engine, started['id'], started['traversal_id']).stack
    assert et.status(stack) == 'UPDATE_COMPLETE', stack.status_reason
    assert _ids(svc, ctx, 'vt') == ids   # changed in place
    enc = cloud.get('volume_encryption_type', ids['my_encrypted_vol_type'])
    assert (enc['cipher'], enc['key_size']) == ('aes-cbc-essiv', 256)
    agg = cloud.get('host_aggregate', ids['aggregate'])
    assert (agg['availability_zone'], agg['hosts']) == ('az2', [])

    started = svc.stack_delete(ctx, 'vt')
    stack = et.wait(engine, started['id'], started['traversal_id']).stack
    assert et.status(stack) == 'DELETE_COMPLETE', stack.status_reason
    for kind in ('volume_type', 'volume_encryption_type', 'host_aggregate'):
        assert cloud.list(kind) == [], kind

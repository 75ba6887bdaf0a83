"""OS::Nova::Server on an in-memory fake of the simulated cloud (and a
couple of checks against the real sim)."""

import pytest

from converge import exception
from converge.resources import base
from converge.resources import properties as p
from converge.resources import server as server_mod
from tests.resource_fakes import FakeClients, again, make

Server = server_mod.Server
BASE = {'image': 'cirros', 'flavor': 'm1.small'}


def props(**kw):
    out = dict(BASE)
    out.update(kw)
    return out


@pytest.fixture
def clients():
    return FakeClients()


def created(clients, name='web', **kw):
    s = make(Server, name, props(**kw), clients=clients)
    s.create()
    return s


# -- schema -------------------------------------------------------------

def test_defaults():
    out = Server.validate_properties(dict(BASE))
    assert out['flavor_update_policy'] == 'RESIZE'
    assert out['image_update_policy'] == 'REBUILD'
    assert out['user_data_update_policy'] == 'REPLACE'
    assert out['user_data_format'] == 'HEAT_CFNTOOLS'
    # converge's own agent unless a template names one of Heat's
    assert out['software_config_transport'] == 'CONVERGE_AGENT'
    assert out['user_data'] == ''
    assert out['security_groups'] == []
    assert out['metadata'] == {}
    assert out['personality'] == {}


def test_update_allowed_per_heat():
    allowed = {k for k, s in Server.properties_schema.items()
               if s.update_allowed}
    assert allowed == {
        'name', 'image', 'flavor', 'flavor_update_policy',
        'image_update_policy', 'networks', 'metadata',
        'software_config_transport', 'user_data_update_policy', 'user_data',
        'admin_pass', 'tags', 'deployment_swift_data'}


@pytest.mark.parametrize('bad,path', [
    ({'flavor': None}, ['flavor']),
    ({'flavor_update_policy': 'MIGRATE'}, ['flavor_update_policy']),
    ({'image_update_policy': 'NEVER'}, ['image_update_policy']),
    ({'user_data_format': 'MIME'}, ['user_data_format']),
    ({'user_data_update_policy': 'KEEP'}, ['user_data_update_policy']),
    ({'networks': [{'network': 'a'}, {'netwrok': 'b'}]},
     ['networks', 1, 'netwrok']),
    ({'networks': [{'network': 'a', 'allocate_network': 'auto'}]},
     ['networks', 0]),
    ({'networks': [{'allocate_network': 'some'}]},
     ['networks', 0, 'allocate_network']),
    ({'metadata': ['x']}, ['metadata']),
    ({'config_drive': 'sometimes'}, ['config_drive']),
    ({'diskConfig': 'AUTOMATIC'}, ['diskConfig']),
    ({'tags': [{'a': 1}]}, ['tags', 0]),
    ({'deployment_swift_data': {'container': ''}},
     ['deployment_swift_data', 'container']),
    ({'block_device_mapping_v2': [{'boot_index': 0}]},
     ['block_device_mapping_v2', 0]),
    ({'block_device_mapping': [{'volume_id': 'v'}]},
     ['block_device_mapping', 0, 'device_name']),
])
def test_bad_values_rejected_with_path(bad, path):
    values = props(**bad)
    if bad.get('flavor', 1) is None:
        values.pop('flavor')
    with pytest.raises(exception.InvalidTemplate) as e:
        Server.validate_properties(
            values, path=['resources', 'web', 'properties'])
    assert e.value.path == ['resources', 'web', 'properties'] + path


def test_boot_source_required():
    with pytest.raises(exception.InvalidTemplate) as e:
        Server.validate_properties({'flavor': 'm1.small'})
    assert 'Neither image nor bootable volume' in str(e.value)
    ok = Server.validate_properties({
        'flavor': 'm1.small',
        'block_device_mapping_v2': [{'image': 'cirros', 'boot_index': 0,
                                     'volume_size': 1}]})
    assert ok['block_device_mapping_v2'][0]['image'] == 'cirros'
    # an image not known yet is fine
    Server.validate_properties({'flavor': 'f', 'image': p.UNKNOWN})


def test_networks_accept_heat_keys():
    out = Server.validate_properties(props(networks=[
        {'network': 'private', 'fixed_ip': '10.0.0.9', 'tag': 'a'},
        {'port': 'p1', 'floating_ip': 'fip'},
        {'subnet': 's1', 'port_extra_properties': {'x': 1}},
        {'uuid': 'net-uuid'},
        {'allocate_network': 'none'}]))
    assert len(out['networks']) == 5


# -- create / observe / idempotency ---------------------------------------

def test_create_names_and_tags_the_server(clients):
    s = created(clients, metadata={'role': 'web', 'n': 3},
                networks=[{'network': 'private'}], key_name='k')
    srv = clients.compute.servers[s.physical_id]
    assert srv['name'].startswith('mystack-web-')
    assert len(srv['name']) <= server_mod.NAME_LIMIT
    assert srv['idempotency_key'] == s.idempotency_key == s.uuid
    assert srv['resource'] == 'mystack/web'
    assert srv['metadata'] == {'role': 'web', 'n': '3'}
    assert srv['key_name'] == 'k'
    assert srv['image'] == 'cirros' and srv['flavor'] == 'm1.small'
    assert s.observe()['id'] == s.physical_id
    assert s.reference_id() == s.physical_id


def test_explicit_name(clients):
    s = make(Server, 'web', props(name='frontend'), clients=clients)
    s.create()
    assert clients.compute.servers[s.physical_id]['name'] == 'frontend'


def test_long_default_name_is_cut(clients):
    s = make(Server, 'a' * 70, dict(BASE), clients=clients)
    s.create()
    name = clients.compute.servers[s.physical_id]['name']
    assert len(name) == server_mod.NAME_LIMIT


def test_create_twice_one_server(clients):
    s = created(clients)
    first = s.physical_id
    s.create()
    assert s.physical_id == first
    assert len(clients.compute.servers) == 1


def test_create_after_crash_adopts_by_key(clients):
    s = created(clients)
    # the engine crashed before persisting physical_id
    s2 = again(s)
    s2.physical_id = None
    assert s2.observe()['id'] == s.physical_id  # observe adopts too
    s3 = again(s)
    s3.physical_id = None
    s3.create()  # the create call with the same key adopts
    assert s3.physical_id == s.physical_id
    assert len(clients.compute.servers) == 1


def test_observe_gone(clients):
    s = created(clients)
    del clients.compute.servers[s.physical_id]
    assert s.observe() is None
    s2 = make(Server, 'other', dict(BASE), clients=clients)
    assert s2.observe() is None and s2.physical_id is None


def test_create_error_fails_and_retry_replaces_the_broken_server(clients):
    clients.compute.create_status = 'ERROR'
    s = make(Server, 'web', dict(BASE), clients=clients)
    with pytest.raises(exception.ResourceFailure):
        s.create()
    broken = s.physical_id
    assert broken  # persisted with the failure
    clients.compute.create_status = 'ACTIVE'
    s2 = again(s)
    s2.create()
    assert s2.physical_id != broken
    assert list(clients.compute.servers) == [s2.physical_id]


def test_create_cloud_error_propagates(clients):
    clients.compute.fail_next['create'] = exception.CloudError('boom')
    s = make(Server, 'web', dict(BASE), clients=clients)
    with pytest.raises(exception.CloudError):
        s.create()
    s.create()
    assert len(clients.compute.servers) == 1


def test_user_data_from_software_config(clients):
    clients.configs.create('5f1e6c4e-8f0e-4c57-9a55-1f0d5b3b2b10', 'c',
                           'script', '#!/bin/sh\necho hi')
    s = created(clients, user_data_format='RAW',
                user_data='5f1e6c4e-8f0e-4c57-9a55-1f0d5b3b2b10')
    assert clients.compute.servers[s.physical_id]['user_data'] == \
        '#!/bin/sh\necho hi'
    s2 = created(clients, name='other', user_data='echo plain')
    assert clients.compute.servers[s2.physical_id]['user_data'] == \
        'echo plain'


# -- update -------------------------------------------------------------

def test_image_change_rebuilds(clients):
    s = created(clients)
    s2 = again(s, props(image='fedora'))
    assert s2.needs_replace(s.properties) is False
    s2.update(s.properties, s2.observe())
    assert clients.compute.servers[s.physical_id]['image'] == 'fedora'
    assert clients.compute.ops('rebuild') == [
        ('rebuild', s.physical_id, 'fedora')]
    assert s2.physical_id == s.physical_id
    # repeating the update (crash after the rebuild) rebuilds nothing
    s2.update(s.properties, s2.observe())
    assert len(clients.compute.ops('rebuild')) == 1


def test_image_change_rebuild_preserve_ephemeral(clients):
    s = created(clients, image_update_policy='REBUILD_PRESERVE_EPHEMERAL')
    s2 = again(s, props(image='fedora',
                        image_update_policy='REBUILD_PRESERVE_EPHEMERAL'))
    assert s2.needs_replace(s.properties) is False
    s2.update(s.properties, s2.observe())
    assert clients.compute.servers[s.physical_id]['image'] == 'fedora'


def test_image_change_replaces_with_policy_replace(clients):
    s = created(clients, image_update_policy='REPLACE')
    s2 = again(s, props(image='fedora', image_update_policy='REPLACE'))
    assert s2.needs_replace(s.properties) is True
    with pytest.raises(exception.UpdateReplace):
        s2.update(s.properties, s2.observe())
    assert not clients.compute.ops('rebuild')


def test_flavor_change_resizes(clients):
    s = created(clients)
    s2 = again(s, props(flavor='m1.large'))
    assert s2.needs_replace(s.properties) is False
    s2.update(s.properties, s2.observe())
    assert clients.compute.servers[s.physical_id]['flavor'] == 'm1.large'
    assert len(clients.compute.ops('resize')) == 1


def test_flavor_change_replaces_with_policy_replace(clients):
    s = created(clients, flavor_update_policy='REPLACE')
    s2 = again(s, props(flavor='m1.large', flavor_update_policy='REPLACE'))
    assert s2.needs_replace(s.properties) is True
    with pytest.raises(exception.UpdateReplace):
        s2.update(s.properties, s2.observe())


def test_policy_changed_in_same_update_applies(clients):
    s = created(clients)
    s2 = again(s, props(flavor='m1.large', flavor_update_policy='REPLACE'))
    assert s2.needs_replace(s.properties) is True


def test_name_and_metadata_in_place(clients):
    s = created(clients, metadata={'a': '1'})
    s2 = again(s, props(name='renamed', metadata={'a': '2', 'b': [1]}))
    assert s2.needs_replace(s.properties) is False
    s2.update(s.properties, s2.observe())
    srv = clients.compute.servers[s.physical_id]
    assert srv['name'] == 'renamed'
    assert srv['metadata'] == {'a': '2', 'b': '[1]'}
    assert len(clients.compute.servers) == 1


def test_user_data_change_replaces_by_default(clients):
    s = created(clients, user_data='echo 1')
    s2 = again(s, props(user_data='echo 2'))
    assert s2.needs_replace(s.properties) is True
    with pytest.raises(exception.UpdateReplace):
        s2.update(s.properties, s2.observe())


def test_user_data_change_ignored_with_policy_ignore(clients):
    s = created(clients, user_data='echo 1', user_data_update_policy='IGNORE')
    s2 = again(s, props(user_data='echo 2',
                        user_data_update_policy='IGNORE'))
    assert s2.needs_replace(s.properties) is False
    s2.update(s.properties, s2.observe())
    assert clients.compute.servers[s.physical_id]['user_data'] == 'echo 1'


@pytest.mark.parametrize('change', [
    {'key_name': 'other'}, {'availability_zone': 'az2'},
    {'security_groups': ['web']}, {'user_data_format': 'RAW'},
    {'config_drive': True}, {'scheduler_hints': {'group': 'g'}},
    {'networks': [{'network': 'other'}]},
])
def test_non_updatable_changes_replace(clients, change):
    s = created(clients)
    s2 = again(s, props(**change))
    assert s2.needs_replace(s.properties) is True


@pytest.mark.parametrize('change', [
    {'admin_pass': 'secret'}, {'tags': ['a']},
    {'software_config_transport': 'POLL_TEMP_URL'},
    {'deployment_swift_data': {'container': 'c'}},
])
def test_updatable_changes_do_not_replace(clients, change):
    s = created(clients)
    s2 = again(s, props(**change))
    assert s2.needs_replace(s.properties) is False
    s2.update(s.properties, s2.observe())
    assert len(clients.compute.servers) == 1


def test_nic_tag_change_is_ignored(clients):
    s = created(clients, networks=[{'network': 'private', 'tag': 'a'}])
    s2 = again(s, props(networks=[{'network': 'private', 'tag': 'b'}]))
    assert s2.needs_replace(s.properties) is False


def test_stopped_server_is_started(clients):
    s = created(clients)
    clients.compute.stop_server(s.physical_id)
    observed = s.observe()
    assert s.drift(observed) == {'status': ('SHUTOFF', 'ACTIVE')}
    again(s).update(s.properties, observed)
    assert clients.compute.servers[s.physical_id]['status'] == 'ACTIVE'
    assert not s.drift(s.observe())


def test_error_server_is_replaced_on_update(clients):
    s = created(clients)
    clients.compute.servers[s.physical_id]['status'] = 'ERROR'
    observed = s.observe()
    assert 'status' in s.drift(observed)
    with pytest.raises(exception.UpdateReplace):
        again(s).update(s.properties, observed)


def test_drift(clients):
    s = created(clients)
    assert not s.drift(s.observe())
    srv = clients.compute.servers[s.physical_id]
    srv['name'] = 'hacked'
    srv['image'] = 'other'
    srv['flavor'] = 'm1.tiny'
    # each field with what is there and what was applied
    assert s.drift(s.observe()) == {
        'name': ('hacked', s._server_name()),
        'image': ('other', 'cirros'), 'flavor': ('m1.tiny', 'm1.small')}
    # the update repairs all three in place
    again(s).update(s.properties, s.observe())
    assert not s.drift(s.observe())
    assert not s.drift({})  # observing failed: no opinion


def test_drift_image_with_replace_policy_replaces(clients):
    s = created(clients, image_update_policy='REPLACE')
    clients.compute.servers[s.physical_id]['image'] = 'other'
    with pytest.raises(exception.UpdateReplace):
        again(s).update(s.properties, s.observe())


# -- delete / check / attributes ------------------------------------------

def test_delete(clients):
    s = created(clients)
    s.delete()
    assert clients.compute.servers == {}
    s.delete()  # absent already: success
    assert s.observe() is None


def test_delete_without_physical_id_finds_by_key(clients):
    s = created(clients)
    s2 = again(s)
    s2.physical_id = None
    s2.delete()
    assert clients.compute.servers == {}
    s2.delete()


def test_check(clients):
    s = created(clients)
    s.check(s.observe())
    s.check({})  # observing failed: it looks again
    clients.compute.stop_server(s.physical_id)
    with pytest.raises(exception.ResourceFailure) as e:
        s.check(s.observe())
    assert 'SHUTOFF' in str(e.value)
    s.delete()
    with pytest.raises(exception.ResourceFailure):
        s.check(s.observe())


def test_attributes(clients):
    s = created(clients, networks=[{'network': 'private'},
                                   {'network': 'public',
                                    'fixed_ip': '172.24.4.9'}],
                tags=['t1'])
    srv = clients.compute.servers[s.physical_id]
    srv['addresses']['private'].insert(0, {
        'addr': 'fd00::5', 'version': 6, 'OS-EXT-IPS:type': 'fixed'})
    attrs = s.get_attributes(s.observe())
    assert set(attrs) == Server.attribute_names()
    assert attrs['first_address'] == srv['addresses']['private'][1]['addr']
    assert attrs['networks'] == {
        'private': ['fd00::5', srv['addresses']['private'][1]['addr']],
        'public': ['172.24.4.9']}
    assert attrs['addresses'] == srv['addresses']
    assert attrs['name'] == srv['name']
    assert attrs['show']['id'] == s.physical_id
    assert attrs['accessIPv4'] == srv['accessIPv4']
    assert attrs['accessIPv6'] == ''
    assert attrs['console_urls'] == {} and attrs['os_collect_config'] == {}
    assert attrs['tags'] == ['t1']
    assert attrs['instance_name']


def test_attributes_when_observation_failed(clients):
    s = created(clients)
    attrs = s.get_attributes({})
    assert attrs['first_address'] == '' and attrs['networks'] == {}
    assert attrs['name'].startswith('mystack-web-')


def test_not_logical():
    assert Server.logical is False


# -- against the real simulated cloud -------------------------------------

@pytest.fixture
def sim_clients(tmp_path):
    sim = pytest.importorskip('converge.drivers.sim')

    class Clients:
        compute = sim.SimCompute('sqlite:///%s' % (tmp_path / 'sim.db'))
        configs = None
    yield Clients()
    sim.forget('sqlite:///%s' % (tmp_path / 'sim.db'))


def test_sim_lifecycle(sim_clients):
    cloud = sim_clients.compute
    s = make(Server, 'web', props(networks=[{'network': 'private'}],
                                  metadata={'a': 1}), clients=sim_clients)
    s.create()
    s2 = again(s)
    s2.physical_id = None
    s2.create()  # adopted, not a second server
    assert s2.physical_id == s.physical_id
    assert len(cloud.list_servers()) == 1
    observed = s.observe()
    assert observed['status'] == 'ACTIVE' and not s.drift(observed)
    attrs = s.get_attributes(observed)
    assert attrs['first_address'] and attrs['networks']['private']
    s3 = again(s, props(image='fedora', flavor='m1.large', name='n',
                        networks=[{'network': 'private'}],
                        metadata={'a': 2}))
    assert s3.needs_replace(s.properties) is False
    s3.update(s.properties, s3.observe())
    got = cloud.get_server(s.physical_id)
    assert (got['image'], got['flavor'], got['name']) == (
        'fedora', 'm1.large', 'n')
    assert got['metadata'] == {'a': '2'}
    cloud.stop_server(s.physical_id)
    assert set(s3.drift(s3.observe())) == {'status'}
    s3.update(s3.properties, s3.observe())
    s3.check(s3.observe())
    s3.delete()
    s3.delete()
    assert s3.observe() is None


# -- waiting for the cloud without a thread ----------------------------------

class Clock:
    """One hand-moved clock for the sim and the plug-in."""

    def __init__(self):
        self.now = 1_700_000_000.0

    def time(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    from converge.drivers.sim import api as sim_api
    c = Clock()
    monkeypatch.setattr(sim_api, 'clock', c.time)
    monkeypatch.setattr(server_mod, 'time', c)
    return c


@pytest.fixture
def cloud(sim_clients):
    return sim_clients.compute


def _real_creates(cloud):
    return [e for e in cloud.api_log(op='create')
            if e['ok'] and not e['detail'].get('adopted')]


def _taken(wait, crowded=False):
    """The seconds an engine waits: an idle one takes the earlier look a
    step offers (Wait.sooner), a crowded one only the step's time."""
    if wait.sooner is not None and not crowded:
        assert 0 < wait.sooner < wait.after
        return wait.sooner
    return wait.after


def _converge(plugin, step, clock, limit=100, crowded=False, waits=None):
    """Call step(plugin) as the engine would: again after each Wait's
    time, on the plug-in rebuilt from what the last call left (its
    physical_id and data), until it is done. Returns (seconds waited,
    number of calls); the Waits are added to `waits`."""
    waited = 0.0
    for calls in range(1, limit + 1):
        plugin = again(plugin)
        result = step(plugin)
        if result is None:
            return waited, calls
        assert isinstance(result, base.Wait), result
        if waits is not None:
            waits.append(result)
        assert result.after > 0
        after = _taken(result, crowded)
        clock.advance(after)
        waited += after
    raise AssertionError('still waiting after %d calls' % limit)


def test_create_waits_while_build_and_is_done_when_active(
        sim_clients, cloud, clock):
    cloud.set_fault('create', latency=30)
    s = make(Server, 'web', dict(BASE), clients=sim_clients)
    wait = s.create()
    assert isinstance(wait, base.Wait)
    assert 0 < wait.after <= Server.poll_first * (1 + Server.poll_jitter)
    assert 'BUILD' in wait.reason and s.physical_id in wait.reason
    assert s.data['waiting']['action'] == 'create'
    clock.advance(10)
    s2 = again(s)          # the engine calls the same step again
    assert isinstance(s2.create(), base.Wait)
    # the engine died before recording physical_id: adopted, not booted
    s3 = again(s)
    s3.physical_id = None
    assert isinstance(s3.create(), base.Wait)
    assert s3.physical_id == s.physical_id
    assert len(_real_creates(cloud)) == 1
    clock.advance(20)
    s4 = again(s2)
    assert s4.create() is None
    assert 'waiting' not in s4.data
    assert s4.observe()['status'] == 'ACTIVE'
    assert len(_real_creates(cloud)) == 1
    assert len(cloud.list_servers()) == 1


def test_a_30s_build_is_seen_active_promptly_with_few_looks(
        sim_clients, cloud, clock):
    cloud.set_fault('create', latency=30)
    s = make(Server, 'web', dict(BASE), clients=sim_clients)
    waited, calls = _converge(s, lambda p: p.create(), clock)
    assert 30 <= waited <= 33      # the target: within 1.1 x the build
    assert calls <= 8
    assert len(cloud.api_log(op='get')) <= 8


@pytest.mark.parametrize('build', [0.5, 30, 300])
def test_the_last_look_is_no_later_than_any_earlier_look_bounds_the_end(
        sim_clients, cloud, clock, build):
    """Each look with Nova's progress bounds the end (within a whole
    percent of the time elapsed); the last look goes no later than the
    tightest bound of all the looks. Looks that only learn more (no
    estimate yet, or before half way) are probes; the last is not."""
    cloud.set_fault('create', latency=build)
    s = make(Server, 'web', dict(BASE), clients=sim_clients)
    probes, waited, bounds = [], 0.0, []
    for _ in range(20):
        s = again(s)
        wait = s.create()
        if wait is None:
            break
        probes.append(wait.probe)
        latest = s.data['waiting'].get('latest')
        if latest is not None:
            bounds.append(latest - s.data['waiting']['since'])
        clock.advance(_taken(wait))
        waited += _taken(wait)
    assert build <= waited <= min(bounds) + 1e-6 <= build * 1.02 + 0.2
    assert probes[-1] is False and True in probes[:-1]


@pytest.mark.parametrize('build', [30, 60])
def test_two_more_looks_quarter_how_late_the_end_of_a_long_build_is_seen(
        sim_clients, cloud, clock, build):
    """Nova's whole-percent progress places the end of a 30 s build
    within about half a second by half way; each look timed so that the
    progress then tells which half the end is in (Server._split_look)
    halves that, and after two the last look comes at most 0.5 % of the
    build after its end (it was up to 1.7 %, 0.5 s of a 30 s build), for
    two looks more."""
    for trial in range(20):
        cloud.set_fault('create', latency=build)
        s = make(Server, 'web%d' % trial, dict(BASE), clients=sim_clients)
        clock.advance(0.037 * trial)   # builds started at other moments
        waited, calls = _converge(s, lambda p: p.create(), clock)
        assert build <= waited <= build * 1.005
        assert calls - 1 <= (6 if build == 30 else 7)   # looks


@pytest.mark.parametrize('build', [30, 60])
def test_a_crowded_engine_skips_the_offered_looks_and_still_sees_the_end(
        sim_clients, cloud, clock, build):
    """The looks that halve the span the end lies in are offered
    (Wait.sooner), not imposed: an engine with many looks due at that
    moment takes none of them, and its last look still comes within the
    bounds the earlier looks set (at most 2 % of the build late), two
    looks fewer."""
    waits = []
    for trial in range(10):
        cloud.set_fault('create', latency=build)
        s = make(Server, 'web%d' % trial, dict(BASE), clients=sim_clients)
        clock.advance(0.037 * trial)
        waited, calls = _converge(s, lambda p: p.create(), clock,
                                  crowded=True, waits=waits)
        assert build <= waited <= build * 1.02
        assert calls - 1 <= (4 if build == 30 else 5)   # looks
    assert any(w.sooner is not None for w in waits)   # looks were skipped


@pytest.mark.parametrize('build', [2, 30, 300, 1200])
def test_progress_estimate_looks_at_most_two_percent_late(build):
    s = Server.__new__(Server)
    for tenth in range(1, build * 10):
        elapsed = tenth / 10
        progress = int(100 * elapsed / build)
        if progress == 0:
            continue
        after = s._next_poll(elapsed, 3, progress)
        if after >= Server.poll_estimate_max:
            continue  # capped: the cap, not the estimate, says when
        # at most 2 % of the action after its end
        assert elapsed + after <= build + max(Server.poll_min,
                                              build * 0.02) + 1e-9


def test_backoff_without_progress_grows_to_a_cap():
    s = Server.__new__(Server)
    waits = [s._next_poll(10.0, n, 0) for n in range(12)]
    assert Server.poll_first <= waits[0] <= Server.poll_first * (
        1 + Server.poll_jitter)
    assert Server.poll_max <= waits[-1] <= Server.poll_max * (
        1 + Server.poll_jitter)
    assert sum(waits[:4]) < sum(waits[4:8])


def test_on_a_cloud_of_cheap_looks_a_young_wait_looks_each_interval_a_long_one_less():
    """Where a look costs no call of its own (a real cloud's watch lists
    every server once a second), a build is looked at each second while
    young, then at most 2 % of its time late, up to the cap: 200 servers
    building for minutes no longer cost a unit each a second."""
    s = Server.__new__(Server)
    s.clients = type('Clients', (), {'compute': type('Compute', (), {
        'look_interval': 1.0})()})()
    jitter = 1 + Server.poll_jitter
    assert 1.0 <= s._next_poll(20.0, 30, 0) <= 1.0 * jitter
    assert 2.0 <= s._next_poll(100.0, 30, 0) <= 2.0 * jitter
    assert Server.poll_max <= s._next_poll(600.0, 30, 0) <= \
        Server.poll_max * jitter


def test_error_during_build_fails_then_a_retry_boots_again(
        sim_clients, cloud, clock):
    from converge.drivers.sim import store
    cloud.set_fault('create', latency=30)
    s = make(Server, 'web', dict(BASE), clients=sim_clients)
    assert isinstance(s.create(), base.Wait)
    with cloud._engine.begin() as conn:
        conn.execute(store.servers.update().values(status='ERROR',
                                                   ready_at=None))
    s2 = again(s)
    with pytest.raises(exception.ResourceFailure) as e:
        s2.create()
    assert 'ERROR' in str(e.value)
    broken = s2.physical_id
    cloud.clear_faults()
    s3 = again(s2)          # a later try: the broken server is discarded
    assert s3.create() is None
    assert s3.physical_id != broken
    assert [x['id'] for x in cloud.list_servers()] == [s3.physical_id]


def test_create_boots_anew_when_its_server_is_being_deleted(
        sim_clients, cloud, clock):
    s = make(Server, 'web', dict(BASE), clients=sim_clients)
    assert s.create() is None
    cloud.set_fault('delete', latency=60)
    cloud.delete_server(s.physical_id)
    s2 = again(s)
    assert s2.create() is None
    assert s2.physical_id != s.physical_id
    assert len(_real_creates(cloud)) == 2


def test_rebuild_waits_and_is_not_issued_twice(sim_clients, cloud, clock):
    s = make(Server, 'web', dict(BASE), clients=sim_clients)
    s.create()
    cloud.set_fault('rebuild', latency=20)
    new = props(image='fedora')
    s2 = again(s, new)
    wait = s2.update(s.properties, s2.observe())
    assert isinstance(wait, base.Wait) and 'REBUILD' in wait.reason
    clock.advance(5)
    s3 = again(s2)
    # the engine may hand in what it observed before: the step looks again
    assert isinstance(s3.update(s.properties, s3.observe()), base.Wait)
    waited, calls = _converge(
        s3, lambda p: p.update(s.properties, {}), clock)
    assert 14 <= waited <= 16.5 and calls <= 6
    assert len(cloud.api_log(op='rebuild')) == 1
    got = cloud.get_server(s.physical_id)
    assert (got['image'], got['status']) == ('fedora', 'ACTIVE')


def test_resize_waits_then_confirms(sim_clients, cloud, clock):
    s = make(Server, 'web', dict(BASE), clients=sim_clients)
    s.create()
    cloud.set_fault('resize', latency=10)
    s2 = again(s, props(flavor='m1.large'))
    wait = s2.update(s.properties, s2.observe())
    assert isinstance(wait, base.Wait) and 'RESIZE' in wait.reason
    _converge(s2, lambda p: p.update(s.properties, {}), clock)
    got = cloud.get_server(s.physical_id)
    assert (got['flavor'], got['status']) == ('m1.large', 'ACTIVE')
    assert [e['op'] for e in cloud.api_log()
            if e['op'] in ('resize', 'confirm_resize')] == [
        'resize', 'confirm_resize']


def test_found_in_verify_resize_is_confirmed(sim_clients, cloud):
    s = make(Server, 'web', dict(BASE), clients=sim_clients)
    s.create()
    cloud.resize_server(s.physical_id, 'm1.large')     # not by converge
    assert cloud.get_server(s.physical_id)['status'] == 'VERIFY_RESIZE'
    s2 = again(s, props(flavor='m1.large'))
    assert s2.update(s.properties, s2.observe()) is None
    assert cloud.get_server(s.physical_id)['status'] == 'ACTIVE'
    assert len(cloud.api_log(op='resize')) == 1


def test_rebuild_then_resize_then_rename_one_after_another(
        sim_clients, cloud, clock):
    s = make(Server, 'web', dict(BASE), clients=sim_clients)
    s.create()
    for op in ('rebuild', 'resize'):
        cloud.set_fault(op, latency=10)
    s2 = again(s, props(image='fedora', flavor='m1.large', name='n'))
    waited, calls = _converge(
        s2, lambda p: p.update(s.properties, p.observe()), clock)
    assert 20 <= waited <= 23 and calls <= 12
    got = cloud.get_server(s.physical_id)
    assert (got['image'], got['flavor'], got['name'], got['status']) == (
        'fedora', 'm1.large', 'n', 'ACTIVE')
    assert [e['op'] for e in cloud.api_log() if e['op'] in (
        'rebuild', 'resize', 'confirm_resize', 'update')] == [
        'rebuild', 'resize', 'confirm_resize', 'update']


def test_error_during_rebuild_fails_then_replaces(sim_clients, cloud, clock):
    from converge.drivers.sim import store
    s = make(Server, 'web', dict(BASE), clients=sim_clients)
    s.create()
    cloud.set_fault('rebuild', latency=10)
    s2 = again(s, props(image='fedora'))
    assert isinstance(s2.update(s.properties, s2.observe()), base.Wait)
    with cloud._engine.begin() as conn:
        conn.execute(store.servers.update().values(status='ERROR',
                                                   ready_at=None))
    s3 = again(s2)
    with pytest.raises(exception.ResourceFailure) as e:
        s3.update(s.properties, {})
    assert 'rebuild' in str(e.value)
    with pytest.raises(exception.UpdateReplace):   # the next traversal
        again(s3).update(s.properties, again(s3).observe())


def test_delete_waits_and_is_not_issued_twice(sim_clients, cloud, clock):
    s = make(Server, 'web', dict(BASE), clients=sim_clients)
    s.create()
    cloud.set_fault('delete', latency=8)
    wait = s.delete()
    assert isinstance(wait, base.Wait) and 'deleting' in wait.reason
    s2 = again(s)
    s2.physical_id = None       # found by its key as well
    assert isinstance(s2.delete(), base.Wait)
    waited, calls = _converge(s, lambda p: p.delete(), clock)
    assert 8 <= waited <= 9.5 and calls <= 6
    assert [e['ok'] for e in cloud.api_log(op='delete')] == [True]
    assert cloud.list_servers() == []
    assert again(s).delete() is None


def test_delete_of_a_building_server(sim_clients, cloud, clock):
    cloud.set_fault('create', latency=30)
    s = make(Server, 'web', dict(BASE), clients=sim_clients)
    assert isinstance(s.create(), base.Wait)
    assert again(s).delete() is None      # no delete latency: gone at once
    assert cloud.list_servers() == []


def test_no_step_sleeps(sim_clients, cloud, monkeypatch):
    def no_sleep(_seconds):
        raise AssertionError('a step slept')
    monkeypatch.setattr(server_mod.time, 'sleep', no_sleep, raising=False)
    for op in ('create', 'rebuild', 'delete'):
        cloud.set_fault(op, latency=600)
    s = make(Server, 'web', dict(BASE), clients=sim_clients)
    assert isinstance(s.create(), base.Wait)
    assert isinstance(again(s).delete(), base.Wait)
    assert not hasattr(Server, 'settle_timeout')


# -- networks changed in place ------------------------------------------------

@pytest.fixture
def net_clients(tmp_path):
    from converge.drivers import sim
    from converge.drivers.sim import objects
    url = 'sqlite:///%s' % (tmp_path / 'sim.db')

    class Clients:
        compute = sim.SimCompute(url)
        cloud = objects.SimCloud(url, 'admin', compute)
        configs = None
    yield Clients()
    sim.forget(url)


def test_a_retried_networks_update_attaches_once(net_clients):
    cloud, compute = net_clients.cloud, net_clients.compute
    net = cloud.create('network', {'name': 'n'}, 'k-net')
    cloud.create('subnet', {'network_id': net['id'],
                            'cidr': '10.1.0.0/24'}, 'k-a')
    b = cloud.create('subnet', {'network_id': net['id'],
                                'cidr': '10.2.0.0/24'}, 'k-b')
    s = make(Server, 'web', props(networks=[{'network': net['id']}]),
             clients=net_clients)
    s.create()
    [old] = compute.interfaces(s.physical_id)
    s2 = again(s, props(networks=[{'subnet': b['id']}]))
    assert s2.needs_replace(s.properties) is False
    # the detach is asked, then waited for (Nova ends it after answering)
    wait = s2.update(s.properties, s2.observe())
    assert isinstance(wait, base.Wait) and old['id'] in wait.reason
    s3 = again(s2)
    assert s3.update(s.properties, s3.observe()) is None
    # the step run again (its unit died before recording it): planned
    # from the interfaces, it finds the new nic there and attaches nothing
    s4 = again(s3)
    assert s4.update(s.properties, s4.observe()) is None
    assert len([e for e in compute.api_log(op='attach') if e['ok']]) == 1
    assert len([e for e in compute.api_log(op='detach') if e['ok']]) == 1
    [now] = compute.interfaces(s.physical_id)
    assert now['fixed_ips'][0]['subnet_id'] == b['id']
    assert s4.physical_id == s.physical_id


def test_networks_naming_nothing_of_the_cloud_replace(net_clients):
    s = make(Server, 'web', props(networks=[{'network': 'free-form'}]),
             clients=net_clients)
    s.create()
    s2 = again(s, props(networks=[{'network': 'private'}]))
    assert s2.needs_replace(s.properties) is True

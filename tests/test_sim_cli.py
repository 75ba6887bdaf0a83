"""`converge sim ...` commands, run in a small cliff app of their own."""

import io
import json

import pytest
from cliff import app as cliff_app
from cliff import commandmanager

from converge import exception
from converge.cmd import sim as sim_cmd
from converge.drivers import sim
from converge.drivers.sim import store

COMMANDS = {
    'sim server list': sim_cmd.ListServer,
    'sim server show': sim_cmd.ShowServer,
    'sim server delete': sim_cmd.DeleteServer,
    'sim server stop': sim_cmd.StopServer,
    'sim server start': sim_cmd.StartServer,
    'sim fault set': sim_cmd.SetFault,
    'sim fault clear': sim_cmd.ClearFault,
    'sim fault list': sim_cmd.ListFault,
    'sim log': sim_cmd.ShowLog,
    'sim object list': sim_cmd.ListObject,
    'sim object show': sim_cmd.ShowObject,
    'sim object delete': sim_cmd.DeleteObject,
}


class SimApp(cliff_app.App):
    def __init__(self, url):
        manager = commandmanager.CommandManager('converge.tests.sim_cli')
        for name, cls in COMMANDS.items():
            manager.add_command(name, cls)
        self.out, self.err = io.StringIO(), io.StringIO()
        super().__init__(description='sim test app', version='0',
                         command_manager=manager, deferred_help=True,
                         stdout=self.out, stderr=self.err)
        self.url = url
        self.exit_code = None

    def configure_logging(self):
        pass

    def sim(self):
        return sim.SimCompute(self.url)

    def clean_up(self, cmd, result, err):
        if err and isinstance(err, exception.ConvergeError):
            self.exit_code = err.exit_code


@pytest.fixture
def url(tmp_path):
    u = 'sqlite:///%s' % (tmp_path / 'sim.db')
    yield u
    store.forget(u)


@pytest.fixture
def cloud(url):
    return sim.SimCompute(url)


class Runner:
    def __init__(self, url):
        self.url = url

    def __call__(self, *argv):
        application = SimApp(self.url)
        rc = application.run(list(argv))
        return application.exit_code or rc, application.out.getvalue()

    def json(self, *argv):
        rc, out = self(*(list(argv) + ['-f', 'json']))
        assert rc == 0, out
        return json.loads(out) if out.strip() else None


@pytest.fixture
def run(url):
    return Runner(url)


def test_server_list(run, cloud):
    a = cloud.create_server('a', 'cirros', 'm1.tiny', resource='web',
                            networks=[{'network': 'private'},
                                      {'network': 'public'}])
    b = cloud.create_server('b', 'fedora', 'm1.small', resource='db',
                            key_name='mykey', idempotency_key='kb')
    rows = run.json('sim', 'server', 'list')
    assert [r['ID'] for r in rows] == [a['id'], b['id']]
    assert rows[0] == {
        'ID': a['id'], 'Name': 'a', 'Status': 'ACTIVE', 'Task State': None,
        'Image': 'cirros',
        'Flavor': 'm1.tiny', 'Resource': 'web',
        'Networks': 'private=%s; public=%s' % (
            a['addresses']['private'][0]['addr'],
            a['addresses']['public'][0]['addr'])}
    long = run.json('sim', 'server', 'list', '--long')
    assert long[1]['Key Name'] == 'mykey'
    assert long[1]['Idempotency Key'] == 'kb'
    assert long[1]['Created'] == b['created']
    only = run.json('sim', 'server', 'list', '--resource', 'db')
    assert [r['Name'] for r in only] == ['b']
    rc, out = run('sim', 'server', 'list')
    assert rc == 0 and 'fedora' in out


def test_server_show_by_id_or_name(run, cloud):
    s = cloud.create_server('web', 'cirros', 'm1.tiny', metadata={'k': 'v'})
    by_name = run.json('sim', 'server', 'show', 'web')
    by_id = run.json('sim', 'server', 'show', s['id'])
    assert by_name == by_id
    assert by_id['id'] == s['id']
    assert by_id['metadata'] == {'k': 'v'}
    assert by_id['addresses'] == s['addresses']
    assert by_id['status'] == 'ACTIVE'
    rc, out = run('sim', 'server', 'show', 'web')
    assert rc == 0 and '"k": "v"' in out


def test_server_show_unknown_or_ambiguous(run, cloud):
    rc, _ = run('sim', 'server', 'show', 'nope')
    assert rc == exception.NotFound.exit_code
    cloud.create_server('twin', 'img', 'fl')
    cloud.create_server('twin', 'img', 'fl')
    rc, _ = run('sim', 'server', 'show', 'twin')
    assert rc == exception.Conflict.exit_code


def test_server_stop_start_delete(run, cloud):
    a = cloud.create_server('a', 'img', 'fl')
    b = cloud.create_server('b', 'img', 'fl')
    assert run('sim', 'server', 'stop', 'a', b['id'])[0] == 0
    assert {s['status'] for s in cloud.list_servers()} == {'SHUTOFF'}
    assert run('sim', 'server', 'start', 'a')[0] == 0
    assert cloud.get_server(a['id'])['status'] == 'ACTIVE'
    assert cloud.get_server(b['id'])['status'] == 'SHUTOFF'
    assert run('sim', 'server', 'delete', 'a')[0] == 0
    assert [s['id'] for s in cloud.list_servers()] == [b['id']]
    # one unknown server among several: the others are still deleted
    rc, _ = run('sim', 'server', 'delete', 'nope', 'b')
    assert rc == exception.NotFound.exit_code
    assert cloud.list_servers() == []


def test_fault_set_list_clear(run, cloud):
    shown = run.json('sim', 'fault', 'set', 'create', '--fail-count', '2',
                     '--message', 'boom')
    assert shown == {'Op': 'create', 'Latency': None, 'Fail Rate': None,
                     'Fail Count': 2, 'Code': None, 'Message': 'boom'}
    run.json('sim', 'fault', 'set', 'get', '--latency', '0.5',
             '--fail-rate', '0.25')
    listed = run.json('sim', 'fault', 'list')
    assert [f['Op'] for f in listed] == ['create', 'get']
    # the fault reaches the cloud seen by the engine
    with pytest.raises(exception.CloudError) as e:
        cloud.create_server('a', 'img', 'fl')
    assert 'boom' in str(e.value)
    assert run('sim', 'fault', 'clear', 'create')[0] == 0
    assert [f['op'] for f in cloud.faults()] == ['get']
    assert run('sim', 'fault', 'clear')[0] == 0
    assert cloud.faults() == []


def test_fault_set_refuses_nonsense(run, cloud):
    assert run('sim', 'fault', 'set', 'create')[0] != 0
    assert run('sim', 'fault', 'set', 'bogus', '--fail-rate', '1')[0] != 0
    assert run('sim', 'fault', 'set', 'get', '--fail-rate', '3')[0] != 0
    assert run('sim', 'fault', 'set', 'get', '--fail-count', '1',
               '--code', '200')[0] != 0
    assert cloud.faults() == []


def test_fault_code_makes_failures_transient_or_fatal(run, cloud):
    s = cloud.create_server('a', 'img', 'fl')
    shown = run.json('sim', 'fault', 'set', 'get', '--fail-count', '1',
                     '--code', '503')
    assert shown['Code'] == 503
    with pytest.raises(exception.CloudTransient) as e:
        cloud.get_server(s['id'])
    assert e.value.code == 503
    run.json('sim', 'fault', 'set', 'get', '--fail-count', '1',
             '--code', '403')
    with pytest.raises(exception.CloudError) as e:
        cloud.get_server(s['id'])
    assert e.value.code == 403
    assert not isinstance(e.value, exception.CloudTransient)


def test_list_and_show_the_transitional_status(run, cloud):
    cloud.set_fault('create', latency=600)
    cloud.set_fault('delete', latency=600)
    building = cloud.create_server('building', 'img', 'fl')
    cloud.clear_faults('create')
    going = cloud.create_server('going', 'img', 'fl')
    cloud.delete_server(going['id'])
    rows = {r['Name']: (r['Status'], r['Task State'])
            for r in run.json('sim', 'server', 'list')}
    assert rows == {'building': ('BUILD', 'spawning'),
                    'going': ('ACTIVE', 'deleting')}
    shown = run.json('sim', 'server', 'show', building['id'])
    assert (shown['status'], shown['task_state']) == ('BUILD', 'spawning')
    assert 0 <= shown['progress'] < 100


def test_cli_is_not_disturbed_by_faults(run, cloud):
    s = cloud.create_server('a', 'img', 'fl')
    cloud.set_fault('*', fail_count=1)
    assert [r['ID'] for r in run.json('sim', 'server', 'list')] == [s['id']]
    assert run('sim', 'server', 'stop', 'a')[0] == 0
    assert cloud.faults()[0]['fail_count'] == 1


def test_log(run, cloud):
    s = cloud.create_server('a', 'img', 'fl', idempotency_key='k1',
                            resource='web')
    cloud.create_server('a', 'img', 'fl', idempotency_key='k1',
                        resource='web')
    cloud.create_server('b', 'img', 'fl', resource='db')
    cloud.set_fault('get', fail_count=1)
    with pytest.raises(exception.CloudError):
        cloud.get_server(s['id'])
    run('sim', 'server', 'stop', 'a')
    rows = run.json('sim', 'log')
    assert [r['Op'] for r in rows] == ['create', 'create', 'create', 'get',
                                       'stop']
    assert [r['OK'] for r in rows] == [True, True, True, False, True]
    assert rows[0]['Server'] == s['id'] and rows[0]['Key'] == 'k1'
    assert rows[0]['Resource'] == 'web'
    assert rows[0]['Time'].endswith('Z')
    assert sorted(rows[0]) == ['ID', 'Key', 'OK', 'Op', 'Resource', 'Server',
                               'Time']
    web = run.json('sim', 'log', '--op', 'create', '--resource', 'web')
    assert len(web) == 2
    detailed = run.json('sim', 'log', '--resource', 'web', '--long')
    assert detailed[1]['Detail']['adopted'] is True
    failed = run.json('sim', 'log', '--failed')
    assert [r['Op'] for r in failed] == ['get']
    assert run.json('sim', 'log', '--key', 'k1')[0]['Server'] == s['id']


# -- the cloud's other kinds -------------------------------------------------

def _port(url):
    from converge.drivers.sim import objects
    tenant = objects.SimCloud(url, 'tenant')
    net = tenant.create('network', {'name': 'web-net'}, 'k-net')
    tenant.create('subnet', {'network_id': net['id'],
                             'cidr': '192.168.5.0/24'}, 'k-sub')
    return tenant, tenant.create('port', {'network_id': net['id'],
                                          'name': 'web-port'}, 'k-port')


def test_object_list_and_show(run, url):
    nets = run.json('sim', 'object', 'list', 'network')
    assert {n['Name']: n['Project'] for n in nets} == {
        'private': 'admin', 'public': 'admin'}
    assert nets[1]['Details'] == 'subnets=1 shared router:external'
    tenant, port = _port(url)
    ports = run.json('sim', 'object', 'list', 'port', '--project', 'tenant',
                     '--long')
    assert [(p['ID'], p['Status'], p['Key']) for p in ports] == [
        (port['id'], 'DOWN', 'k-port')]
    assert ports[0]['Details'] == '192.168.5.2'
    shown = run.json('sim', 'object', 'show', 'port', 'web-port')
    assert shown['id'] == port['id']
    assert shown['fixed_ips'] == port['fixed_ips']
    rc, out = run('sim', 'object', 'show', 'port', 'nothing')
    assert rc == 3
    with pytest.raises(SystemExit):   # argparse: not a kind
        run('sim', 'object', 'list', 'gadget')


def test_object_delete_behind_the_engines_back(run, url, cloud):
    tenant, port = _port(url)
    server = cloud.create_server('web', 'cirros', 'm1.tiny',
                                 networks=[{'port': port['id']}])
    assert server['addresses']['web-net'][0]['addr'] == '192.168.5.2'
    assert run('sim', 'object', 'delete', 'port', port['id'])[0] == 0
    assert tenant.get('port', port['id']) is None
    # the server lost its address with its port, as with Nova
    assert cloud.get_server(server['id'])['addresses'] == {}
    deleted = [e for e in cloud.api_log(op='port.delete')]
    assert deleted[0]['object_id'] == port['id']
    assert deleted[0]['detail']['admin'] is True
    log = run.json('sim', 'log', '--object', port['id'], '--long')
    assert [(e['Op'], e['Object']) for e in log] == [
        ('port.create', port['id']), ('port.delete', port['id']),
        ('port.get', port['id'])]
    # the cloud's refusals hold for its operator too
    tenant.create('port', {'network_id': port['network_id']}, 'k-port2')
    rc, out = run('sim', 'object', 'delete', 'network', 'web-net')
    assert rc == 1
    assert tenant.get('network', port['network_id'])['status'] == 'ACTIVE'


def test_fault_set_takes_other_kinds_ops(run, cloud, url):
    from converge.drivers.sim import objects
    row = run.json('sim', 'fault', 'set', 'volume.create', '--fail-count',
                   '1', '--code', '409')
    assert row['Op'] == 'volume.create' and row['Code'] == 409
    tenant = objects.SimCloud(url, 'tenant')
    with pytest.raises(exception.CloudError) as e:
        tenant.create('volume', {'size': 1}, 'k-vol')
    assert e.value.code == 409
    assert tenant.create('volume', {'size': 1}, 'k-vol')['status'] == \
        'available'
    rc, _ = run('sim', 'fault', 'set', 'volume.explode', '--latency', '1')
    assert rc != 0

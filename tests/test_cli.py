"""The `converge` command end to end, in subprocesses, as a user runs it."""

import json
import os
import signal
import time

import pytest

from tests.conftest import EXAMPLES

DEMO = os.path.join(EXAMPLES, 'demo.yaml')
SERVERS_IN_DEMO = {'db_server', 'web1', 'web2', 'web3', 'web4', 'lb_server'}


def _creates_per_resource(log, stack='demo'):
    counts = {}
    for entry in log:
        if entry['Op'] == 'create' and entry['OK']:
            counts[entry['Resource']] = counts.get(entry['Resource'], 0) + 1
    return counts


def test_demo_create_update_image_and_delete(cli):
    proc = cli.run('stack', 'create', 'demo', '-t', DEMO, '--wait')
    assert 'CREATE_COMPLETE' in proc.stdout
    show = cli.json('stack', 'show', 'demo')
    assert show['stack_status'] == 'CREATE_COMPLETE'
    resources = cli.json('stack', 'resource', 'list', 'demo')
    assert len(resources) == 20
    assert {r['resource_status'] for r in resources} == {'CREATE_COMPLETE'}
    servers = cli.json('sim', 'server', 'list')
    assert len(servers) == len(SERVERS_IN_DEMO)
    before = {s['ID']: s for s in servers}

    cli.run('stack', 'update', 'demo', '--existing', '--parameter',
            'image=cirros-0.6.3', '--wait')
    after = {s['ID']: s for s in cli.json('sim', 'server', 'list')}
    assert set(after) == set(before)  # rebuilt in place, not replaced
    assert {s['Image'] for s in after.values()} == {'cirros-0.6.3'}
    log = cli.json('sim', 'log', '--op', 'rebuild')
    assert len(log) == len(SERVERS_IN_DEMO)

    web1 = cli.json('stack', 'resource', 'show', 'demo', 'web1')
    assert web1['attributes']['first_address']
    out = cli.json('stack', 'output', 'show', 'demo', 'web_addresses')
    assert len(out['output_value']) == 4

    cli.run('stack', 'delete', 'demo', '--yes', '--wait')
    assert cli.json('sim', 'server', 'list') == []
    assert cli.json('stack', 'list') == []


def test_flavor_policy_replace_makes_new_servers(cli, write):
    tmpl = write('s.yaml', '''
heat_template_version: 2016-10-14
parameters:
  flavor: {type: string, default: m1.small}
resources:
  srv:
    type: OS::Nova::Server
    properties:
      image: cirros
      flavor: {get_param: flavor}
      flavor_update_policy: REPLACE
outputs:
  ip: {value: {get_attr: [srv, first_address]}}
''')
    cli.run('stack', 'create', 's', '-t', tmpl)
    first = cli.json('sim', 'server', 'list')
    cli.run('stack', 'update', 's', '-t', tmpl, '--parameter',
            'flavor=m1.large')
    second = cli.json('sim', 'server', 'list')
    assert len(first) == len(second) == 1
    assert first[0]['ID'] != second[0]['ID']
    assert second[0]['Flavor'] == 'm1.large'


def _slow_servers_template(write, n=6):
    body = ['heat_template_version: 2018-08-31', 'resources:']
    for i in range(n):
        # pairs of servers in a chain: s2,s3 wait for s0,s1 and so on
        body += ['  s%d:' % i, '    type: OS::Nova::Server',
                 '    properties: {image: cirros, flavor: m1.tiny}']
        if i >= 2:
            body += ['    depends_on: [s%d, s%d]' % (i - 2 - i % 2,
                                                   i - 1 - i % 2)]
    body += ['  after:', '    type: OS::Heat::Value',
             '    properties:', '      value: {list_join: [",", [%s]]}' %
             ', '.join('{get_attr: [s%d, first_address]}' % i
                       for i in range(n))]
    return write('slow.yaml', '\n'.join(body) + '\n')


def _wait_for(predicate, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_kill_9_mid_create_then_converge_creates_each_server_once(cli, write):
    tmpl = _slow_servers_template(write)
    # a slow look after each create leaves servers made but not recorded;
    # long enough that the kill below lands in it even when each poll of
    # the sim log (a CLI process) is slow on a loaded machine
    cli.run('sim', 'fault', 'set', 'create', '--latency', '0.3')
    cli.run('sim', 'fault', 'set', 'get', '--latency', '5.0')
    proc = cli.popen('stack', 'create', 'k', '-t', tmpl)
    assert _wait_for(lambda: len(cli.json('sim', 'log', '--op', 'create'))
                     >= 1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert cli.json('stack', 'show', 'k')['stack_status'] == \
        'CREATE_IN_PROGRESS'
    made_before = {e['Resource'] for e in cli.json('sim', 'log', '--op',
                                                   'create')}
    cli.run('sim', 'fault', 'clear')
    cli.run('stack', 'converge', 'k')
    assert cli.json('stack', 'show', 'k')['stack_status'] == 'CREATE_COMPLETE'
    counts = _creates_per_resource(cli.json('sim', 'log', '--op', 'create'))
    assert counts == {'k/s%d' % i: 1 for i in range(6)}
    assert len(cli.json('sim', 'server', 'list')) == 6
    # the server made before the kill was looked up and adopted (by its
    # key, or by the id its wait recorded), not made again
    assert made_before and made_before <= set(counts)
    looked = [e for op in ('find', 'get')
              for e in cli.json('sim', 'log', '--op', op)
              if e['Resource'] in made_before]
    assert looked


def test_update_from_a_second_terminal_supersedes_the_first(cli, write):
    slow = write('v1.yaml', '''
heat_template_version: 2018-08-31
resources:
  a:
    type: OS::Heat::TestResource
    properties: {value: one, action_wait_secs: {create: 120}}
  b:
    type: OS::Heat::TestResource
    depends_on: a
    properties: {value: b-one}
''')
    fast = write('v2.yaml', '''
heat_template_version: 2018-08-31
resources:
  a:
    type: OS::Heat::TestResource
    properties: {value: two}
  b:
    type: OS::Heat::TestResource
    depends_on: a
    properties: {value: b-two}
''')
    first = cli.popen('stack', 'create', 'two', '-t', slow)
    def a_is_running():
        proc = cli.run('stack', 'event', 'list', 'two', '-f', 'json',
                       check=False)
        return proc.returncode == 0 and any(
            e['resource_status'] == 'CREATE_IN_PROGRESS'
            for e in json.loads(proc.stdout))
    assert _wait_for(a_is_running)
    cli.run('stack', 'update', 'two', '-t', fast, '--wait')
    out, err = first.communicate(timeout=60)
    assert first.returncode != 0, (out, err)
    assert 'superseded' in err
    assert cli.json('stack', 'show', 'two')['stack_status'] == \
        'UPDATE_COMPLETE'
    b = cli.json('stack', 'resource', 'show', 'two', 'b')
    assert b['attributes']['output'] == 'b-two'


def test_external_delete_is_healed_by_converge(cli, write):
    tmpl = write('h.yaml', '''
heat_template_version: 2018-08-31
resources:
  srv:
    type: OS::Nova::Server
    properties: {image: cirros, flavor: m1.tiny, name: healme}
''')
    cli.run('stack', 'create', 'h', '-t', tmpl)
    cli.run('sim', 'server', 'delete', 'healme')
    assert cli.json('sim', 'server', 'list') == []
    cli.run('stack', 'converge', 'h')
    servers = cli.json('sim', 'server', 'list')
    assert [s['Name'] for s in servers] == ['healme']


@pytest.mark.parametrize('text,needle', [
    ('heat_template_version: 2018-08-31\nresources:\n  a: [\n', 'bad.yaml:'),
    ('heat_template_version: 2099-01-01\nresources: {}\n', '2099-01-01'),
    ('heat_template_version: 2018-08-31\nresources:\n  a:\n'
     '    type: OS::Nope::Thing\n', 'OS::Nope::Thing'),
    ('heat_template_version: 2018-08-31\nresources:\n  a:\n'
     '    type: OS::Heat::TestResource\n    properties:\n      wat: 1\n',
     'wat'),
    ('heat_template_version: 2018-08-31\nresources:\n  a:\n'
     '    type: OS::Heat::Value\n    properties:\n'
     '      value: {get_attr: [missing, x]}\n', 'missing'),
])
def test_bad_input_is_refused_with_location_and_nothing_stored(
        cli, write, text, needle):
    path = write('bad.yaml', text)
    proc = cli.run('stack', 'create', 'bad', '-t', path, check=False)
    assert proc.returncode != 0
    assert needle in proc.stderr
    assert cli.json('stack', 'list') == []


def test_template_validate_prints_parameters(cli):
    info = json.loads(cli.run('template', 'validate', '-t', DEMO, '-f',
                              'json').stdout)
    assert info['Parameters']['flavor']['Default'] == 'm1.small'
    assert info['Parameters']['admin_password']['NoEcho'] == 'true'


def test_graph_prints_dot(cli, write):
    path = write('g.yaml', '''
heat_template_version: 2018-08-31
resources:
  a: {type: OS::Heat::None}
  b: {type: OS::Heat::None, depends_on: a}
''')
    cli.run('stack', 'create', 'g', '-t', path)
    dot = cli.run('stack', 'graph', 'g').stdout
    assert dot.startswith('digraph') and '"b" -> "a";' in dot


@pytest.mark.parametrize('text,args,needle', [
    ('heat_template_version: 2018-08-31\nresources:\n'
     '  a: {type: OS::Heat::None, depends_on: b}\n'
     '  b: {type: OS::Heat::None, depends_on: a}\n', [], 'a, b'),
    ('heat_template_version: 2018-08-31\nparameters:\n  p: {type: string}\n'
     'resources: {}\n', [], 'p'),
    ('heat_template_version: 2018-08-31\nparameters:\n  p:\n'
     '    type: number\n    constraints: [{range: {min: 1, max: 5}}]\n'
     'resources: {}\n', ['--parameter', 'p=9'], 'p'),
    ('heat_template_version: 2018-08-31\nresources:\n  a:\n'
     '    type: OS::Heat::Value\n    properties:\n'
     '      value: {get_file: ../../etc/passwd}\n', [], 'file not found'),
    ('heat_template_version: 2018-08-31\nresources:\n  a:\n'
     '    type: OS::Heat::RandomString\n    properties: {length: lots}\n',
     [], 'length'),
])
def test_more_bad_input(cli, write, text, args, needle):
    path = write('sub/bad.yaml', text)
    proc = cli.run('stack', 'create', 'bad', '-t', path, *args, check=False)
    assert proc.returncode != 0
    assert needle in proc.stderr and 'bad.yaml' in proc.stderr
    assert cli.json('stack', 'list') == []


def test_template_over_the_size_limit(cli, write):
    conf = write('c.conf', '[DEFAULT]\nmax_template_size = 100\n')
    path = write('big.yaml', 'heat_template_version: 2018-08-31\n'
                 'resources:\n' + ''.join(
                     '  r%d: {type: OS::Heat::None}\n' % i for i in range(20)))
    proc = cli.run('--config-file', conf, 'template', 'validate', '-t', path,
                   check=False)
    assert proc.returncode != 0 and 'exceeds' in proc.stderr


def test_kill_9_while_servers_build_then_converge(cli, write):
    """Servers building wait in the database, not in the engine process:
    kill -9 the only engine while they build, and `stack converge` sees
    them through, creating none of them twice."""
    body = ['heat_template_version: 2018-08-31', 'resources:']
    for i in range(6):
        body += ['  s%d:' % i, '    type: OS::Nova::Server',
                 '    properties: {image: cirros, flavor: m1.tiny}']
    tmpl = write('build.yaml', '\n'.join(body) + '\n')
    cli.run('sim', 'fault', 'set', 'create', '--latency', '4')
    proc = cli.popen('stack', 'create', 'b', '-t', tmpl)

    def all_building():
        servers = cli.json('sim', 'server', 'list')
        return len(servers) == 6 and {s['Status'] for s in servers} == \
            {'BUILD'}
    assert _wait_for(all_building)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    rows = cli.json('stack', 'resource', 'list', 'b')
    assert {r['resource_status'] for r in rows} == {'CREATE_IN_PROGRESS'}
    cli.run('stack', 'converge', 'b')
    assert cli.json('stack', 'show', 'b')['stack_status'] == \
        'CREATE_COMPLETE'
    counts = _creates_per_resource(cli.json('sim', 'log', '--op', 'create'))
    assert counts == {'b/s%d' % i: 1 for i in range(6)}
    assert {s['Status'] for s in cli.json('sim', 'server', 'list')} == \
        {'ACTIVE'}

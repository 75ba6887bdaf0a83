"""Software deployments end to end, as a user runs them: the CLI (embedded,
serving the agents' routes while it runs), the simulated cloud booting a
real agent for each SOFTWARE_CONFIG server, and real scripts running on
the servers' disks.
"""

import json
import os
import shutil

import pytest


CORPUS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'shared', 'corpus', 'hot')
EXAMPLES = os.path.join(CORPUS, 'heat-templates', 'hot', 'software-config',
                        'example-templates')

# The corpus leaves the scripts out (they are code): this one does what
# Heat's example-script.sh does, writing its inputs to a file on the server
# and returning them as the output "result".
EXAMPLE_SCRIPT = '''#!/bin/sh
echo "Writing to $bar"
echo "$foo" > "$bar.txt"
echo -n "The file $bar.txt contains $(cat "$bar.txt") for server \
$deploy_server_id during $deploy_action" > "$heat_outputs_path.result"
echo "Output to stderr" 1>&2
'''

# no Neutron in the simulated cloud: the security group is a stand-in
ENV = '''resource_registry:
  OS::Neutron::SecurityGroup: OS::Heat::None
'''


@pytest.fixture
def home(cli):
    return cli   # the cli fixture stops the home's agent host


@pytest.mark.skipif(not os.path.isdir(EXAMPLES), reason='corpus not here')
def test_the_example_script_template_runs_its_script(home, tmp_path):
    cli = home
    work = tmp_path / 'example'
    shutil.copytree(EXAMPLES, work)
    (work / 'config-scripts' / 'example-script.sh').write_text(
        EXAMPLE_SCRIPT)
    (work / 'env.yaml').write_text(ENV)
    cli.run('stack', 'create', 'ex', '-t',
            str(work / 'example-script-template.yaml'),
            '-e', str(work / 'env.yaml'),
            '--parameter', 'key_name=demo-key',
            '--parameter', 'flavor=m1.small', '--wait', timeout=240)
    out = cli.json('stack', 'output', 'show', 'ex', '--all')
    assert 'baaaaa.txt contains fooooo' in out['result'], out
    assert 'during CREATE' in out['result']
    assert out['stdout'].strip() == 'Writing to baaaaa'
    assert out['stderr'].strip() == 'Output to stderr'
    assert out['status_code'] == 0
    assert 'barmy.txt contains fu' in out['other_result']
    # the scripts really ran on the server's disk
    servers = cli.json('sim', 'server', 'list')
    assert len(servers) == 1
    disk = cli.json('sim', 'server', 'show', servers[0]['ID'])['disk']
    with open(os.path.join(disk, 'baaaaa.txt')) as f:
        assert f.read().strip() == 'fooooo'
    with open(os.path.join(disk, 'barmy.txt')) as f:
        assert f.read().strip() == 'fu'


COMPONENT = '''heat_template_version: 2016-10-14
resources:
  app:
    type: OS::Heat::SoftwareComponent
    properties:
      configs:
        - actions: [CREATE]
          tool: script
          config: |
            #!/bin/sh
            echo CREATE >> lifecycle.log
        - actions: [SUSPEND]
          tool: script
          config: |
            #!/bin/sh
            echo SUSPEND >> lifecycle.log
        - actions: [RESUME]
          tool: script
          config: |
            #!/bin/sh
            echo RESUME >> lifecycle.log
        - actions: [DELETE]
          tool: script
          config: |
            #!/bin/sh
            echo DELETE >> lifecycle.log
        - actions: [backup]
          tool: script
          config: |
            #!/bin/sh
            echo "backup to $target" >> lifecycle.log
            echo -n "$target/app.tgz" > "$heat_outputs_path.archive"
      inputs:
        - name: target
          default: /backups
      outputs:
        - name: archive
  server:
    type: OS::Nova::Server
    properties:
      image: cirros
      flavor: m1.tiny
      user_data_format: SOFTWARE_CONFIG
  deployment:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: app}
      server: {get_resource: server}
'''


@pytest.mark.long  # 20-30 s beside a busy machine
def test_a_component_lifecycle_leaves_four_lines_in_order(home, write):
    cli = home
    cli.run('stack', 'create', 'app', '-t', write('app.yaml', COMPONENT),
            '--wait', timeout=240)
    [server] = cli.json('sim', 'server', 'list')
    disk = cli.json('sim', 'server', 'show', server['ID'])['disk']
    cli.run('stack', 'suspend', 'app', '--wait', timeout=240)
    cli.run('stack', 'resume', 'app', '--wait', timeout=240)
    # a day-2 action: the stack is not touched
    before = cli.json('stack', 'show', 'app')
    [done] = cli.json('deployment', 'action', 'run', 'app', 'deployment',
                      'backup', '--input', 'target=/mnt/b', timeout=240)
    assert done['status'] == 'COMPLETE', done
    assert done['output_values']['archive'] == '/mnt/b/app.tgz'
    after = cli.json('stack', 'show', 'app')
    assert after['updated_time'] == before['updated_time']
    assert after['stack_status'] == before['stack_status']
    listed = cli.json('deployment', 'action', 'list', 'app')
    assert [a['action'] for a in listed] == ['backup']
    cli.run('stack', 'delete', 'app', '--wait', timeout=240)
    with open(os.path.join(disk, 'lifecycle.log')) as f:
        lines = f.read().split('\n')
    assert lines[:-1] == ['CREATE', 'SUSPEND', 'RESUME', 'backup to /mnt/b',
                          'DELETE']


def test_an_update_that_changes_nothing_runs_nothing(home, write):
    """Seed 004: an UPDATE deployment whose input is a timestamp parameter
    re-runs when it changes, and not when it does not."""
    cli = home
    template = write('ts.yaml', json.dumps({
        'heat_template_version': '2016-10-14',
        'parameters': {'update_timestamp': {'type': 'string',
                                            'default': 'first'}},
        'resources': {
            'config': {'type': 'OS::Heat::SoftwareConfig', 'properties': {
                'group': 'script', 'inputs': [{'name': 'stamp'}],
                'config': '#!/bin/sh\necho "$deploy_action $stamp" '
                          '>> runs.log\n'}},
            'server': {'type': 'OS::Nova::Server', 'properties': {
                'image': 'cirros', 'flavor': 'm1.tiny',
                'user_data_format': 'SOFTWARE_CONFIG'}},
            'deployment': {'type': 'OS::Heat::SoftwareDeployment',
                           'properties': {
                               'config': {'get_resource': 'config'},
                               'server': {'get_resource': 'server'},
                               'actions': ['CREATE', 'UPDATE'],
                               'input_values': {'stamp': {
                                   'get_param': 'update_timestamp'}}}}}}))
    cli.run('stack', 'create', 'ts', '-t', template, '--wait', timeout=240)
    [server] = cli.json('sim', 'server', 'list')
    disk = cli.json('sim', 'server', 'show', server['ID'])['disk']
    cli.run('stack', 'update', 'ts', '-t', template, '--parameter',
            'update_timestamp=second', '--wait', timeout=240)
    cli.run('stack', 'update', 'ts', '-t', template, '--parameter',
            'update_timestamp=second', '--wait', timeout=240)
    with open(os.path.join(disk, 'runs.log')) as f:
        assert f.read().split('\n')[:-1] == ['CREATE first',
                                             'UPDATE second']


# corpus templates: (path, parameters, the files the corpus left out,
# what their outputs must show)
WP = os.path.join('wordpress', 'WordPress_software-config_1-instance.yaml')
PLACEHOLDER = '''#!/bin/sh
echo "installing for $deploy_resource_name" > installed.txt
'''
CORPUS_CASES = {
    'deploy-sequence': ('example-deploy-sequence.yaml', [], {}),
    'structured': ('example-structured-template.yaml',
                   ['key_name=demo-key', 'flavor=m1.small'], {}),
    'wordpress': (WP, ['flavor=m1.small'],
                  {'wordpress/wp_install.sh': PLACEHOLDER,
                   'wordpress/db_install.sh': PLACEHOLDER}),
}


@pytest.mark.skipif(not os.path.isdir(EXAMPLES), reason='corpus not here')
@pytest.mark.parametrize('case', sorted(CORPUS_CASES))
def test_corpus_software_templates_converge(home, tmp_path, case):
    cli = home
    path, params, files = CORPUS_CASES[case]
    work = tmp_path / 'example'
    shutil.copytree(EXAMPLES, work)
    for name, text in files.items():
        (work / name).write_text(text)
    (work / 'env.yaml').write_text(ENV)
    args = ['stack', 'create', case, '-t', str(work / path), '-e',
            str(work / 'env.yaml'), '--wait']
    for p in params:
        args += ['--parameter', p]
    cli.run(*args, timeout=240)
    shown = cli.json('stack', 'show', case)
    assert shown['stack_status'] == 'CREATE_COMPLETE'
    out = cli.json('stack', 'output', 'show', case, '--all')
    if case == 'deploy-sequence':
        # b ran with a's stdout as input; c after b
        assert 'deployment_a is running on' in out['deployment_a_stdout']
        assert out['deployment_b_stdout'].startswith(
            'Previous: ' + out['deployment_a_stdout'].rstrip('\n'))
        assert 'Previous: deployment_b' in out['deployment_c_stdout']
    elif case == 'structured':
        assert out['server_ip'].startswith('10.')
    elif case == 'wordpress':
        disk = cli.json('sim', 'server', 'show', cli.json(
            'sim', 'server', 'list')[0]['ID'])['disk']
        with open(os.path.join(disk, 'installed.txt')) as f:
            assert f.read().startswith('installing for')


def test_a_backup_on_a_five_member_group_returns_each_members_output(
        home, write):
    cli = home
    servers = {'node%d' % i: {
        'type': 'OS::Nova::Server', 'properties': {
            'image': 'cirros', 'flavor': 'm1.tiny', 'name': 'node%d' % i,
            'user_data_format': 'SOFTWARE_CONFIG'}} for i in range(5)}
    resources = dict(servers, **{
        'app': {'type': 'OS::Heat::SoftwareComponent', 'properties': {
            'outputs': [{'name': 'archive'}],
            'configs': [
                {'actions': ['CREATE'], 'tool': 'script',
                 'config': '#!/bin/sh\necho installed > app.txt\n'},
                {'actions': ['backup'], 'tool': 'script',
                 'config': '#!/bin/sh\nset -e\ncp app.txt backup.txt\n'
                           'echo -n "$(pwd)/backup.txt" > '
                           '"$heat_outputs_path.archive"\n'}]}},
        'group': {'type': 'OS::Heat::SoftwareDeploymentGroup',
                  'properties': {
                      'config': {'get_resource': 'app'},
                      'servers': {n: {'get_resource': n}
                                  for n in servers}}}})
    cli.run('stack', 'create', 'grp', '-t', write('grp.yaml', json.dumps({
        'heat_template_version': '2016-10-14', 'resources': resources})),
        '--wait', timeout=240)
    before = cli.json('stack', 'show', 'grp')
    done = cli.json('deployment', 'action', 'run', 'grp', 'group', 'backup',
                    '--batch-size', '2', timeout=240)
    assert sorted(a['member'] for a in done) == sorted(servers)
    assert {a['status'] for a in done} == {'COMPLETE'}
    for action in done:
        archive = action['output_values']['archive']
        assert archive.endswith('backup.txt')
        with open(archive) as f:
            assert f.read() == 'installed\n'
    after = cli.json('stack', 'show', 'grp')
    assert after['updated_time'] == before['updated_time']
    assert after['stack_status'] == 'CREATE_COMPLETE'

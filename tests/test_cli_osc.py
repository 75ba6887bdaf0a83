"""The `openstack stack …` verbs and flags the converge CLI offers as
OSC does, each run as a user runs it — a subprocess — in both modes:
embedded (a home of its own) and remote (--os-url against a live
converge-api over another home): snapshots, software configs and
deployments, stack failures, stack list's filters, tags, sort and page,
update --dry-run, event list's log format and --follow, resource list
--long, stack show's rendering and the short summary of a create or
update. One converge-api and one embedded home serve the module."""

import concurrent.futures
import json
import queue
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
import yaml

from tests import test_heat_api
from tests.conftest import CLI, stop_agents
from tests.test_remote_cli import Remote

pytestmark = pytest.mark.xdist_group('cli_osc')

#: a converge-api on loopback over an embedded home, this module's own
api = test_heat_api.api

VALUE = '''\
heat_template_version: 2018-08-31
parameters:
  word: {type: string, default: one}
resources:
  v:
    type: OS::Heat::Value
    properties: {value: {get_param: word}}
outputs:
  o: {value: {get_attr: [v, value]}}
'''

INNER_FAILING = '''\
heat_template_version: 2018-08-31
resources:
  ok: {type: OS::Heat::Value, properties: {value: fine}}
  bad:
    type: OS::Heat::TestResource
    properties: {fail: true}
    depends_on: ok
'''

FAILING = '''\
heat_template_version: 2018-08-31
resources:
  top: {type: OS::Heat::Value, properties: {value: x}}
  inner: {type: inner_failing.yaml}
'''

HOST = '''\
heat_template_version: 2018-08-31
resources:
  box:
    type: OS::Nova::Server
    properties: {image: cirros, flavor: m1.small,
                 user_data_format: SOFTWARE_CONFIG}
'''

GREET = '''\
#!/bin/sh
printf "hi %s" "$who" > "$heat_outputs_path.said"
echo out-line
echo err-line >&2
'''

#: the columns OSC's short summary shows after a create or an update
SUMMARY = ['id', 'stack_name', 'description', 'creation_time',
           'updated_time', 'stack_status', 'stack_status_reason']

#: an event in OSC's log format: time, id, [resource]: status  reason
LOG_LINE = re.compile(r'^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?Z? '
                      r'[0-9a-f-]{36} \[(?P<name>[^\]]*)\]: '
                      r'(?P<status>[A-Z_]+)  (?P<reason>.*)$')


@pytest.fixture(scope='module')
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp('osc-files')
    out = {}
    for name, text in (('value.yaml', VALUE), ('failing.yaml', FAILING),
                       ('inner_failing.yaml', INNER_FAILING),
                       ('host.yaml', HOST), ('greet.sh', GREET),
                       ('defn.yaml', 'inputs:\n- name: who\n'
                                     'outputs:\n- name: said\n')):
        (d / name).write_text(text)
        out[name] = str(d / name)
    return out


@pytest.fixture(scope='module')
def sides(api, tmp_path_factory):
    """{'local': the CLI on an embedded home, 'remote': the CLI on
    converge-api}: every test runs its commands on both."""
    d = tmp_path_factory.mktemp('osc-sides')
    remote = Remote('%s/v1/osc' % api.url, api.token('osc')['token'],
                    str(d / 'nohome'))
    local = CLI(str(d / 'home'))
    yield {'local': local, 'remote': remote}
    stop_agents(local.home)


def both(sides, on):
    """`on(side, cli)` for each side at once (their homes share nothing):
    the module's wall time halves; a failure on either is raised."""
    with concurrent.futures.ThreadPoolExecutor(len(sides)) as pool:
        for done in [pool.submit(on, side, cli)
                     for side, cli in sides.items()]:
            done.result()


def _table_columns(out):
    """The column names of a table cliff printed."""
    header = [line for line in out.splitlines() if line.startswith('|')][0]
    return [c.strip() for c in header.strip('|').split('|')]


@pytest.mark.long  # among the slowest of ./run-tests
def test_snapshot_create_list_show_restore_delete(sides, files):
    def on(side, cli):
        cli.run('stack', 'create', '-t', files['value.yaml'], 'snap',
                '--wait')
        made = cli.json('stack', 'snapshot', 'create', 'snap', '--name',
                        'first', '--wait')
        assert list(made) == ['ID', 'name', 'action', 'status',
                              'status_reason', 'data', 'creation_time']
        assert (made['name'], made['status']) == ('first', 'COMPLETE'), side
        [listed] = cli.json('stack', 'snapshot', 'list', 'snap')
        assert list(listed) == ['id', 'name', 'action', 'status',
                                'status_reason', 'creation_time']
        assert listed['id'] == made['ID']
        # YAML by default, as OSC's
        shown = yaml.safe_load(cli.run('stack', 'snapshot', 'show', 'snap',
                                       made['ID']).stdout)
        assert shown['name'] == 'first'
        assert shown['data']['resources']['v']['type'] == 'OS::Heat::Value'

        cli.run('stack', 'update', 'snap', '--existing', '--parameter',
                'word=two', '--wait')
        restored = cli.run('stack', 'snapshot', 'restore', 'snap',
                           made['ID'], '--wait')
        assert '[v]: UPDATE_COMPLETE' in restored.stdout, side
        assert cli.json('stack', 'show', 'snap')['stack_status'] == \
            'RESTORE_COMPLETE', side
        assert cli.json('stack', 'output', 'show', 'snap', 'o')[
            'output_value'] == 'one', side

        cli.run('stack', 'snapshot', 'delete', 'snap', made['ID'], '--yes')
        gone = cli.run('stack', 'snapshot', 'show', 'snap', made['ID'],
                       check=False)
        assert gone.returncode == 3, (side, gone.stderr)
    both(sides, on)


@pytest.mark.long  # among the slowest of ./run-tests
def test_stack_list_filters_tags_sort_page_long(sides, files):
    def on(side, cli):
        made = {}
        for name, tags in (('la', 'x,y'), ('lb', 'y'), ('lc', None)):
            args = ['stack', 'create', '-t', files['value.yaml'], name,
                    '--wait']
            if tags:
                args += ['--tags', tags]
            made[name] = cli.json(*args)['id']

        def names(*args):
            return [r['Stack Name'] for r in cli.json('stack', 'list', *args)
                    if r['Stack Name'] in made]

        assert names('--tags', 'x,y') == ['la'], side   # all of them
        assert names('--tags', 'x,lc', '--tag-mode', 'any') == ['la'], side
        assert names('--tags', 'y', '--tag-mode', 'not') == ['lc'], side
        bad = cli.run('stack', 'list', '--tags', 'y', '--tag-mode', 'all',
                      check=False)
        assert bad.returncode == 2 and 'tag mode must be one of' in \
            bad.stderr, (side, bad.stderr)
        assert names('--filter', 'name=lb', '--filter', 'name=lc') == [
            'lb', 'lc'], side
        unknown = cli.run('stack', 'list', '--filter', 'colour=red',
                          check=False)
        assert unknown.returncode == 2 and 'Unknown filter "colour"' in \
            unknown.stderr, (side, unknown.stderr)
        # the page is cut in the order asked for
        assert names('--sort', 'stack_name:desc', '--tags', 'y',
                     '--limit', '1') == ['lb'], side
        assert names('--sort', 'stack_name:desc', '--filter',
                     'status=COMPLETE', '--marker', made['lc']) == [
                         'lb', 'la'], side

        [long_row] = cli.json('stack', 'list', '--long', '--filter',
                              'name=la')
        assert list(long_row) == ['ID', 'Stack Name', 'Project',
                                  'Stack Owner', 'Stack Status',
                                  'Creation Time', 'Updated Time']
        assert long_row['Project'] == ('osc' if side == 'remote'
                                       else 'converge')
        [short] = cli.json('stack', 'list', '--short', '--nested',
                           '--filter', 'name=la')
        assert list(short) == ['ID', 'Stack Name', 'Stack Status',
                               'Parent'], side
    both(sides, on)


@pytest.mark.long  # 20-30 s beside a busy machine
def test_update_dry_run_timeout_tags_and_the_short_summary(sides, files):
    def on(side, cli):
        made = cli.json('stack', 'create', '-t', files['value.yaml'], 'up',
                        '--wait')
        # OSC's short summary, not the whole stack
        assert list(made) == SUMMARY, side
        dry = cli.json('stack', 'update', 'up', '--existing', '--parameter',
                       'word=two', '--dry-run', '--show-nested')
        assert sorted(dry) == ['added', 'deleted', 'replaced', 'unchanged',
                               'updated']
        assert [r['resource_name'] for r in dry['updated']] == ['v'], side
        table = cli.run('stack', 'update', 'up', '-t', files['value.yaml'],
                        '--parameter', 'word=two', '--dry-run').stdout
        assert '"resource_name": "v"' in table, side    # JSON text

        updated = cli.json('stack', 'update', 'up', '--existing',
                           '--parameter', 'word=two', '--timeout', '7',
                           '--tags', 'p,q', '--wait')
        assert list(updated) == SUMMARY, side
        assert updated['stack_status'] == 'UPDATE_COMPLETE'
        shown = cli.json('stack', 'show', 'up')
        assert (shown['timeout_mins'], shown['tags']) == (7, ['p', 'q'])
        # --existing keeps the tags; a template in full without --tags
        # leaves none (Heat's PUT)
        cli.run('stack', 'update', 'up', '--existing', '--wait')
        assert cli.json('stack', 'show', 'up')['tags'] == ['p', 'q'], side
        cli.run('stack', 'update', 'up', '-t', files['value.yaml'],
                '--parameter', 'word=two', '--wait')
        shown = cli.json('stack', 'show', 'up')
        assert (shown['timeout_mins'], shown['tags']) == (7, None), side

        # stack show as OSC renders it: the summary first, parameters
        # and outputs as YAML in a table, JSON text in value
        out = cli.run('stack', 'show', 'up').stdout
        fields = [line.split('|')[1].strip() for line in out.splitlines()
                  if line.startswith('|') and line.split('|')[1].strip()]
        assert fields[1:len(SUMMARY) + 3] == \
            SUMMARY + ['parameters', 'outputs'], side
        assert re.search(r'\| parameters +\| word: two', out), out
        assert 'output_key: o' in out and "{'" not in out, out
        values = cli.run('stack', 'show', 'up', '-f', 'value', '-c',
                         'parameters').stdout
        assert json.loads(values) == {'word': 'two'}, side
        assert 'outputs' not in cli.json('stack', 'show', 'up',
                                         '--no-resolve-outputs')

        # OSC's stack actions: a row a stack, several stacks at once
        done = cli.json('stack', 'check', 'up', '--wait')
        assert done == [{'ID': shown['id'], 'Stack Name': 'up',
                         'Stack Status': 'CHECK_COMPLETE',
                         'Creation Time': shown['creation_time'],
                         'Updated Time': done[0]['Updated Time']}], side
        # the first stack done, the second not found: the command fails
        both_ = cli.run('stack', 'suspend', 'up', 'nope', '--wait',
                        check=False)
        assert both_.returncode == 3, (side, both_.stderr)
        assert cli.json('stack', 'show', 'up')['stack_status'] == \
            'SUSPEND_COMPLETE', side
        cancel = cli.run('stack', 'cancel', 'up', '--no-rollback', '--wait',
                         check=False)
        assert cancel.returncode == 4, (side, cancel.stderr)  # not busy
    both(sides, on)


def _reader(proc):
    """A queue of the lines `proc` prints, read by a thread (a read with
    a deadline, not a pause)."""
    lines = queue.Queue()

    def read():
        for line in proc.stdout:
            lines.put(line.rstrip('\n'))
        lines.put(None)
    threading.Thread(target=read, daemon=True).start()
    return lines


def _until(lines, wanted, timeout=120):
    """Lines up to the one `wanted(line)` is true of."""
    deadline = time.monotonic() + timeout
    seen = []
    while True:
        line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        assert line is not None, 'ended before: %s' % seen
        seen.append(line)
        if wanted(line):
            return seen


def test_event_list_log_format_follow_and_resource_list_long(sides,
                                                             files):
    def on(side, cli):
        cli.run('stack', 'create', '-t', files['value.yaml'], 'ev', '--wait')
        # OSC's default format: log lines
        lines = cli.run('stack', 'event', 'list', 'ev').stdout.splitlines()
        parsed = [LOG_LINE.match(line) for line in lines if line]
        assert all(parsed), lines
        assert [(m['name'], m['status']) for m in parsed] == [
            ('v', 'CREATE_IN_PROGRESS'), ('v', 'CREATE_COMPLETE')], side
        refused = cli.run('stack', 'event', 'list', 'ev', '--follow', '-f',
                          'json', check=False)
        assert refused.returncode == 2 and '--format log' in \
            refused.stderr, side

        following = cli.popen('stack', 'event', 'list', 'ev', '--follow')
        try:
            lines = _reader(following)
            _until(lines, lambda line: 'CREATE_COMPLETE' in line)
            cli.run('stack', 'update', 'ev', '--existing', '--parameter',
                    'word=two', '--wait')
            seen = _until(lines, lambda line: 'UPDATE_COMPLETE' in line)
            assert LOG_LINE.match(seen[-1])['name'] == 'v'
            following.send_signal(signal.SIGINT)
            assert following.wait(timeout=60) == 0, following.stderr.read()
        finally:
            if following.poll() is None:
                following.kill()
                following.wait()

        table = cli.run('stack', 'resource', 'list', 'ev', '--long').stdout
        assert _table_columns(table) == [
            'resource_name', 'physical_resource_id', 'resource_type',
            'resource_status', 'updated_time', 'stack_name'], side
        assert '| ev ' in table
    both(sides, on)


def test_stack_failures_list(sides, files):
    def on(side, cli):
        failed = cli.run('stack', 'create', '-t', files['failing.yaml'],
                         'fl', '--wait', check=False)
        assert failed.returncode == 1, (side, failed.stderr)
        out = cli.run('stack', 'failures', 'list', 'fl', '--long').stdout
        # the failure down in the nested stack, not its owner
        assert out.splitlines()[:5] == [
            'fl.inner.bad:',
            '  resource_type: OS::Heat::TestResource',
            '  physical_resource_id: ',
            '  status: CREATE_FAILED',
            '  status_reason: |'], (side, out)
        assert 'Test Resource failed bad' in out
        assert 'fl.inner:' not in out and 'fl.top' not in out
        # the log names a nested stack's resource by its path, as OSC's
        log = cli.run('stack', 'event', 'list', 'fl', '--nested-depth',
                      '1').stdout
        assert '[inner.bad]: CREATE_FAILED  ValueError: resources.bad: ' \
            'Test Resource failed bad' in log, (side, log)
        cli.run('stack', 'create', '-t', files['value.yaml'], 'fine',
                '--wait')
        assert cli.run('stack', 'failures', 'list', 'fine').stdout == ''
        assert cli.run('stack', 'failures', 'list', 'nope',
                       check=False).returncode == 3
    both(sides, on)


@pytest.mark.long  # among the slowest of ./run-tests
def test_software_config_and_deployment(sides, files):
    def on(side, cli):
        made = cli.json('software', 'config', 'create', 'greet',
                        '--config-file', files['greet.sh'], '--group',
                        'script', '--definition-file', files['defn.yaml'])
        assert (made['name'], made['group'], made['config']) == (
            'greet', 'script', GREET), side
        assert [i['name'] for i in made['inputs']] == ['who']
        listed = cli.json('software', 'config', 'list')
        assert [(c['id'], c['name']) for c in listed
                if c['id'] == made['id']] == [(made['id'], 'greet')]
        assert list(listed[0]) == ['id', 'name', 'group', 'creation_time']
        shown = yaml.safe_load(cli.run('software', 'config', 'show',
                                       made['id']).stdout)   # YAML
        assert list(shown) == ['id', 'name', 'group', 'config', 'inputs',
                               'outputs', 'options', 'creation_time']
        assert cli.run('software', 'config', 'show', made['id'],
                       '--config-only').stdout == GREET + '\n'

        cli.run('stack', 'create', '-t', files['host.yaml'], 'host',
                '--wait')
        server = cli.json('stack', 'resource', 'show', 'host', 'box')[
            'physical_resource_id']
        # embedded, the command serves the agent and waits; remotely,
        # --wait follows the deployment through converge-api
        dep = yaml.safe_load(cli.run(
            'software', 'deployment', 'create', 'greeting', '--config',
            made['id'], '--server', server, '--input-value', 'who=there',
            '--wait').stdout)
        assert dep['status'] == 'COMPLETE', (side, dep)
        assert dep['output_values']['said'] == 'hi there'

        out = cli.run('software', 'deployment', 'output', 'show', dep['id'],
                      'said').stdout
        assert out == 'output_value:\n\n  said: hi there\n', side
        out = cli.run('software', 'deployment', 'output', 'show', dep['id'],
                      '--all').stdout
        assert '  deploy_stdout: |\n    out-line\n' in out, out
        meta = json.loads(cli.run('software', 'deployment', 'metadata',
                                  'show', server).stdout)
        assert [m['id'] for m in meta] == [dep['id']], side
        assert [m['name'] for m in meta] == ['greeting']
        [row] = cli.json('software', 'deployment', 'list', '--server',
                         server, '--long')
        assert list(row) == ['id', 'config_id', 'server_id', 'action',
                             'status', 'creation_time', 'status_reason']
        assert (row['id'], row['status']) == (dep['id'], 'COMPLETE')
        shown = cli.json('software', 'deployment', 'show', dep['id'],
                         '--long')
        assert shown['output_values']['said'] == 'hi there'
        assert shown['input_values'] == {'who': 'there'}

        cli.run('software', 'deployment', 'delete', dep['id'])
        assert cli.run('software', 'deployment', 'show', dep['id'],
                       check=False).returncode == 3
        # one deleted, one not found: the failures' code, not found
        gone = cli.run('software', 'config', 'delete', made['id'],
                       'no-such-config', check=False)
        assert gone.returncode == 3 and 'Unable to delete 1 of the 2' in \
            gone.stderr, (side, gone.stderr)
        assert cli.run('software', 'config', 'show', made['id'],
                       check=False).returncode == 3
    both(sides, on)


def test_global_config_file_before_the_command_only(sides, files):
    """`--config-file` after the command words is the command's (OSC's
    software config create), not oslo.config's."""
    cli = sides['local']
    proc = subprocess.run(
        [sys.executable, '-m', 'converge.cmd.cli', '--home', cli.home,
         'software', 'config', 'create',
         'x', '--config-file', files['greet.sh'], '-f', 'value', '-c',
         'config'], capture_output=True, text=True, env=cli.env(),
        timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == GREET + '\n'

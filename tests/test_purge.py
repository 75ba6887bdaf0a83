"""`converge-manage purge_deleted`, Heat's `heat-manage purge_deleted`
with its arguments, as an operator runs it (a subprocess, the home from
CONVERGE_HOME as the API's): deleted stacks older than the age are gone
from `stack list --deleted`, nested ones with them; those deleted since,
and live stacks, stay.
"""

import os
import subprocess
import sys

TEMPLATE = '''heat_template_version: 2021-04-16
resources:
  v: {type: OS::Heat::Value, properties: {value: 1}}
  group:
    type: OS::Heat::ResourceGroup
    properties: {count: 1, resource_def: {type: OS::Heat::RandomString}}
'''


def _manage(home, *args):
    env = dict(os.environ, CONVERGE_HOME=home)
    return subprocess.run(
        [sys.executable, '-m', 'converge.cmd.manage'] + list(args),
        capture_output=True, text=True, env=env, timeout=120)


def _listed(cli):
    return {s['Stack Name']: s['Stack Status'] for s in cli.json(
        'stack', 'list', '--deleted', '--nested')}


def test_purge_deleted_forgets_stacks_deleted_before_the_age(cli, write):
    path = write('t.yaml', TEMPLATE)
    for name in ('gone', 'live'):
        cli.run('stack', 'create', name, '-t', path)
    cli.run('stack', 'delete', '-y', 'gone')
    before = _listed(cli)
    assert before['gone'] == 'DELETE_COMPLETE'
    assert len(before) == 4   # each with its group's nested stack
    kept = _manage(cli.home, 'purge_deleted', '1', '-g', 'hours')
    assert kept.returncode == 0, kept.stderr
    assert _listed(cli) == before   # deleted less than an hour ago
    bad = _manage(cli.home, 'purge_deleted', 'soon')
    assert bad.returncode != 0 and 'age should be an integer' in bad.stderr
    other = _manage(cli.home, 'purge_deleted', '0', '-p', 'elsewhere')
    assert other.returncode == 0 and _listed(cli) == before
    done = _manage(cli.home, 'purge_deleted', '0')
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == '2 deleted stacks purged'
    after = _listed(cli)
    assert 'gone' not in after and len(after) == 2
    assert after['live'] == 'CREATE_COMPLETE'

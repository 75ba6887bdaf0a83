"""Drift, seen and repaired, as an operator meets it through the CLI: servers
deleted, stopped and rebuilt behind the engine's back (`converge sim
server ...`), found by `stack drift` and `stack check`, planned by `stack
converge --dry-run` and repaired by `stack converge`, with the deployments
of the recreated servers run again by their agents and no other.
"""

import os

import pytest

NODE = '''heat_template_version: 2018-08-31
parameters:
  index: {type: string}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      config: |
        #!/bin/sh
        echo ran >> runs.log
  server:
    type: OS::Nova::Server
    properties:
      name: {list_join: ['-', [node, {get_param: index}]]}
      image: cirros
      flavor: m1.tiny
      user_data_format: SOFTWARE_CONFIG
  deployment:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config}
      server: {get_resource: server}
'''

CLUSTER = '''heat_template_version: 2018-08-31
resources:
  nodes:
    type: OS::Heat::ResourceGroup
    properties:
      count: %d
      resource_def:
        type: node.yaml
        properties:
          index: '%%index%%'
'''


def _runs(cli, server):
    """How often the deployment's script ran on the server's disk."""
    disk = cli.json('sim', 'server', 'show', server)['disk']
    try:
        with open(os.path.join(disk, 'runs.log')) as f:
            return len(f.read().split())
    except FileNotFoundError:
        return 0


@pytest.mark.long
def test_drift_is_found_checked_planned_and_repaired(cli, write):
    write('node.yaml', NODE)
    top = write('cluster.yaml', CLUSTER % 8)
    cli.run('stack', 'create', 'c', '-t', top, '--wait', timeout=240)
    names = ['node-%d' % i for i in range(8)]
    before = {s['Name']: s['ID'] for s in cli.json('sim', 'server', 'list')}
    assert sorted(before) == names
    assert [_runs(cli, n) for n in names] == [1] * 8
    assert cli.json('stack', 'drift', 'c') == []

    # behind the engine's back: 3 deleted, 2 stopped, 1 rebuilt
    cli.run('sim', 'server', 'delete', 'node-0', 'node-1', 'node-2')
    cli.run('sim', 'server', 'stop', 'node-3', 'node-4')
    cli.run('sim', 'server', 'rebuild', 'node-5', '--image', 'fedora')

    drift = cli.json('stack', 'drift', 'c')
    found = {d['physical_resource_id']: (d['kind'], d['drift'])
             for d in drift}
    assert found == {
        before['node-0']: ('gone', 'gone'),
        before['node-1']: ('gone', 'gone'),
        before['node-2']: ('gone', 'gone'),
        before['node-3']: ('changed', 'changed: status SHUTOFF, not ACTIVE'),
        before['node-4']: ('changed', 'changed: status SHUTOFF, not ACTIVE'),
        before['node-5']: ('changed', 'changed: image fedora, not cirros'),
    }, drift
    # recorded: the resources list shows it without observing again
    listed = cli.json('stack', 'resource', 'list', 'c', '-n', '3', '--drift')
    assert sorted((r['physical_resource_id'], r['drift']) for r in listed) \
        == sorted((pid, d) for pid, (_k, d) in found.items())

    # stack check: CHECK_FAILED (exit 1), naming exactly those six
    proc = cli.run('stack', 'check', 'c', '--wait', check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert cli.json('stack', 'show', 'c')['stack_status'] == 'CHECK_FAILED'
    servers = [r for r in cli.json('stack', 'resource', 'list', 'c', '-n',
                                   '3')
               if r['resource_type'] == 'OS::Nova::Server']
    assert sorted(r['physical_resource_id'] for r in servers
                  if r['resource_status'] == 'CHECK_FAILED') == sorted(found)
    for r in servers:
        if r['physical_resource_id'] in found:
            shown = cli.json('stack', 'resource', 'show', r['stack_name'],
                             r['resource_name'])
            _kind, detail = found[r['physical_resource_id']]
            assert shown['resource_status_reason'] == \
                'Error: resources.%s: drifted: %s' % (r['resource_name'],
                                                      detail)
            assert shown['drift'] == detail
            # three ways: the template's, the applied, the observed
            assert shown['desired_properties']['image'] == 'cirros'
            assert shown['applied_properties']['image'] == 'cirros'
            if _kind == 'gone':
                assert shown['observed'] is None
            else:
                assert shown['observed']['id'] == \
                    r['physical_resource_id']

    # the plan: the six repairs, and the deployments of the three servers
    # to be recreated run again; nothing else
    plan = cli.json('stack', 'converge', 'c', '--dry-run')
    by_pid = {p['physical_resource_id']: p for p in plan
              if p['resource_type'] == 'OS::Nova::Server'}
    assert {pid: p['action'] for pid, p in by_pid.items()} == {
        before['node-0']: 'create', before['node-1']: 'create',
        before['node-2']: 'create', before['node-3']: 'update',
        before['node-4']: 'update', before['node-5']: 'update'}
    reruns = [p for p in plan
              if p['resource_type'] == 'OS::Heat::SoftwareDeployment']
    assert len(reruns) == 3 and {p['action'] for p in reruns} == {'re-run'}
    assert {p['reason'] for p in reruns} == {
        'its input server is recreated'}
    assert len(plan) == 9, plan
    # a dry run repairs nothing
    assert len(cli.json('sim', 'server', 'list')) == 5

    cli.run('stack', 'converge', 'c', '--wait', timeout=240)
    assert cli.json('stack', 'show', 'c')['stack_status'] == \
        'UPDATE_COMPLETE'
    after = {s['Name']: s for s in cli.json('sim', 'server', 'list',
                                            '--long')}
    assert sorted(after) == names
    assert all(s['Status'] == 'ACTIVE' for s in after.values()), after
    assert {s['Image'] for s in after.values()} == {'cirros'}
    # recreated: new servers, whose deployment ran on them once; the
    # others kept their server and did not run theirs again
    assert [after[n]['ID'] != before[n] for n in names] == \
        [True] * 3 + [False] * 5
    assert [_runs(cli, n) for n in names] == [1] * 8
    assert cli.json('stack', 'drift', 'c') == []
    assert cli.json('stack', 'resource', 'list', 'c', '-n', '3',
                    '--drift') == []


def test_observing_a_stack_costs_one_list_call_per_driver(cli, write):
    """However many servers: a drift pass asks the cloud once."""
    top = write('many.yaml', '''heat_template_version: 2018-08-31
resources:
  servers:
    type: OS::Heat::ResourceGroup
    properties:
      count: 40
      resource_def:
        type: OS::Nova::Server
        properties: {image: cirros, flavor: m1.tiny}
''')
    cli.run('stack', 'create', 'm', '-t', top, '--wait', timeout=240)
    calls = len(cli.json('sim', 'log'))
    cli.run('sim', 'server', 'stop', cli.json('sim', 'server', 'list')[0]
            ['ID'])
    calls = len(cli.json('sim', 'log'))
    drift = cli.json('stack', 'drift', 'm')
    assert [d['kind'] for d in drift] == ['changed']
    log = cli.json('sim', 'log')[calls:]
    assert [c['Op'] for c in log] == ['list'], log


def test_update_converge_reaches_an_unchanged_nested_stack(cli, write):
    """Heat's --converge: an update that changes nothing still repairs a
    nested stack's server deleted from outside; without it, an unchanged
    nested stack is left alone."""
    write('inner.yaml', '''heat_template_version: 2018-08-31
resources:
  server:
    type: OS::Nova::Server
    properties: {name: inner, image: cirros, flavor: m1.tiny}
''')
    outer = write('outer.yaml', '''heat_template_version: 2018-08-31
resources:
  box: {type: inner.yaml}
''')
    cli.run('stack', 'create', 'o', '-t', outer, '--wait')
    cli.run('sim', 'server', 'delete', 'inner')
    cli.run('stack', 'update', 'o', '--existing', '--wait')
    assert cli.json('sim', 'server', 'list') == []
    cli.run('stack', 'update', 'o', '--existing', '--converge', '--wait')
    [server] = cli.json('sim', 'server', 'list')
    assert (server['Name'], server['Status']) == ('inner', 'ACTIVE')
    assert cli.json('stack', 'show', 'o')['stack_status'] == \
        'UPDATE_COMPLETE'


def test_update_dry_run_is_three_way(cli, write):
    """What an update would do: the template against what was applied, and
    what was applied against what is there now, each with its reason."""
    top = write('flat.yaml', '''heat_template_version: 2018-08-31
parameters:
  word: {type: string, default: one}
resources:
  a: {type: OS::Nova::Server,
      properties: {name: fa, image: cirros, flavor: m1.tiny}}
  b: {type: OS::Nova::Server,
      properties: {name: fb, image: cirros, flavor: m1.tiny}}
  c: {type: OS::Nova::Server,
      properties: {name: fc, image: cirros, flavor: m1.tiny}}
  v: {type: OS::Heat::Value, properties: {value: {get_param: word}}}
''')
    cli.run('stack', 'create', 'f', '-t', top, '--wait')
    cli.run('sim', 'server', 'delete', 'fa')
    cli.run('sim', 'server', 'rebuild', 'fb', '--image', 'fedora')
    plan = cli.json('stack', 'update', 'f', '--existing', '--parameter',
                    'word=two', '--dry-run')
    seen = {kind: {i['resource_name']: (i['action'], i['reason'])
                   for i in items} for kind, items in plan.items()}
    assert seen == {
        'added': {}, 'deleted': {}, 'replaced': {},
        'unchanged': {'c': ('none', '')},
        'updated': {'a': ('create', 'observed: gone'),
                    'b': ('update',
                          'observed: changed: image fedora, not cirros'),
                    'v': ('update', 'template: value changed')}}
    # the update's change set: what changed, and what was seen drifted
    # (recorded by the dry run's look), not c
    visits = {i['resource_name']: i['visit_reason']
              for items in plan.values() for i in items if i['visit']}
    assert visits == {'a': 'drifted: gone',
                      'b': 'drifted: changed: image fedora, not cirros',
                      'v': 'changed: its definition'}
    # nothing was changed by looking
    assert sorted(s['Name'] for s in cli.json('sim', 'server', 'list')) == \
        ['fb', 'fc']
    # the update does what the dry run said
    cli.run('stack', 'update', 'f', '--existing', '--parameter', 'word=two',
            '--wait')
    after = {s['Name']: s for s in cli.json('sim', 'server', 'list',
                                            '--long')}
    assert sorted(after) == ['fa', 'fb', 'fc']
    assert {s['Image'] for s in after.values()} == {'cirros'}


CHECKED = '''heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::SoftwareComponent
    properties:
      configs:
        - actions: [CREATE]
          tool: script
          config: |
            #!/bin/sh
            echo ran >> runs.log
            touch installed
        - actions: [CHECK]
          tool: script
          config: |
            #!/bin/sh
            test -f installed || { echo "installed is missing" >&2; exit 3; }
  server:
    type: OS::Nova::Server
    properties:
      name: checked
      image: cirros
      flavor: m1.tiny
      user_data_format: SOFTWARE_CONFIG
  deployment:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config}
      server: {get_resource: server}
'''


@pytest.mark.long  # 20-30 s beside a busy machine
def test_a_deployment_whose_check_fails_is_run_again_by_converge(
        cli, write):
    """Its work undone on the server: the CHECK config finds it, converge
    runs the deployment's config again (once), and the next check
    passes."""
    cli.run('stack', 'create', 'k', '-t', write('k.yaml', CHECKED),
            '--wait', timeout=120)
    assert _runs(cli, 'checked') == 1
    disk = cli.json('sim', 'server', 'show', 'checked')['disk']
    os.remove(os.path.join(disk, 'installed'))   # behind its back

    proc = cli.run('stack', 'check', 'k', '--wait', check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    dep = cli.json('stack', 'resource', 'show', 'k', 'deployment')
    assert dep['resource_status'] == 'CHECK_FAILED'
    assert 'installed is missing' in dep['resource_status_reason'] or \
        'status code' in dep['resource_status_reason'], dep

    plan = cli.json('stack', 'converge', 'k', '--dry-run')
    assert [(p['resource_name'], p['action']) for p in plan] == \
        [('deployment', 're-run')], plan
    assert _runs(cli, 'checked') == 1   # a dry run runs nothing

    cli.run('stack', 'converge', 'k', '--wait', timeout=120)
    assert os.path.exists(os.path.join(disk, 'installed'))
    assert _runs(cli, 'checked') == 2
    # in sync again: the check passes, and ran nothing but itself
    cli.run('stack', 'check', 'k', '--wait')
    assert cli.json('stack', 'show', 'k')['stack_status'] == \
        'CHECK_COMPLETE'
    assert _runs(cli, 'checked') == 2

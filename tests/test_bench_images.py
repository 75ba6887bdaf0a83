"""converge-bench's tripleo servers on another image (issue 40): --image
and --transport, and each deployment's run count as the bench reports it,
read from the servers' disks. Nothing here runs a bench or asserts a
time (the runs themselves: docs/performance.md)."""

import subprocess
import sys

import pytest

from converge.bench import cli
from converge.bench import scenarios
from converge.bench import software


def _bench(*argv):
    return subprocess.run(
        [sys.executable, '-m', 'converge.bench.cli'] + list(argv),
        capture_output=True, text=True, timeout=120)


def test_heat_agents_needs_a_heat_transport():
    out = _bench('--scenario', 'tripleo', '--nodes', '2',
                 '--image', 'heat-agents')
    assert out.returncode == 2
    assert '--image heat-agents needs --transport' in out.stderr
    assert 'POLL_TEMP_URL' in out.stderr


def test_image_goes_with_the_tripleo_scenarios_only():
    out = _bench('--scenario', 'wide', '--n', '2', '--image', 'cirros')
    assert out.returncode == 2
    assert '--image and --transport go with the tripleo' in out.stderr
    out = _bench('--scenario', 'tripleo', '--nodes', '2', '--transport',
                 'POLL_ANYHOW')
    assert out.returncode == 2 and 'invalid choice' in out.stderr


def test_a_run_per_image_each_labelled():
    args = cli.parse_args(['--scenario', 'tripleo', '--nodes', '5', '20',
                           '--image', 'cirros', 'heat-agents',
                           '--transport', 'POLL_TEMP_URL'])
    assert cli.plan(args) == [('tripleo', 5, 'cirros'),
                              ('tripleo', 5, 'heat-agents'),
                              ('tripleo', 20, 'cirros'),
                              ('tripleo', 20, 'heat-agents')]
    # no --image: the scenario's own servers, as before
    args = cli.parse_args(['--scenario', 'tripleo', 'wide', '--n', '3'])
    assert cli.plan(args) == [('tripleo', 3, None), ('wide', 3, None)]
    sc = scenarios.make('tripleo', 3, image='heat-agents',
                        transport='POLL_SERVER_CFN')
    assert cli.label(sc) == 'tripleo@heat-agents/POLL_SERVER_CFN'
    assert cli.label(scenarios.make('tripleo', 3)) == 'tripleo'


def test_heat_agents_servers_poll_and_signal_with_heat_transports(tmp_path):
    written = scenarios.write('tripleo', 4, str(tmp_path),
                              image='heat-agents', transport='POLL_TEMP_URL')
    assert (written.image, written.transport) == ('heat-agents',
                                                  'POLL_TEMP_URL')
    assert len(written.deployment_names) == written.deployments == \
        4 * len(scenarios.PER_NODE_DEPLOYMENTS)
    res = written.bundle().template['resources']
    servers = [r['properties'] for r in res.values()
               if r['type'] == 'OS::Nova::Server']
    assert len(servers) == 4
    for props in servers:
        assert props['image'] == 'heat-agents'
        assert props['software_config_transport'] == 'POLL_TEMP_URL'
        # os-collect-config polls more often than its own 30 s
        assert props['metadata']['os-collect-config'] == {
            'polling_interval': scenarios.POLLING_INTERVAL}
    deployments = [r['properties'] for r in res.values()
                   if r['type'] == 'OS::Heat::SoftwareDeployment']
    assert {d['signal_transport'] for d in deployments} == {
        'TEMP_URL_SIGNAL'}
    # heat-config runs scripts in the root's /, a tmpfs: they write where
    # the disk keeps it
    scripts = [r['properties']['config'] for r in res.values()
               if r['type'] == 'OS::Heat::SoftwareConfig'
               and r['properties']['group'] == 'script']
    for body in scripts:
        text = body if isinstance(body, str) else \
            body['str_replace']['template']
        assert text.splitlines()[:2] == ['#!/bin/sh', 'cd /var/lib || exit 1']
    # the default servers are unchanged
    plain = scenarios.make('tripleo', 4).doc['resources']
    assert plain['Compute0']['properties']['image'] == 'overcloud-full'
    assert 'software_config_transport' not in plain['Compute0']['properties']
    assert 'cd ' not in plain['ComputeConfig']['properties']['config'][
        'str_replace']['template']


def _disks(tmp_path, converge_agent, heat_agents):
    """Disks of servers that wrote the runs given: converge-agent's on
    the disk, heat-agents' under rootfs/var/lib (as each really does)."""
    disks = tmp_path / 'disks'
    for where, servers in ((scenarios.RUNS_LOGS[0], converge_agent),
                           (scenarios.RUNS_LOGS[1], heat_agents)):
        for server, lines in servers.items():
            log = disks / server / where
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(''.join(line + '\n' for line in lines))
    return str(disks)


def test_each_deployment_ran_once_from_either_kind_of_disk(tmp_path):
    names = ['A1Deployment', 'A2Deployment', 'B1Deployment']
    disks = _disks(tmp_path, {'s1': ['A1Deployment CREATE',
                                     'A2Deployment CREATE']},
                   {'s2': ['B1Deployment CREATE']})
    row = software.ran(software.runs(disks), 3, 2.0, names)
    assert row['exactly_once'] == 'yes'
    assert row['deployment_runs'] == dict.fromkeys(names, 1)
    assert row['run_counts'] == {'1': 3}
    assert row['script_runs'] == 3 and row['runs_per_s'] == 1.5
    table = cli.table([dict(row, label='tripleo', status='ok')])
    head, line = table.splitlines()
    assert 'runs_each' in head.split()
    assert '1x3' in line.split() and 'yes' in line.split()


def test_a_deployment_run_twice_or_never_is_reported(tmp_path):
    names = ['A1Deployment', 'A2Deployment', 'B1Deployment']
    disks = _disks(tmp_path, {}, {
        's1': ['A1Deployment CREATE', 'A1Deployment CREATE'],
        's2': ['B1Deployment CREATE', 'B1Deployment UPDATE']})
    row = software.ran(software.runs(disks), 3, 1.0, names)
    assert row['deployment_runs'] == {'A1Deployment': 2, 'A2Deployment': 0,
                                      'B1Deployment': 1}
    assert row['run_counts'] == {'0': 1, '1': 1, '2': 1}
    assert row['run_counts_text'] == '0x1,1x1,2x1'
    assert row['exactly_once'].startswith('NO: 2 of 3 not once')
    assert 'A1Deployment ran 2' in row['exactly_once']
    assert 'A2Deployment ran 0' in row['exactly_once']


def test_heat_config_records_are_counted(tmp_path):
    disks = tmp_path / 'disks'
    assert software.heat_config_deployed(str(disks)) is None
    for server, ids in (('s1', ['a', 'b']), ('s2', ['c'])):
        deployed = disks / server / software.DEPLOYED
        deployed.mkdir(parents=True)
        for i in ids:
            (deployed / (i + '.json')).write_text('{}')
            (deployed / (i + '.notify.json')).write_text('{}')
    (disks / 's3').mkdir()   # a converge-agent server: none
    assert software.heat_config_deployed(str(disks)) == 3


@pytest.mark.parametrize('transport,signal', sorted(
    scenarios.TRANSPORTS.items()))
def test_each_transport_signals_with_its_pair(transport, signal):
    doc = scenarios.tripleo_doc(1, image='heat-agents', transport=transport)
    signals = {r['properties']['signal_transport']
               for r in doc['resources'].values()
               if r['type'] == 'OS::Heat::SoftwareDeployment'}
    assert signals == {signal}

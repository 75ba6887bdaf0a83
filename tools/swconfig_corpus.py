#!/usr/bin/env python
"""Heat's software-config examples of the corpus (heat-templates'
hot/software-config/example-templates), converged on the simulated cloud
for each image and transport, their outputs checked (issue 40).

A column is an image and a transport pair:

- ``heat-agents/TEMP_URL``: image heat-agents (Heat's own os-collect-config,
  os-refresh-config, os-apply-config and heat-config hooks in the server's
  root), ``POLL_TEMP_URL`` + ``TEMP_URL_SIGNAL``;
- ``heat-agents/CFN``: the same, ``POLL_SERVER_CFN`` + ``CFN_SIGNAL``;
- ``heat-agents/HEAT``: ``POLL_SERVER_HEAT`` + ``HEAT_SIGNAL``, which needs
  a Keystone: ``--config-file`` naming a converge.conf with ``[trustee]``,
  ``[api] auth_strategy = keystone`` and a fixed ``bind_port``, and
  ``[cloud] region_name`` naming a region whose ``orchestration`` endpoint
  is that port (the servers find converge-api in the catalog):
  tests/realcloud.py ``home_in_catalog`` writes one for the devcloud;
  without ``--config-file`` the column is skipped;
- ``cirros``: image cirros (converge-agent), the templates' transports as
  published (none named: converge's own).

For a heat-agents column the tool writes the transports into the template
(every server's ``software_config_transport``, every deployment's
``signal_transport`` but NO_SIGNAL), as an operator sets Heat's
``default_software_config_transport``, and names the os-apply-config
examples' group ``apply-config``, heat-agents' hook for it (with group
``os-apply-config`` heat-config runs nothing and signals nothing: that
was tripleo-image-elements' 99-refresh-completed, which no heat-agents
image has; the deployment waits until the stack times out, in Heat as
here). The parameters (image, flavor, key, network) it gives. The
corpus leaves out ``example-script.sh`` (code): a stand-in does what
Heat's does and logs each run in /tmp/runs.log. The
deployment group example, published with NO_SIGNAL and no inputs (Heat
shows no outputs for it), is given its inputs and signals.

Each example is a stack in an embedded home of its own (``converge stack
create --wait``; deleted afterwards in the heat-agents/HEAT column, so
its servers' Keystone users go), then checked: the stack's outputs (``stack output
show``), each deployment's (``software deployment output show``), and
each hook ran once (the files it wrote on the server's disk; heat-config's
``deployed`` records, converge-agent's journal). Prints a markdown table
(template x column -> outcome), the one kept in docs/software.md:

    python tools/swconfig_corpus.py [--column C ...] [--only NAME ...]
        [--config-file converge.conf] [--keep DIR] [--json]
"""

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.environ.get('CONVERGE_CORPUS') or os.path.join(
    HERE, '..', '..', 'shared', 'corpus', 'hot')
EXAMPLES = os.path.join(CORPUS, 'heat-templates', 'hot', 'software-config',
                        'example-templates')

#: column -> (image, software_config_transport, signal_transport)
COLUMNS = {
    'heat-agents/TEMP_URL': ('heat-agents', 'POLL_TEMP_URL',
                             'TEMP_URL_SIGNAL'),
    'heat-agents/CFN': ('heat-agents', 'POLL_SERVER_CFN', 'CFN_SIGNAL'),
    'heat-agents/HEAT': ('heat-agents', 'POLL_SERVER_HEAT', 'HEAT_SIGNAL'),
    'cirros': ('cirros', None, None),
}

# The corpus leaves example-script.sh out: this does what Heat's does
# (its inputs to a file in /tmp, the file's content as output `result`,
# a line on stderr), and logs the run
EXAMPLE_SCRIPT = '''#!/bin/sh
echo "$deploy_resource_name $deploy_action" >> /tmp/runs.log
echo "Writing to /tmp/$bar"
echo "$foo" > "/tmp/$bar"
printf '%s' "The file /tmp/$bar contains $(cat "/tmp/$bar") for server \
$deploy_server_id during $deploy_action" > "$heat_outputs_path.result"
echo "Written to /tmp/$bar"
echo "Output to stderr" 1>&2
'''

# no Neutron security groups in the simulated cloud: a stand-in
ENV = '''resource_registry:
  OS::Neutron::SecurityGroup: OS::Heat::None
'''

SERVER_TYPES = ('OS::Nova::Server',)
CONFIG_TYPES = ('OS::Heat::SoftwareConfig', 'OS::Heat::StructuredConfig')
DEPLOYMENT_TYPES = ('OS::Heat::SoftwareDeployment',
                    'OS::Heat::StructuredDeployment',
                    'OS::Heat::SoftwareDeploymentGroup',
                    'OS::Heat::StructuredDeploymentGroup',
                    'OS::Heat::SoftwareDeployments',
                    'OS::Heat::StructuredDeployments')


def _has(text):
    return lambda v: isinstance(v, str) and text in v


def _is(value):
    return lambda v: v == value


def _each(check):
    return lambda v: isinstance(v, dict) and sorted(v) == ['0', '1'] and \
        all(check(x) for x in v.values())


#: name -> what to run and what to find. `outputs`: stack output ->
#: check; `deployment`: a deployment resource whose outputs `software
#: deployment output show` must answer; `files`: a file of each server's
#: disk -> its content; `runs`: hook runs recorded in all (a hook-less
#: group runs nothing)
EXAMPLES_RUN = {
    'script': {
        'template': 'example-script-template.yaml', 'hook': 'script',
        'outputs': {
            'result': _has('The file /tmp/baaaaa contains fooooo for '
                           'server '),
            'stdout': _is('Writing to /tmp/baaaaa\n'
                          'Written to /tmp/baaaaa\n'),
            'stderr': _is('Output to stderr\n'),
            'status_code': _is(0),
            'other_result': _has('The file /tmp/barmy contains fu ')},
        'deployment': ('deployment', 'result'),
        'files': {'tmp/runs.log': ['deployment CREATE',
                                   'other_deployment CREATE']},
        'runs': 2},
    'os-apply-config': {
        'template': 'example-os-apply-config.yaml',
        'hook': 'os-apply-config',
        'outputs': {'deployment_status': _is(0)},
        'deployment': ('deployment', 'deploy_status_code'),
        'runs': 1},
    'os-apply-config+cloud-config': {
        'template': 'example-os-apply-config-plus-cloud-config.yaml',
        'hook': 'os-apply-config',
        'outputs': {'deployment_status': _is(0)},
        'deployment': ('deployment', 'deploy_status_code'),
        'runs': 1},
    'ansible': {
        'template': 'example-ansible-template.yaml', 'hook': 'ansible',
        'outputs': {
            'result': _is('The file /tmp/baaaaa contains fooooo\n'),
            'stdout': _has('PLAY RECAP'),
            'status_code': _is(0),
            'other_result': _is('The file /tmp/barmy contains fu\n')},
        'deployment': ('deployment', 'result'),
        'files': {'tmp/baaaaa': ['fooooo'], 'tmp/barmy': ['fu']},
        'runs': 2},
    'deployment-group': {
        'template': 'example-software-deploymentgroup-template.yaml',
        'hook': 'ansible',
        'outputs': {
            'result': _each(_is('The file /tmp/baaaaa contains fooooo\n')),
            'stdout': _each(_has('PLAY RECAP')),
            'status_code': _each(_is(0))},
        'files': {'tmp/baaaaa': ['fooooo']},
        'runs': 2},
    'deploy-sequence': {
        'template': 'example-deploy-sequence.yaml', 'hook': 'script',
        'outputs': {
            'deployment_a_stdout': _has('Previous: NONE\ndeployment_a is '
                                        'running on '),
            'deployment_b_stdout': _has('Previous: Previous: NONE\n'),
            'deployment_c_stdout': _has('Previous: deployment_b\n'
                                        'deployment_c is running on ')},
        'deployment': ('deployment_c', 'deploy_stdout'),
        'runs': 3},
    'cirros-hello-world': {
        'template': 'cirros-example/cirros-hello-world.yaml',
        'hook': 'script',
        'outputs': {'deploy_output': _is('Hello, world!\n')},
        'deployment': ('sd', 'file_content'),
        'runs': 1},
    'sw-component': {
        'template': 'example-sw-component-template.yaml',
        'hook': 'component (script)',
        'outputs': {},
        'deployment': ('sw_deployment', 'last_action'),
        'runs': 1},
    'structured (no hook)': {
        'template': 'example-structured-template.yaml',
        'hook': '(none: Heat::Ungrouped)',
        'outputs': {}, 'runs': 0},
}

#: minutes a stack may take
TIMEOUT = 8

#: what the tests and the table run by default
DEFAULT = ('script', 'os-apply-config', 'os-apply-config+cloud-config',
           'ansible', 'deployment-group', 'deploy-sequence',
           'cirros-hello-world', 'sw-component', 'structured (no hook)')


def parameters(template, image):
    """The parameters the template declares, given as the simulated
    cloud has them."""
    given = {'key_name': 'demo-key', 'flavor': 'm1.small',
             'network': 'private'}
    out = {}
    for name in template.get('parameters') or {}:
        if name == 'image' or name.endswith('_image'):
            out[name] = image
        elif name in given:
            out[name] = given[name]
    return out


def rewrite(template, name, transport, signal):
    """The template as the column runs it (see the module's doc)."""
    for res in (template.get('resources') or {}).values():
        props = res.setdefault('properties', {})
        if res.get('type') in SERVER_TYPES and transport:
            props['software_config_transport'] = transport
        if res.get('type') in DEPLOYMENT_TYPES:
            if name == 'deployment-group':
                props.pop('signal_transport', None)
                props['input_values'] = {'foo': 'fooooo', 'bar': 'baaaaa'}
            if signal and props.get('signal_transport') != 'NO_SIGNAL':
                props['signal_transport'] = signal
        if res.get('type') in CONFIG_TYPES and transport and \
                props.get('group') == 'os-apply-config':
            # heat-agents' hook for it is `apply-config`: its 55-heat-config
            # skips group os-apply-config and signals nothing (only
            # tripleo-image-elements' 99-refresh-completed did), so the
            # deployment would wait for ever, in Heat as here
            props['group'] = 'apply-config'
    return template


class Home:
    """`converge` in a subprocess against an embedded home of its own."""

    def __init__(self, home, config_files=()):
        self.home = home
        self.config = []
        for path in config_files:
            self.config += ['--config-file', os.path.abspath(path)]

    def run(self, *args, timeout=900):
        env = dict(os.environ)
        env.pop('CONVERGE_HOME', None)
        return subprocess.run(
            [sys.executable, '-m', 'converge.cmd.cli', '--home', self.home]
            + self.config + list(args), capture_output=True, text=True,
            env=env, timeout=timeout)

    def json(self, *args, **kw):
        done = self.run(*(list(args) + ['-f', 'json']), **kw)
        if done.returncode:
            raise Failed('converge %s: %s' % (' '.join(args), (
                done.stderr or done.stdout).strip()[-600:]))
        return json.loads(done.stdout)

    def yaml(self, *args, **kw):
        """What a command that answers YAML only (as OSC's `software
        deployment output show`) printed."""
        done = self.run(*args, **kw)
        if done.returncode:
            raise Failed('converge %s: %s' % (' '.join(args), (
                done.stderr or done.stdout).strip()[-600:]))
        return yaml.safe_load(done.stdout) or {}

    def stop(self):
        disks = os.path.join(self.home, 'sim-disks')
        if os.path.isdir(disks):
            from converge.drivers.sim import agents
            agents.shutdown('sqlite:///%s' % os.path.join(
                self.home, 'sim.db'), disks)


class Failed(Exception):
    pass


def recorded_runs(disk):
    """The hook runs a server's disk records: heat-config's (one
    ``deployed/<id>.notify.json`` per run it signalled, one
    ``<id>.json`` per run) and converge-agent's journal (one file per
    run, `done`)."""
    deployed = glob.glob(os.path.join(
        disk, 'rootfs', 'var', 'lib', 'heat-config', 'deployed', '*.json'))
    runs = [p for p in deployed if not p.endswith('.notify.json')]
    for path in glob.glob(os.path.join(disk, '**', 'journal', '*', '*.json'),
                          recursive=True):
        try:
            with open(path) as f:
                if json.load(f).get('state') == 'done':
                    runs.append(path)
        except (OSError, ValueError):
            pass
    return len(runs)


def run_one(name, column, work, config_files=()):
    """Converge example `name` in column `column` under directory `work`;
    (outcome, detail): 'ok', or 'FAILED' and what was wrong."""
    spec = EXAMPLES_RUN[name]
    image, transport, signal = COLUMNS[column]
    src = os.path.join(work, 'example')
    shutil.copytree(EXAMPLES, src)
    with open(os.path.join(src, 'config-scripts', 'example-script.sh'),
              'w') as f:
        f.write(EXAMPLE_SCRIPT)
    with open(os.path.join(src, 'env.yaml'), 'w') as f:
        f.write(ENV)
    path = os.path.join(src, spec['template'])
    with open(path) as f:
        template = yaml.safe_load(f)
    params = parameters(template, image)
    rewrite(template, name, transport, signal)
    path = path[:-len('.yaml')] + '.run.yaml'
    with open(path, 'w') as f:
        yaml.safe_dump(template, f, sort_keys=False)
    cli = Home(os.path.join(work, 'home'), config_files)
    try:
        return _check(cli, spec, path, src, params)
    except Failed as e:
        return 'FAILED', str(e)
    except subprocess.TimeoutExpired as e:
        return 'FAILED', 'timed out: %s' % e
    finally:
        if transport == 'POLL_SERVER_HEAT':
            # its servers' Keystone users go with the stack
            cli.run('stack', 'delete', 's', '--yes', '--wait')
        cli.stop()


def _check(cli, spec, path, src, params):
    # a deployment whose signal never comes fails the stack in minutes
    args = ['stack', 'create', 's', '-t', path, '-e',
            os.path.join(src, 'env.yaml'), '--timeout', str(TIMEOUT),
            '--wait']
    for k, v in params.items():
        args += ['--parameter', '%s=%s' % (k, v)]
    done = cli.run(*args)
    shown = cli.json('stack', 'show', 's')
    if shown['stack_status'] != 'CREATE_COMPLETE':
        raise Failed('%s: %s' % (shown['stack_status'],
                                 shown.get('stack_status_reason')))
    problems = []
    outputs = cli.json('stack', 'output', 'show', 's', '--all')
    for key, check in spec['outputs'].items():
        if not check(outputs.get(key)):
            problems.append('output %s = %r' % (key, outputs.get(key)))
    if spec.get('deployment'):
        resource, output = spec['deployment']
        dep = cli.json('stack', 'resource', 'show', 's', resource)
        got = cli.yaml('software', 'deployment', 'output', 'show',
                       dep['physical_resource_id'], '--all')
        attrs = dep['attributes']
        if output not in attrs or attrs[output] in (None, ''):
            problems.append('%s has no %s: %r' % (resource, output, attrs))
        elif not _same((got.get('output_values') or {}).get(output),
                       attrs[output]):
            problems.append('software deployment output show %s: %r, the '
                            'resource %r' % (resource, got, attrs[output]))
    disks = [cli.json('sim', 'server', 'show', s['ID'])['disk']
             for s in cli.json('sim', 'server', 'list')]
    for rel, lines in spec.get('files', {}).items():
        for disk in disks:
            try:
                with open(os.path.join(disk, rel)) as f:
                    found = sorted(f.read().splitlines())
            except OSError as e:
                found = str(e)
            if found != sorted(lines):
                problems.append('%s on %s: %r' % (rel, os.path.basename(
                    disk), found))
    runs = sum(recorded_runs(d) for d in disks)
    if runs != spec['runs']:
        problems.append('%d hook runs recorded, %d expected' % (
            runs, spec['runs']))
    if problems:
        raise Failed('; '.join(problems))
    del done
    return 'ok', ''


def _same(shown, value):
    """The CLI shows a string output without its trailing newline."""
    if isinstance(value, str) and isinstance(shown, str):
        return shown.rstrip() == value.rstrip()
    return shown == value


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--column', action='append', choices=list(COLUMNS))
    parser.add_argument('--only', action='append',
                        choices=list(EXAMPLES_RUN))
    parser.add_argument('--config-file', action='append', default=[],
                        help='converge.conf of the engine (its [trustee] '
                        'runs the heat-agents/HEAT column)')
    parser.add_argument('--keep', help='keep the work here')
    parser.add_argument('--json', action='store_true')
    args = parser.parse_args(argv)
    if not os.path.isdir(EXAMPLES):
        print('no corpus at %s' % EXAMPLES, file=sys.stderr)
        return 2
    columns = args.column or [c for c in COLUMNS if c != 'heat-agents/HEAT'
                              or args.config_file]
    names = args.only or list(DEFAULT)
    base = args.keep or tempfile.mkdtemp(prefix='swconfig-corpus-')
    results = {}
    for name in names:
        for column in columns:
            work = os.path.join(base, '%s--%s' % (
                name.replace(' ', '_').replace('(', '').replace(')', ''),
                column.replace('/', '_')))
            os.makedirs(work)
            results[name, column] = run_one(name, column, work,
                                            args.config_file)
            print('%s on %s: %s %s' % (name, column, *results[name, column]),
                  file=sys.stderr, flush=True)
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps({'%s|%s' % k: v for k, v in results.items()},
                         indent=1))
    else:
        print(table(results, names, columns))
    return 0 if all(o == 'ok' for o, _ in results.values()) else 1


def table(results, names, columns):
    lines = ['| example (hook) | ' + ' | '.join(columns) + ' |',
             '|---' * (len(columns) + 1) + '|']
    for name in names:
        cells = []
        for column in columns:
            outcome, detail = results[name, column]
            cells.append(outcome if not detail else '%s: %s' % (
                outcome, detail.replace('|', '\\|')[:300]))
        lines.append('| %s (%s) | %s |' % (
            name, EXAMPLES_RUN[name]['hook'], ' | '.join(cells)))
    return '\n'.join(lines)


if __name__ == '__main__':
    sys.exit(main())

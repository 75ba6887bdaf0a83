"""Write a config-download plan (engine/configdl.py) as files Ansible
runs: an inventory, playbooks per step and role, and the module that
runs a deployment once on its host. The layout is ansible-runner's
(``private_data_dir``), so `converge deployment run` and a plain
``ansible-playbook`` both run it::

    DIR/inventory/hosts.yaml        hosts by role, where each is reached
    DIR/inventory/host_vars/H.json  converge_deployments: each deployment
                                    of host H (its derived config, run
                                    key; JSON, base64: not templated)
    DIR/project/deploy.yaml         every step, in order
    DIR/project/stepN.yaml          step N: each role's playbook
    DIR/project/stepN_ROLE.yaml     a play per deployment of ROLE at step N
    DIR/project/library/converge_deployment.py
    DIR/project/ansible.cfg
    DIR/plan.json                   the plan itself (what `run` reads)

Where a host is reached: the simulator's host of its name (`converge sim
host create`: 127.0.0.1, its port, root, converge's key), else its
metadata's ``ansible_host``/``ansible_port``/``ansible_user``, else its
name. A deployment group's rolling policy (``batch_create`` on CREATE,
``rolling_update`` on UPDATE) becomes its play's ``serial``
(max_batch_size) and ``max_fail_percentage: 0`` (a failed member ends the
rollout after its batch, as converge's own rollout does), and
``pause_time`` a pause after each batch.
"""

import base64
import json
import os
import re
import shutil
import sys

import yaml

from converge.agent import sshhost

LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       'library', 'converge_deployment.py')
SSH_ARGS = '-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'


def _slug(text):
    return re.sub(r'[^A-Za-z0-9_.-]+', '_', str(text)) or '_'


def _key(dep):
    """A deployment resource's name in a host's converge_deployments."""
    return '%s/%s' % (dep['stack_id'][:8], dep['resource'])


def _address(host, hosts_dir, key):
    sim = sshhost.record(hosts_dir, host['name']) if hosts_dir else None
    if sim is not None:
        found = {'ansible_host': sim['address'],
                 'ansible_port': sim['port'],
                 'ansible_user': sim['user'],
                 'converge_disk': sim['disk'],
                 # the ansible hook in a simulated host's root runs the
                 # controller's ansible-playbook (bound read-only there)
                 'converge_ansible_playbook': shutil.which(
                     'ansible-playbook') or os.path.join(
                     os.path.dirname(sys.executable), 'ansible-playbook')}
        if key:
            found['ansible_ssh_private_key_file'] = key
        return found
    meta = host.get('metadata') or {}
    found = {'ansible_host': meta.get('ansible_host') or host['name']}
    for name in ('ansible_port', 'ansible_user'):
        if meta.get(name):
            found[name] = meta[name]
    if key:
        found['ansible_ssh_private_key_file'] = key
    return found


def write(plan, directory, hosts_dir=None, key=None):
    """Write `plan` under `directory`; the playbooks' paths by step."""
    project = os.path.join(directory, 'project')
    inventory = os.path.join(directory, 'inventory')
    for sub in (os.path.join(project, 'library'),
                os.path.join(inventory, 'host_vars')):
        os.makedirs(sub, exist_ok=True)
    for old in os.listdir(project):   # an earlier export's steps
        if old.startswith('step') and old.endswith('.yaml'):
            os.unlink(os.path.join(project, old))
    for old in os.listdir(os.path.join(inventory, 'host_vars')):
        os.unlink(os.path.join(inventory, 'host_vars', old))
    shutil.copy(LIBRARY, os.path.join(project, 'library'))
    with open(os.path.join(project, 'ansible.cfg'), 'w') as f:
        f.write('[defaults]\nlibrary = %s\nhost_key_checking = False\n'
                'retry_files_enabled = False\ninterpreter_python = '
                'auto_silent\n\n[ssh_connection]\npipelining = True\n'
                % os.path.join(project, 'library'))

    names = {}   # server id -> inventory name (unique)
    roles = {}
    host_vars = {}
    for host in plan['hosts']:
        name = _slug(host['name'])
        while name in host_vars:
            name += '_'
        names[host['server_id']] = name
        host_vars[name] = {'converge_server_id': host['server_id'],
                           'converge_deployments': {}}
        roles.setdefault(_slug(host['role']), {})[name] = _address(
            host, hosts_dir, key)
    with open(os.path.join(inventory, 'hosts.yaml'), 'w') as f:
        yaml.safe_dump({'all': {
            'vars': {'ansible_ssh_common_args': SSH_ARGS},
            'children': {role: {'hosts': hosts}
                         for role, hosts in sorted(roles.items())}}}, f,
            default_flow_style=False)

    plays = {}   # (step, role) -> {deployment key: play}
    for dep in plan['deployments']:
        host = names[dep['server_id']]
        key_ = _key(dep)
        # encoded: Ansible would template a config's own "{{ ... }}"
        # (an ansible config's variables) when it reads the value
        host_vars[host]['converge_deployments'][key_] = base64.b64encode(
            json.dumps(dep['deployment'], sort_keys=True).encode(
                'utf-8')).decode('ascii')
        role = _slug(dep['role'])
        play = plays.setdefault((dep['step'], role), {}).get(key_)
        if play is None:
            play = {'name': 'step %d %s: %s (%s)' % (
                        dep['step'], role, dep['resource'],
                        dep['deployment'].get('name') or ''),
                    'hosts': [], 'gather_facts': False,
                    'tasks': [{
                        'name': '%s %s' % (dep['resource'],
                                           dep['deployment']['action']),
                        'converge_deployment': {
                            'deployment': "{{ converge_deployments['%s'] }}"
                                          % key_,
                            'disk': "{{ converge_disk | default("
                                    "'/var/lib/converge') }}",
                            'ansible_playbook': "{{ converge_ansible_playbook"
                                                " | default(omit) }}"}}]}
            policy = dep.get('policy')
            if policy:
                play['serial'] = policy['max_batch_size']
                play['max_fail_percentage'] = 0
                if policy['pause_time']:
                    play['tasks'].append({
                        'name': 'pause between batches',
                        'ansible.builtin.pause': {
                            'seconds': int(policy['pause_time'])},
                        'run_once': True})
            plays[(dep['step'], role)][key_] = play
        play['hosts'].append(host)
    for host, values in host_vars.items():
        with open(os.path.join(inventory, 'host_vars', host + '.json'),
                  'w') as f:
            json.dump(values, f, indent=1, sort_keys=True)

    steps = {}
    for (step, role), found in sorted(plays.items()):
        path = 'step%d_%s.yaml' % (step, role)
        with open(os.path.join(project, path), 'w') as f:
            yaml.safe_dump(list(found.values()), f, default_flow_style=False,
                           sort_keys=False)
        steps.setdefault(step, []).append(path)
    for step, paths in steps.items():
        with open(os.path.join(project, 'step%d.yaml' % step), 'w') as f:
            yaml.safe_dump([{'import_playbook': p} for p in paths], f,
                           default_flow_style=False)
    with open(os.path.join(project, 'deploy.yaml'), 'w') as f:
        yaml.safe_dump([{'import_playbook': 'step%d.yaml' % s}
                        for s in sorted(steps)] or
                       [{'hosts': 'localhost', 'gather_facts': False,
                         'tasks': []}], f, default_flow_style=False)
    with open(os.path.join(directory, 'plan.json'), 'w') as f:
        json.dump(dict(plan, inventory_names=names, steps={
            str(s): p for s, p in steps.items()}), f, indent=1,
            sort_keys=True, default=str)
    return {s: ['step%d.yaml' % s] + p for s, p in sorted(steps.items())}

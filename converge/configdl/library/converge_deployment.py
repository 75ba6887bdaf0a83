#!/usr/bin/python
"""Ansible module: run one converge deployment on this host, once.

Shipped by `converge deployment export` (the playbooks' ``library``) and
run by Ansible on the target, with the target's Python: it imports
nothing of converge's. It keeps the agent's journal, in the same format
and place (``<disk>/journal/<id>/<action>-<run>.json``, docs/software.md
"Exactly once"), so a deployment runs once per (id, action, run) however
often the playbook is run, whoever ran it:

- an entry ``done``: nothing runs; the journalled result is returned
  (``changed: false``);
- an entry ``started`` but not done (the host, sshd or the run died
  while the hook ran): nothing runs; the result is the agent's
  "interrupted" one (``changed: false``);
- no entry: ``started`` is journalled, the hook runs, ``done`` and its
  result are journalled (``changed: true``).

Hooks, as the agent's (Heat's contracts): ``script`` and
``Heat::Ungrouped`` (inputs in the environment, outputs read from
``${heat_outputs_path}.NAME``), ``ansible`` (the config as a playbook,
run locally with ``ansible-playbook`` where the host has it). Another
group is a result with ``deploy_status_code`` 1 naming it.
"""

import base64
import json
import os
import re
import shutil
import subprocess
import tempfile

from ansible.module_utils.basic import AnsibleModule

INTERRUPTED = 'interrupted: the agent stopped while the hook ran'
_SAFE = re.compile(r'^[A-Za-z0-9_.:-]{1,200}$')
#: what of a hook's stdout and stderr is kept (its end)
TRIM = 900 * 1024


def _safe(what, value):
    if not isinstance(value, str) or not _SAFE.match(value) or \
            value in ('.', '..'):
        raise ValueError('deployment %s %r cannot name a journal file'
                         % (what, value))
    return value


# journal.write_atomically of the agent, again: this file runs on the host,
# where converge is not installed
def _write(path, data):
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix='.tmp-')
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _put(path, entry):
    _write(path, json.dumps(entry, sort_keys=True).encode('utf-8'))
    return entry


def _env_value(value):
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return '' if value is None else str(value)


def _trim(data):
    return data[-TRIM:].decode('utf-8', 'replace')


def _outputs(base, names):
    found = {}
    for name in names:
        if '/' in name:
            continue
        try:
            with open('%s.%s' % (base, name), 'rb') as f:
                found[name] = f.read(TRIM).decode('utf-8', 'replace')
        except OSError:
            pass
    return found


def _run(argv, cwd, env):
    try:
        done = subprocess.run(argv, cwd=cwd, env=env,
                              stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as e:
        return {'deploy_stdout': '', 'deploy_stderr': str(e),
                'deploy_status_code': 1}
    return {'deploy_stdout': _trim(done.stdout),
            'deploy_stderr': _trim(done.stderr),
            'deploy_status_code': done.returncode}


def _inputs(dep):
    return {i['name']: i.get('value') for i in dep.get('inputs') or []
            if isinstance(i, dict) and i.get('name')}


def _output_names(dep):
    return [o['name'] for o in dep.get('outputs') or []
            if isinstance(o, dict) and o.get('name')]


def hook_script(dep, disk, ansible_playbook=None):
    folder = os.path.join(disk, 'heat-config-script')
    outdir = os.path.join(disk, 'heat-config-script-outputs')
    os.makedirs(folder, exist_ok=True)
    os.makedirs(outdir, exist_ok=True)
    script = os.path.join(folder, dep['id'])
    config = dep.get('config')
    if not isinstance(config, str):
        config = json.dumps(config)
    with open(script, 'w') as f:
        f.write(config)
    os.chmod(script, 0o700)
    base = os.path.join(outdir, dep['id'])
    names = _output_names(dep)
    for name in names:   # stale ones first
        try:
            os.unlink('%s.%s' % (base, name))
        except OSError:
            pass
    env = dict(os.environ)
    for key, value in _inputs(dep).items():
        env[key] = _env_value(value)
    env['heat_outputs_path'] = base
    result = _run([script], disk, env)
    result.update(_outputs(base, names))
    return result


def hook_ansible(dep, disk, ansible_playbook=None):
    tool = shutil.which('ansible-playbook') or ansible_playbook
    if not tool or not os.path.exists(tool):
        return {'deploy_stdout': '', 'deploy_status_code': 1,
                'deploy_stderr': 'ansible-playbook is not installed on '
                                 'this host: the ansible hook cannot run'}
    folder = os.path.join(disk, 'heat-config-ansible')
    os.makedirs(folder, exist_ok=True)
    playbook = os.path.join(folder, '%s_playbook.yaml' % dep['id'])
    variables = os.path.join(folder, '%s_variables.json' % dep['id'])
    base = os.path.join(disk, 'heat-config-ansible-outputs', dep['id'])
    os.makedirs(os.path.dirname(base), exist_ok=True)
    config = dep.get('config')
    with open(playbook, 'w') as f:
        f.write(config if isinstance(config, str) else json.dumps(config))
    values = dict(_inputs(dep), heat_config_id=dep['id'],
                  heat_outputs_path=base)
    with open(variables, 'w') as f:
        json.dump(values, f)
    env = dict(os.environ, ANSIBLE_HOME=os.path.join(folder, '.ansible'))
    result = _run([tool, '-i', 'localhost,', '--connection=local', playbook,
                   '--extra-vars', '@' + variables], folder, env)
    result.update(_outputs(base, _output_names(dep)))
    return result


HOOKS = {'script': hook_script, 'Heat::Ungrouped': hook_script,
         'ansible': hook_ansible}


def main():
    module = AnsibleModule(argument_spec={
        # the deployment's document, JSON in base64 (so that Ansible does
        # not template what an ansible config holds)
        'deployment': {'type': 'str', 'required': True},
        'disk': {'type': 'str', 'default': '/var/lib/converge'},
        # where the host has ansible-playbook, when not on its PATH (a
        # simulated host: the controller's, bound read-only in its root)
        'ansible_playbook': {'type': 'str', 'required': False},
    }, supports_check_mode=False)
    try:
        dep = json.loads(base64.b64decode(module.params['deployment']))
    except ValueError as e:
        module.fail_json(msg='deployment is not base64 JSON: %s' % e)
    disk = module.params['disk']
    try:
        path = os.path.join(disk, 'journal', _safe('id', dep.get('id')),
                            '%s-%s.json' % (_safe('action', dep.get('action')),
                                            _safe('run', dep.get('run'))))
    except ValueError as e:
        module.fail_json(msg=str(e))
    ident = {'id': dep['id'], 'action': dep['action'], 'run': dep['run']}
    try:
        with open(path, 'rb') as f:
            entry = json.loads(f.read().decode('utf-8'))
    except FileNotFoundError:
        entry = None
    if entry is not None:
        if entry.get('state') != 'done':
            entry = _put(path, dict(entry, state='done', result={
                'deploy_stdout': '', 'deploy_stderr': INTERRUPTED,
                'deploy_status_code': -1,
                'deploy_status_reason': INTERRUPTED}))
        _finish(module, False, dict(ident, result=entry['result'],
                                    ran=False))
    entry = _put(path, dict(ident, name=dep.get('name'), state='started',
                            acked=False))
    hook = HOOKS.get(dep.get('group') or 'Heat::Ungrouped')
    if hook is None:
        result = {'deploy_stdout': '', 'deploy_status_code': 1,
                  'deploy_stderr': 'no hook for group %r on this host '
                                   '(config-download runs script and '
                                   'ansible configs)' % dep.get('group')}
    else:
        os.makedirs(disk, exist_ok=True)
        result = hook(dep, disk, module.params.get('ansible_playbook'))
    _put(path, dict(entry, state='done', result=result))
    _finish(module, True, dict(ident, result=result, ran=True))


def _finish(module, changed, outcome):
    # a hook that failed fails the task (the play's max_fail_percentage
    # and serial batches count it); its result is returned all the same
    code = outcome['result'].get('deploy_status_code')
    if code not in (0, None, '0'):
        module.fail_json(msg='Deployment exited with non-zero status code: '
                             '%s' % code, changed=changed, converge=outcome)
    module.exit_json(changed=changed, converge=outcome)


if __name__ == '__main__':
    main()

"""Run an exported plan (configdl/export.py) with ansible-runner, a step
at a time, and hand each deployment's result back (`run_step`).

Each task of the module (``converge_deployment``) returns what ran on
its host: the deployment id, action, run key, result (Heat's signal
payload: ``deploy_stdout``, ``deploy_stderr``, ``deploy_status_code``,
outputs by name) and whether the hook ran now or its journal had it.
A host that cannot be reached is a failed result of each of its
deployments in that step ("unreachable"), recorded as such only where
nothing ran: a host that is not reached ran nothing.
"""

import os
import sys

from converge import exception

UNREACHABLE_CODE = 255


def run_step(directory, playbook, verbose=False):
    """Run `playbook` of the export at `directory`; (return code, a result
    per task: {id, action, run, result, ran, host, unreachable})."""
    try:
        import ansible_runner
    except ImportError:
        # an extra, not a requirement: only config-download pushes
        raise exception.InvalidInput(
            'converge deployment run needs ansible-runner and ansible-core:'
            " pip install 'converge[configdl]'") from None

    results = []

    def handler(event):
        kind = event.get('event')
        data = event.get('event_data') or {}
        if kind not in ('runner_on_ok', 'runner_on_failed',
                        'runner_on_unreachable'):
            return True
        if data.get('task_action') not in ('converge_deployment', None):
            return True
        res = data.get('res') or {}
        outcome = res.get('converge')
        if outcome:
            results.append(dict(outcome, host=data.get('host'),
                                unreachable=False))
        elif kind == 'runner_on_unreachable':
            results.append({'host': data.get('host'), 'unreachable': True,
                            'message': res.get('msg', '')})
        return True

    bindir = os.path.dirname(sys.executable)
    env = {'PATH': bindir + os.pathsep + os.environ.get('PATH', os.defpath),
           'ANSIBLE_CONFIG': os.path.join(directory, 'project',
                                          'ansible.cfg'),
           'ANSIBLE_LIBRARY': os.path.join(directory, 'project', 'library'),
           'ANSIBLE_HOST_KEY_CHECKING': 'False',
           'ANSIBLE_LOCAL_TEMP': os.path.join(directory, 'tmp')}
    runner = ansible_runner.run(
        private_data_dir=directory, playbook=playbook, quiet=not verbose,
        event_handler=handler, envvars=env, rotate_artifacts=3,
        suppress_env_files=True)
    return runner.rc, results

"""`converge deployment export STACK DIR` and `converge deployment run
STACK`: config-download, a stack's software deployments pushed to its
servers over SSH with Ansible instead of pulled by agents
(docs/software.md "Servers without agents: config-download")."""

import os
import signal
import time

from cliff import lister

from converge import conf as conf_mod

COLUMNS = ('step', 'role', 'host', 'resource', 'member', 'action', 'status',
           'playbook')
RUN_COLUMNS = ('step', 'role', 'host', 'resource', 'member', 'action',
               'outcome', 'deploy_status_code', 'recorded')
#: a test's crash point: `deployment run` kills itself (SIGKILL) once
#: this step ran on its hosts, before its results are recorded
CRASH_AFTER_STEP = 'CONVERGE_TEST_CRASH_AFTER_STEP'
#: seconds between two looks at a stack whose next deployments are not
#: written yet
POLL = 0.5


def _export(app, stack, directory):
    from converge.cmd import simhosts
    from converge.configdl import export
    plan = app.service().deployment_plan(app.context(), stack)
    key = os.path.join(simhosts.key_dir(), 'id_ed25519')
    steps = export.write(plan, os.path.abspath(directory),
                         hosts_dir=simhosts.hosts_dir(),
                         key=key if os.path.exists(key) else None)
    return plan, steps


def _by_step(plan):
    steps = {}
    for dep in plan['deployments']:
        steps.setdefault(dep['step'], []).append(dep)
    return steps


class Export(lister.Lister):
    """Write a stack's deployments as an Ansible inventory (hosts by
    role) and playbooks by step and role, in DIR (ansible-runner's
    layout: DIR/inventory, DIR/project/deploy.yaml)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        parser.add_argument('directory', metavar='<dir>')
        return parser

    def take_action(self, args):
        plan, _steps = _export(self.app, args.stack, args.directory)
        rows = [(d['step'], d['role'], d['host'], d['resource'],
                 d['member'], d['deployment']['action'], d['status'],
                 'step%d_%s.yaml' % (d['step'], d['role']))
                for d in plan['deployments']]
        return COLUMNS, rows


class Run(lister.Lister):
    """Run a stack's deployments on its servers over SSH, a step at a
    time (export, then ansible-runner): each runs once per (deployment,
    action, run key), journalled on its host; the results are recorded
    as the servers' signals would be. Exits 1 when a deployment failed or
    a host could not be reached (the steps after it do not run)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>')
        parser.add_argument('--dir', metavar='<dir>',
                            help='Where to export (default '
                                 '$CONVERGE_HOME/config-download/STACK)')
        parser.add_argument('--verbose', action='store_true',
                            help='Show Ansible\'s output')
        parser.add_argument('--timeout', metavar='<minutes>', type=float,
                            help='While the stack is IN_PROGRESS, stop '
                                 'waiting for its next deployments after '
                                 'this long (default: until it is not)')
        return parser

    def take_action(self, args):
        directory = os.path.abspath(args.dir or os.path.join(
            conf_mod.home_dir(), 'config-download', args.stack))
        deadline = (time.monotonic() + args.timeout * 60
                    if args.timeout else None)
        handled, rows, failed = set(), [], False
        while not failed:
            plan, steps = _export(self.app, args.stack, directory)
            by_step = _by_step(plan)
            todo = sorted(s for s, deps in by_step.items() if any(
                (d['id'], d['deployment']['run']) not in handled
                for d in deps))
            if todo:
                failed = self._step(args, directory, plan, todo[0],
                                    by_step[todo[0]], handled, rows)
                continue
            if not plan['stack_status'].endswith('_IN_PROGRESS') or (
                    deadline is not None and time.monotonic() > deadline):
                break
            # the stack's engine writes the next deployments once those
            # it waited for are recorded: look again
            time.sleep(POLL)
        if failed:
            self.app.exit_code = 1
        return RUN_COLUMNS, rows

    def _step(self, args, directory, plan, step, deps, handled, rows):
        """Run step `step`; True when a deployment failed or a host could
        not be reached."""
        from converge.configdl import push
        svc, ctx = self.app.service(), self.app.context()
        _rc, results = push.run_step(directory, 'step%d.yaml' % step,
                                     args.verbose)
        if os.environ.get(CRASH_AFTER_STEP) == str(step):
            os.kill(os.getpid(), signal.SIGKILL)
        found = {(r.get('id'), r.get('run')): r for r in results
                 if not r.get('unreachable')}
        unreachable = {r['host'] for r in results if r.get('unreachable')}
        answers = {a['id']: a for a in svc.deployment_push_results(
            ctx, args.stack, [{'id': r['id'], 'run': r['run'],
                               'payload': r.get('result') or {}}
                              for r in found.values()])}
        names = plan.get('inventory_names') or {}
        failed = False
        for dep in deps:
            doc = dep['deployment']
            if (doc['id'], doc['run']) in handled:
                continue
            handled.add((doc['id'], doc['run']))
            res = found.get((doc['id'], doc['run']))
            if res is None:
                outcome = ('unreachable' if names.get(dep['server_id']) in
                           unreachable else 'not run')
                code = None
                failed = True
            else:
                code = (res.get('result') or {}).get('deploy_status_code')
                outcome = 'ran' if res.get('ran') else 'journalled'
                if str(code) not in ('0', 'None'):
                    failed = True
            answer = answers.get(doc['id'])
            if answer is None:
                recorded = ''
            elif answer.get('accepted'):
                recorded = answer.get('reason', '')
            else:
                recorded = 'no (%s)' % answer.get('reason', '')
            rows.append((step, dep['role'], dep['host'], dep['resource'],
                         dep['member'], doc['action'], outcome, code,
                         recorded))
        return failed

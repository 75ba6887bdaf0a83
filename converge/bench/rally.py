"""Run a Rally task file (v1 format, Heat's ``HeatStacks`` scenarios)
directly on the engine: ``converge-bench --rally rally-jobs/converge.yaml``,
or through Heat's REST API (converge-api) with python-heatclient, as Rally
itself does: ``--api http://host:port/v1/PROJECT --api-token T``.

A task maps scenario names to workloads::

    HeatStacks.create_and_delete_stack:
      - args: {template_path: "~/.rally/extra/default.yaml"}
        runner: {type: constant, times: 10, concurrency: 2}
        context: {stacks: {stacks_per_tenant: 2, resources_per_stack: 10}}
        sla: {failure_rate: {max: 0}}

Each iteration is timed as a whole and by its atomic actions
(heat.create_stack, ...); an action that starts a traversal includes the
wait for it, as Rally's do. Stacks left over by failed iterations, by
create_and_list_stack and by the ``stacks`` context are deleted at the end
of the workload, untimed (Rally's cleanup).
"""

import collections
import concurrent.futures
import dataclasses
import os
import threading
import time
import uuid

import yaml

from converge import exception
from converge import template
from converge.bench import measure
from converge.db import api
from converge.engine import stacks
from converge.engine import views
from converge.template import loader

#: Rally's jobs name their templates like this; here it is the task's
#: sibling directory extra/
RALLY_EXTRA = '~/.rally/extra/'
#: error messages kept per workload
MAX_ERRORS = 5


class RallyError(Exception):
    """The task file cannot be run as written."""


class StackFailed(Exception):
    """A traversal ended somewhere other than <ACTION>_COMPLETE."""


@dataclasses.dataclass
class Workload:
    scenario: str
    index: int              # position in the task, from 0
    args: dict              # as written (paths resolved)
    times: int
    concurrency: int
    sla_max_pct: float
    sla_min_pct: float
    stacks_context: tuple = None   # (stacks, resources_per_stack) or None
    bundles: dict = dataclasses.field(default_factory=dict)

    @property
    def params(self):
        return self.args.get('parameters') or {}

    @property
    def updated_params(self):
        return self.args.get('updated_parameters') or self.params


# -- talking to the engine ----------------------------------------------------

class _Heat:
    """The engine seen as Rally's heat client sees Heat: every operation
    returns once its traversal has ended. Remembers what it created so the
    workload can clean up after itself."""

    def __init__(self, engine, wait):
        self.engine = engine
        self.wait = wait
        self.live = {}      # stack id -> name
        self._lock = threading.Lock()

    def _finish(self, stack_id, trav, action):
        row = self.wait(self.engine, stack_id, trav)
        if (row.action, row.status) != (action, 'COMPLETE'):
            reason = getattr(row, 'status_reason', None) or \
                self._reason(stack_id)
            raise StackFailed('stack %s ended %s_%s%s' % (
                self.live.get(stack_id, stack_id), row.action, row.status,
                ': %s' % reason if reason else ''))

    def _reason(self, stack_id):
        # the caller's wait may return only action and status
        with self.engine.db.read() as s:
            return api.stack_get(s, stack_id).status_reason

    def create(self, name, bundle, params):
        stack_id, trav = stacks.create(self.engine, name, bundle, params)
        with self._lock:
            self.live[stack_id] = name
        self._finish(stack_id, trav, 'CREATE')
        return stack_id

    def update(self, stack_id, bundle, params):
        _, trav = stacks.update(self.engine, stack_id, bundle=bundle,
                                params=params)
        self._finish(stack_id, trav, 'UPDATE')

    def check(self, stack_id):
        _, trav = stacks.check(self.engine, stack_id)
        self._finish(stack_id, trav, 'CHECK')

    def delete(self, stack_id):
        _, trav = stacks.delete(self.engine, stack_id)
        self._finish(stack_id, trav, 'DELETE')
        with self._lock:
            self.live.pop(stack_id, None)

    def list_stacks(self):
        """What `converge stack list` reads: the live stacks' rows."""
        with self.engine.db.read() as s:
            return list(api.stack_list(s))

    def list_resources(self, stack):
        """What `converge stack resource list` reads, for one stack row."""
        return views.resources(self.engine, stack)

    def cleanup(self, concurrency):
        """Delete whatever is still live; return the errors (untimed, and
        not counted against the iterations)."""
        with self._lock:
            left = sorted(self.live)
        errors = []

        def remove(stack_id):
            try:
                with self.engine.db.read() as s:
                    api.stack_get(s, stack_id)
            except exception.StackNotFound:
                return
            try:
                self.delete(stack_id)
            except Exception as e:
                errors.append('cleanup: %s' % _describe(e))

        _each(remove, left, concurrency)
        return errors


class HeatAPI:
    """The same operations through Heat's REST API (converge-api, or
    Heat), with python-heatclient, as Rally's own heat client calls it:
    each returns once the stack has left IN_PROGRESS, looked at every
    `poll` seconds (Rally's heat_stack_*_poll_interval, 1 s by default;
    shorter here so the poll does not hide the engine's time)."""

    def __init__(self, endpoint, token, poll=0.05, timeout=600):
        try:
            from heatclient import client as heat_client
        except ImportError:
            raise RallyError('--api needs python-heatclient (pip install '
                             'python-heatclient)')
        self.endpoint, self.token = endpoint, token
        self.hc = heat_client.Client('1', endpoint=endpoint, token=token)
        self.poll, self.timeout = poll, timeout
        self.live = {}
        self._lock = threading.Lock()

    def fresh(self):
        """One client per workload (requests' sessions are not shared
        across runner threads by Rally either)."""
        return HeatAPI(self.endpoint, self.token, self.poll, self.timeout)

    def _finish(self, stack_id, action):
        from heatclient import exc
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                st = self.hc.stacks.get(stack_id, resolve_outputs=False)
            except exc.HTTPNotFound:
                if action == 'DELETE':
                    return
                raise
            if st.stack_status == '%s_COMPLETE' % action:
                return
            if not st.stack_status.endswith('_IN_PROGRESS'):
                raise StackFailed('stack %s ended %s: %s' % (
                    st.stack_name, st.stack_status,
                    st.stack_status_reason))
            if time.monotonic() > deadline:
                raise StackFailed('stack %s still %s after %d s' % (
                    st.stack_name, st.stack_status, self.timeout))
            time.sleep(self.poll)

    @staticmethod
    def _body(bundle):
        return {'template': bundle.template, 'files': bundle.files,
                'environment': bundle.environment}

    def create(self, name, bundle, params):
        made = self.hc.stacks.create(stack_name=name, parameters=params,
                                     disable_rollback=True,
                                     **self._body(bundle))
        stack_id = made['stack']['id']
        with self._lock:
            self.live[stack_id] = name
        self._finish(stack_id, 'CREATE')
        return stack_id

    def update(self, stack_id, bundle, params):
        self.hc.stacks.update(stack_id, parameters=params,
                              **self._body(bundle))
        self._finish(stack_id, 'UPDATE')

    def check(self, stack_id):
        self.hc.actions.check(stack_id)
        self._finish(stack_id, 'CHECK')

    def delete(self, stack_id):
        self.hc.stacks.delete(stack_id)
        self._finish(stack_id, 'DELETE')
        with self._lock:
            self.live.pop(stack_id, None)

    def list_stacks(self):
        return list(self.hc.stacks.list())

    def list_resources(self, stack):
        return self.hc.resources.list(stack.id)

    def cleanup(self, concurrency):
        with self._lock:
            left = sorted(self.live)
        errors = []

        def remove(stack_id):
            try:
                self.delete(stack_id)
            except Exception as e:
                errors.append('cleanup: %s' % _describe(e))
        _each(remove, left, concurrency)
        return errors


def _each(fn, items, concurrency):
    """fn(item) for every item, at most `concurrency` at a time; the results
    in the order of items."""
    if not items:
        return []
    workers = max(1, min(concurrency, len(items)))
    with concurrent.futures.ThreadPoolExecutor(
            workers, thread_name_prefix='rally') as pool:
        return list(pool.map(fn, items))


def _describe(e):
    if isinstance(e, (StackFailed, exception.ConvergeError)):
        return str(e)
    return '%s: %s' % (type(e).__name__, e)


# -- scenarios ----------------------------------------------------------------

class _Iteration:
    """One run of a scenario: its stack name, its timed atomic actions and
    how it ended."""

    def __init__(self, index, name):
        self.index = index
        self.name = name
        self.atomic = []    # (action, seconds, ok)
        self.seconds = None
        self.error = None

    def timed(self, action, fn, *args):
        start = time.perf_counter()
        try:
            result = fn(*args)
        except BaseException:
            self.atomic.append((action, time.perf_counter() - start, False))
            raise
        self.atomic.append((action, time.perf_counter() - start, True))
        return result


def create_and_delete_stack(heat, w, it):
    stack_id = it.timed('heat.create_stack', heat.create, it.name,
                        w.bundles['create'], w.params)
    it.timed('heat.delete_stack', heat.delete, stack_id)


def create_update_delete_stack(heat, w, it):
    stack_id = it.timed('heat.create_stack', heat.create, it.name,
                        w.bundles['create'], w.params)
    it.timed('heat.update_stack', heat.update, stack_id,
             w.bundles['update'], w.updated_params)
    it.timed('heat.delete_stack', heat.delete, stack_id)


def create_check_delete_stack(heat, w, it):
    stack_id = it.timed('heat.create_stack', heat.create, it.name,
                        w.bundles['create'], w.params)
    it.timed('heat.check_stack', heat.check, stack_id)
    it.timed('heat.delete_stack', heat.delete, stack_id)


def create_and_list_stack(heat, w, it):
    stack_id = it.timed('heat.create_stack', heat.create, it.name,
                        w.bundles['create'], w.params)
    listed = it.timed('heat.list_stacks', heat.list_stacks)
    if stack_id not in {st.id for st in listed}:
        raise StackFailed('stack %s is not in the stack list' % it.name)


def list_stacks_and_resources(heat, w, it):
    listed = it.timed('heat.list_stacks', heat.list_stacks)

    # as Rally's: one action that lists the resources of every stack
    def list_all():
        for st in listed:
            heat.list_resources(st)
    it.timed('heat.list_resources', list_all)


_TEMPLATE_ARGS = ('template_path', 'parameters', 'files', 'environment')

Scenario = collections.namedtuple('Scenario', 'run actions args required')

SCENARIOS = {
    'HeatStacks.create_and_delete_stack': Scenario(
        create_and_delete_stack,
        ('heat.create_stack', 'heat.delete_stack'),
        _TEMPLATE_ARGS, ('template_path',)),
    'HeatStacks.create_update_delete_stack': Scenario(
        create_update_delete_stack,
        ('heat.create_stack', 'heat.update_stack', 'heat.delete_stack'),
        _TEMPLATE_ARGS + ('updated_template_path', 'updated_parameters',
                          'updated_files', 'updated_environment'),
        ('template_path', 'updated_template_path')),
    'HeatStacks.create_check_delete_stack': Scenario(
        create_check_delete_stack,
        ('heat.create_stack', 'heat.check_stack', 'heat.delete_stack'),
        _TEMPLATE_ARGS, ('template_path',)),
    'HeatStacks.create_and_list_stack': Scenario(
        create_and_list_stack,
        ('heat.create_stack', 'heat.list_stacks'),
        _TEMPLATE_ARGS, ('template_path',)),
    'HeatStacks.list_stacks_and_resources': Scenario(
        list_stacks_and_resources,
        ('heat.list_stacks', 'heat.list_resources'),
        (), ()),
}

#: Rally's defaults for the stacks context
STACKS_PER_TENANT = 2
RESOURCES_PER_STACK = 10


def context_bundle(resources):
    """The stacks context's template: `resources` random strings."""
    doc = {'heat_template_version': '2014-10-16',
           'description': 'Rally stacks context',
           'resources': {'r%d' % i: {'type': 'OS::Heat::RandomString',
                                     'properties': {'length': 10}}
                         for i in range(resources)}}
    return template.Bundle(doc, template_path='<stacks context>')


# -- the task file ------------------------------------------------------------

def resolve(task_path, path):
    """A path as a Rally job writes it, relative to the task file."""
    base = os.path.dirname(os.path.abspath(task_path))
    if path.startswith(RALLY_EXTRA):
        return os.path.join(base, 'extra', path[len(RALLY_EXTRA):])
    path = os.path.expanduser(path)
    return path if os.path.isabs(path) else os.path.join(base, path)


def load_task(path):
    """Parse and check a task file, loading every template it names;
    return its workloads in order. Raises RallyError naming the file and
    the scenario."""
    try:
        with open(path, encoding='utf-8') as f:
            doc = yaml.safe_load(f)
    except OSError as e:
        raise RallyError('%s: cannot read the task: %s' % (
            path, e.strerror or e))
    except yaml.YAMLError as e:
        raise RallyError('%s: not valid YAML: %s' % (path, e))
    if not isinstance(doc, dict) or not doc:
        raise RallyError('%s: a Rally task is a mapping of scenario names to '
                         'lists of workloads' % path)
    if 'subtasks' in doc or 'version' in doc:
        raise RallyError('%s: only the v1 task format (scenario name: '
                         '[workloads]) is supported' % path)
    workloads = []
    for name, entries in doc.items():
        if name not in SCENARIOS:
            raise RallyError('%s: unknown scenario %s (supported: %s)' % (
                path, name, ', '.join(sorted(SCENARIOS))))
        if not isinstance(entries, list) or not entries:
            raise RallyError('%s: %s: expected a list of workloads' % (
                path, name))
        for n, entry in enumerate(entries):
            where = '%s: %s[%d]' % (path, name, n)
            workloads.append(_workload(path, where, name, len(workloads),
                                       entry))
    return workloads


def _mapping(where, what, value):
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RallyError('%s: %s must be a mapping' % (where, what))
    return value


def _only(where, what, value, allowed):
    extra = sorted(set(value) - set(allowed))
    if extra:
        raise RallyError('%s: %s: %s not supported (supported: %s)' % (
            where, what, ', '.join(map(str, extra)),
            ', '.join(allowed) or 'none'))


def _count(where, what, value, default):
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RallyError('%s: %s must be a positive integer' % (where, what))
    return value


def _percent(where, what, value, default):
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not 0 <= value <= 100:
        raise RallyError('%s: %s must be a percentage (0-100)' % (
            where, what))
    return float(value)


def _workload(task_path, where, name, index, entry):
    scenario = SCENARIOS[name]
    entry = _mapping(where, 'the workload', entry)
    _only(where, 'workload key', entry, ('args', 'runner', 'context', 'sla'))

    args = dict(_mapping(where, 'args', entry.get('args')))
    _only(where, 'argument', args, scenario.args)
    missing = [a for a in scenario.required if not args.get(a)]
    if missing:
        raise RallyError('%s: missing argument %s' % (where,
                                                      ', '.join(missing)))

    runner = _mapping(where, 'runner', entry.get('runner'))
    _only(where, 'runner key', runner, ('type', 'times', 'concurrency'))
    if runner.get('type', 'constant') != 'constant':
        raise RallyError('%s: runner type %s not supported (only constant)'
                         % (where, runner.get('type')))
    times = _count(where, 'runner times', runner.get('times'), 1)
    concurrency = _count(where, 'runner concurrency',
                         runner.get('concurrency'), 1)

    context = _mapping(where, 'context', entry.get('context'))
    _only(where, 'context', context, ('users', 'stacks'))
    users = _mapping(where, 'context users', context.get('users'))
    _only(where, 'context users', users, ('tenants', 'users_per_tenant'))
    tenants = _count(where, 'users tenants', users.get('tenants'), 1)
    stacks_context = None
    if 'stacks' in context:
        spec = _mapping(where, 'context stacks', context['stacks'])
        _only(where, 'context stacks', spec,
              ('stacks_per_tenant', 'resources_per_stack'))
        # one engine, one project: every tenant's stacks are listed together
        stacks_context = (
            tenants * _count(where, 'stacks_per_tenant',
                             spec.get('stacks_per_tenant'),
                             STACKS_PER_TENANT),
            _count(where, 'resources_per_stack',
                   spec.get('resources_per_stack'), RESOURCES_PER_STACK))
    elif name == 'HeatStacks.list_stacks_and_resources':
        raise RallyError('%s: needs the stacks context (context: {stacks: '
                         '{stacks_per_tenant: S, resources_per_stack: R}})'
                         % where)

    sla = _mapping(where, 'sla', entry.get('sla'))
    _only(where, 'sla', sla, ('failure_rate',))
    rate = _mapping(where, 'sla failure_rate', sla.get('failure_rate'))
    _only(where, 'sla failure_rate', rate, ('max', 'min'))

    w = Workload(scenario=name, index=index, args=args, times=times,
                 concurrency=concurrency,
                 sla_max_pct=_percent(where, 'failure_rate max',
                                      rate.get('max'), 0.0),
                 sla_min_pct=_percent(where, 'failure_rate min',
                                      rate.get('min'), 0.0),
                 stacks_context=stacks_context)
    if 'template_path' in args:
        w.bundles['create'] = _bundle(task_path, where, args['template_path'],
                                      args.get('files'),
                                      args.get('environment'))
    if 'updated_template_path' in args:
        w.bundles['update'] = _bundle(
            task_path, where, args['updated_template_path'],
            args.get('updated_files') or args.get('files'),
            args.get('updated_environment') or args.get('environment'))
    for key in ('parameters', 'updated_parameters'):
        _mapping(where, key, args.get(key))
    return w


def _bundle(task_path, where, template_path, files, environment):
    """Template + files + environment, as the engine takes them.

    ``files``: a list of paths (each keyed by its base name, as a template
    beside it would get_file it) or a mapping of name to path.
    ``environment``: a path to an environment file, or the environment
    itself as a mapping.
    """
    if not isinstance(template_path, str):
        raise RallyError('%s: template path must be a string' % where)
    if isinstance(files, list):
        files = {os.path.basename(p): p for p in files}
    files = _mapping(where, 'files', files)
    env_paths, env_doc = (), None
    if isinstance(environment, str):
        env_paths = (resolve(task_path, environment),)
    else:
        env_doc = _mapping(where, 'environment', environment)
        _only(where, 'environment section', env_doc, loader.ENV_SECTIONS)
    path = resolve(task_path, template_path)
    try:
        contents = {}
        for key, file_path in files.items():
            with open(resolve(task_path, str(file_path)),
                      encoding='utf-8') as f:
                contents[key] = f.read()
        bundle = template.load_bundle(path, env_paths,
                                      extra_files=contents)
        if env_doc:
            # the inline environment layered over the loaded one
            bundle = template.Bundle(bundle.template, {}, env_doc, path,
                                     bundle.source_text).merged_over(bundle)
    except OSError as e:
        raise RallyError('%s: %s: %s' % (where, e.filename, e.strerror))
    except exception.ConvergeError as e:
        raise RallyError('%s: %s' % (where, e))
    return bundle


# -- running ------------------------------------------------------------------

def run_task(path, engine, wait, on_progress=None, api=None):
    """Run every workload of the task on `engine`, one after the other
    (or, with `api`, a HeatAPI: through Heat's REST API).

    ``wait(engine, stack_id, traversal_id)`` blocks until the traversal
    ends and returns the stack (with .action and .status).
    ``on_progress(scenario, done, times)`` is called after each iteration
    (from the runner's threads). Returns one row per workload.
    """
    workloads = load_task(path)
    # stack names stay unique when a task runs again on the same engine
    token = uuid.uuid4().hex[:8]
    return [run_workload(w, engine, wait, 'rally-%s-%d' % (token, w.index),
                         on_progress, api) for w in workloads]


def run_workload(w, engine, wait, prefix, on_progress=None, api=None):
    heat = api.fresh() if api is not None else _Heat(engine, wait)
    scenario = SCENARIOS[w.scenario]
    iterations = []
    context_error = None
    done = [0]
    lock = threading.Lock()

    def iterate(i):
        it = _Iteration(i, '%s-%d' % (prefix, i))
        start = time.perf_counter()
        try:
            scenario.run(heat, w, it)
        except Exception as e:
            it.error = _describe(e)
        it.seconds = time.perf_counter() - start
        if on_progress:
            with lock:
                done[0] += 1
                on_progress(w.scenario, done[0], w.times)
        return it

    try:
        if w.stacks_context:
            context_error = _setup_stacks(heat, w, prefix)
        if context_error is None:
            iterations = _each(iterate, list(range(w.times)), w.concurrency)
    finally:
        cleanup_errors = heat.cleanup(w.concurrency)
    return summarize(w, iterations, context_error, cleanup_errors)


def _setup_stacks(heat, w, prefix):
    """Rally's stacks context; the first error, or None."""
    count, resources = w.stacks_context
    bundle = context_bundle(resources)

    def make(j):
        try:
            heat.create('%s-ctx-%d' % (prefix, j), bundle, {})
        except Exception as e:
            return 'context stacks: %s' % _describe(e)
        return None
    errors = [e for e in _each(make, list(range(count)), w.concurrency) if e]
    return errors[0] if errors else None


# -- arithmetic and report ----------------------------------------------------

def stats(samples):
    """Rally's columns over (seconds, ok) samples: durations of the
    successful ones only, so a quick failure does not flatter them."""
    good = [s for s, ok in samples if ok]
    count = len(samples)
    return dict(min=min(good) if good else None,
                median=measure.percentile(good, 50),
                p90=measure.percentile(good, 90),
                p95=measure.percentile(good, 95),
                max=max(good) if good else None,
                avg=sum(good) / len(good) if good else None,
                count=count,
                success_pct=100.0 * len(good) / count if count else None)


def summarize(w, iterations, context_error=None, cleanup_errors=()):
    scenario = SCENARIOS[w.scenario]
    samples = collections.OrderedDict((a, []) for a in scenario.actions)
    for it in iterations:
        for action, seconds, ok in it.atomic:
            samples.setdefault(action, []).append((seconds, ok))
    errors = []
    if context_error:
        errors.append(context_error)
        failures = w.times  # no iteration could run
        total = stats([])
        total['count'] = w.times
        total['success_pct'] = 0.0
    else:
        failures = sum(1 for it in iterations if it.error)
        total = stats([(it.seconds, not it.error) for it in iterations])
        errors.extend('iteration %d: %s' % (it.index, it.error)
                      for it in iterations if it.error)
    errors = errors[:MAX_ERRORS] + list(cleanup_errors)[:MAX_ERRORS]
    rate = 100.0 * failures / w.times
    templates = [os.path.basename(w.args[k]) for k in
                 ('template_path', 'updated_template_path') if k in w.args]
    return dict(scenario=w.scenario, templates=templates, times=w.times,
                concurrency=w.concurrency,
                atomic={a: stats(s) for a, s in samples.items()},
                total=total, failures=failures, failure_rate_pct=rate,
                sla_max_pct=w.sla_max_pct, sla_min_pct=w.sla_min_pct,
                sla_passed=w.sla_min_pct <= rate <= w.sla_max_pct,
                errors=errors)


HEADINGS = ('Action', 'Min (sec)', 'Median', '90%ile', '95%ile', 'Max',
            'Avg', 'Success', 'Count')


def _cells(name, st):
    def sec(v):
        return 'n/a' if v is None else '%.3f' % v
    success = 'n/a' if st['success_pct'] is None else \
        '%.1f%%' % st['success_pct']
    return [name] + [sec(st[k]) for k in ('min', 'median', 'p90', 'p95',
                                          'max', 'avg')] + \
        [success, str(st['count'])]


def _boxed(rows):
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    rule = '+' + '+'.join('-' * (w + 2) for w in widths) + '+'

    def line(r):
        return '| ' + ' | '.join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths))) + ' |'
    return '\n'.join([rule, line(rows[0]), rule] +
                     [line(r) for r in rows[1:]] + [rule])


def _pct(v):
    return '%g%%' % v


def format_report(rows):
    """Rally's table per workload, then its SLA line and first errors."""
    out = []
    for row in rows:
        table = [list(HEADINGS)]
        table.extend(_cells(a, st) for a, st in row['atomic'].items())
        table.append(_cells('total', row['total']))
        sla = 'failure_rate max %s' % _pct(row['sla_max_pct'])
        if row.get('sla_min_pct'):
            sla = 'failure_rate min %s max %s' % (
                _pct(row['sla_min_pct']), _pct(row['sla_max_pct']))
        over = ' -> '.join(row.get('templates') or ())
        out.append('%s%s (times %d, concurrency %d)' % (
            row['scenario'], ' [%s]' % over if over else '', row['times'],
            row['concurrency']))
        out.append(_boxed(table))
        out.append('%s: %s (actual %.1f%%)' % (
            sla, 'passed' if row['sla_passed'] else 'failed',
            row['failure_rate_pct']))
        out.extend('  ' + e for e in row['errors'])
        out.append('')
    return '\n'.join(out).rstrip('\n')

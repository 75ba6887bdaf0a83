"""converge-bench: create and delete generated stacks on the engine and
report what each traversal cost.

    converge-bench --scenario wide --n 1000
    converge-bench --scenario deep fanin --n 200 1000 --json out.json
    converge-bench --scenario tripleo --nodes 1000
    converge-bench --scenario tripleo --nodes 200 --image cirros heat-agents \
        --transport POLL_TEMP_URL
    converge-bench --scenario latency --n 40 --latency 0.5
    converge-bench --scenario latency --shape wide --n 2000 --latency 30
    converge-bench --scenario rolling --n 1000 --batch 100 --latency 30
    converge-bench --scenario update --n 1000
    converge-bench --scenario wide --mode distributed --workers 3
    converge-bench --scenario wide deep --n 1000 --heat
    converge-bench --rally rally-jobs/converge.yaml
"""

import argparse
import concurrent.futures
import itertools
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
import types

import converge  # noqa: F401  (picks oslo.service's backend first)
from converge.bench import harness as harness_mod
from converge.bench import heat
from converge.bench import measure
from converge.bench import rollout
from converge.bench import scenarios

COLUMNS = [
    # (key, heading, format)
    ('label', 'scenario', '%s'),
    ('engine', 'engine', '%s'),
    ('n', 'n', '%d'),
    ('create_s', 'create_s', '%.2f'),
    ('create_cpu_s', 'cpu_s', '%.2f'),
    ('resources_per_s', 'res/s', '%.1f'),
    ('update_s', 'update_s', '%.2f'),
    ('bound_s', 'bound_s', '%.2f'),
    ('wall_over_bound', 'wall/bound', '%.2f'),
    ('statements_per_check_resource', 'sql/cr', '%.1f'),
    ('messages_per_check_resource', 'msg/cr', '%.2f'),
    ('locks_per_check_resource', 'locks/cr', '%.2f'),
    ('cr_p50_ms', 'cr_p50_ms', '%.1f'),
    ('cr_p95_ms', 'cr_p95_ms', '%.1f'),
    ('rss_mb', 'rss_mb', '%s'),
    ('worker_threads', 'wthr', '%d'),
    ('threads', 'thr_peak', '%s'),
    ('delete_s', 'delete_s', '%.2f'),
    ('script_runs', 'runs', '%d'),
    ('runs_per_s', 'runs/s', '%.0f'),
    ('agent_requests_per_deployment', 'areq/dep', '%.2f'),
    ('agent_rss_mb', 'agent_mb', '%.0f'),
    ('agent_cpu_s', 'agent_cpu', '%.1f'),
    ('hooks_cpu_s', 'hooks_cpu', '%.1f'),
    ('batches', 'batches', '%s'),
    ('busy_max', 'busy', '%d'),
    ('run_counts_text', 'runs_each', '%s'),
    ('exactly_once', 'once', '%s'),
    ('mem_added_peak_mb', 'mem_mb', '%.0f'),
    ('load_max', 'load', '%.1f'),
    ('x_heat', 'x_heat', '%.1f'),
    ('status', 'status', '%s'),
]
#: the columns of a scenario whose rows are steps (update: the create,
#: then each update)
STEP_COLUMNS = [
    ('label', 'scenario', '%s'),
    ('engine', 'engine', '%s'),
    ('nodes', 'nodes', '%d'),
    ('n', 'n', '%d'),
    ('step', 'step', '%s'),
    ('wall_s', 'wall_s', '%.2f'),
    ('cpu_s', 'cpu_s', '%.2f'),
    ('wall_over_create', 'x_create', '%.2f'),
    ('units', 'units', '%d'),
    ('statements_per_check_resource', 'sql/cr', '%.1f'),
    ('messages_per_check_resource', 'msg/cr', '%.2f'),
    ('locks_per_check_resource', 'locks/cr', '%.2f'),
    ('cr_p50_ms', 'cr_p50_ms', '%.1f'),
    ('cr_p95_ms', 'cr_p95_ms', '%.1f'),
    ('script_runs', 'runs', '%d'),
    ('rss_mb', 'rss_mb', '%s'),
    ('threads', 'thr_peak', '%s'),
    ('status', 'status', '%s'),
]


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog='converge-bench',
        description='Benchmark traversals of generated HOT graphs, or run a '
                    'Rally task on the engine.')
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument('--scenario', nargs='+',
                      choices=scenarios.NAMES + ('cloud',),
                      help='wide: N independent resources; deep: 20 layers, '
                           'each resource needs one of the layer before; '
                           'fanin: 20 layers, each resource needs %d hubs of '
                           'the layer before; latency: servers (in the '
                           '--shape) with a simulated create latency; '
                           'tripleo: '
                           'an overcloud of --nodes servers with their '
                           'configs and deployments; rolling: a '
                           'ResourceGroup of N servers, created, then '
                           'its image updated --batch at a time, each '
                           'rebuild taking --latency; update: the tripleo '
                           'stack of --n nodes, then four updates, each '
                           'timed (no change, a parameter one node reads, '
                           'one a role reads, --converge), a row each'
                           % scenarios.HUBS)
    what.add_argument('--rally', metavar='TASK',
                      help='run a Rally task file (HeatStacks scenarios) '
                           'on the engine')
    ap.add_argument('--os-cloud', metavar='NAME',
                    default=os.environ.get('OS_CLOUD'),
                    help='the cloud (clouds.yaml) of the cloud scenario: N '
                         'servers with a port each, made by converge beside '
                         'the same burst made by openstacksdk directly '
                         '(and through Heat with --heat) (Env: OS_CLOUD)')
    ap.add_argument('--heat-cloud', metavar='NAME', default=None,
                    help='with --scenario cloud --heat: the cloud that '
                         'reaches Heat (default: OS_CLOUD-heat if '
                         'clouds.yaml has it, as tools/devcloud up '
                         '--with-heat writes, else --os-cloud)')
    ap.add_argument('--api', metavar='URL',
                    help='with --rally: run it through Heat\'s REST API '
                         'at URL (http://HOST:PORT/v1/PROJECT: a '
                         'converge-api) with python-heatclient')
    ap.add_argument('--api-token', metavar='TOKEN',
                    default=os.environ.get('OS_TOKEN'),
                    help='the token for --api (default: $OS_TOKEN)')
    ap.add_argument('--n', nargs='+', type=int, default=None,
                    help='resources per stack (default: %s)' % ', '.join(
                        '%s %d' % kv for kv in scenarios.DEFAULT_N.items()
                        if kv[0] not in NODES))
    ap.add_argument('--nodes', nargs='+', type=int, default=None,
                    help='overcloud nodes of the tripleo and update '
                         'scenarios (about 22 resources each; default %s; '
                         '--n says the same)' % ', '.join(
                             '%s %d' % (name, scenarios.DEFAULT_N[name])
                             for name in NODES))
    ap.add_argument('--image', nargs='+', default=None,
                    help="the tripleo and update scenarios' servers' "
                         "image, a run each: %s (Heat's own tooling: "
                         "os-collect-config and heat-config's hooks, "
                         "with --transport) or any other (converge-agent; "
                         "default %s)" % (scenarios.HEAT_AGENTS,
                                          scenarios.DEFAULT_IMAGE))
    ap.add_argument('--transport', choices=sorted(scenarios.TRANSPORTS),
                    default=None,
                    help="the tripleo and update scenarios' servers' "
                         "software_config_transport, their deployments' "
                         "signal_transport its pair (%s); default: "
                         "converge-agent's own" % ', '.join(
                             '%s + %s' % kv
                             for kv in scenarios.TRANSPORTS.items()))
    ap.add_argument('--repeat', type=int, default=1,
                    help='runs of each scenario and n (default 1)')
    ap.add_argument('--latency', type=float, default=None,
                    help='seconds per server create in the latency '
                         'scenario (default %s), per member rebuild in '
                         'the rolling one (default %s)' % (
                             scenarios.DEFAULT_LATENCY,
                             scenarios.DEFAULT_ROLLING_LATENCY))
    ap.add_argument('--batch', type=int, default=None,
                    help="the rolling scenario's max_batch_size (its "
                         "min_in_service is N - batch; default N/%d)"
                         % scenarios.ROLLING_BATCHES)
    ap.add_argument('--shape', choices=scenarios.SHAPES,
                    default=scenarios.DEFAULT_SHAPE,
                    help='shape of the latency scenario: deep (20 layers, '
                         'each server needs one of the layer before) or '
                         'wide (independent servers, a critical path of one '
                         'create) (default %(default)s)')
    ap.add_argument('--mode', choices=('embedded', 'distributed'),
                    default='embedded',
                    help='embedded: one process, SQLite; distributed: '
                         'PostgreSQL, RabbitMQ and Redis on 127.0.0.1 and '
                         '--workers converge-worker processes')
    ap.add_argument('--workers', type=int, default=1,
                    help='worker processes in distributed mode (default 1)')
    ap.add_argument('--db', choices=('postgresql', 'mariadb'),
                    default='postgresql',
                    help='database of the distributed mode')
    ap.add_argument('--worker-threads', type=int, default=None,
                    help='override [DEFAULT] worker_threads')
    ap.add_argument('--engine-threads', type=int, default=None,
                    help='override [DEFAULT] engine_threads')
    ap.add_argument('--heat', action='store_true',
                    help="also run Heat's engine (heat-bench anchor) on the "
                         "wide and deep shapes at the same sizes, and report "
                         "converge's resources/s over Heat's")
    ap.add_argument('--heat-bench', default=heat.default_script(),
                    help='heat_bench.py (default %(default)s)')
    ap.add_argument('--heat-venv', default=heat.default_venv(),
                    help="Heat's virtualenv, made by `heat_bench.py setup` "
                         "(default %(default)s)")
    ap.add_argument('--home', default=None,
                    help='engine home, kept afterwards (default: a '
                         'temporary directory, removed afterwards; with '
                         'more than one run, HOME/1, HOME/2... in order); in '
                         'distributed mode the directory of the run (its '
                         'configuration, sim.db, logs)')
    ap.add_argument('--json', metavar='FILE', default=None,
                    help='also write the rows as JSON to FILE')
    args = ap.parse_args(argv)
    for opt in ('n', 'nodes'):
        if getattr(args, opt) and any(n < 1 for n in getattr(args, opt)):
            ap.error('--%s must be at least 1' % opt)
    if args.scenario and 'update' in args.scenario and any(
            size < scenarios.UPDATE_MIN_NODES
            for size in args.nodes or args.n or ()):
        ap.error('the update scenario needs at least %d nodes (its first '
                 '3 are controllers, then %s)' % (
                     scenarios.UPDATE_MIN_NODES, scenarios.UPDATE_NODE))
    if (args.image or args.transport) and not (
            args.scenario and set(args.scenario) <= set(NODES)):
        ap.error('--image and --transport go with the tripleo and update '
                 'scenarios')
    if scenarios.HEAT_AGENTS in (args.image or ()) and not args.transport:
        ap.error('--image %s needs --transport (its os-collect-config '
                 'polls with one of Heat\'s: %s)' % (
                     scenarios.HEAT_AGENTS, ', '.join(
                         sorted(scenarios.TRANSPORTS))))
    if args.batch is not None and args.batch < 1:
        ap.error('--batch must be at least 1')
    if args.latency is not None and args.latency < 0:
        ap.error('--latency must be at least 0')
    if args.repeat < 1:
        ap.error('--repeat must be at least 1')
    if args.workers < 1:
        ap.error('--workers must be at least 1')
    if args.heat and args.rally:
        ap.error('--heat compares scenarios, not Rally tasks')
    if args.api and not args.rally:
        ap.error('--api runs a Rally task: give --rally TASK')
    if args.api and not args.api_token:
        ap.error('--api needs a token: --api-token or OS_TOKEN')
    if args.heat_cloud and not (args.heat and args.scenario == ['cloud']):
        ap.error('--heat-cloud goes with --scenario cloud --heat')
    if args.scenario and 'cloud' in args.scenario:
        if args.scenario != ['cloud']:
            ap.error('the cloud scenario runs alone')
        if not args.os_cloud:
            ap.error('the cloud scenario needs --os-cloud (or OS_CLOUD)')
        return args
    if args.heat:
        problem = heat.missing(args.heat_bench, args.heat_venv)
        if problem:
            ap.error(problem)
    return args


#: the scenarios whose size is in nodes (--nodes, or --n)
NODES = ('tripleo', 'update')


def plan(args):
    """(scenario name, size, image) triples, in order (image None: the
    scenario's own)."""
    out = []
    for name in args.scenario:
        images = [None]
        if name in NODES:
            sizes = args.nodes or args.n or [scenarios.DEFAULT_N[name]]
            images = getattr(args, 'image', None) or [None]
        else:
            sizes = args.n or [scenarios.DEFAULT_N[name]]
        out.extend((name, size, image) for size in sizes
                   for image in images for _ in range(args.repeat))
    return out


def make_harness(args, workdir, agents=False):
    """The harness of args.mode; with `agents`, serving the agents' routes
    (a scenario whose servers run deployments)."""
    if args.mode == 'distributed':
        return harness_mod.Distributed(args.home or workdir, args.workers,
                                       engine_options(args), args.db,
                                       agents=agents)
    return harness_mod.Embedded(args.home or os.path.join(workdir, 'home'),
                                engine_options(args), agents=agents)


def engine_options(args):
    """[DEFAULT] options the command line overrides."""
    return {name: getattr(args, name)
            for name in ('worker_threads', 'engine_threads')
            if getattr(args, name) is not None}


def label(scenario):
    """The scenario as the table names it: the latency scenario with its
    shape when it is not the default one; the tripleo and update ones
    with their servers' image and transport when given."""
    if scenario.shape and scenario.shape != scenarios.DEFAULT_SHAPE:
        return '%s/%s' % (scenario.name, scenario.shape)
    name = scenario.name
    image = getattr(scenario, 'image', None)
    transport = getattr(scenario, 'transport', None)
    if image:
        name += '@' + image
    if transport:
        name += '/' + transport
    return name


def engine_label(h):
    if h.mode == 'distributed':
        return 'converge/%dw' % h.processes()
    return 'converge'


def _timed(h, start_fn):
    """Start a traversal (start_fn() -> (stack id, traversal id)) and
    wait for its end: a namespace of the stack id, (action, status), wall
    s, this process's CPU s, the start's epoch time, the traversal id,
    and the snapshots before and after."""
    before = h.snapshot()
    epoch = time.time()
    start = time.perf_counter()
    cpu = time.process_time()
    stack_id, trav = start_fn()
    result = h.wait(stack_id, trav)
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu
    return types.SimpleNamespace(
        stack_id=stack_id, result=result, wall=wall, cpu=cpu, epoch=epoch,
        trav=trav, before=before, after=h.snapshot())


def run_one(h, scenario, stack_name):
    """Create then delete one written scenario's stack; return its row.
    The rolling scenario updates it in between: the update is the timed
    figure (its wall over the bound), the counts are of its traversals
    (the group's and its member stack's)."""
    from converge.engine import stacks
    engine = h.engine
    bundle = scenario.bundle()
    bound = scenario.bound_s
    update = scenario.update_params
    scenario.prepare(engine)
    from converge.bench import software
    sampler = software.Sampler() if scenario.deployments else None
    try:
        try:
            created = timed = _timed(
                h, lambda: stacks.create(engine, stack_name, bundle, {}))
        finally:
            sampled = sampler.stop() if sampler else {}
        stack_id, create = created.stack_id, created.result
        updated = None
        if update and create == ('CREATE', 'COMPLETE'):
            updated = timed = _timed(
                h, lambda: stacks.update(engine, stack_id, params=update,
                                         existing=True))
    finally:
        scenario.finish(engine)
    embedded = h.mode == 'embedded'
    row = dict(_about(h, scenario), **_created(h, scenario, created))
    row.update(chain=scenario.chain, bound_s=bound,
               wall_over_bound=measure.ratio(created.wall, bound))
    if update:
        update_s = updated.wall if updated else None
        row.update(update_s=update_s,
                   update_cpu_s=updated.cpu if updated and embedded
                   else None,
                   wall_over_bound=measure.ratio(update_s, bound))
        if updated:
            row.update(rollout.figures(engine, stack_id, updated.epoch,
                                       update_s, scenario))
    # the counts of the timed traversal: the create's, or the update's
    # (every traversal: the group's members are a stack of their own)
    row.update(_counts(timed, None if updated else timed.trav))
    if scenario.deployments:
        row.update(software.figures(engine, scenario.deployments,
                                    created.wall,
                                    scenario.deployment_names))
        row.update(sampled)
    for key, value in list(software.NONE.items()) + list(
            rollout.NONE.items()):
        row.setdefault(key, value)   # (rolling gives exactly_once)

    delete, row['delete_s'] = _delete(h, stack_id)
    row.update(_rss(h.snapshot()))
    goal = [CREATED] + ([UPDATED] if update else [])
    reached = [create] + ([updated.result if updated else
                           ('UPDATE', 'NOT_STARTED')] if update else [])
    row['status'] = _status(goal, reached, delete)
    return row


CREATED, UPDATED, DELETED = (('CREATE', 'COMPLETE'), ('UPDATE', 'COMPLETE'),
                             ('DELETE', 'COMPLETE'))


def run_steps(h, scenario, stack_name):
    """Create the stack of `scenario` (the update scenario), then make
    each of its steps' updates, one after the other, then delete it;
    return a row per traversal (step): its wall and (embedded) CPU
    seconds and their ratio to the create's, its units and what they
    did, and the script runs the agents made in it. The create's row
    also tells whether each deployment ran exactly once, and the delete
    (its status is the create's and the delete's). After a step that did
    not end COMPLETE the rest are not started."""
    from converge.bench import software
    from converge.engine import stacks
    engine = h.engine
    bundle = scenario.bundle()
    disks = engine.clients.compute.disks_dir
    about = _about(h, scenario)
    rows, seen = [], software.runs(disks)

    def step(name, start_fn):
        nonlocal seen
        timed = _timed(h, start_fn)
        now = software.runs(disks)
        row = dict(about, step=name, wall_s=timed.wall,
                   cpu_s=timed.cpu if h.mode == 'embedded' else None,
                   script_runs=sum((now - seen).values()))
        seen = now
        row.update(_counts(timed, timed.trav))
        row.update(_rss(timed.after), units=row['check_resources'])
        rows.append(row)
        return timed

    created = step('create', lambda: stacks.create(engine, stack_name,
                                                   bundle, {}))
    rows[0].update(_created(h, scenario, created))
    rows[0].update(software.ran(seen, scenario.deployments, created.wall,
                                scenario.deployment_names))
    reached = created.result
    for name, params, observe in scenario.steps:
        if reached not in (CREATED, UPDATED):
            rows.append(dict(about, step=name, status='UPDATE_NOT_STARTED'))
            continue
        reached = step(name, lambda: stacks.update(
            engine, created.stack_id, bundle, params,
            converge=observe)).result
        rows[-1]['status'] = _status([UPDATED], [reached])
    for row in rows:
        row['wall_over_create'] = measure.ratio(row.get('wall_s'),
                                                created.wall)
    delete, rows[0]['delete_s'] = _delete(h, created.stack_id)
    rows[0]['status'] = _status([CREATED], [created.result], delete)
    return rows


def _about(h, scenario):
    """What every row of a scenario says of it and of the engine."""
    return dict(scenario=scenario.name, shape=scenario.shape,
                label=label(scenario), engine=engine_label(h), mode=h.mode,
                workers=h.processes(), n=scenario.n, nodes=scenario.nodes,
                image=scenario.image, transport=scenario.transport)


def _created(h, scenario, created):
    """The figures of a timed create."""
    return dict(create_s=created.wall,
                # embedded: the engine's CPU seconds (this process)
                create_cpu_s=created.cpu if h.mode == 'embedded' else None,
                resources_per_s=measure.ratio(scenario.n, created.wall))


def _counts(timed, trav):
    """What the units of a timed traversal did (of every traversal when
    `trav` is None), and the engine's threads meanwhile."""
    out = measure.figures(measure.window(timed.before, timed.after, trav))
    out.update(measure.threads(timed.after))
    return out


def _delete(h, stack_id):
    """Delete the stack: its (action, status) and the seconds it took."""
    from converge.engine import stacks
    start = time.perf_counter()
    stack_id, trav = stacks.delete(h.engine, stack_id)
    return h.wait(stack_id, trav), time.perf_counter() - start


def _rss(snapshot):
    """The peak RSS of each engine process so far, and the highest."""
    rss = snapshot['rss_each']
    return dict(peak_rss_mb_each=rss, peak_rss_mb=max(rss) if rss else None,
                rss_mb='/'.join('%.0f' % r for r in rss) if rss else None)


def _status(goal, reached, delete=None):
    """'ok' when each traversal reached its goal (and the delete, when
    given, DELETE_COMPLETE); else what each reached."""
    deleted = [] if delete is None else [delete]
    if reached == goal and deleted in ([], [DELETED]):
        return 'ok'
    return '/'.join('%s_%s' % r for r in reached + deleted)


def run(args, on_row=None):
    """Run the plan, each row on an engine of its own; return the rows
    (Heat's after each of converge's it is compared with)."""
    tmp = tempfile.mkdtemp(prefix='converge-bench-')
    rows = []
    try:
        planned = plan(args)
        for count, (name, size, image) in enumerate(planned, 1):
            rowdir = os.path.join(tmp, str(count))
            os.makedirs(rowdir)
            latency = args.latency if args.latency is not None else \
                scenarios.default_latency(name)
            scenario = scenarios.write(
                name, size, rowdir, latency, args.shape, args.batch,
                image=image,
                transport=getattr(args, 'transport', None)
                if name in NODES else None)
            # each run's engine and servers a --home of their own: a
            # disk left by the run before would be counted as this one's
            row_args = args
            if args.home and len(planned) > 1:
                row_args = argparse.Namespace(**vars(args))
                row_args.home = os.path.join(args.home, str(count))
            new = measure_one(row_args, scenario, rowdir,
                              'bench-%s-%d-%d' % (name, size, count))
            rows.extend(new)
            for row in new:
                if on_row:
                    on_row(row)
            if args.heat and name in heat.SHAPES:
                hrow = heat.run(args.heat_bench, args.heat_venv, name,
                                scenario.n, os.path.join(rowdir, 'heat'))
                row['x_heat'] = measure.ratio(row['resources_per_s'],
                                              hrow.get('resources_per_s'))
                rows.append(hrow)
                if on_row:
                    on_row(hrow)
    except harness_mod.BenchError as e:
        raise harness_mod.BenchError('%s (kept: %s)' % (e, tmp))
    shutil.rmtree(tmp, ignore_errors=True)
    return rows


def measure_one(args, scenario, workdir, stack_name):
    """One scenario's rows (one, or one a step) on fresh engine
    processes, so that each scenario's peak RSS is its own: embedded, a
    child process is the engine (and, like the CLI, loads the template);
    distributed, new workers (this process is the API)."""
    if args.mode == 'distributed':
        return _rows(args, scenario, workdir, stack_name)
    spawn = multiprocessing.get_context('spawn')
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as pool:
        return pool.submit(_rows, args, scenario, workdir, stack_name).result()


def _rows(args, scenario, workdir, stack_name):
    with make_harness(args, workdir, agents=bool(scenario.deployments)) as h:
        if scenario.steps:
            return run_steps(h, scenario, stack_name)
        return [run_one(h, scenario, stack_name)]


def format_cell(value, fmt):
    if value is None:
        return '-'
    return fmt % value


def cell_value(row, key):
    if key == 'label':  # Heat's rows and older JSON have no label
        return row.get('label') or row.get('scenario')
    return row.get(key)


def columns_of(row):
    return STEP_COLUMNS if row.get('step') else COLUMNS


def table(rows, header=True):
    """The rows as a table; rows of steps (the update scenario's) and
    the others in tables of their own columns, one after the other."""
    return '\n\n'.join(
        _table(list(group), columns, header)
        for columns, group in itertools.groupby(rows, columns_of))


def _table(rows, columns, header):
    cells = [[format_cell(cell_value(r, k), f) for k, _, f in columns]
             for r in rows]
    heads = [h for _, h, _ in columns]
    widths = [max([len(h)] + [len(c[i]) for c in cells])
              for i, h in enumerate(heads)]
    lines = []
    if header:
        lines.append('  '.join(h.rjust(w) for h, w in zip(heads, widths)))
    for c in cells:
        lines.append('  '.join(v.rjust(w) for v, w in zip(c, widths)))
    return '\n'.join(lines)


def _dot(_row):
    print('.', end='', file=sys.stderr, flush=True)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.rally:
            return run_rally(args)
        if args.scenario == ['cloud']:
            return run_cloud(args)
        rows = run(args, on_row=_dot)
    except harness_mod.BenchError as e:
        print('\nconverge-bench: %s' % e, file=sys.stderr)
        return 2
    print('', file=sys.stderr)
    print(table(rows))
    write_json(args.json, rows)
    return 0 if all(r['status'] == 'ok' for r in rows) else 1


def run_cloud(args):
    from converge.bench import cloud
    def shown(row):
        # each row as it ends: a run of many minutes that fails late
        # keeps what it measured
        print(cloud.line(row), file=sys.stderr, flush=True)
    rows = cloud.run(args.os_cloud, args.n or [50], heat=args.heat,
                     threads=args.worker_threads or 8, on_row=shown,
                     heat_cloud_name=args.heat_cloud)
    print('', file=sys.stderr)
    print(cloud.table(rows))
    write_json(args.json, rows)
    return 0 if all(r['status'] == 'ok' for r in rows) else 1


def run_rally(args):
    from converge.bench import rally
    try:
        rally.load_task(args.rally)
    except rally.RallyError as e:
        print('converge-bench: %s' % e, file=sys.stderr)
        return 2
    if args.api:
        try:
            api = rally.HeatAPI(args.api.rstrip('/'), args.api_token)
        except rally.RallyError as e:
            print('converge-bench: %s' % e, file=sys.stderr)
            return 2
        rows = rally.run_task(args.rally, None, None, api=api)
        print(rally.format_report(rows))
        write_json(args.json, rows)
        return 0 if all(r['sla_passed'] for r in rows) else 1
    tmp = tempfile.mkdtemp(prefix='converge-bench-')
    try:
        with make_harness(args, tmp) as h:
            def wait(engine, stack_id, trav):
                action, status = h.wait(stack_id, trav)
                return types.SimpleNamespace(action=action, status=status)
            rows = rally.run_task(args.rally, h.engine, wait)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(rally.format_report(rows))
    write_json(args.json, rows)
    return 0 if all(r['sla_passed'] for r in rows) else 1


def write_json(path, rows):
    if path:
        with open(path, 'w') as f:
            json.dump(rows, f, indent=2)
            f.write('\n')


if __name__ == '__main__':
    sys.exit(main())

"""converge-bench: create and delete generated stacks on an in-process
embedded engine and report what each traversal cost.

    converge-bench --scenario wide --n 1000
    converge-bench --scenario deep fanin --n 200 1000 --json out.json
    converge-bench --scenario latency --n 40 --latency 0.5
"""

import argparse
import contextlib
import io
import json
import shutil
import sys
import tempfile
import time

import converge  # noqa: F401  (picks oslo.service's backend first)
from converge.bench import measure
from converge.bench import scenarios

COLUMNS = [
    # (key, heading, format)
    ('scenario', 'scenario', '%s'),
    ('n', 'n', '%d'),
    ('create_s', 'create_s', '%.2f'),
    ('resources_per_s', 'res/s', '%.1f'),
    ('bound_s', 'bound_s', '%.2f'),
    ('wall_over_bound', 'wall/bound', '%.2f'),
    ('statements_per_check_resource', 'sql/cr', '%.1f'),
    ('messages_per_check_resource', 'msg/cr', '%.2f'),
    ('locks_per_check_resource', 'locks/cr', '%.2f'),
    ('cr_p50_ms', 'cr_p50_ms', '%.1f'),
    ('cr_p95_ms', 'cr_p95_ms', '%.1f'),
    ('peak_rss_mb', 'rss_mb', '%.0f'),
    ('delete_s', 'delete_s', '%.2f'),
    ('status', 'status', '%s'),
]


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog='converge-bench',
        description='Benchmark traversals of generated HOT graphs.')
    ap.add_argument('--scenario', nargs='+', required=True,
                    choices=scenarios.NAMES,
                    help='wide: N independent resources; deep: 20 layers, '
                         'each resource needs one of the layer before; '
                         'fanin: 20 layers, each resource needs %d hubs of '
                         'the layer before; latency: servers in the deep '
                         'shape with a simulated create latency'
                         % scenarios.HUBS)
    ap.add_argument('--n', nargs='+', type=int, default=None,
                    help='resources per stack (default: %s)' % ', '.join(
                        '%s %d' % kv for kv in scenarios.DEFAULT_N.items()))
    ap.add_argument('--repeat', type=int, default=1,
                    help='runs of each scenario and n (default 1)')
    ap.add_argument('--latency', type=float,
                    default=scenarios.DEFAULT_LATENCY,
                    help='seconds per server create in the latency '
                         'scenario (default %(default)s)')
    ap.add_argument('--mode', choices=('embedded', 'distributed'),
                    default='embedded')
    ap.add_argument('--worker-threads', type=int, default=None,
                    help='override [DEFAULT] worker_threads')
    ap.add_argument('--home', default=None,
                    help='engine home (default: a temporary directory, '
                         'removed afterwards)')
    ap.add_argument('--json', metavar='FILE', default=None,
                    help='also write the rows as JSON to FILE')
    args = ap.parse_args(argv)
    if args.n and any(n < 1 for n in args.n):
        ap.error('--n must be at least 1')
    if args.repeat < 1:
        ap.error('--repeat must be at least 1')
    return args


@contextlib.contextmanager
def embedded_engine(home, worker_threads=None):
    """An in-process embedded engine with its workers running."""
    from converge import conf
    from converge.db import session
    from converge.engine import context
    conf.setup([], home=home, log=False)
    if worker_threads:
        conf.CONF.set_override('worker_threads', worker_threads)
    engine = context.Engine()
    engine.start_workers()
    try:
        yield engine
    finally:
        engine.stop_workers()
        session.forget()


def _wait(engine, stack_id, traversal_id):
    from converge.cmd import progress
    return progress.follow(engine, stack_id, traversal_id,
                           out=io.StringIO(), tty=False,
                           local_workers=True).stack


def run_one(engine, scenario, workdir, stack_name):
    """Create then delete one scenario's stack; return its row."""
    from converge.engine import stacks
    bundle = scenario.bundle(workdir)
    chain = measure.longest_chain(scenario.deps)
    bound = chain * scenario.latency if scenario.latency else None
    scenario.prepare(engine)
    try:
        with measure.Recorder(engine) as rec:
            before = rec.snapshot()
            start = time.perf_counter()
            stack_id, trav = stacks.create(engine, stack_name, bundle, {})
            stack = _wait(engine, stack_id, trav)
            create_s = time.perf_counter() - start
            after = rec.snapshot()
        row = dict(scenario=scenario.name, n=scenario.n,
                   create_s=create_s,
                   resources_per_s=measure.ratio(scenario.n, create_s),
                   chain=chain, bound_s=bound,
                   wall_over_bound=measure.ratio(create_s, bound))
        row.update(measure.figures(rec.window(before, after, trav)))
        create_status = '%s_%s' % (stack.action, stack.status)
    finally:
        scenario.finish(engine)

    start = time.perf_counter()
    stack_id, dtrav = stacks.delete(engine, stack_id)
    stack = _wait(engine, stack_id, dtrav)
    row['delete_s'] = time.perf_counter() - start
    row['peak_rss_mb'] = measure.peak_rss_mb()
    delete_status = '%s_%s' % (stack.action, stack.status)
    ok = (create_status == 'CREATE_COMPLETE'
          and delete_status == 'DELETE_COMPLETE')
    row['status'] = 'ok' if ok else '%s/%s' % (create_status, delete_status)
    return row


def run(scenario_names, ns=None, repeat=1, latency=scenarios.DEFAULT_LATENCY,
        home=None, worker_threads=None, on_row=None):
    """Run every scenario for every n on one engine; return the rows."""
    tmp = tempfile.mkdtemp(prefix='converge-bench-')
    rows = []
    try:
        with embedded_engine(home or tmp + '/home', worker_threads) as engine:
            count = 0
            for name in scenario_names:
                for n in ns or [scenarios.DEFAULT_N[name]]:
                    for _ in range(repeat):
                        count += 1
                        scenario = scenarios.make(name, n, latency=latency)
                        row = run_one(engine, scenario, tmp,
                                      'bench-%s-%d-%d' % (name, n, count))
                        rows.append(row)
                        if on_row:
                            on_row(row)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def format_cell(value, fmt):
    if value is None:
        return '-'
    return fmt % value


def table(rows, header=True):
    cells = [[format_cell(r.get(k), f) for k, _, f in COLUMNS] for r in rows]
    heads = [h for _, h, _ in COLUMNS]
    widths = [max([len(h)] + [len(c[i]) for c in cells])
              for i, h in enumerate(heads)]
    lines = []
    if header:
        lines.append('  '.join(h.rjust(w) for h, w in zip(heads, widths)))
    for c in cells:
        lines.append('  '.join(v.rjust(w) for v, w in zip(c, widths)))
    return '\n'.join(lines)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.mode == 'distributed':
        print('converge-bench: --mode distributed is not yet implemented',
              file=sys.stderr)
        return 2
    rows = run(args.scenario, args.n, args.repeat, args.latency, args.home,
               args.worker_threads,
               on_row=lambda r: print('.', end='', file=sys.stderr,
                                      flush=True))
    print('', file=sys.stderr)
    print(table(rows))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(rows, f, indent=2)
            f.write('\n')
    return 0 if all(r['status'] == 'ok' for r in rows) else 1


if __name__ == '__main__':
    sys.exit(main())

"""Before and after: docs/performance.md's rows on two git revisions, back to
back on this machine.

    bench/compare OLD_REV [NEW_REV]           (NEW_REV: HEAD)
    COMPARE_MAX_N=100 bench/compare main      (a quick check of the script)

Each revision is checked out in a temporary worktree with a virtualenv of
its own, built as ./run-tests builds one; each row is one `converge-bench`
command run once on each revision, old and new alternating which goes first
(so that a drift of the machine's speed spreads over both). A flag one
revision's converge-bench does not know is left out of both runs. Prints
one table, each figure old, new and new/old, and writes every row of both
runs to bench/results/compare-OLD-NEW-TIME.json.

Only committed code is measured (a worktree checks out a commit).
"""

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

#: the rows docs/performance.md reports: (scenario, size, workers); size is
#: --nodes for tripleo, --n otherwise; workers None is the embedded mode
ROWS = [
    ('wide', 1000, None), ('wide', 10000, None),
    ('deep', 1000, None), ('deep', 10000, None),
    ('wide', 1000, 2), ('wide', 10000, 2),
    ('deep', 1000, 2), ('deep', 10000, 2),
    ('tripleo', 1000, None), ('tripleo', 1000, 2),
]
#: resources per tripleo node (scenarios.tripleo_doc), to cap its size
TRIPLEO_PER_NODE = 22
#: (row key, heading, format): the figures compared
METRICS = [
    ('create_s', 'create_s', '%.2f'),
    ('resources_per_s', 'res/s', '%.1f'),
    ('statements_per_check_resource', 'sql/cr', '%.2f'),
    ('messages_per_check_resource', 'msg/cr', '%.2f'),
    ('locks_per_check_resource', 'locks/cr', '%.2f'),
    ('cr_p50_ms', 'p50_ms', '%.1f'),
    ('cr_p95_ms', 'p95_ms', '%.1f'),
    ('peak_rss_mb', 'rss_mb', '%.0f'),
]
#: a row whose resources per second fell by more than this is flagged
#: "slower?" (runs of a second vary by about 10% on this machine)
NOISE = 0.10
#: statements per unit that rose by more than this are flagged "sql+"
SQL_SLACK = 0.05


# -- what to run -------------------------------------------------------------

def capped(rows, max_n):
    """`rows` with sizes cut to `max_n` resources (tripleo: to the nodes
    that make at most `max_n`, at least one), duplicates dropped."""
    if not max_n:
        return list(rows)
    out = []
    for scenario, size, workers in rows:
        if scenario == 'tripleo':
            size = min(size, max(1, max_n // TRIPLEO_PER_NODE))
        else:
            size = min(size, max_n)
        if (scenario, size, workers) not in out:
            out.append((scenario, size, workers))
    return out


def row_args(scenario, size, workers):
    args = ['--scenario', scenario,
            '--nodes' if scenario == 'tripleo' else '--n', str(size)]
    if workers:
        args += ['--mode', 'distributed', '--workers', str(workers)]
    return args


def row_label(scenario, size, workers):
    return '%s %d %s' % (scenario, size,
                         '%dw' % workers if workers else 'embedded')


def flags_of(help_text):
    """The long options a --help output names."""
    return set(re.findall(r'(?<![\w-])(--[a-z][\w-]*)', help_text))


def common_args(args, *flag_sets):
    """`args` without the options (and their values) some of `flag_sets`
    lacks; returns (kept, dropped)."""
    known = set.intersection(*map(set, flag_sets))
    kept, dropped, skipping = [], [], False
    for arg in args:
        if arg.startswith('--'):
            skipping = arg.split('=', 1)[0] not in known
        (dropped if skipping else kept).append(arg)
    return kept, dropped


def order(index):
    """Which revision runs first on row `index`: old, new, new, old..."""
    return ('old', 'new') if index % 2 == 0 else ('new', 'old')


# -- arithmetic and the report ------------------------------------------------

def figure(row, key):
    if row is None:
        return None
    if key == 'peak_rss_mb' and row.get('peak_rss_mb') is None:
        each = row.get('peak_rss_mb_each') or []
        return max(each) if each else None
    return row.get(key)


def ratio(new, old):
    if new is None or old is None or not old:
        return None
    return new / old


def compared(old, new):
    """{metric: (old, new, new/old)} of two rows (None where missing)."""
    out = {}
    for key, _, _ in METRICS:
        o, n = figure(old, key), figure(new, key)
        out[key] = (o, n, ratio(n, o))
    return out


def notes(old, new, noise=NOISE, slack=SQL_SLACK):
    """What the reader should look at in a row: a failed run, fewer
    resources per second beyond noise, more statements per unit."""
    out = []
    for side, row in (('old', old), ('new', new)):
        status = row.get('status') if row else 'no result'
        if status != 'ok':
            out.append('%s: %s' % (side, status))
    if out:
        return out
    rps = ratio(figure(new, 'resources_per_s'), figure(old, 'resources_per_s'))
    if rps is not None and rps < 1 - noise:
        out.append('slower?')
    o = figure(old, 'statements_per_check_resource')
    n = figure(new, 'statements_per_check_resource')
    if o is not None and n is not None and n > o + slack:
        out.append('sql+')
    return out


def _cell(value, fmt):
    return '-' if value is None else fmt % value


def table(results):
    """One line per row: each figure old, new and new/old."""
    heads = ['row']
    subs = ['']
    for _, head, _ in METRICS:
        heads += [head, '', '']
        subs += ['old', 'new', 'x']
    heads.append('note')
    subs.append('')
    lines = []
    for res in results:
        cmp = compared(res.get('old'), res.get('new'))
        cells = [res['label']]
        for key, _, fmt in METRICS:
            o, n, x = cmp[key]
            cells += [_cell(o, fmt), _cell(n, fmt), _cell(x, '%.2f')]
        cells.append(', '.join(notes(res.get('old'), res.get('new'))))
        lines.append(cells)
    widths = [max(len(c[i]) for c in [heads, subs] + lines)
              for i in range(len(heads))]

    def fmt_line(cells):
        first = cells[0].ljust(widths[0])
        rest = [c.rjust(w) for c, w in zip(cells[1:-1], widths[1:-1])]
        return '  '.join([first] + rest + [cells[-1]]).rstrip()
    return '\n'.join(fmt_line(c) for c in [heads, subs] + lines)


# -- running ------------------------------------------------------------------

class Revision:
    """One revision: a worktree of it, with its own virtualenv."""

    def __init__(self, repo, rev, workdir):
        self.rev = rev
        self.sha = _git(repo, 'rev-parse', '--verify', rev + '^{commit}')
        self.repo = repo
        self.dir = os.path.join(workdir, self.sha[:12])
        self.bench = os.path.join(self.dir, '.venv', 'bin', 'converge-bench')
        self.flags = set()
        self.made = False

    def build(self, log):
        if not os.path.isdir(self.dir):
            _git(self.repo, 'worktree', 'add', '--quiet', '--detach',
                 self.dir, self.sha)
            self.made = True
        if not os.path.exists(self.bench):
            log('building %s (%s) in %s' % (self.rev, self.sha[:12],
                                             self.dir))
            # as ./run-tests does
            subprocess.run([sys.executable, '-m', 'venv', '.venv'],
                           cwd=self.dir, check=True)
            reqs = ['-r', 'test-requirements.txt'] if os.path.exists(
                os.path.join(self.dir, 'test-requirements.txt')) else []
            pip = subprocess.run(
                [os.path.join('.venv', 'bin', 'pip'), 'install', '-q',
                 '--disable-pip-version-check', '-e', '.'] + reqs,
                cwd=self.dir, capture_output=True, text=True)
            if pip.returncode:
                # pip's noise about missing local indexes says nothing
                raise subprocess.CalledProcessError(
                    pip.returncode, pip.args, pip.stdout, '\n'.join(
                        line for line in pip.stderr.splitlines()
                        if 'WARNING: Location' not in line))
        helped = subprocess.run([self.bench, '--help'], cwd=self.dir,
                                capture_output=True, text=True, check=True)
        self.flags = flags_of(helped.stdout)
        return self

    def run(self, args, json_path):
        """One converge-bench command; its rows, or a failed row."""
        proc = subprocess.run([self.bench] + args + ['--json', json_path],
                              cwd=self.dir, capture_output=True, text=True,
                              env=_clean_env())
        rows = []
        if os.path.exists(json_path):
            with open(json_path) as f:
                rows = json.load(f)
        if not rows:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            return dict(status='exit %d' % proc.returncode,
                        error=' / '.join(tail))
        return rows[0]

    def remove(self):
        if self.made:
            subprocess.run(['git', '-C', self.repo, 'worktree', 'remove',
                            '--force', self.dir], capture_output=True)


def _clean_env():
    # each revision's converge-bench finds its own converge-worker next to
    # its python: no virtualenv of the caller's should come first
    env = dict(os.environ)
    env.pop('VIRTUAL_ENV', None)
    env.pop('PYTHONPATH', None)
    return env


def _git(repo, *args):
    return subprocess.run(['git', '-C', repo] + list(args), check=True,
                          capture_output=True, text=True).stdout.strip()


def compare(old, new, rows, scratch, log, on_row=None):
    """Run every row on both revisions; return the results."""
    results = []
    for index, (scenario, size, workers) in enumerate(rows):
        args, dropped = common_args(row_args(scenario, size, workers),
                                    old.flags, new.flags)
        res = dict(label=row_label(scenario, size, workers), args=args,
                   dropped=dropped, scenario=scenario, size=size,
                   workers=workers, first=order(index)[0])
        for side in order(index):
            rev = old if side == 'old' else new
            log('%s: %s converge-bench %s' % (res['label'], side,
                                             ' '.join(args)))
            res[side] = rev.run(args, os.path.join(
                scratch, '%d-%s.json' % (index, side)))
        results.append(res)
        if on_row:
            on_row(results)
    return results


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog='bench/compare',
        description="docs/performance.md's rows (wide and deep at 1,000 "
                    "and 10,000, tripleo at 1,000 nodes; embedded and 2 "
                    "distributed workers) on two revisions, back to back.")
    ap.add_argument('old', help='the revision before (any git revision)')
    ap.add_argument('new', nargs='?', default='HEAD',
                    help='the revision after (default HEAD)')
    ap.add_argument('--max-n', type=int,
                    default=int(os.environ.get('COMPARE_MAX_N') or 0),
                    help='cut every row to this many resources (a quick '
                         'check of the script; default $COMPARE_MAX_N, '
                         'else the full sizes)')
    ap.add_argument('--workdir', default=None,
                    help='where the worktrees and their virtualenvs go; '
                         'kept, and reused by the next run (default: a '
                         'temporary directory, removed afterwards)')
    ap.add_argument('--repo', default=None,
                    help='the git repository (default: the one holding '
                         'this script)')
    args = ap.parse_args(argv)
    if args.max_n < 0:
        ap.error('--max-n must be at least 1')
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    here = os.path.dirname(os.path.abspath(__file__))
    repo = args.repo or _git(here, 'rev-parse', '--show-toplevel')

    def log(msg):
        print('compare: %s' % msg, file=sys.stderr, flush=True)

    workdir = args.workdir or tempfile.mkdtemp(prefix='converge-compare-')
    os.makedirs(workdir, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix='rows-', dir=workdir)
    try:
        old = Revision(repo, args.old, workdir)
        new = Revision(repo, args.new, workdir)
    except subprocess.CalledProcessError as e:
        print('bench/compare: not a revision: %s' % e.stderr.strip(),
              file=sys.stderr)
        return 2
    stamp = datetime.datetime.now(datetime.timezone.utc)
    out = os.path.join(repo, 'bench', 'results', 'compare-%s-%s-%s.json' % (
        old.sha[:7], new.sha[:7], stamp.strftime('%Y%m%dT%H%M%SZ')))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    rows = capped(ROWS, args.max_n)

    def save(results):
        with open(out, 'w') as f:
            json.dump(dict(old=dict(rev=old.rev, sha=old.sha),
                           new=dict(rev=new.rev, sha=new.sha),
                           started=stamp.isoformat(), cores=os.cpu_count(),
                           max_n=args.max_n or None, rows=results),
                      f, indent=2)
            f.write('\n')
    try:
        try:
            old.build(log)
            new.build(log)
        except subprocess.CalledProcessError as e:
            print('bench/compare: %s failed (exit %d)%s' % (
                ' '.join(e.cmd), e.returncode,
                ': ' + e.stderr.strip() if e.stderr else ''),
                file=sys.stderr)
            return 2
        results = compare(old, new, rows, scratch, log, on_row=save)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if not args.workdir:
            old.remove()
            new.remove()
            shutil.rmtree(workdir, ignore_errors=True)
    print('old: %s (%s)   new: %s (%s)   x = new/old' % (
        old.rev, old.sha[:12], new.rev, new.sha[:12]))
    print(table(results))
    dropped = sorted({a for r in results for a in r['dropped']
                      if a.startswith('--')})
    if dropped:
        print('left out (one revision does not know them): %s'
              % ' '.join(dropped))
    print('wrote %s' % out)
    # a slower row is for the reader to judge (noise); a failed run is not
    ok = all((r.get(side) or {}).get('status') == 'ok'
             for r in results for side in ('old', 'new'))
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())

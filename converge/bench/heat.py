"""Heat beside converge: runs the heat-bench anchor (Heat's own engine,
openstack-heat from PyPI, in its own virtualenv) on the same shape and size
and turns its result into a bench row.

heat-bench's ``one --mode inline`` drives Heat's real convergence code
(check_resource, sync points) on SQLite from one thread: Heat's threaded
worker fails on SQLite ("database is locked"), so this is the mode in which
Heat finishes, and it measures Heat's per-resource cost without waits.
"""

import json
import os
import subprocess

#: converge's shapes that heat-bench builds the same way
SHAPES = {'wide': 'flat', 'deep': 'layered'}
TIMEOUT = 3600

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def default_script():
    return os.environ.get('CONVERGE_HEAT_BENCH') or os.path.normpath(
        os.path.join(_REPO, '..', 'shared', 'anchors', 'heat-bench',
                     'heat_bench.py'))


def default_venv():
    return os.environ.get('CONVERGE_HEAT_VENV') or os.path.join(
        _REPO, '.heatbench', 'venv')


def missing(script, venv):
    """Why Heat cannot be run, or None."""
    if not os.path.exists(script):
        return 'heat-bench not found at %s (--heat-bench)' % script
    if not os.path.exists(os.path.join(venv, 'bin', 'python')):
        return ("Heat's virtualenv not found at %s: make it with "
                "HEATBENCH_DIR=%s python3 %s setup (--heat-venv)"
                % (venv, os.path.dirname(venv), script))
    return None


def row_of(scenario, n, result):
    """A bench row from heat-bench's RESULT (None: it produced none)."""
    row = dict(scenario=scenario, engine='heat', mode='embedded', n=n,
               status='no result')
    if result is None:
        return row
    rss = result.get('peak_rss_mb')
    row.update(create_s=result.get('create_s'),
               resources_per_s=result.get('create_rps'),
               delete_s=result.get('delete_s'),
               peak_rss_mb=rss, peak_rss_mb_each=[rss] if rss else [],
               rss_mb=None if rss is None else '%.0f' % rss,
               heat_version=result.get('heat_version'),
               status='ok' if result.get('ok') else 'failed')
    return row


def parse(stdout):
    """heat-bench's RESULT line, as a dict (None if it printed none)."""
    for line in stdout.splitlines():
        if line.startswith('RESULT '):
            return json.loads(line[len('RESULT '):])
    return None


def run(script, venv, scenario, n, workdir):
    os.makedirs(workdir, exist_ok=True)
    cmd = [os.path.join(venv, 'bin', 'python'), script, 'one',
           '--mode', 'inline', '--db', 'sqlite', '--shape', SHAPES[scenario],
           '--type', 'none', '--n', str(n), '--workdir', workdir]
    env = dict(os.environ, HEATBENCH_DIR=os.path.dirname(venv))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env,
                              timeout=TIMEOUT)
        result = parse(proc.stdout)
    except subprocess.TimeoutExpired:
        result = None
    return row_of(scenario, n, result)

"""Shared fixtures. `import converge` first: it picks oslo.service's
threading backend before anything imports oslo_messaging."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import converge  # noqa: F401
import pytest

#: the home of whatever a test runs without one of its own (an in-process
#: conf.setup([]), a process that inherits this environment): never the
#: real ~/.converge (real_home_untouched below checks)
RUN_HOME = tempfile.mkdtemp(prefix='converge-tests-home-')
os.environ['CONVERGE_HOME'] = RUN_HOME
#: every command reads for itself: a home's read server (converge/client/
#: home.py) would outlive the test that started it, one per home the
#: tests make; tests/test_read_server.py turns it on where it is the point
os.environ['OS_CLI__READ_SERVER'] = 'false'

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(REPO, 'examples')
#: the HOT corpus (read-only); CONVERGE_CORPUS names it for a checkout
#: that is not beside it (a worktree)
CORPUS = os.environ.get('CONVERGE_CORPUS') or os.path.join(
    os.path.dirname(REPO), 'shared', 'corpus', 'hot')


class CLI:
    """Runs `converge` in a subprocess against one embedded home."""

    def __init__(self, home):
        self.home = home

    def env(self):
        env = dict(os.environ)
        env.pop('CONVERGE_HOME', None)
        return env

    def popen(self, *args, **kw):
        return subprocess.Popen(
            [sys.executable, '-m', 'converge.cmd.cli', '--home', self.home]
            + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=self.env(), **kw)

    def run(self, *args, check=True, timeout=300):
        proc = subprocess.run(
            [sys.executable, '-m', 'converge.cmd.cli', '--home', self.home]
            + list(args), capture_output=True, text=True, env=self.env(),
            timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError('converge %s failed (%d):\n%s\n%s' % (
                ' '.join(args), proc.returncode, proc.stdout, proc.stderr))
        return proc

    def json(self, *args, **kw):
        proc = self.run(*(list(args) + ['-f', 'json']), **kw)
        return json.loads(proc.stdout)


def pytest_unconfigure(config):
    shutil.rmtree(RUN_HOME, ignore_errors=True)


def pytest_configure(config):
    """Byte-compile converge once, before any test starts a `converge`
    subprocess. Where PYTHONDONTWRITEBYTECODE is set, no process writes
    the cache, and each of the hundreds of commands, workers and agents
    the tests start compiled converge from source (a quarter of a second
    of its start); Python reads a cache that exists either way, and
    recompiles a module whose source changed."""
    if not hasattr(config, 'workerinput'):  # once: in the xdist controller
        import compileall
        compileall.compile_dir(os.path.join(REPO, 'converge'), quiet=2)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """`--dist loadgroup` (./run-tests) keeps an xdist_group's tests on one
    worker (the `services` group: tests that restart or pause the shared
    RabbitMQ, PostgreSQL and Redis, or lean on their timing, one at a time)
    by adding `@group` to their node ids. pytest 9.2 keeps a node's id in
    `_id`, so pytest-xdist's write to `_nodeid` is lost and the groups
    were spread over both workers: the id is set here where xdist's did
    not take (a no-op where it did)."""
    if not getattr(config.option, 'loadgroup', False):
        return
    from _pytest.nodeid import NodeId
    for item in items:
        names = {str(m.args[0] if m.args else m.kwargs.get('name', 'default'))
                 for m in item.iter_markers('xdist_group')}
        suffix = '@' + '_'.join(sorted(names))
        if names and not item.nodeid.endswith(suffix):
            item._id = NodeId.parse(item.nodeid + suffix)


def _real_home():
    """What the user's own ~/.converge holds: every test keeps to its own
    temporary home, so this must read the same after each test."""
    path = os.path.join(os.path.expanduser('~'), '.converge')
    seen = {}
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(root, name)
            try:
                seen[full] = os.lstat(full).st_mtime_ns
            except FileNotFoundError:
                pass
    try:
        seen[path] = os.lstat(path).st_mtime_ns
    except FileNotFoundError:
        pass
    return seen


@pytest.fixture(autouse=True)
def real_home_untouched(request):
    before = _real_home()
    yield
    after = _real_home()
    if after != before:
        changed = sorted(set(after.items()) ^ set(before.items()))
        pytest.fail('%s wrote into the real ~/.converge (a test must use a '
                    'home of its own): %s' % (
                        request.node.nodeid,
                        ', '.join(sorted({p for p, _ in changed}))[:500]),
                    pytrace=False)


@pytest.fixture
def stub():
    """A stand-in converge-api on loopback (tests/agent_stub.py)."""
    from tests import agent_stub
    api = agent_stub.StubAPI()
    yield api
    api.close()


def stop_agents(home):
    """Stop the sim's agent host of an embedded home, if one was started
    (a test leaves no process behind)."""
    disks = os.path.join(home, 'sim-disks')
    # not only where the host wrote its pid file: one spawned as the test
    # ended has not written it yet, and was left running
    if os.path.isdir(disks):
        from converge.drivers.sim import agents
        agents.shutdown('sqlite:///%s' % os.path.join(home, 'sim.db'),
                        disks)


@pytest.fixture
def cli(tmp_path):
    yield CLI(str(tmp_path / 'home'))
    stop_agents(str(tmp_path / 'home'))


@pytest.fixture
def write(tmp_path):
    """write(name, text) -> path of a file in the test's directory."""
    def _write(name, text):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return str(path)
    return _write


@pytest.fixture
def engine(tmp_path):
    """An in-process embedded engine with its worker pool running."""
    from converge import conf
    from converge.engine import context
    conf.setup([], home=str(tmp_path / 'home'), log=False)
    eng = context.Engine()
    from converge.workers import pool
    pool.start(eng)
    yield eng
    eng.close()
    stop_agents(str(tmp_path / 'home'))
    from converge.db import session
    session.forget()


@pytest.fixture
def dist(tmp_path):
    """A distributed deployment on PostgreSQL, RabbitMQ and Redis
    (tests/distributed.py; skips, naming the missing service, without
    them); its workers are the test's to start."""
    from tests.distributed import Deployment, require
    require('postgresql', 'rabbitmq', 'redis')
    d = Deployment(tmp_path)
    yield d
    d.close()

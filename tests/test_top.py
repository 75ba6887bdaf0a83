"""`converge top` (issue 41): what the engine is doing now, as the user
sees it in a terminal (tmux drives it: send-keys, capture-pane), and its
one-snapshot form against converge-api, scoped to the caller's project."""

import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from converge import exception
from converge.engine import request, service, stacks
from tests import enginetools

#: a group of 2,000 test resources: one nested stack, one traversal of
#: 2,000 nodes. Member N waits N seconds (holding no thread): after the
#: first burst one is done a second, whatever the machine's speed, so
#: the progress top shows moves for as long as the test looks
BIG = '''\
heat_template_version: 2018-08-31
resources:
  group:
    type: OS::Heat::ResourceGroup
    properties:
      count: 2000
      resource_def:
        type: OS::Heat::TestResource
        properties: {value: v%index%, wait_secs: "%index%"}
'''


def _tmux():
    found = shutil.which('tmux')
    if found is None:
        if os.environ.get('CI'):
            pytest.fail('tmux is missing (.ci/run installs it)')
        pytest.skip('tmux is not installed')
    return found


class Pane:
    """One command in a tmux session of its own (its own server, on a
    socket in `folder`, so no other tmux is touched), read as the user
    would see it."""

    def __init__(self, argv, folder, width=160, height=50):
        self.tmux = _tmux()
        self.socket = os.path.join(folder, 'tmux.sock')
        # the command's exit status, as its shell saw it: tmux's own
        # (#{pane_dead_status}) is empty when tmux reaps the command late,
        # as it did now and then on a busy machine (the command a zombie)
        self.status = os.path.join(folder, 'status')
        self._run('new-session', '-d', '-s', 'top', '-x', str(width),
                  '-y', str(height), ' '.join(_quote(a) for a in argv)
                  + '; echo $? > ' + _quote(self.status))
        # the pane stays when the command ends, so its exit is seen
        self._run('set-option', '-t', 'top', 'remain-on-exit', 'on')

    def _run(self, *args):
        return subprocess.run([self.tmux, '-S', self.socket] + list(args),
                              capture_output=True, text=True, check=True,
                              timeout=30).stdout

    def screen(self):
        return self._run('capture-pane', '-p', '-t', 'top')

    def keys(self, *keys):
        self._run('send-keys', '-t', 'top', *keys)

    def dead(self):
        """None while the command runs, else its exit status."""
        try:
            with open(self.status) as f:
                return int(f.read())
        except (OSError, ValueError):  # not yet (or not yet whole)
            return None

    def close(self):
        subprocess.run([self.tmux, '-S', self.socket, 'kill-server'],
                       capture_output=True, timeout=30)


def _quote(arg):
    return "'%s'" % arg.replace("'", "'\\''")


def _until(what, deadline, describe):
    """what()'s first true value, looked for until `deadline`."""
    while True:
        found = what()
        if found:
            return found
        assert time.monotonic() < deadline, describe()
        time.sleep(0.1)


@pytest.mark.long  # a 2,000-resource create, watched: 10-30 s
def test_top_shows_a_big_create_moving_and_q_quits(cli, write, tmp_path):
    tmpl = write('big.yaml', BIG)
    # embedded: the create's process is the engine; top reads the home
    create = cli.popen('stack', 'create', 'big', '-t', tmpl)
    deadline = time.monotonic() + 240
    # the home is the create's to make: top starts once the stack is there
    _until(lambda: cli.json('stack', 'list'), deadline, lambda: 'no stack')
    # (pytest's environment says COLUMNS=80 and LINES=24, which curses
    # would take over the pane's own size)
    pane = Pane(['env', '-u', 'CONVERGE_HOME', '-u', 'COLUMNS', '-u',
                 'LINES', sys.executable, '-m',
                 'converge.cmd.cli', '--home', cli.home, 'top',
                 '--interval', '0.5'], str(tmp_path))
    try:
        # the group's nested stack (big-group-...) under the stack, with
        # its 2,000 nodes counted as they are done
        row = re.compile(r'^  big-group-\S+ +CREATE +running +(\d+)/2000 '
                         r'+\[[#.]{20}\] ', re.M)

        def progress():
            """(the group's nodes done, the screen) as it shows now."""
            screen = pane.screen()
            m = row.search(screen)
            return m and (int(m.group(1)), screen)
        first, screen = _until(progress, deadline, pane.screen)
        # the stack itself, its one node (the group) not done yet
        assert re.search(r'^big +CREATE +running +0/1 ', screen, re.M), \
            screen
        assert screen.rstrip().endswith('q quits'), screen
        # it moves: a later refresh shows more of them done
        _until(lambda: (progress() or (0,))[0] > first, deadline,
               pane.screen)
        pane.keys('q')
        assert _until(lambda: pane.dead() is not None and
                      ('exited', pane.dead()), deadline,
                      pane.screen) == ('exited', 0)
    finally:
        pane.close()
        create.kill()
        create.wait()


WAITING = '''\
heat_template_version: 2018-08-31
resources:
  quick:
    type: OS::Heat::Value
    properties: {value: 1}
  sleepy:
    type: OS::Heat::TestResource
    properties: {action_wait_secs: {create: 40}}
  after:
    type: OS::Heat::Value
    properties: {value: 2}
    depends_on: sleepy
'''


def test_a_snapshot_counts_what_runs_in_the_callers_project(engine,
                                                             tmp_path):
    """The service's snapshot (what `converge top` shows): a traversal's
    nodes done and in all, its wait and when it comes due, the action
    that ended; nothing of it for another project."""
    svc = service.Service(engine)
    ctx = request.make(project_id='mine')
    stacks.create(engine, 'act', enginetools.bundle(tmp_path, WAITING), {},
                  project_id='mine')
    deadline = time.monotonic() + 60

    def waiting():
        snap = svc.engine_activity(ctx, due_within=60)
        [t] = snap['traversals']
        return t['done'] == 1 and t['waiting'] == 1 and snap
    snap = _until(waiting, deadline, lambda: svc.engine_activity(ctx))
    [t] = snap['traversals']
    assert (t['stack_name'], t['action'], t['state'], t['total'],
            t['ready'], t['due'], t['late']) == (
                'act', 'CREATE', 'running', 3, 0, 1, 0)
    [w] = snap['waits']
    assert (w['stack_name'], w['resource']) == ('act', 'sleepy')
    # due 40 s after the wait was made, which may be a moment after the
    # snapshot's time was taken (its rows are read after)
    assert 0 < w['in'] <= 40 + (time.time() - snap['time'])
    assert [(e['resource'], e['status']) for e in snap['slowest']] == [
        ('quick', 'COMPLETE')]
    # a wait holds no unit: nothing in flight
    assert snap['in_flight'] == [] and snap['engines'] == []
    # not due within 10 s: counted as waiting, not listed
    later = svc.engine_activity(ctx, due_within=10)
    assert later['waits'] == [] and later['waiting'] == 1
    other = svc.engine_activity(request.make(project_id='theirs'))
    assert other['traversals'] == [] and other['waits'] == []
    with pytest.raises(exception.InvalidInput):
        svc.engine_activity(ctx, window=0)

"""A home's read server (converge/client/home.py, converge/cmd/readserver.py):
the first read-only command of a home starts it, the next ones are
answered by it, with the same output, errors and exit codes as a command
that reads for itself, seeing every change and no other project's
stacks; killed, it is replaced; unasked, it ends."""

import glob
import os
import shutil
import signal
import tempfile
import time

import pytest

from tests.conftest import CLI

TEMPLATE = '''\
heat_template_version: 2018-08-31
parameters:
  password:
    type: string
    hidden: true
    default: s3cr3t-value
  size:
    type: number
    default: 3
resources:
  net:
    type: OS::Heat::None
  value:
    type: OS::Heat::Value
    properties:
      value: {list_join: ['-', [{get_param: password}, {get_resource: net}]]}
  tuple:
    type: OS::Heat::Value
    properties: {value: {a: [1, 2], b: {get_param: size}}}
outputs:
  secret:
    value: {get_attr: [value, value]}
  plain:
    description: a plain one
    value: {get_attr: [tuple, value]}
'''

#: the read-only commands of issue 41, and more that the server answers
READS = (('stack', 'list'), ('stack', 'list', '--long'),
         ('stack', 'show', 's'),
         ('stack', 'resource', 'list', 's'),
         ('stack', 'resource', 'show', 's', 'value'),
         ('stack', 'event', 'list', 's'),
         ('stack', 'output', 'list', 's'),
         ('stack', 'output', 'show', 's', 'plain'),
         ('stack', 'output', 'show', 's', '--all'),
         ('stack', 'template', 'show', 's'))
ANSWERED = 'answered by the read server'
#: seconds to wait for a server to come up or go
DEADLINE = 60


class ReadsCLI(CLI):
    """`converge` with the read server on, its sockets in `run`."""

    def __init__(self, home, run, idle=300):
        super().__init__(home)
        self.runtime = run
        self.idle = idle

    def env(self):
        env = super().env()
        env.update(OS_CLI__READ_SERVER='true', XDG_RUNTIME_DIR=self.runtime,
                   OS_CLI__READ_SERVER_IDLE=str(self.idle))
        return env

    def local(self, *args, check=True):
        """The command with the read server off: it reads for itself."""
        saved = self.env
        self.env = lambda: dict(saved(), OS_CLI__READ_SERVER='false')
        try:
            return self.run(*args, check=check)
        finally:
            self.env = saved

    def sockets(self):
        return glob.glob(os.path.join(self.runtime, 'converge-*', '*.sock'))

    def servers(self):
        """pids of the read servers of this test's sockets."""
        found = []
        for cmdline in glob.glob('/proc/[0-9]*/cmdline'):
            try:
                with open(cmdline, 'rb') as f:
                    argv = f.read().split(b'\0')
            except OSError:
                continue
            if b'converge.cmd.readserver' in argv and any(
                    self.runtime.encode() in a for a in argv):
                found.append(int(cmdline.split('/')[2]))
        return found

    def until(self, what, check):
        deadline = time.monotonic() + DEADLINE
        while not check():
            assert time.monotonic() < deadline, 'no %s after %d s' % (
                what, DEADLINE)
            time.sleep(0.05)  # a look, not a wait for something

    def served(self, *args, check=True):
        """The command, once the home's read server is up: asserted
        answered by it."""
        self.until('read server', lambda: self.sockets())
        proc = self.run('--debug', *args, check=check)
        assert ANSWERED in proc.stderr, proc.stderr[-2000:]
        return proc


@pytest.fixture
def reads(tmp_path):
    # short: a Unix socket's path has at most 107 bytes
    run = tempfile.mkdtemp(prefix='cr')
    cli = ReadsCLI(str(tmp_path / 'home'), run)
    yield cli
    for pid in cli.servers():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    shutil.rmtree(run, ignore_errors=True)


def _output(proc):
    # --debug's log lines are on stderr; what is printed is the same
    return proc.stdout


def test_reads_answered_by_the_read_server_print_what_a_command_reading_for_itself_prints(reads, write):
    reads.local('stack', 'create', '-t', write('t.yaml', TEMPLATE), 's')
    assert not reads.sockets()  # a write starts no server
    first = reads.run('--debug', 'stack', 'list')
    assert ANSWERED not in first.stderr  # none yet: it read for itself
    # the data exactly (JSON); tables of maps and lists as YAML
    for args in [a + ('-f', 'json') for a in READS] + [
            ('stack', 'show', 's'), ('stack', 'resource', 'list', 's')]:
        mine = reads.local(*args)
        served = reads.served(*args)
        assert _output(served) == _output(mine), args
    # the hidden parameter's value is in no answer
    shown = reads.served('stack', 'output', 'show', 's', 'secret')
    assert 's3cr3t-value' not in shown.stdout + shown.stderr
    assert len(reads.servers()) == 1


def test_the_read_server_sees_every_change_and_no_other_project(reads, write):
    t = write('t.yaml', TEMPLATE)
    reads.local('stack', 'create', '-t', t, 's')
    reads.run('stack', 'list')  # starts the server
    assert 's\n' in reads.served('stack', 'list', '-f', 'value',
                                 '-c', 'Stack Name').stdout
    # a change made since by another command (a write reads for itself)
    reads.run('stack', 'create', '-t', t, 'second')
    names = reads.served('stack', 'list', '-f', 'value',
                         '-c', 'Stack Name').stdout.split()
    assert sorted(names) == ['s', 'second']
    reads.run('stack', 'delete', 'second', '--yes', '--wait')
    assert reads.served('stack', 'list', '-f', 'value', '-c',
                        'Stack Name').stdout.split() == ['s']
    # another project sees none of them, as a command of its own
    other = ('--os-project-id', 'other')
    assert reads.served(*other, 'stack', 'list', '-f', 'json').stdout \
        .strip() == '[]'
    mine = reads.local(*other, 'stack', 'show', 's', check=False)
    served = reads.served(*other, 'stack', 'show', 's', check=False)
    assert served.returncode == mine.returncode != 0
    assert mine.stderr.strip() in served.stderr


def test_errors_answered_by_the_read_server_exit_as_the_commands_own(reads, write):
    reads.local('stack', 'create', '-t', write('t.yaml', TEMPLATE), 's')
    reads.run('stack', 'list')
    for args in (('stack', 'show', 'nope'),
                 ('stack', 'output', 'show', 's', 'nope'),
                 ('stack', 'resource', 'show', 's', 'nope'),
                 ('stack', 'event', 'list', 'nope')):
        mine = reads.local(*args, check=False)
        served = reads.served(*args, check=False)
        assert mine.returncode != 0, args
        assert (served.returncode, served.stdout) == \
            (mine.returncode, mine.stdout), args
        assert mine.stderr.strip() in served.stderr, args


@pytest.mark.long  # 5 s and more: servers started and ended
def test_a_killed_read_server_is_replaced_and_nothing_is_lost(reads, write):
    reads.local('stack', 'create', '-t', write('t.yaml', TEMPLATE), 's')
    reads.run('stack', 'list')
    expected = reads.served('stack', 'show', 's').stdout
    [pid] = reads.servers()
    os.kill(pid, signal.SIGKILL)
    reads.until('end of the killed server', lambda: pid not in
                reads.servers())
    # its socket is left: the next command reads for itself, the same
    again = reads.run('--debug', 'stack', 'show', 's')
    assert ANSWERED not in again.stderr and again.stdout == expected
    reads.until('a new server', lambda: [
        p for p in reads.servers() if p != pid])
    assert reads.served('stack', 'show', 's').stdout == expected


@pytest.mark.long  # 5 s and more: servers started and ended
def test_a_read_server_ends_unasked_or_with_its_home(tmp_path, write):
    run = tempfile.mkdtemp(prefix='cr')
    try:
        cli = ReadsCLI(str(tmp_path / 'home'), run, idle=1)
        cli.local('stack', 'create', '-t', write('t.yaml', TEMPLATE), 's')
        cli.run('stack', 'list')
        cli.until('read server', lambda: cli.servers())
        # a second before the idle server leaves
        cli.until('end of the idle server', lambda: not cli.servers())
        assert not cli.sockets()  # it took its socket with it

        # a long idle, but its home (and database) deleted
        cli.idle = 300
        cli.run('stack', 'list')
        cli.until('read server', lambda: cli.sockets())
        shutil.rmtree(cli.home)
        cli.until('end with the home', lambda: not cli.servers())
    finally:
        for pid in ReadsCLI('', run).servers():
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(run, ignore_errors=True)


@pytest.mark.long  # 5 s and more: servers started and ended
def test_another_configuration_has_a_read_server_of_its_own(reads, write):
    reads.local('stack', 'create', '-t', write('t.yaml', TEMPLATE), 's')
    reads.run('stack', 'list')
    reads.until('read server', lambda: reads.sockets())
    # a stack of that tag hidden: the same home, another answer
    conf = write('c.conf', '[DEFAULT]\nhidden_stack_tags = hide\n')
    reads.run('stack', 'create', '-t', write('t.yaml', TEMPLATE), 'h',
              '--tags', 'hide')
    reads.run('--config-file', conf, 'stack', 'list')
    reads.until('second server', lambda: len(reads.sockets()) == 2)
    listed = reads.served('--config-file', conf, 'stack', 'list', '-f',
                          'value', '-c', 'Stack Name').stdout.split()
    assert listed == ['s']
    assert sorted(reads.served('stack', 'list', '-f', 'value', '-c',
                               'Stack Name').stdout.split()) == ['h', 's']


def test_with_the_read_server_off_no_server_starts(tmp_path, write):
    run = tempfile.mkdtemp(prefix='cr')
    try:
        cli = ReadsCLI(str(tmp_path / 'home'), run)
        cli.local('stack', 'create', '-t', write('t.yaml', TEMPLATE), 's')
        for _ in range(2):
            proc = cli.local('--debug', 'stack', 'list')
            assert ANSWERED not in proc.stderr
        assert not cli.sockets() and not cli.servers()
    finally:
        shutil.rmtree(run, ignore_errors=True)

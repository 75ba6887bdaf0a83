"""converge as system services (docs/install.md, etc/systemd/): the units
are valid and start the console scripts setup.cfg declares, with options
those take; the units that say Type=notify do tell systemd they run, and
stop on SIGTERM; the agent's unit runs deployments logging to journald;
`converge-manage db sync|version`; and every option, command, metric and
unit docs/install.md names exists."""

import configparser
import importlib.metadata
import os
import re
import shlex
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
from concurrent import futures

import pytest

from converge import userdata
from converge.db import migrate
from tests.conftest import REPO

BIN = os.path.dirname(sys.executable)
UNITS = os.path.join(REPO, 'etc', 'systemd')
CONF = '/etc/converge/converge.conf'


def console_scripts():
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(os.path.join(REPO, 'setup.cfg'))
    return {line.split('=')[0].strip() for line in
            cfg['options.entry_points']['console_scripts'].splitlines()
            if line.strip()}


def unit_files():
    return sorted(os.path.join(UNITS, n) for n in os.listdir(UNITS)
                  if n.endswith('.service'))


def read_unit(path):
    """{section: {key: [values]}}: systemd repeats keys, which
    configparser would not take."""
    sections, current = {}, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith(('#', ';')):
                continue
            assert not line.endswith('\\'), 'continued line in %s' % path
            if line.startswith('['):
                current = sections.setdefault(line[1:-1], {})
                continue
            key, _, value = line.partition('=')
            current.setdefault(key.strip(), []).append(value.strip())
    return sections


_HELP = {}
#: the home `converge --help` makes (a pytest temporary directory)
_HELP_HOME = []
#: commands that hand the arguments they do not parse themselves to
#: oslo.config (conf.setup), as converge-worker does: converge-api's own
#: --help lists only --bind
OSLO_COMMAND_LINE = {'converge-api': 'converge-worker'}


def help_of(prog, *args):
    """`prog ARGS --help`: (exit status, what it printed)."""
    key = (prog,) + args
    if key not in _HELP:
        done = subprocess.run(
            [os.path.join(BIN, prog)] + list(args) + ['--help'],
            capture_output=True, text=True, timeout=120,
            env=dict(os.environ, CONVERGE_HOME=_HELP_HOME[0]))
        _HELP[key] = (done.returncode, done.stdout + done.stderr)
    return _HELP[key]


@pytest.fixture(scope='module', autouse=True)
def help_home(tmp_path_factory):
    _HELP_HOME[:] = [str(tmp_path_factory.mktemp('help-home'))]


def prefetch_help(*keys):
    """Run several `--help`s at once (each is mostly a Python start)."""
    with futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda key: help_of(*key), keys))


def options_of(prog):
    status, text = help_of(prog)
    assert status == 0, text
    found = set(re.findall(r'--[\w-]+', text))
    if prog in OSLO_COMMAND_LINE:
        found |= options_of(OSLO_COMMAND_LINE[prog])
    return found


def check_command(tokens):
    """A converge command as the docs or a unit write it: the command is
    a console script and takes every --option given; the manage and CLI
    commands' subcommands parse (their --help, which reads no file)."""
    while tokens and tokens[0] == 'sudo':
        tokens = tokens[3:] if tokens[1:2] == ['-u'] else tokens[1:]
    prog, args = tokens[0], tokens[1:]
    assert prog in console_scripts(), '%s: no such console script' % prog
    given = {a.split('=')[0] for a in args if re.match(r'--\w', a)}
    if prog in ('converge-manage', 'converge'):
        status, text = help_of(prog, *args)
        assert status == 0, '%s: %s' % (' '.join(tokens), text)
        accepted = set(re.findall(r'--[\w-]+', text + help_of(prog)[1]))
    else:
        accepted = options_of(prog)
    assert given <= accepted, '%s: %s not taken' % (
        ' '.join(tokens), sorted(given - accepted))


# -- the units --------------------------------------------------------------

@pytest.mark.skipif(shutil.which('systemd-analyze') is None,
                    reason='no systemd-analyze on this machine')
def test_units_pass_systemd_analyze_verify(tmp_path):
    """systemd's own check (each key and value, the commands executable),
    on copies whose /usr/bin is this venv's bin. It exits 0 on an unknown
    key or a value it cannot parse, saying so on stderr."""
    for path in unit_files():
        with open(path) as f:
            text = f.read().replace('/usr/bin/converge',
                                    os.path.join(BIN, 'converge'))
        (tmp_path / os.path.basename(path)).write_text(text)
    done = subprocess.run(
        ['systemd-analyze', 'verify']
        + sorted(str(p) for p in tmp_path.iterdir()),
        capture_output=True, text=True, timeout=60, cwd=tmp_path)
    ours = [line for line in done.stderr.splitlines() if 'converge' in line]
    assert done.returncode == 0 and not ours, done.stderr


def test_units_start_the_console_scripts_as_the_distros_do():
    units = {os.path.basename(p): read_unit(p) for p in unit_files()}
    assert set(units) == {'converge-api.service', 'converge-worker.service',
                          'converge-worker@.service',
                          'converge-observer.service',
                          'converge-agent.service'}
    prefetch_help(*[(p,) for p in ('converge-api', 'converge-worker',
                                   'converge-observer', 'converge-agent')])
    started = set()
    for name, unit in units.items():
        service = unit['Service']
        [exec_start] = service['ExecStart']
        argv = shlex.split(exec_start)
        assert argv[0].startswith('/usr/bin/'), name
        argv[0] = os.path.basename(argv[0])
        check_command(argv)
        started.add(argv[0])
        assert service['Restart'] == ['on-failure'], name
        assert 'network-online.target' in unit['Unit']['After'][0].split()
        assert unit['Unit']['Wants'] == ['network-online.target'], name
        assert unit['Install']['WantedBy'] == ['multi-user.target'], name
        if name != 'converge-agent.service':
            # the agent runs on a tenant's server, as root: its hooks
            # configure the server
            assert service['User'] == ['converge'], name
            assert ' '.join(argv[1:]) == '--config-file %s' % CONF, name
    assert started == {'converge-api', 'converge-worker',
                       'converge-observer', 'converge-agent'}
    # the options their comments name exist
    for path in unit_files():
        with open(path) as f:
            check_options(f.read(), path, required=False)


def _closed_port():
    """A port bound and not listening: connections to it are refused
    for as long as the socket lives."""
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    return s


def _unit_argv(unit, conf):
    [exec_start] = read_unit(os.path.join(UNITS, unit))['Service'][
        'ExecStart']
    return [a.replace('/usr/bin/', BIN + '/').replace(CONF, str(conf))
            for a in shlex.split(exec_start)]


@pytest.mark.parametrize('unit', ['converge-worker.service',
                                  'converge-observer.service'])
def test_a_notify_unit_tells_systemd_it_runs_and_stops_on_sigterm(
        tmp_path, unit):
    """Type=notify: READY=1 on $NOTIFY_SOCKET (oslo.service's launcher);
    SIGTERM to the main process alone (KillMode=mixed) stops it all, exit
    0. Without a message bus it exits 2, which the unit does not restart
    (RestartPreventExitStatus=2)."""
    assert read_unit(os.path.join(UNITS, unit))['Service']['Type'] == [
        'notify']
    base = ('[DEFAULT]\nhome = %s\ngraceful_shutdown_timeout = 5\n'
            '[database]\nconnection = sqlite:///%s\n'
            '[metrics]\nenabled = false\n' % (tmp_path / 'home',
                                                tmp_path / 'c.db'))
    alone = tmp_path / 'alone.conf'
    alone.write_text(base)
    refused = subprocess.run(_unit_argv(unit, alone), capture_output=True,
                             text=True, timeout=120)
    assert refused.returncode == 2
    assert 'transport_url' in refused.stderr

    broker = _closed_port()
    conf = tmp_path / 'converge.conf'
    conf.write_text(base.replace(
        '[DEFAULT]\n', '[DEFAULT]\ntransport_url = rabbit://guest:guest@'
        '127.0.0.1:%d/\n' % broker.getsockname()[1]))
    # the schema first, as docs/install.md's install does (a service
    # refuses a database without it)
    subprocess.run([os.path.join(BIN, 'converge-manage'), '--config-file',
                    str(conf), 'db', 'sync'], check=True,
                   capture_output=True, timeout=120)
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / 'notify'))
    notify.settimeout(60)
    # its log (the broker refusing, again and again) to a file: a pipe
    # nobody reads until the end could fill and stop it
    log = tmp_path / 'log'
    with open(log, 'w') as out:
        proc = subprocess.Popen(
            _unit_argv(unit, conf), stdout=out, stderr=subprocess.STDOUT,
            env=dict(os.environ, NOTIFY_SOCKET=str(tmp_path / 'notify')))
    try:
        assert notify.recv(256) == b'READY=1'
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            try:   # the launcher leads a process group of its own
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                proc.kill()
            proc.wait()
        notify.close()
        broker.close()


def test_the_agent_unit_runs_deployments_and_logs_to_stderr(stub, tmp_path):
    """converge-agent.service's command line (cloud-init's copy of the
    user data, a disk of its own, `--log-file -`): the deployment runs and
    signals, the log goes to standard error (journald) and not to a file,
    and SIGTERM ends it with 0."""
    creds = stub.add_agent()
    user_data = tmp_path / 'user-data.txt'
    user_data.write_text(userdata.encode('#!/bin/sh\n', **creds))
    disk = tmp_path / 'disk'
    argv = [a.replace('/usr/bin/', BIN + '/')
             .replace('/var/lib/cloud/instance/user-data.txt', str(user_data))
             .replace('/var/lib/converge-agent', str(disk))
            for a in _unit_argv('converge-agent.service', CONF)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        dep = stub.deploy(creds['agent_id'], '#!/bin/sh\necho hi\n')
        stub.wait_for(lambda: stub.signals_of(dep['id']), what='the signal')
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert 'agent %s started' % creds['agent_id'] in err
    assert 'agent %s stopped' % creds['agent_id'] in err
    assert not (disk / 'agent.log').exists()
    [sig] = stub.signals_of(dep['id'])
    assert sig['payload']['deploy_stdout'] == 'hi\n'


def test_manage_db_sync_and_version(tmp_path):
    conf = tmp_path / 'converge.conf'
    conf.write_text('[DEFAULT]\nhome = %s\n[database]\nconnection = '
                    'sqlite:///%s\n' % (tmp_path / 'home', tmp_path / 'c.db'))

    def manage(*args):
        done = subprocess.run(
            [os.path.join(BIN, 'converge-manage'), '--config-file',
             str(conf)] + list(args), capture_output=True, text=True,
            timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    head = migrate.declared_head()
    assert manage('db', 'sync') == 'database at revision %s' % head
    assert manage('db', 'version') == head


def test_services_refuse_a_schema_that_is_not_theirs(tmp_path):
    """converge-worker and converge-observer (which never migrate) refuse
    to start on a database whose schema is not their converge's, saying
    what to do, rather than fail every unit with database errors."""
    db = tmp_path / 'c.db'
    conf = tmp_path / 'converge.conf'
    conf.write_text(
        '[DEFAULT]\nhome = %s\ntransport_url = rabbit://guest:guest@'
        '127.0.0.1:5672/\n[database]\nconnection = sqlite:///%s\n'
        % (tmp_path / 'home', db))

    def run(prog, *args):
        return subprocess.run(
            [os.path.join(BIN, prog), '--config-file', str(conf)]
            + list(args), capture_output=True, text=True, timeout=120)

    def refused(prog, *words):
        done = run(prog)
        assert done.returncode == 2, (prog, done.stderr)
        for w in words:
            assert w in done.stderr, (prog, done.stderr)

    for prog in ('converge-worker', 'converge-observer'):
        refused(prog, 'holds no converge schema', 'db sync')
    assert run('converge-manage', 'db', 'sync').returncode == 0
    head = migrate.declared_head()
    old = sorted({r for r, _ in migrate._declared()} - {head})[0]

    def stored(revision):
        with sqlite3.connect(db) as conn:
            conn.execute('UPDATE alembic_version SET version_num = ?',
                         (revision,))

    stored(old)  # a converge upgraded, its database not yet
    for prog in ('converge-worker', 'converge-observer'):
        refused(prog, 'at schema revision %s; this converge needs %s'
                % (old, head), 'db sync')
    stored('9999_from_a_newer_converge')
    refused('converge-worker', 'does not know', 'newer converge')


@pytest.mark.distributed
def test_api_refuses_a_postgresql_schema_that_is_not_its_own(dist):
    head = migrate.declared_head()
    old = sorted({r for r, _ in migrate._declared()} - {head})[0]
    dist.sql("UPDATE alembic_version SET version_num = '%s'" % old)
    done = subprocess.run(
        [os.path.join(BIN, 'converge-api'), '--bind', '127.0.0.1:0',
         '--config-file', dist.conf], capture_output=True, text=True,
        timeout=120)
    assert done.returncode == 2, done.stderr
    assert 'at schema revision %s; this converge needs %s' % (old, head) \
        in done.stderr
    assert 'postgresql' in done.stderr and 'db sync' in done.stderr


# -- docs/install.md --------------------------------------------------------

#: the oslo.config namespaces converge's processes read: its own, and
#: those of the libraries it registers options of or hands its CONF to
NAMESPACES = ('converge', 'oslo.messaging', 'oslo.log',
              'oslo.service.service', 'oslo.policy',
              'keystonemiddleware.auth_token')
_KNOWN = {}


def known_options():
    if not _KNOWN:
        points = {e.name: e for e in importlib.metadata.entry_points(
            group='oslo.config.opts')}
        for ns in NAMESPACES:
            for group, opts in points[ns].load()():
                group = getattr(group, 'name', group) or 'DEFAULT'
                _KNOWN.setdefault(group, set()).update(
                    o.dest for o in opts)
        # [keystone_authtoken]'s auth plugin (auth_type = password) has
        # its options from keystoneauth
        from keystoneauth1 import loading
        _KNOWN['keystone_authtoken'].update(
            o.dest for o in loading.get_auth_common_conf_options()
            + loading.get_auth_plugin_conf_options('password'))
    return _KNOWN


FENCED = re.compile(r'^```(\w*)\n(.*?)^```', re.M | re.S)


def prose(text):
    """Markdown without its fenced blocks, whose ``` would pair with
    inline code's backticks."""
    return FENCED.sub('', text)


def code_blocks(text, *languages):
    return [body for lang, body in
            FENCED.findall(text) if lang in languages]


def check_options(text, where, required=True):
    """Every `[section] option` named, and every option of an ini block,
    exists; no ini value carries a comment (oslo.config would read it as
    part of the value) or goes on over an indented line."""
    known = known_options()
    # markdown: in inline code (prose and comments say "the [trustee]
    # user"); a unit's comments have no other way to name one
    mention = r'`\[(\w+)\]\s+([a-z_]+)' if where.endswith('.md') else \
        r'\[(\w+)\] ([a-z_]+)'
    named = re.findall(mention, prose(text))
    for block in code_blocks(text, 'ini'):
        section = None
        for line in block.splitlines():
            if not line.strip() or line.lstrip().startswith(('#', ';')):
                continue
            assert not line[0].isspace(), '%s: continued value %r' % (
                where, line)
            if line.startswith('['):
                section = line.strip()[1:-1]
                continue
            key, _, value = line.partition('=')
            assert not re.search(r'\s[#;]', value), \
                '%s: a comment after a value: %r' % (where, line)
            named.append((section, key.strip()))
    assert named or not required, '%s names no option' % where
    unknown = [(s, o) for s, o in named if o not in known.get(s, ())]
    assert not unknown, '%s names options that do not exist: %s' % (
        where, unknown)


def _commands(text):
    """The converge commands of the shell blocks (a line continued with
    a backslash joined, comments dropped) and of inline code."""
    found = []
    for block in code_blocks(text, 'bash', 'sh', 'console'):
        for line in block.replace('\\\n', ' ').splitlines():
            tokens = shlex.split(line, comments=True)
            found.append(tokens)
    for span in re.findall(r'`([^`]+)`', prose(text)):
        span = ' '.join(span.split())
        if re.match(r'(sudo -u \w+ )?converge(-[a-z]+)?( |$)', span):
            found.append(shlex.split(span))
    word = re.compile(r'^converge(-[a-z]+)?$')
    return [t for t in found if t and (
        word.match(t[0]) or t[0] == 'sudo' and len(t) > 3
        and word.match(t[3]))]


@pytest.fixture(scope='module')
def install_md():
    with open(os.path.join(REPO, 'docs', 'install.md')) as f:
        return f.read()


def test_install_doc_names_only_options_that_exist(install_md):
    check_options(install_md, 'docs/install.md')


def test_operating_doc_config_is_what_oslo_config_reads():
    with open(os.path.join(REPO, 'docs', 'operating.md')) as f:
        check_options(f.read(), 'docs/operating.md')


def test_install_doc_names_only_commands_that_exist(install_md):
    commands = _commands(install_md)
    prefetch_help(*{tuple(t[3:] if t[0] == 'sudo' else t) if (
        t[3] if t[0] == 'sudo' else t[0]) in ('converge-manage', 'converge')
        else (t[3] if t[0] == 'sudo' else t[0],) for t in commands})
    assert {'converge-manage', 'converge-agent'} <= {
        t[3] if t[0] == 'sudo' else t[0] for t in commands}
    for tokens in commands:
        check_command(tokens)


def test_install_doc_names_only_units_and_metrics_that_exist(install_md):
    units = set(re.findall(r'converge-[\w@-]*\.service', install_md))
    assert units and units <= {os.path.basename(p) for p in unit_files()}
    with open(os.path.join(REPO, 'converge', 'metrics.py')) as f:
        declared = set(re.findall(r"'(converge_\w+)'", f.read()))
    named = {re.sub(r'_(total|bucket|count|sum)$', '', m)
             for m in re.findall(r'\bconverge_[a-z_]+', install_md)}
    assert named and named <= declared, named - declared

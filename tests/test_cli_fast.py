"""What issue 41 asks of the CLI beyond its answers: read-only commands
that import only what they use, a progress line with the time elapsed
and an estimate of what is left, and `stack graph --format svg` without
Graphviz."""

import os
import pty
import re
import select
import subprocess
import sys
import xml.etree.ElementTree as ET

from converge.cmd import progress

SVG = '{http://www.w3.org/2000/svg}'

TEMPLATE = '''\
heat_template_version: 2018-08-31
resources:
  net:
    type: OS::Heat::None
  subnet:
    type: OS::Heat::None
    depends_on: net
  port:
    type: OS::Heat::Value
    properties: {value: {get_resource: subnet}}
  lone:
    type: OS::Heat::None
outputs:
  o:
    value: {get_attr: [port, value]}
'''

#: modules a read-only command has no use for: what abandons a stack; a
#: command that shows no output: the template engine, the nested stack
#: resource, YAML (a table of plain values)
UNUSED = ('converge.engine.abandon',)
NO_OUTPUTS = UNUSED + ('converge.template.definition',
                       'converge.resources.nested', 'yaml')

#: prints the modules a command imported, at its exit
COUNTER = ('import atexit, sys; atexit.register(lambda: sys.stderr.write('
           '"MODULES " + " ".join(sorted(sys.modules)) + "\\n")); '
           'from converge.cmd.cli import main; sys.exit(main())')


def _modules(home, *args):
    proc = subprocess.run(
        [sys.executable, '-c', COUNTER, '--home', home] + list(args),
        capture_output=True, text=True, timeout=120,
        env={k: v for k, v in os.environ.items() if k != 'CONVERGE_HOME'})
    assert proc.returncode == 0, proc.stderr
    line = [ln for ln in proc.stderr.splitlines()
            if ln.startswith('MODULES ')][-1]
    return set(line.split()[1:]), proc.stdout


def test_read_only_commands_import_only_what_they_use(cli, write):
    cli.run('stack', 'create', '-t', write('t.yaml', TEMPLATE), 's')
    for args, unused in (
            (('stack', 'list'), NO_OUTPUTS),
            (('stack', 'resource', 'list', 's'), NO_OUTPUTS),
            (('stack', 'event', 'list', 's'), NO_OUTPUTS),
            (('stack', 'show', 's'), UNUSED),
            (('stack', 'output', 'show', 's', 'o'), UNUSED)):
        mods, out = _modules(cli.home, *args)
        assert out  # it answered
        assert not [m for m in unused if m in mods], (args, [
            m for m in unused if m in mods])


def test_progress_line_estimates_what_is_left():
    line = progress.progress_line('CREATE', 'IN_PROGRESS', 5, 20, 2, 0,
                                  10.0)
    assert line == ('CREATE_IN_PROGRESS  5/20 done, 2 in progress, '
                    '0 failed, 0:10 elapsed, about 0:30 left')
    # nothing done yet: no pace to go by
    assert progress.progress_line(
        'UPDATE', 'IN_PROGRESS', 0, 4, 1, 0, 3725.0).endswith(
        '1:02:05 elapsed, ? left')
    # ended: the time it took, nothing left
    assert progress.progress_line(
        'CREATE', 'COMPLETE', 4, 4, 0, 0, 75.0) == (
        'CREATE_COMPLETE  4/4 done, 0 in progress, 0 failed, 1:15 elapsed')


def test_progress_line_on_a_terminal_shows_elapsed(cli, write):
    """`stack create` on a terminal (a pty): its last progress line says
    how long the create took."""
    path = write('t.yaml', TEMPLATE)
    main, sub = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, '-m', 'converge.cmd.cli', '--home', cli.home,
         'stack', 'create', '-t', path, 'tty'],
        stdin=sub, stdout=sub, stderr=sub, env=dict(cli.env(), TERM='xterm'))
    os.close(sub)
    chunks = []
    while True:
        ready, _, _ = select.select([main], [], [], 120)
        assert ready, b''.join(chunks)
        try:
            data = os.read(main, 65536)
        except OSError:  # the pty closed: the command exited
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=60) == 0
    os.close(main)
    text = b''.join(chunks).decode()
    lines = [seg.split('\r\n')[0] for seg in text.split('\r\x1b[K')[1:]]
    assert re.fullmatch(r'CREATE_COMPLETE  4/4 done, 0 in progress, '
                        r'0 failed, \d+:\d\d elapsed', lines[-1]), lines


def _svg(cli, *args):
    """`stack graph --format svg` with no Graphviz on PATH."""
    env = dict(cli.env(), PATH=os.path.dirname(sys.executable))
    proc = subprocess.run(
        [sys.executable, '-m', 'converge.cmd.cli', '--home', cli.home,
         'stack', 'graph', '--format', 'svg'] + list(args),
        capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_graph_as_svg_without_graphviz(cli, write, tmp_path):
    cli.run('stack', 'create', '-t', write('t.yaml', TEMPLATE), 'g')
    root = ET.fromstring(_svg(cli, 'g'))
    assert root.tag == SVG + 'svg'
    nodes = {g.get('data-resource'): g for g in root.iter(SVG + 'g')
             if g.get('class') == 'node'}
    assert set(nodes) == {'net', 'subnet', 'port', 'lone'}
    assert {n.get('data-status') for n in nodes.values()} == {
        'CREATE_COMPLETE'}
    assert [t.text for t in nodes['port'].iter(SVG + 'text')] == [
        'port', 'OS::Heat::Value']
    edges = {(g.get('data-from'), g.get('data-to'))
             for g in root.iter(SVG + 'g') if g.get('class') == 'edge'}
    assert edges == {('subnet', 'net'), ('port', 'subnet')}

    def top(name):
        return float(nodes[name].find(SVG + 'rect').get('y'))
    # one layer per dependency depth, what is needed first above
    assert top('net') == top('lone') < top('subnet') < top('port')

    # --output: the same document in a file
    out = tmp_path / 'g.svg'
    assert _svg(cli, 'g', '--output', str(out)) == ''
    assert ET.parse(str(out)).getroot().tag == SVG + 'svg'


def test_graph_still_dot_by_default(cli, write):
    cli.run('stack', 'create', '-t', write('t.yaml', TEMPLATE), 'd')
    out = cli.run('stack', 'graph', 'd').stdout
    assert out.startswith('digraph "d" {')
    assert '"subnet" -> "net";' in out

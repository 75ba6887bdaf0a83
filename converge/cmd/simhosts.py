"""`converge sim host create|list|delete`: simulated hosts outside the
cloud, reached over SSH (converge/agent/sshhost.py). What an
OS::Heat::DeployedServer of the same name stands for when `converge
deployment export` writes its inventory."""

import os

from cliff import command
from cliff import lister

from converge import conf as conf_mod
from converge import exception

COLUMNS = ('Name', 'Address', 'Port', 'User', 'Disk', 'Running')


def hosts_dir():
    return os.path.join(conf_mod.home_dir(), 'sim-hosts')


def key_dir():
    return os.path.join(conf_mod.home_dir(), 'ssh')


def _row(rec):
    from converge.agent import sshhost
    return (rec['name'], rec['address'], rec['port'], rec['user'],
            rec['disk'], sshhost.alive(rec))


class CreateHost(lister.Lister):
    """Start a simulated host: its own root (namespaces, as a simulated
    server's), a real sshd in it, reached on a port of the loopback with
    converge's key (made once under $CONVERGE_HOME/ssh)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('name', metavar='<name>', nargs='+',
                            help='The host name (a DeployedServer\'s '
                                 '`name`)')
        return parser

    def take_action(self, args):
        from converge.agent import sshhost
        key = sshhost.key_pair(key_dir())
        rows = []
        for name in args.name:
            if '/' in name or name in ('', '.', '..'):
                raise exception.InvalidInput('%r is not a host name' % name)
            rec = sshhost.record(hosts_dir(), name)
            if rec is None or not sshhost.alive(rec):
                try:
                    rec = sshhost.start(hosts_dir(), name, key + '.pub')
                except OSError as e:
                    raise exception.InvalidInput(str(e))
            rows.append(_row(rec))
        return COLUMNS, rows


class ListHost(lister.Lister):
    """List the simulated hosts."""

    def take_action(self, args):
        from converge.agent import sshhost
        return COLUMNS, [_row(r) for r in sshhost.records(hosts_dir())]


class DeleteHost(command.Command):
    """Stop simulated hosts (their roots, sshd and every process in them);
    their disks stay, for inspection."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('name', metavar='<name>', nargs='+')
        return parser

    def take_action(self, args):
        from converge.agent import sshhost
        for name in args.name:
            if sshhost.record(hosts_dir(), name) is None:
                raise exception.NotFound('No simulated host %s' % name)
            sshhost.stop(hosts_dir(), name)

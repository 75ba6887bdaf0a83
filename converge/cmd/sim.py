"""`converge sim server list|show|delete|stop|start|reboot`, `sim object
list|show|delete KIND` (networks, ports, volumes, ...), `sim fault
set|clear`, `sim log`, `sim shutdown`: look at and tamper with the
simulated cloud.

The commands act as the cloud's operator: injected faults do not apply to
them and their reads are not logged (see ``SimCompute.admin``), so using
them never disturbs what the engine sees except where that is the point
(deleting or stopping a server behind the engine's back).
"""

import datetime
import json
import logging

from cliff import columns
from cliff import command
from cliff import lister
from cliff import show

from converge import exception

LOG = logging.getLogger(__name__)


class _Json(columns.FormattableColumn):
    """A dict or list: compact JSON in tables, itself in json/yaml."""

    def human_readable(self):
        return json.dumps(self._value, sort_keys=True)


def _sim(app):
    return app.sim().admin()


def _cloud(app):
    """The cloud's other kinds (objects.py), as its operator sees them:
    every project's."""
    from converge.drivers.sim import objects
    from converge.drivers.sim import rows
    compute = app.sim()
    return objects.SimCloud(compute.url, rows.ADMIN_PROJECT,
                            compute).admin()


def _networks(server):
    parts = []
    for net in sorted(server.get('addresses') or {}):
        addrs = ', '.join(a['addr'] for a in server['addresses'][net])
        parts.append('%s=%s' % (net, addrs))
    return '; '.join(parts)


def _time(ts):
    return datetime.datetime.fromtimestamp(
        ts, datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.%fZ')[:-4] + 'Z'


def find_server(servers, ref):
    """The server whose id, else name, is `ref` (a list of server dicts)."""
    for server in servers:
        if server['id'] == ref:
            return server
    named = [s for s in servers if s['name'] == ref]
    if len(named) == 1:
        return named[0]
    if named:
        raise exception.Conflict(
            'More than one server is named %s (%s): use an ID' % (
                ref, ', '.join(s['id'] for s in named)))
    # a unique ID prefix is handy when typing
    prefixed = [s for s in servers if len(ref) >= 4 and
                s['id'].startswith(ref)]
    if len(prefixed) == 1:
        return prefixed[0]
    raise exception.NotFound('No server with a name or ID of %s exists in '
                             'the sim cloud' % ref)


class ListServer(lister.Lister):
    """List the sim cloud's servers (deleted ones are not shown; one being
    deleted shows task state "deleting")."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--long', action='store_true',
                            help='Also show key name, host, idempotency key '
                                 'and creation time')
        parser.add_argument('--resource', metavar='<resource>',
                            help='Only servers created for this resource')
        return parser

    def take_action(self, args):
        cols = ['ID', 'Name', 'Status', 'Task State', 'Image', 'Flavor',
                'Networks', 'Resource']
        if args.long:
            cols += ['Key Name', 'Host', 'Idempotency Key', 'Created']
        rows = []
        for s in _sim(self.app).list_servers():
            if args.resource is not None and s['resource'] != args.resource:
                continue
            row = [s['id'], s['name'], s['status'], s['task_state'],
                   s['image'], s['flavor'], _networks(s), s['resource']]
            if args.long:
                row += [s['key_name'], s['host'], s['idempotency_key'],
                        s['created']]
            rows.append(row)
        return cols, rows


class ShowServer(show.ShowOne):
    """Show one server of the sim cloud."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('server', metavar='<server>',
                            help='Server (name or ID)')
        return parser

    def take_action(self, args):
        sim = _sim(self.app)
        server = find_server(sim.list_servers(), args.server)
        disk = sim.disk(server)
        if disk is not None:
            server['disk'] = disk   # its agent's directory
            from converge.agent import firstboot
            if server.get('first_boot'):
                # what cloud-init did with its user_data (None: not yet)
                server['firstboot'] = firstboot.status(disk)
        cols = sorted(server)
        return cols, [_Json(server[c]) if isinstance(server[c], (dict, list))
                      else server[c] for c in cols]


class _ServerAction(command.Command):
    verb = None

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('servers', metavar='<server>', nargs='+',
                            help='Server(s) to %s (name or ID)' % self.verb)
        return parser

    def act(self, sim, server_id):
        raise NotImplementedError

    def take_action(self, args):
        sim = _sim(self.app)
        servers = sim.list_servers()
        failures = []
        for ref in args.servers:
            try:
                server = find_server(servers, ref)
                self.act(sim, server['id'])
            except exception.ConvergeError as e:
                failures.append(e)
                LOG.error('Failed to %s server %s: %s',
                          self.verb, ref, e)
        if failures:
            if len(args.servers) == 1:
                raise failures[0]
            err = type(failures[0]) if all(
                type(f) is type(failures[0]) for f in failures) \
                else exception.ConvergeError
            raise err('%d of %d servers failed to %s' % (
                len(failures), len(args.servers), self.verb))


class DeleteServer(_ServerAction):
    """Delete server(s) behind the engine's back."""

    verb = 'delete'

    def act(self, sim, server_id):
        sim.delete_server(server_id)


class StopServer(_ServerAction):
    """Stop server(s): status SHUTOFF."""

    verb = 'stop'

    def act(self, sim, server_id):
        sim.stop_server(server_id)


class StartServer(_ServerAction):
    """Start server(s): status ACTIVE."""

    verb = 'start'

    def act(self, sim, server_id):
        sim.start_server(server_id)


class RebootServer(_ServerAction):
    """Reboot server(s): ACTIVE again; the agent of a server that runs
    one restarts and reads its journal again (a hook the reboot cut off
    is reported interrupted)."""

    verb = 'reboot'

    def act(self, sim, server_id):
        sim.reboot_server(server_id)


class RebuildServer(_ServerAction):
    """Rebuild server(s) with another image behind the engine's back: the
    new image shows at once, REBUILD for the rebuild latency, then ACTIVE
    (SHUTOFF if it was)."""

    verb = 'rebuild'

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--image', metavar='<image>', required=True,
                            help='Image to rebuild with (name or ID)')
        return parser

    def take_action(self, args):
        self._image = args.image
        return super().take_action(args)

    def act(self, sim, server_id):
        sim.rebuild_server(server_id, self._image)


class Shutdown(command.Command):
    """Stop the sim's agent host (the agents of every server). It starts
    again when a server with an agent is created, rebooted or read by
    the engine."""

    def take_action(self, args):
        sim = _sim(self.app)
        if sim.shutdown_agents():
            self.app.stdout.write('Stopped the agent host of %s\n'
                                  % sim.disks_dir)
        else:
            self.app.stdout.write('No agent host was running for %s\n'
                                  % sim.disks_dir)


def _kinds():
    from converge.drivers import cloud
    return cloud.KINDS


def find_object(found, kind, ref):
    """The object of `found` (views) whose id, else name, else unique id
    prefix is `ref`."""
    for view in found:
        if view['id'] == ref:
            return view
    named = [v for v in found if v.get('name') == ref]
    if len(named) == 1:
        return named[0]
    if named:
        raise exception.Conflict(
            'More than one %s is named %s (%s): use an ID' % (
                kind, ref, ', '.join(v['id'] for v in named)))
    prefixed = [v for v in found if len(ref) >= 4 and
                v['id'].startswith(ref)]
    if len(prefixed) == 1:
        return prefixed[0]
    raise exception.NotFound('No %s with a name or ID of %s exists in the '
                             'sim cloud' % (kind, ref))


def _summary(kind, view):
    """The few fields that tell one object of `kind` from another."""
    def ips(fixed):
        return ', '.join(f['ip_address'] for f in fixed or [])
    if kind == 'network':
        flags = [f for f in ('shared', 'router:external') if view.get(f)]
        return 'subnets=%d%s' % (len(view.get('subnets') or []), ''.join(
            ' ' + f for f in flags))
    if kind == 'subnet':
        return '%s gateway=%s' % (view['cidr'], view['gateway_ip'])
    if kind == 'port':
        text = ips(view.get('fixed_ips'))
        if view.get('device_id'):
            text += ' device=%s (%s)' % (view['device_id'],
                                         view['device_owner'])
        return text
    if kind == 'router':
        info = view.get('external_gateway_info') or {}
        return 'gateway=%s' % ips(info.get('external_fixed_ips')) \
            if info else ''
    if kind == 'floating_ip':
        return '%s -> %s' % (view['floating_ip_address'],
                             view.get('fixed_ip_address') or '-')
    if kind == 'security_group_rule':
        return '%s %s %s %s-%s %s' % (
            view['direction'], view['ethertype'], view['protocol'] or 'any',
            view['port_range_min'] or '', view['port_range_max'] or '',
            view['remote_ip_prefix'] or view['remote_group_id'] or '')
    if kind == 'volume':
        servers = [a['server_id'] for a in view.get('attachments') or []]
        return '%d GB%s' % (view['size'], ''.join(
            ' attached to %s' % s for s in servers))
    if kind == 'volume_attachment':
        return '%s on %s' % (view['device'], view['server_id'])
    if kind == 'image':
        return view.get('visibility') or ''
    if kind == 'flavor':
        return '%s MB, %s vCPU, %s GB' % (view['ram'], view['vcpus'],
                                          view['disk'])
    if kind == 'server_group':
        return '%s members=%d' % (view['policy'], len(view['members']))
    return ''


class _ObjectCommand(command.Command):

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('kind', metavar='<kind>', choices=_kinds(),
                            help='Kind of object: %s' % ', '.join(_kinds()))
        return parser


class ListObject(_ObjectCommand, lister.Lister):
    """List the sim cloud's objects of a kind (every project's; deleted
    ones are not shown, a volume being deleted shows "deleting")."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--project', metavar='<project-id>',
                            help='Only objects of this project')
        parser.add_argument('--long', action='store_true',
                            help='Also show the key converge made it with '
                                 'and its creation time')
        return parser

    def take_action(self, args):
        cols = ['ID', 'Name', 'Status', 'Project', 'Details']
        if args.long:
            cols += ['Key', 'Created']
        rows = []
        for entry in _cloud(self.app).inventory(args.kind):
            view = entry['view']
            if args.project is not None and entry['project'] != args.project:
                continue
            row = [view['id'], view.get('name'), view.get('status'),
                   entry['project'], _summary(args.kind, view)]
            if args.long:
                row += [entry['key'], entry['created']]
            rows.append(row)
        return cols, rows


class ShowObject(_ObjectCommand, show.ShowOne):
    """Show one object of the sim cloud, as its API shows it."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('object', metavar='<object>',
                            help='Object (name or ID)')
        return parser

    def take_action(self, args):
        found = [e['view'] for e in _cloud(self.app).inventory(args.kind)]
        view = find_object(found, args.kind, args.object)
        cols = sorted(view)
        return cols, [_Json(view[c]) if isinstance(view[c], (dict, list))
                      else view[c] for c in cols]


class DeleteObject(_ObjectCommand):
    """Delete object(s) of the sim cloud behind the engine's back, as its
    operator: a port a server is on is taken from the server (its
    address goes), a router's or floating IP's own port may go too. The
    cloud's refusals still hold (a network with ports, a volume in
    use)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('objects', metavar='<object>', nargs='+',
                            help='Object(s) to delete (name or ID)')
        return parser

    def take_action(self, args):
        cloud = _cloud(self.app)
        found = [e['view'] for e in cloud.inventory(args.kind)]
        failures = []
        for ref in args.objects:
            try:
                view = find_object(found, args.kind, ref)
                cloud.delete(args.kind, view['id'])
            except exception.ConvergeError as e:
                failures.append(e)
                LOG.error('Failed to delete %s %s: %s', args.kind, ref, e)
        if failures:
            if len(args.objects) == 1:
                raise failures[0]
            raise exception.ConvergeError('%d of %d %ss failed to delete' % (
                len(failures), len(args.objects), args.kind))


def _fault_row(fault):
    return (fault['op'], fault['latency'], fault['fail_rate'],
            fault['fail_count'], fault['code'], fault['message'])


FAULT_COLUMNS = ('Op', 'Latency', 'Fail Rate', 'Fail Count', 'Code',
                 'Message')


class SetFault(show.ShowOne):
    """Inject a fault into an operation of the sim cloud, for every process
    using it. Replaces any fault already set for that operation."""

    def get_parser(self, prog_name):
        from converge.drivers import sim
        parser = super().get_parser(prog_name)
        parser.add_argument('op', metavar='<op>',
                            help='Operation: a server\'s (%s); another '
                                 'kind\'s as KIND.OP (KIND one of %s; OP one '
                                 'of %s: network.create, volume.delete); or '
                                 '* for all'
                                 % (', '.join(sim.OPS), ', '.join(_kinds()),
                                    ', '.join(sim.OBJECT_OPS)))
        parser.add_argument('--latency', metavar='<seconds>', type=float,
                            help='create, rebuild, resize, delete: how long '
                                 'the server stays BUILD, REBUILD, RESIZE '
                                 'or deleting (the call returns at once); '
                                 'volume.create, volume.update (a growing '
                                 'size), volume.delete, image.create, '
                                 'volume_attachment.create and .delete: how '
                                 'long the object stays creating, '
                                 'extending, deleting, importing, attaching '
                                 'or detaching; other operations: delay '
                                 'each call')
        parser.add_argument('--fail-rate', metavar='<0..1>', type=float,
                            help='Probability that a call fails')
        parser.add_argument('--fail-count', metavar='<n>', type=int,
                            help='The next N calls fail')
        parser.add_argument('--code', metavar='<http-status>', type=int,
                            help='HTTP status of the failures (default '
                                 '500): 5xx and 429 are transient (the '
                                 'engine retries), other 4xx fail the '
                                 'resource')
        parser.add_argument('--message', metavar='<text>',
                            help='Error message of the failures')
        return parser

    def take_action(self, args):
        if args.latency is None and args.fail_rate is None and \
                args.fail_count is None:
            raise exception.ConvergeError(
                'Give at least one of --latency, --fail-rate, --fail-count')
        sim = self.app.sim()
        sim.set_fault(args.op, latency=args.latency,
                      fail_rate=args.fail_rate, fail_count=args.fail_count,
                      message=args.message, code=args.code)
        for fault in sim.faults():
            if fault['op'] == args.op:
                return FAULT_COLUMNS, _fault_row(fault)
        raise exception.NotFound('Fault for %s vanished' % args.op)


class ClearFault(command.Command):
    """Remove the fault of one operation, or all faults."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('op', metavar='<op>', nargs='?',
                            help='Operation (default: every fault)')
        return parser

    def take_action(self, args):
        self.app.sim().clear_faults(args.op)


class ListFault(lister.Lister):
    """List the faults injected into the sim cloud."""

    def take_action(self, args):
        return FAULT_COLUMNS, [_fault_row(f) for f in self.app.sim().faults()]


class ShowLog(lister.Lister):
    """List the API calls the sim cloud received, oldest first."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--op', metavar='<op>',
                            help='Only calls of this operation')
        parser.add_argument('--resource', metavar='<resource>',
                            help='Only calls made for this resource')
        parser.add_argument('--key', metavar='<idempotency-key>',
                            help='Only calls with this idempotency key')
        parser.add_argument('--failed', action='store_true',
                            help='Only calls that failed')
        parser.add_argument('--object', metavar='<object-id>',
                            help='Only calls on this object (of another '
                                 'kind than servers)')
        parser.add_argument('--long', action='store_true',
                            help='Also show the object of each call (of '
                                 'another kind than servers) and its '
                                 'details')
        return parser

    def take_action(self, args):
        cols = ['ID', 'Time', 'Op', 'Server', 'Key', 'Resource', 'OK']
        if args.long:
            cols += ['Object', 'Detail']
        rows = []
        for e in self.app.sim().api_log(op=args.op, resource=args.resource,
                                        idempotency_key=args.key,
                                        object_id=args.object):
            if args.failed and e['ok']:
                continue
            row = [e['id'], _time(e['ts']), e['op'], e['server_id'],
                   e['idempotency_key'], e['resource'], e['ok']]
            if args.long:
                row += [e['object_id'], _Json(e['detail'])]
            rows.append(row)
        return cols, rows

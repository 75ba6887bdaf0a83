"""SimCloud: drivers/cloud.py's interface on the simulated cloud, for
every kind besides servers (those are SimCompute's, api.py).

Each call is one transaction of the sim's database with its line in
``sim_api_log`` (op ``KIND.OP``: ``network.create``, ``volume.get``),
through SimCompute's plumbing: the faults set for that op (``converge
sim fault set volume.create --latency 2``) apply in every process, a
dropped database connection is retried where that is safe. A refused
call is logged and its partial writes undone (a savepoint), so the log
says what the cloud did. Latency is a response time, except for the
calls whose objects show a transitional status meanwhile (a volume
``creating``, an image ``importing``; ``task_ops`` of each kind).

Every object belongs to the SimCloud's project: another project's are
not seen (``get`` None, ``list`` without them, ``update`` and
``delete`` CloudNotFound), but for shared and external networks (and
their subnets), public images and public flavors, which a project sees
and may use but not change (403). What the kinds do is in their
modules: neutron.py (networks, subnets, ports), l3.py (routers, their
interfaces, floating IPs), secgroups.py, cinder.py (volumes and their
attachments, volume types and their encryption), glance.py (images),
nova.py (key pairs, server groups, flavors, host aggregates),
keystone.py (domains, projects, users, roles, role assignments).

``resolve`` of an image, flavor or key pair takes any name: the sim has
every one (templates written for other clouds boot their own images,
flavors and key pairs on it); a name none has resolves to an id derived
from it (a key pair's: the name). Every other kind's name must exist.
"""

import json

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from converge import exception
from converge.drivers import cloud
from converge.drivers.sim import aodh
from converge.drivers.sim import api
from converge.drivers.sim import cinder
from converge.drivers.sim import glance
from converge.drivers.sim import keystone
from converge.drivers.sim import l3
from converge.drivers.sim import neutron
from converge.drivers.sim import nova
from converge.drivers.sim import rows
from converge.drivers.sim import secgroups
from converge.drivers.sim import store
from converge.drivers.sim import swift
from converge.drivers.sim import trunk
from converge.drivers.sim import vpn

KINDS = dict(neutron.KINDS, **l3.KINDS, **secgroups.KINDS, **cinder.KINDS,
             **glance.KINDS, **nova.KINDS, **vpn.KINDS, **swift.KINDS,
             **aodh.KINDS, **keystone.KINDS, **trunk.KINDS)
assert set(KINDS) == set(cloud.KINDS), 'a kind of drivers/cloud.py lacks ' \
    'its sim'
#: kinds a create finds again by what its body says (natural identity)
IDENTIFIED = ('keypair', 'flavor', 'server_group', 'router_interface',
              'volume_attachment', 'security_group_rule', 'router_gateway',
              'container', 'alarm', 'volume_type', 'volume_encryption_type',
              'host_aggregate', 'domain', 'project', 'user', 'role',
              'role_assignment')
#: kinds the sim has every one of (any name resolves): templates written
#: for other clouds boot their own images, flavors and key pairs on it
EVERY_NAME = ('image', 'flavor', 'keypair', 'volume_type', 'role')
#: a create whose key (or identity) another process took between the look
#: and the insert looks again (it finds that one)
_ATTEMPTS = 5
#: list filters a column answers (kind -> API field -> column)
_FILTER_COLUMNS = {
    'role_assignment': {'user_id': 'parent'},
    'volume_encryption_type': {'volume_type_id': 'parent'},
    'subnet': {'network_id': 'parent'},
    'port': {'network_id': 'parent', 'device_id': 'device'},
    'security_group_rule': {'security_group_id': 'parent'},
    'router_interface': {'router_id': 'parent'},
    'volume_attachment': {'server_id': 'device', 'volume_id': 'parent'},
}
#: how resolve names what it cannot find (the OpenStack driver's words)
_TITLES = {'image': 'Image', 'flavor': 'Flavor', 'keypair': 'Keypair',
           'volume': 'Volume', 'server': 'Server'}


def _plumbing(url, compute):
    """The SimCompute whose plumbing the calls go through: `compute`'s
    (unwrapped from drivers/limits.py) when it is this cloud's."""
    inner = getattr(compute, '_compute', compute)
    if isinstance(inner, api.SimCompute) and inner.url == url:
        return inner
    return api.SimCompute(url, waiting=getattr(compute, 'waiting', None))


class SimCloud(cloud.Cloud):
    """The simulated cloud at database `url` as project `project_id` sees
    it; `compute` the SimCompute the engine uses for servers (its hook
    for waiting is shared)."""

    name = 'sim'
    #: calls run on this process's CPU, not in a remote service
    in_process = True

    def __init__(self, url, project_id, compute=None):
        if not project_id:
            # every object is a project's: one made with none would be
            # nobody's to see
            raise exception.ConvergeError(
                'The simulated cloud needs the project it acts in (got %r)'
                % (project_id,))
        self.url = url
        self.project_id = str(project_id)
        self._api = _plumbing(url, compute)
        self._admin = False

    def __repr__(self):
        return 'SimCloud(%r, project %s%s)' % (
            self.url, self.project_id, ', admin' if self._admin else '')

    def available(self, service_type, extension=None):
        """Every service and extension, but those [sim] absent_services
        names (a smaller cloud, for trying templates against one)."""
        from converge import conf as conf_mod
        absent = set(conf_mod.CONF.sim.absent_services)
        if service_type in absent:
            return False, 'Service endpoint not in service catalog.'
        if extension and '%s:%s' % (service_type, extension) in absent:
            return False, ('Required extension %s in %s service is not '
                           'available.' % (extension, service_type))
        return True, None

    def admin(self):
        """The same cloud seen by its operator (the ``converge sim``
        commands): every project's objects, no faults, reads not logged
        (SimCompute.admin)."""
        other = SimCloud.__new__(SimCloud)
        other.__dict__.update(self.__dict__)
        other._api = self._api.admin()
        other._admin = True
        return other

    # -- plumbing -----------------------------------------------------------

    def _kind(self, kind):
        found = KINDS.get(kind)
        if found is None:
            raise exception.CloudError(
                'The sim has no objects of kind %r: one of %s' % (
                    kind, ', '.join(cloud.KINDS)), 400)
        return found

    def _run(self, kind, op, fn, key=None, object_id=None, body=None,
             repeatable=True):
        """fn(ctx, kind handler, latency) -> (result, log detail) in one
        transaction of the cloud, logged as KIND.OP; a refusal
        (CloudError) undoes fn's writes and is logged."""
        handler = self._kind(kind)
        op_name = '%s.%s' % (kind, op)

        def work(conn, latency, now):
            ctx = rows.Ctx(conn, now, self.project_id, self._admin)
            try:
                with conn.begin_nested():
                    result, detail = fn(ctx, handler, latency)
            except exception.CloudError as e:
                self._api._log(conn, op_name, False, idempotency_key=key,
                               object_id=object_id, error=str(e),
                               code=e.code, latency=latency or None)
                raise api._Failed(e)
            done = detail.pop('object_id', object_id)
            self._api._log(conn, op_name, True, idempotency_key=key,
                           object_id=done, latency=latency or None,
                           **detail)
            return result

        for attempt in range(_ATTEMPTS):
            try:
                return self._api._call(
                    op_name, work, idempotency_key=key, object_id=object_id,
                    repeatable=repeatable, faults=attempt == 0,
                    task=handler.is_task(op, body))
            except sa_exc.IntegrityError as e:
                # another process made the object (took the address, the
                # key) between this call's look and its insert
                error = e
        raise exception.CloudTransient(
            '%s kept conflicting with concurrent calls: %s' % (op_name,
                                                                error))

    def _show(self, ctx, handler, obj):
        view = handler.show(ctx, obj)
        view.update(getattr(obj, 'once', None) or {})
        return view

    def inventory(self, kind):
        """Every object of `kind` the caller sees (the operator: every
        project's), as {'view', 'project', 'key', 'created'}; not logged
        as a call (the ``converge sim object`` commands)."""
        handler = self._kind(kind)

        def fn(conn, latency, now):
            ctx = rows.Ctx(conn, now, self.project_id, self._admin)
            return [{'view': handler.show(ctx, obj),
                     'project': obj.project_id, 'key': obj.key,
                     'created': obj.created} for obj in ctx.all(kind)]
        return self._api._call('%s.list' % kind, fn, faults=False)

    # -- the contract -------------------------------------------------------

    def create(self, kind, body, key, fresh=False):
        # `fresh` changes nothing here: the look-up by key is part of the
        # create's own transaction, no call of its own
        body = dict(body or {})
        key = str(key) if key else None

        def fn(ctx, handler, latency):
            if key is not None:
                obj = ctx.by_key(kind, key)
                if obj is not None and obj.gone_at is not None:
                    # one being deleted gives its key up to the one about
                    # to be made (as servers do)
                    ctx.let_go(obj)
                    obj = None
                if obj is not None:
                    if not ctx.sees(obj):
                        raise rows.conflict(
                            'Key %s is another project\'s %s' % (key, kind))
                    return handler.show(ctx, obj), {
                        'object_id': obj.id, 'adopted': True}
            obj = handler.find(ctx, body)
            if obj is not None and handler.same(obj, body):
                return handler.show(ctx, obj), {
                    'object_id': obj.id, 'adopted': True, 'identity': True}
            obj = handler.create(ctx, body, key, latency)
            return self._show(ctx, handler, obj), {
                'object_id': obj.id, 'name': obj.name or None}
        # a create repeated after an unknown commit finds what it made by
        # its key, or by its identity; without either it would make two
        return self._run(kind, 'create', fn, key=key, body=body,
                         repeatable=key is not None or kind in IDENTIFIED)

    def find(self, kind, key, body=None):
        key = str(key) if key else None

        def fn(ctx, handler, latency):
            obj = ctx.by_key(kind, key) if key is not None else None
            if obj is None or not ctx.sees(obj):
                obj = handler.find(ctx, dict(body or {}))
            if obj is None:
                return None, {'found': False}
            return handler.show(ctx, obj), {'object_id': obj.id,
                                            'found': True}
        return self._run(kind, 'find', fn, key=key)

    def get(self, kind, id):
        def fn(ctx, handler, latency):
            obj = ctx.visible(kind, id)
            if obj is None:
                return None, {'found': False}
            return handler.show(ctx, obj), {'found': True}
        return self._run(kind, 'get', fn, object_id=_id(id))

    def owns(self, kind, id):
        def fn(ctx, handler, latency):
            obj = ctx.visible(kind, id)
            owned = obj is not None and ctx.owns(obj)
            return owned, {'found': obj is not None, 'owned': owned}
        return self._run(kind, 'get', fn, object_id=_id(id))

    def _mine(self, ctx, handler, kind, id, verb):
        """The object the caller may change, or the service's refusal:
        404 when it does not see it, 403 when it sees another project's
        (a shared network, a public image)."""
        obj = ctx.visible(kind, id)
        if obj is None:
            if verb == 'delete' and ctx.live(kind, id) is None:
                return None   # gone already: success
            raise rows.missing('%s %s could not be found.' % (
                handler.title, id))
        if not ctx.owns(obj):
            raise rows.forbidden('(rule:%s_%s) is disallowed by policy: %s '
                                 '%s is not this project\'s' % (
                                     verb, kind, handler.title, id))
        return obj

    def update(self, kind, id, body):
        body = dict(body or {})

        def fn(ctx, handler, latency):
            obj = self._mine(ctx, handler, kind, id, 'update')
            ctx.settle(obj)
            obj = handler.update(ctx, obj, body, latency)
            return handler.show(ctx, obj), {'changed': sorted(body)}
        return self._run(kind, 'update', fn, object_id=_id(id), body=body)

    def delete(self, kind, id):
        def fn(ctx, handler, latency):
            obj = self._mine(ctx, handler, kind, id, 'delete')
            if obj is None:
                return None, {'noop': True}
            handler.delete(ctx, obj, latency)
            return None, {}
        self._run(kind, 'delete', fn, object_id=_id(id))

    @staticmethod
    def _default_group(ctx, kind):
        # as Neutron: a project's first look at its security groups makes
        # its default one
        if kind == 'security_group' and not ctx.admin:
            secgroups.default_group(ctx, ctx.project_id)

    def list(self, kind, **filters):
        def fn(ctx, handler, latency):
            self._default_group(ctx, kind)
            columns = {}
            rest = dict(filters)
            for field, column in _FILTER_COLUMNS.get(kind, {}).items():
                if rest.get(field):
                    columns[column] = rest.pop(field)
            if isinstance(rest.get('name'), str):
                columns['name'] = rest.pop('name')
            views = [handler.show(ctx, obj)
                     for obj in ctx.all(kind, **columns)]
            found = [v for v in views if _matches(v, rest)]
            return found, {'count': len(found)}
        return self._run(kind, 'list', fn)

    def resolve(self, kind, name_or_id):
        ref = str(name_or_id)

        def fn(ctx, handler, latency):
            found = ctx.visible(kind, ref)
            if found is not None:
                return found.id, {'object_id': found.id}
            self._default_group(ctx, kind)
            if kind == 'domain' and ref == keystone.DEFAULT_DOMAIN:
                return ref, {'object_id': ref}   # Keystone's own
            name, domain = cloud.split_domain(ref) \
                if kind in cloud.DOMAIN_SCOPED else (ref, None)
            if domain is not None:
                found = ctx.visible('domain', domain) or (
                    ctx.all('domain', name=domain) or [None])[0]
                domain = domain if domain == keystone.DEFAULT_DOMAIN \
                    else (found.id if found else '-')
            named = ctx.all(kind, name=name, parent=domain)
            if len(named) > 1:
                raise rows.conflict(
                    'Multiple %s matches found for name \'%s\', use an ID '
                    'to be more specific.' % (kind.replace('_', ' '), ref))
            if named:
                return named[0].id, {'object_id': named[0].id}
            if kind in EVERY_NAME:
                # a key pair's id is its name
                made_up = ref if kind == 'keypair' else \
                    rows.derived_id(kind, ref)
                return made_up, {'object_id': made_up, 'derived': True}
            raise _unknown(kind, ref)
        if kind == 'server':
            return self._resolve_server(ref)
        return self._run(kind, 'resolve', fn)

    def _resolve_server(self, ref):
        """A sim server's id (volume attachments name servers)."""
        def fn(conn, latency, now):
            S = store.servers.c
            live = sa.and_(S.deleted == sa.false(), sa.or_(
                S.gone_at.is_(None), S.gone_at > now))
            if not self._admin:   # another project's is not found
                live = sa.and_(live, sa.or_(
                    S.project_id.is_(None), S.project_id == self.project_id))
            ids = [r.id for r in conn.execute(sa.select(S.id).where(
                live, S.id == ref))] or [r.id for r in conn.execute(
                    sa.select(S.id).where(live, S.name == ref))]
            if len(ids) > 1:
                raise api._Failed(rows.conflict(
                    'Multiple server matches found for name \'%s\', use an '
                    'ID to be more specific.' % ref))
            if not ids:
                raise api._Failed(_unknown('server', ref))
            return ids[0]
        return self._api._call('find', fn, faults=False)


def _id(id):
    return None if id is None else str(id)


def _unknown(kind, ref):
    title = _TITLES.get(kind)
    if title is None:
        return rows.missing('Unable to find %s with name or id \'%s\'' % (
            kind.replace('_', ' '), ref))
    return rows.missing('The %s (%s) could not be found.' % (title, ref))


def _matches(view, filters):
    """Whether an object's view has what a list's filters ask (Neutron's
    query: a list of values is any of them; tags all of them)."""
    for field, wanted in filters.items():
        have = view.get(field)
        if field in ('tags', 'tags-any'):
            asked = wanted.split(',') if isinstance(wanted, str) \
                else list(wanted)
            test = all if field == 'tags' else any
            if not test(t in (have or []) for t in asked):
                return False
            continue
        if field == 'metadata':
            asked = json.loads(wanted) if isinstance(wanted, str) \
                else dict(wanted)
            if any((have or {}).get(k) != v for k, v in asked.items()):
                return False
            continue
        options = wanted if isinstance(wanted, (list, tuple, set)) \
            else [wanted]
        if not any(_same(have, option) for option in options):
            return False
    return True


def _same(have, wanted):
    if isinstance(have, bool) and isinstance(wanted, str):
        return have == (wanted.lower() == 'true')
    if have == wanted:
        return True
    return have is not None and wanted is not None and \
        str(have) == str(wanted)

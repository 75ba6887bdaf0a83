"""The sim's objects besides servers, as its kinds' code handles them.

An object is a row of ``sim_objects`` (store.py) made into an `Obj`: its
columns as attributes and its ``body`` (the API view's own fields)
decoded. `Ctx` is one call's view of the cloud: the transaction, the
sim's time and the project asking, with the looks every kind makes (by
id, by key, by natural identity, the objects hanging off another) and
the writes (insert, save, remove). `Kind` is what each kind's module
(neutron.py, cinder.py, glance.py, nova.py) fills in.

Nothing here commits: a call's transaction is objects.py's (or, for the
ports of a server, api.py's).
"""

import datetime
import json
import uuid

import sqlalchemy as sa

from converge import exception
from converge.drivers import cloud
from converge.drivers.sim import store

T = store.objects
C = T.c

#: the project that owns what the sim starts with (seed.py)
ADMIN_PROJECT = 'admin'
#: ids derived from names (seeded objects; the images and flavors every
#: name resolves to) are uuid5s in this namespace: the same in every sim
NAMESPACE = uuid.UUID('6c1d3f3e-8f0e-4f1e-9a55-3a1b0c2d7e91')

COLUMNS = ('seq', 'id', 'kind', 'project_id', 'name', 'key', 'live_key',
           'live_ident', 'parent', 'device', 'shared', 'status', 'body',
           'created', 'updated', 'ready_at', 'outcome', 'gone_at',
           'deleted')


def now_text():
    return datetime.datetime.now(datetime.timezone.utc).strftime(
        '%Y-%m-%dT%H:%M:%SZ')


def dumps(value):
    return json.dumps(value, sort_keys=True, default=str)


def loads(text, default=None):
    if not text:
        return default
    return json.loads(text)


def new_id():
    return str(uuid.uuid4())


def derived_id(kind, name):
    """The id the sim gives `kind` named `name` wherever it makes one up
    (the same in every sim database and process)."""
    return str(uuid.uuid5(NAMESPACE, '%s:%s' % (kind, name)))


# -- the services' refusals -------------------------------------------------

def bad(message):
    return exception.CloudError(message, 400)


def forbidden(message):
    return exception.CloudError(message, 403)


def conflict(message):
    return exception.CloudError(message, 409)


def missing(message):
    return exception.CloudNotFound(message)


class Obj:
    """One object: its row's columns, `body` decoded (a dict)."""

    def __init__(self, **values):
        for column in COLUMNS:
            setattr(self, column, values.get(column))
        if isinstance(self.body, str):
            self.body = loads(self.body, {})
        if self.body is None:
            self.body = {}
        if self.deleted is None:
            self.deleted = False
        if self.shared is None:
            self.shared = False

    @classmethod
    def of(cls, row):
        return cls(**row._mapping)

    def state(self, now):
        """(status, body) at `now`: an action whose time is up is over,
        whoever looks (the outcome's status and fields taken)."""
        if self.ready_at is not None and now >= self.ready_at:
            outcome = loads(self.outcome, {})
            body = dict(self.body, **outcome.get('fields', {}))
            return outcome.get('status', self.status), body
        return self.status, self.body

    def busy(self, now):
        return self.ready_at is not None and now < self.ready_at

    def values(self):
        out = {c: getattr(self, c) for c in COLUMNS if c != 'seq'}
        out['body'] = dumps(self.body)
        return out

    def __repr__(self):
        return '<%s %s>' % (self.kind, self.id)


def live_clause(now):
    """Rows of objects that exist at `now` (a delete under way
    included)."""
    return sa.and_(C.deleted == sa.false(),
                   sa.or_(C.gone_at.is_(None), C.gone_at > now))


class Ctx:
    """One call's view: `conn` (its transaction), `now` (the sim's
    clock), `project_id` asking (`admin`: the operator, who sees every
    project's objects)."""

    def __init__(self, conn, now, project_id, admin=False):
        self.conn = conn
        self.now = now
        self.project_id = project_id
        self.admin = admin
        self.stamp = now_text()
        #: ids made up from kind and name instead of random (seed.py)
        self.derive_ids = False

    def new_id(self, kind, name):
        if self.derive_ids:
            return derived_id(kind, name)
        return new_id()

    # -- visibility --------------------------------------------------------

    def sees(self, obj):
        if obj is None:
            return False
        if self.admin or obj.project_id == self.project_id or obj.shared:
            return True
        # a private flavor its access list grants
        return obj.kind == 'flavor' and \
            self.project_id in (obj.body.get('_tenants') or [])

    def owns(self, obj):
        return self.admin or obj.project_id == self.project_id

    # -- looks -------------------------------------------------------------

    def _rows(self, query):
        return [Obj.of(r) for r in self.conn.execute(query)]

    def live(self, kind, id):
        """The live object of `kind` with `id`, whoever owns it."""
        if id is None:
            return None
        found = self._rows(sa.select(T).where(
            C.id == str(id), C.kind == kind, live_clause(self.now)))
        return found[0] if found else None

    def visible(self, kind, id):
        """The live object of `kind` with `id` that the caller sees."""
        if id is None:
            return None
        for obj in self._rows(sa.select(T).where(
                C.id == str(id), C.kind == kind, live_clause(self.now))):
            if self.sees(obj):
                return obj
        return None

    def held(self, column, value):
        """The live holder of a unique `column` (live_key, live_ident)
        value. One whose delete ended is let go of here (its row marked
        deleted), so a new object may take the value."""
        rows = self._rows(sa.select(T).where(getattr(C, column) == value))
        if not rows:
            return None
        obj = rows[0]
        if obj.gone_at is not None and obj.gone_at <= self.now:
            self.conn.execute(T.update().where(C.seq == obj.seq).values(
                deleted=True, live_key=None, live_ident=None))
            return None
        return obj

    def let_go(self, obj):
        """The object's key is free for another (it is being deleted)."""
        obj.live_key = None
        self.conn.execute(T.update().where(C.seq == obj.seq).values(
            live_key=None))

    def by_key(self, kind, key):
        return self.held('live_key', live_key(kind, key))

    def all(self, kind, parent=None, device=None, name=None, project=None,
            visible_only=True, where=None):
        """The live objects of `kind` (those the caller sees, unless
        `visible_only` is false), oldest first."""
        query = sa.select(T).where(C.kind == kind, live_clause(self.now))
        if parent is not None:
            query = query.where(C.parent == str(parent))
        if device is not None:
            query = query.where(C.device == str(device))
        if name is not None:
            query = query.where(C.name == str(name))
        if project is not None:
            query = query.where(C.project_id == project)
        elif visible_only and not self.admin:
            query = query.where(sa.or_(
                C.project_id == self.project_id, C.shared == sa.true(),
                C.kind == 'flavor'))
        if where is not None:
            query = query.where(where)
        rows = self._rows(query.order_by(C.seq))
        if visible_only:
            rows = [r for r in rows if self.sees(r)]
        return rows

    # -- writes ------------------------------------------------------------

    def insert(self, obj):
        obj.created = obj.created or self.stamp
        obj.updated = obj.updated or self.stamp
        obj.seq = self.conn.execute(T.insert().values(
            **obj.values())).inserted_primary_key[0]
        return obj

    def save(self, obj, touch=True):
        if touch:
            obj.updated = self.stamp
        self.conn.execute(T.update().where(C.seq == obj.seq).values(
            **obj.values()))
        return obj

    def settle(self, obj):
        """Write down the end of an action whose time is up (readers only
        compute it), before changing the object again."""
        if obj.ready_at is None or self.now < obj.ready_at:
            return obj
        obj.status, obj.body = obj.state(self.now)
        obj.ready_at = obj.outcome = None
        return obj

    def remove(self, obj, after=0.0):
        """Delete: at once, or gone `after` seconds from now (it shows
        meanwhile, as its kind's delete left it)."""
        if after > 0:
            obj.gone_at = self.now + after
        else:
            obj.deleted = True
            obj.live_key = obj.live_ident = None
        self.save(obj)


def live_key(kind, key):
    return '%s:%s' % (kind, key)


class Kind:
    """What a kind of object does on the sim. Its module's subclass says
    how a body becomes an object and how the object shows."""

    #: the kind's name (cloud.KINDS)
    name = None
    #: what the service calls it in messages ('Network', 'Volume')
    title = None
    #: where the converge key shows in the view: 'tags' (Neutron),
    #: 'metadata' (Cinder), 'property' (Glance), None (nowhere)
    key_in = None
    #: ops whose latency is how long the object stays in a transitional
    #: status (the call returns at once); other ops' latency is their
    #: response time
    task_ops = ()
    #: fields an update may change
    updatable = ()

    def identity(self, ctx, body):
        """A string naming the object by what the body says (the
        natural identity drivers/cloud.py names), unique among live
        objects; None for kinds without one."""
        return None

    def find(self, ctx, body):
        """The live object `body` names by natural identity, or None."""
        ident = self.identity(ctx, body)
        if ident is None:
            return None
        obj = ctx.held('live_ident', ident)
        return obj if ctx.sees(obj) else None

    def same(self, obj, body):
        """Whether `body` asks for `obj` itself (its identity matched);
        raises the service's conflict when it asks for something else
        under the same identity."""
        return True

    def create(self, ctx, body, key, latency):
        raise NotImplementedError

    def show(self, ctx, obj):
        raise NotImplementedError

    def update(self, ctx, obj, body, latency):
        raise bad('%s objects have no update' % self.name)

    def delete(self, ctx, obj, latency):
        ctx.remove(obj)

    def is_task(self, op, body=None):
        return op in self.task_ops

    # -- helpers of the kinds ----------------------------------------------

    def new(self, ctx, body, key, id=None, project_id=None, name=None,
            ident=None, **columns):
        """An Obj of this kind for `ctx`'s project, not yet inserted."""
        name = name if name is not None else body.get('name')
        return Obj(id=id or ctx.new_id(self.name, name), kind=self.name,
                   project_id=ctx.project_id if project_id is None
                   else project_id,
                   name=name, key=key, live_key=live_key(self.name, key)
                   if key else None,
                   live_ident=ident, body=body, **columns)

    def show_with_id(self, ctx, obj):
        """The view of a kind that shows its body and its id only."""
        view = public(obj.body)
        view['id'] = obj.id
        return view

    def check_fields(self, body, allowed, what='create'):
        unknown = sorted(set(body) - set(allowed))
        if unknown:
            raise bad('Unrecognized attribute(s) %s for a %s %s' % (
                ', '.join("'%s'" % u for u in unknown), self.name, what))

    def refuse_read_only(self, body):
        fixed = sorted(set(body) - set(self.updatable))
        if fixed:
            raise bad('Cannot update read-only attribute %s' % fixed[0])

    def with_key(self, obj, view):
        """`view` with the object's key where the service keeps it."""
        if obj.key and self.key_in == 'tags':
            view['tags'] = list(view.get('tags') or []) + [
                cloud.key_tag(obj.key)]
        elif obj.key and self.key_in == 'metadata':
            view['metadata'] = dict(view.get('metadata') or {}, **{
                cloud.KEY_NAME: obj.key})
        elif obj.key and self.key_in == 'property':
            view[cloud.KEY_NAME] = obj.key
        return view


def public(body):
    """The fields of a body users see (names with a leading underscore
    are the sim's own bookkeeping)."""
    return {k: v for k, v in body.items() if not k.startswith('_')}

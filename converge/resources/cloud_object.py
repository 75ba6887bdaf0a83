"""CloudObject: the base of a plug-in over one kind of ``clients.cloud``.

A subclass names its ``kind`` (drivers/cloud.py), declares Heat's
properties and attributes, and says how its properties become the API
body (`make_body`, in the API's own field names, names resolved to ids
through ``cloud.resolve``) and which fields the cloud changes in place
(``update_fields``). This class does the rest, the same way for every
kind:

- ``create`` sends the body with the resource's key: a create repeated
  after a crash finds what the first one made (by key, or by the
  natural identity the body carries) instead of making a second. For a
  kind whose status settles (``cloud.SETTLING``: volumes, images,
  attachments) it returns base.Wait until it has; an error status fails
  the step with the cloud's reason, and the next create discards the
  broken object before making another.
- ``observe`` is a get by physical id or, with none recorded yet, a find
  by key.
- ``update`` sends only the update fields whose wanted value differs
  from what was applied last (``data['applied']``) or, for the fields
  the plug-in owns (``drift_fields``), from what is there now.
- ``delete`` asks once and waits until ``get`` shows nothing; 404 is
  success, and a 409 (the object is still in use: a subnet with ports
  that are going, a security group a deleted server still holds) is
  asked again for a while, as Heat retries a conflict.
- ``drift`` compares the observed ``drift_fields`` with what was
  applied; ``check`` fails when the object is gone or in error;
  ``get_attributes`` maps the observed object to Heat's attribute names
  (and ``show`` is the whole object).

No step sleeps: a step that must wait returns base.Wait and is run again
from the top, looking first, so it never asks twice for what it asked
for already.
"""

import copy
import random
import time

from converge import conf as conf_mod
from converge import exception
from converge.drivers import cloud as cloud_mod
from converge.resources import base
from converge.resources import none
from converge.resources import properties as props_mod

#: statuses that mean the object failed (Cinder's, Glance's, Nova's)
ERROR_STATUSES = ('error', 'error_deleting', 'error_extending',
                  'error_restoring', 'killed', 'ERROR')
#: statuses of an object on its way out: observed, it is gone already
GOING_STATUSES = ('deleting', 'deleted', 'pending_delete')


#: a value of ``cleared``: a field the template no longer sets is left as
#: it is (not sent)
KEEP = object()


def is_error(obj):
    return (obj or {}).get('status') in ERROR_STATUSES


def status_reason(obj):
    """The reason the cloud gives for an object's status, if any."""
    obj = obj or {}
    for field in ('status_reason', 'fault', 'message', 'migration_status'):
        value = obj.get(field)
        if isinstance(value, dict):
            value = value.get('message')
        if value:
            return str(value)
    return 'Unknown'


def user_tags(tags):
    """`tags` without the one that carries converge's key (the driver's,
    not the template's)."""
    prefix = cloud_mod.KEY_NAME + '='
    return sorted(t for t in (tags or []) if not str(t).startswith(prefix))


def user_metadata(meta):
    """`meta` without converge's key (Cinder metadata, Glance properties)."""
    return {k: v for k, v in (meta or {}).items()
            if k != cloud_mod.KEY_NAME}


class CloudObject(base.Resource):
    """One object of ``kind`` in ``clients.cloud``; see the top."""

    #: the kind of object (drivers/cloud.py KINDS)
    kind = None
    #: how Heat names the kind in messages ("Volume", "Port")
    title = None
    # a create finds what an earlier create made: by the resource's key,
    # or by the natural identity its body carries (drivers/cloud.py)
    adopts_by_key = True
    #: True for a kind the cloud finds by the body's natural identity,
    #: not by the key (key pairs, flavors, router interfaces, volume
    #: attachments, rules): observe() passes the body to find()
    natural_identity = False
    #: the body fields the cloud changes in place
    update_fields = ()
    #: the body fields compared with what is observed (drift, and what an
    #: update puts back); each must read back as it was sent
    drift_fields = ()
    #: of those, the lists whose order means nothing
    unordered_fields = ('tags', 'security_groups')
    #: field -> the value that clears it, sent when the template no longer
    #: sets a field it set before (default None; KEEP: not sent)
    cleared = {}
    #: the map property whose keys are extra body fields, changed in
    #: place (Neutron's value_specs, an image's extra_properties)
    extra_fields_property = 'value_specs'
    #: what a key taken out of it sends (Heat leaves a Neutron field as it
    #: is; an image's property is removed: None)
    extra_cleared = KEEP
    #: a physical name longer than this is cut (Heat's, per service)
    name_limit = 255

    # waiting, without a thread (base.Wait)
    #: seconds before the first look at an object that has not settled
    poll_first = 0.25
    #: each wait this factor longer ...
    poll_growth = 1.5
    #: ... up to this many seconds
    poll_max = 5.0
    #: waits are lengthened by up to this fraction at random, so objects
    #: made together are not all looked at together
    poll_jitter = 0.1
    #: seconds a delete refused as "in use" (409) is asked again before it
    #: fails: what uses the object is usually going away with the stack.
    #: None: the [worker] in_use_timeout setting
    in_use_timeout = None

    # -- what a subclass says ------------------------------------------------
    def make_body(self):
        """The create body (API field names) for self.properties."""
        raise NotImplementedError

    def attributes(self, obj):
        """{Heat attribute name: value} from the observed object."""
        return {name: obj.get(name) for name in self.attributes_schema}

    def identity_conflict(self, obj, body):
        """For a kind found by natural identity: a message when `obj`,
        found for `body`, is not what the body asks for (another
        resource's, which the cloud would refuse to make twice), else
        None."""
        return None

    def after_create_call(self, obj):
        """Right after the cloud answered the create (a key pair's private
        key is in that answer only)."""

    def after_settled(self, obj, prior=None):
        """After the object settled, on create (`prior` None) and update:
        what else makes the resource (a security group's rules). Return
        None when done (the object as `obj` shows it), the object as it
        is now (a dict) if this changed it, or a base.Wait."""

    # -- helpers for subclasses -----------------------------------------------
    @property
    def cloud(self):
        return self.clients.cloud

    @property
    def computes_locally(self):
        # the simulated cloud computes in this process (engine/gate.py)
        clients = self.clients
        if clients is None:
            return False
        try:
            return bool(getattr(clients.cloud, 'in_process', False))
        except Exception:  # no cloud reachable: not ours to report here
            return False

    @property
    def looks_up_remotely(self):
        return self.clients is not None and not self.computes_locally

    def physical_name(self, prop='name'):
        """The template's name, or Heat's ``<stack>-<resource>-<id>``."""
        return self.properties.get(prop) or \
            none.physical_resource_name(self, self.name_limit)

    def resolve(self, kind, value, prop):
        """The id of the object of `kind` that `value` names (property
        `prop`); None and '' stay as they are. Not found, or ambiguous,
        fails the step naming the resource and property."""
        if value is None or value == '':
            return value
        try:
            return self.cloud.resolve(kind, value)
        except exception.CloudTransient:
            raise
        except exception.CloudError as exc:
            raise exception.ResourceFailure(
                '%s: property %s: %s' % (self.name, prop, exc))

    def label(self, obj=None):
        """"Volume vol1 (<id>)": how messages name the object."""
        return '%s %s (%s)' % (self.title or self.kind, self.name,
                               (obj or {}).get('id') or self.physical_id)

    # -- looking -------------------------------------------------------------
    def _get(self, id=None):
        """The object as the cloud shows it (even while it goes), or
        None."""
        try:
            return self.cloud.get(self.kind, id or self.physical_id)
        except exception.CloudNotFound:
            return None

    def _current(self):
        """The object by physical id, None when gone or going."""
        if not self.physical_id:
            return None
        obj = self._get()
        if obj is None or obj.get('status') in GOING_STATUSES:
            return None
        return obj

    def _find(self):
        """The object made with our key (or our body's natural identity)."""
        body = None
        if self.natural_identity:
            try:
                body = self.make_body()
            except exception.ResourceFailure:
                # what it names is gone: so is anything made on it
                return None
        return self.cloud.find(self.kind, self.idempotency_key, body)

    def owned(self, shared=False):
        owns = getattr(self.cloud, 'owns', None)
        if shared or owns is None:   # seen is enough
            return self._get() is not None
        return owns(self.kind, self.physical_id)

    def observe(self):
        if self.physical_id:
            return self._current()
        obj = self._find()
        if obj is None or obj.get('status') in GOING_STATUSES:
            return None
        self.physical_id = obj['id']
        return obj

    # -- waiting -------------------------------------------------------------
    def _settled(self, obj):
        states = cloud_mod.SETTLING.get(self.kind)
        if states is None:
            return True
        # a status the table does not know is taken as on its way
        return states.get(obj.get('status'), False)

    def _settle(self, obj, action):
        """`obj` once it has settled after `action`; a Wait before."""
        if is_error(obj):
            self.data.pop('waiting', None)
            raise exception.ResourceFailure(
                '%s went to status %s during %s: %s' % (
                    self.label(obj), obj.get('status'), action,
                    status_reason(obj)), heat_error='ResourceInError')
        if self._settled(obj):
            return obj
        return self._wait(obj, action)

    def _wait(self, obj, action, reason=None):
        waiting = self.data.get('waiting') or {}
        if waiting.get('action') != action or \
                waiting.get('id') != obj.get('id'):
            waiting = {'action': action, 'id': obj.get('id'),
                       'since': time.time(), 'polls': 0}
        after = min(self.poll_max,
                    self.poll_first * self.poll_growth ** waiting['polls'])
        after *= random.uniform(1, 1 + self.poll_jitter)
        waiting['polls'] += 1
        self.data['waiting'] = waiting
        return base.Wait(after=after, probe=True, reason=reason or (
            '%s is %s' % (self.label(obj), obj.get('status'))))

    def _waiting_for(self, action):
        waiting = self.data.get('waiting') or {}
        return waiting if waiting.get('action') == action else None

    # -- steps ---------------------------------------------------------------
    def create(self):
        discarding = self._waiting_for('discard')
        if discarding is not None:
            broken = self._get(discarding['id'])
            if broken is not None:
                return self._wait(broken, 'discard',
                                  reason='%s is being discarded' %
                                  self.label(broken))
            self.data.pop('waiting', None)
            self.physical_id = None
        obj = self._current()
        if obj is not None and is_error(obj) and \
                self._waiting_for('create') is None:
            # a failed earlier try (its failure was reported): discard it,
            # and once it is gone make another
            return self._discard(obj)
        if obj is None:
            body = self.make_body()
            obj = self.cloud.create(self.kind, body, key=self.idempotency_key,
                                    fresh=self.fresh)
            conflict = self.identity_conflict(obj, body) \
                if self.natural_identity else None
            if conflict:
                raise exception.ResourceFailure('%s: %s' % (self.name,
                                                            conflict))
            self.physical_id = obj['id']
            self.data['applied'] = _jsonable(body)
            self.data['waiting'] = {'action': 'create', 'id': obj['id'],
                                    'since': time.time(), 'polls': 0}
            self.after_create_call(obj)
        obj = self._settle(obj, 'create')
        if isinstance(obj, base.Wait):
            return obj
        more = self.after_settled(obj)
        if isinstance(more, base.Wait):
            return more
        self.data.pop('waiting', None)
        self.seen = more if isinstance(more, dict) else obj
        return None

    def _discard(self, obj):
        try:
            self.cloud.delete(self.kind, obj['id'])
        except exception.CloudNotFound:
            pass
        self.data['waiting'] = {'action': 'discard', 'id': obj['id'],
                                'since': time.time(), 'polls': 0}
        return base.Wait(after=self.poll_first, probe=True,
                         reason='discarding %s, in status %s' % (
                             self.label(obj), obj.get('status')))

    def update(self, prior, observed):
        if self.needs_replace(prior) or not self.physical_id:
            raise exception.UpdateReplace(self.name)
        obj = observed if observed and not self.data.get('waiting') \
            else self._current()
        if obj is None:
            raise exception.UpdateReplace(self.name)
        if is_error(obj) and self._waiting_for('update') is None:
            # Heat replaces a failed resource (needs_replace_failed)
            raise exception.UpdateReplace(self.name)
        if not self._settled(obj):
            # a change under way (ours, or another's): wait for it first
            return self._settle(obj, 'update')
        self.check_update(prior, obj)
        body = self.make_body()
        changes = self.changes(prior, obj, body)
        if changes:
            obj = self.cloud.update(self.kind, self.physical_id,
                                    changes) or obj
            self.data['waiting'] = {'action': 'update', 'id': obj['id'],
                                    'since': time.time(), 'polls': 0}
        self.data['applied'] = _jsonable(body)
        obj = self._settle(obj, 'update')
        if isinstance(obj, base.Wait):
            return obj
        more = self.after_settled(obj, prior)
        if isinstance(more, base.Wait):
            return more
        self.data.pop('waiting', None)
        self.seen = more if isinstance(more, dict) else obj
        return None

    def check_update(self, prior, obj):
        """Refuse, before anything is sent, an update the cloud cannot
        make (raise ResourceFailure); default: none."""

    def changes(self, prior, obj, body):
        """{field: value} to send: the update fields whose wanted value
        differs from what was applied last, or (``drift_fields``) from
        what is there; a field the template no longer sets is cleared."""
        applied = self.data.get('applied') or {}
        fields = set(self.update_fields) | self.extra_update_fields(prior)
        out = {}
        for field in sorted(fields):
            if field in body:
                want = body[field]
            elif field in applied:
                want = self.cleared_value(field)
                if want is KEEP:
                    continue
            else:
                continue
            seen_differs = field in self.drift_fields and field in obj and \
                not self.same(field, obj[field], want)
            if field in applied:
                if seen_differs or not self.same(field, applied[field],
                                                 want):
                    out[field] = want
            elif field in self.drift_fields and field in obj:
                if seen_differs:
                    out[field] = want
            else:
                out[field] = want   # set by the template only now
        return out

    def cleared_value(self, field):
        """What clears `field` (see ``cleared``)."""
        if field not in self.update_fields and field not in self.cleared:
            return self.extra_cleared
        return self.cleared.get(field)

    def extra_update_fields(self, prior):
        """The keys of ``extra_fields_property`` set now or before."""
        prop = self.extra_fields_property
        if prop not in self.properties_schema or \
                not self.properties_schema[prop].update_allowed:
            return set()
        return set(self.properties.get(prop) or {}) | \
            set((prior or {}).get(prop) or {})

    def same(self, field, seen, wanted):
        """Whether `seen` (observed or applied) is `wanted` for `field`."""
        if field == 'tags':
            return user_tags(seen) == user_tags(wanted)
        if field == 'metadata':
            return user_metadata(seen) == user_metadata(wanted)
        if field in self.unordered_fields and \
                isinstance(seen, list) and isinstance(wanted, list):
            return sorted(map(repr, seen)) == sorted(map(repr, wanted))
        return seen == wanted

    def delete(self):
        if self.physical_id and self.kind not in cloud_mod.SETTLING and \
                type(self).in_use is CloudObject.in_use:
            return self._delete_at_once()
        obj = self._get() if self.physical_id else self._find()
        if obj is None:
            self.data.pop('waiting', None)
            return None
        asked = self._waiting_for('delete')
        if obj.get('status') in GOING_STATUSES:
            pass   # going already (asked by us, or another): only wait
        elif asked is None or asked.get('id') != obj['id']:
            busy = self.in_use(obj)
            if busy:
                return self._in_use(obj, busy)
            try:
                self.cloud.delete(self.kind, obj['id'])
            except exception.CloudNotFound:
                self.data.pop('waiting', None)
                return None
            except exception.CloudTransient:
                raise
            except exception.CloudError as exc:
                if exc.code == 409:
                    return self._in_use(obj, str(exc))
                raise
            self.data['waiting'] = {'action': 'delete', 'id': obj['id'],
                                    'since': time.time(), 'polls': 0}
            obj = self._get(obj['id'])
            if obj is None:
                self.data.pop('waiting', None)
                return None
        if obj.get('status') == 'error_deleting':
            self.data.pop('waiting', None)
            raise exception.ResourceFailure(
                '%s went to status error_deleting: %s' % (
                    self.label(obj), status_reason(obj)))
        return self._wait(obj, 'delete', reason='%s is being deleted' %
                          self.label(obj))

    def _delete_at_once(self):
        """An object gone when its delete call returns (no status that
        settles: Neutron's, key pairs, flavors): asked at once, with no
        look before or after (two calls fewer); a 404 is gone too, a 409
        in use (asked again later)."""
        try:
            self.cloud.delete(self.kind, self.physical_id)
        except exception.CloudNotFound:
            pass
        except exception.CloudTransient:
            raise
        except exception.CloudError as exc:
            if exc.code == 409:
                return self._in_use({'id': self.physical_id}, str(exc))
            raise
        self.data.pop('waiting', None)
        return None

    def in_use(self, obj):
        """Why `obj` cannot be deleted yet (a volume still attached), or
        None: the delete is then asked again later, as for a 409."""
        return None

    def _in_use(self, obj, why):
        waiting = self._waiting_for('delete-in-use')
        now = time.time()
        if waiting is None or waiting.get('id') != obj['id']:
            waiting = {'action': 'delete-in-use', 'id': obj['id'],
                       'since': now, 'polls': 0}
            self.data['waiting'] = waiting
        bound = self.in_use_timeout if self.in_use_timeout is not None \
            else conf_mod.CONF.worker.in_use_timeout
        if now - waiting['since'] > bound:
            self.data.pop('waiting', None)
            raise exception.ResourceFailure(
                'Cannot delete %s: %s' % (self.label(obj), why))
        return self._wait(obj, 'delete-in-use',
                          reason='%s is in use: %s' % (self.label(obj), why))

    def check(self, observed):
        if observed == {} and self.physical_id:  # observing failed: again
            observed = self._current()
        if observed is None:
            raise exception.ResourceFailure('%s does not exist' %
                                            self.label())
        if is_error(observed):
            raise exception.ResourceFailure('%s is in status %s: %s' % (
                self.label(observed), observed.get('status'),
                status_reason(observed)))

    def drift(self, observed):
        """{field: (observed, applied)} for the ``drift_fields`` that
        differ. Gone is the engine's to see; unobservable is no drift."""
        applied = self.data.get('applied')
        if not observed or applied is None:
            return {}
        out = {}
        for field in self.drift_fields:
            if field in applied and field in observed and \
                    not self.same(field, observed[field], applied[field]):
                out[field] = (observed[field], applied[field])
        return out

    def adopt(self, observed):
        # what was applied is what is there: drift counts from now
        if self.data.get('applied') is None:
            self.data['applied'] = _jsonable(
                {f: observed[f] for f in self.drift_fields if f in observed})

    def get_attributes(self, observed):
        obj = observed or {}
        out = self.attributes(obj) if obj else {
            name: None for name in self.attributes_schema}
        out['show'] = copy.deepcopy(obj) if obj else None
        return out


def _jsonable(body):
    """What is kept in self.data (persisted as JSON)."""
    return copy.deepcopy(body)


def known(value):
    """A value given and not UNKNOWN (validation sees references to
    resources not created yet as UNKNOWN)."""
    return value is not None and value is not props_mod.UNKNOWN


def conflict(path, *names):
    """Heat's ResourcePropertyConflict, as converge reports it."""
    return exception.InvalidTemplate(
        'Cannot define the following properties at the same time: %s' %
        ', '.join(names), path=list(path))


def unspecified(path, *names):
    """Heat's PropertyUnspecifiedError."""
    return exception.InvalidTemplate(
        'At least one of the following properties must be specified: %s' %
        ', '.join(names), path=list(path))


def merge_value_specs(body, specs):
    """Neutron's value_specs: extra fields sent as they are."""
    for key, value in (specs or {}).items():
        body[key] = value
    return body


def check_value_specs(cls, values, path):
    """Heat: value_specs may not set what a property sets, nor shared or
    tenant_id."""
    specs = values.get('value_specs')
    if not isinstance(specs, dict):
        return
    banned = {'shared', 'tenant_id'} | set(cls.properties_schema)
    found = sorted(banned & set(specs))
    if found:
        raise exception.InvalidTemplate(
            '%s not allowed in value_specs' % ', '.join(found),
            path=list(path) + ['value_specs'])

"""The resource plug-in contract.

A resource type is a class registered under the entry point group
``converge.resources`` (name = the HOT type, e.g. ``OS::Nova::Server``).
It declares a schema of properties and attributes and a few small,
idempotent steps. The engine (converge/workers/reconcile.py) decides which
step to run; a plug-in never decides, never touches the engine's database
and never talks to other resources.

Steps may be called again after a crash at any line, so each must be safe
to repeat: `create` adopts what already exists under ``self.idempotency_key``
before creating anything.
"""

import dataclasses

from converge import exception
from converge.resources import properties as props_mod


class Wait:
    """What a step returns when it has started something that takes time
    (a server building, an agent's signal): "call this step again later".

    The engine records the wait in the database (the plug-in's ``data`` and
    ``physical_id`` with it), lets go of the thread and the lock, and calls
    the same step again after ``after`` seconds, or at once when ``event``
    (a name the engine knows, e.g. a signal's) happens. The step is then
    run again from the top, so it must look at the world first: a server
    still BUILDing returns Wait again, an ACTIVE one returns None (done).

    ``still``, with an event: a callable(conn) run in the transaction that
    records the wait, False when what the step waits for has happened
    since the step looked (the step then runs again at once). It reads,
    and locks, the rows the event's sender writes in the transaction that
    sends it, so that sender either commits first (and ``still`` sees
    it) or finds the wait recorded: no lock is needed around the step.

    ``probe``: the step looks again only to learn more (a server with no
    estimate of its end yet), so coming back a little late costs
    nothing: an engine whose threads are all busy holds such looks back
    (up to a second) for the work that is waiting, where one that
    expects to find the thing done comes back at its time.

    ``sooner``: seconds to an earlier look that is worth its cost only if
    it comes on time (it narrows down when the action ends, so that the
    look at ``after`` can come earlier). An engine that has many looks of
    its own due about then (thousands of servers built together) looks at
    ``after`` only: there, the extra look would make every other one
    later.
    """

    def __init__(self, after=None, event=None, reason='', still=None,
                 probe=False, sooner=None):
        if after is None and event is None:
            raise ValueError('a Wait needs a time (after) or an event')
        self.after = after
        self.event = event
        self.reason = reason
        self.still = still
        self.probe = probe
        self.sooner = sooner

    def __repr__(self):
        return 'Wait(after=%r, event=%r, reason=%r)' % (
            self.after, self.event, self.reason)


def snapshot_key(key, snapshot_id):
    """The key of what a resource's ``snapshot`` step makes for one
    snapshot (an image, a backup): found again by it should the step
    run again after a crash."""
    return '%s.%s' % (key, snapshot_id)


@dataclasses.dataclass
class MemberEvent:
    """Something that happened to one member of a resource (a deployment
    group's deployment), seen by a step: the engine writes it with the
    step's outcome, in the same transaction, as an event of the
    resource's nested stack (``nested_stack_id``)."""

    name: str
    type: str
    physical_id: str | None
    action: str
    status: str
    reason: str = ''
    #: when it happened (epoch seconds); None: now
    timestamp: float | None = None


class StackInfo:
    """What a plug-in may know about its stack."""

    def __init__(self, id, name, project_id='converge', template_id=None,
                 converging=None):
        self.id = id
        self.name = name
        self.project_id = project_id
        #: the template version the stack is being converged to (a nested
        #: stack's resource builds its child from that version's files
        #: and environment)
        self.template_id = template_id
        #: the id of the traversal walking the stack, when it is a `stack
        #: converge` (a resource owning a nested stack passes it down)
        self.converging = converging
        #: the id of the traversal walking the stack (a check's run is
        #: one per traversal)
        self.traversal_id = None
        #: the cloud the stack lives in (a clouds.yaml name), None for
        #: the simulated cloud
        self.cloud = None
        #: its timeout in minutes (None: none), which its nested stacks
        #: get unless they say otherwise (Heat)
        self.timeout_mins = None


class Resource:
    #: name -> properties.Schema
    properties_schema = {}
    #: name -> description; every resource also has ``show``
    attributes_schema = {}
    #: accept properties not in the schema (OS::Heat::None does)
    allow_unknown_properties = False
    #: a plug-in whose steps are instant and local (no cloud call) sets this;
    #: the engine may then skip the IN_PROGRESS claim write for it
    logical = False
    #: a plug-in whose steps compute in this process rather than wait on
    #: a remote service (the in-process simulated cloud) answers True: the
    #: engine then keeps its gate while they run (see engine/gate.py)
    computes_locally = False
    #: a plug-in whose create finds what an earlier call of it made (an
    #: idempotency key the cloud honours) sets this: the engine may then
    #: create before claiming the row. A unit that dies between the cloud
    #: call and its record leaves the row INIT; the next create (or the
    #: delete, through observe()) finds the real thing by its key
    adopts_by_key = False
    #: such a plug-in whose look-up is a call to a remote service (a real
    #: cloud) answers True: the engine then claims its create all the
    #: same (one local transaction) and marks the first try ``fresh``,
    #: which looks nothing up: a cloud call fewer per object made
    looks_up_remotely = False
    #: set by the engine on a create's first try, claimed before it: no
    #: earlier try can have made anything with this resource's key
    fresh = False
    #: a plug-in that reads its resource's resolved metadata and deletion
    #: policy (``self.metadata``, ``self.deletion_policy``) sets this; the
    #: engine resolves them for it only
    wants_facade = False
    #: a plug-in with an attribute that costs a cloud call of its own
    #: (a server's addresses with their ports) sets this: the engine then
    #: tells it which of its attributes the template reads
    #: (``self.attributes_read``), and it computes that one only then
    reads_attributes = False
    attributes_read = frozenset()
    #: name -> properties.Schema of the update_policy keys the plug-in
    #: honours (batch_create, rolling_update); None: not checked
    update_policy_schema = None

    def __init__(self, name, properties, *, stack, uuid, physical_id=None,
                 data=None, clients=None, metadata=None, update_policy=None):
        #: the resource name in the template
        self.name = name
        #: resolved, validated desired properties (dict, defaults applied)
        self.properties = properties
        self.stack = stack
        #: stable per resource version; the base of idempotency keys
        self.uuid = uuid
        self.physical_id = physical_id
        #: plug-in private state, persisted by the engine after each step
        self.data = dict(data or {})
        #: access to drivers: ``clients.compute`` (servers), ``clients.cloud``
        #: (every other kind, drivers/cloud.py), the engine's stores ...
        self.clients = clients
        self.metadata = metadata or {}
        #: the resource's resolved update_policy (batch_create,
        #: rolling_update: a group batches its members by it)
        self.update_policy = update_policy or {}
        #: a step that has just looked at the real thing may leave what it
        #: saw here (as observe() would return it); the engine then does
        #: not observe again before recording
        self.seen = None
        #: MemberEvents this step saw happen (a group's members)
        self.member_events = []
        #: what this step did that the operator should read, each
        #: written as an IN_PROGRESS event of the resource itself with
        #: the step's outcome (a group's rollout: "batch 2 of 5 started")
        self.notes = []
        #: the reason recorded with a step that ends done, instead of
        #: "state changed" (a rollout that completed with failed members)
        self.status_note = None

    # -- identity ---------------------------------------------------------
    @property
    def idempotency_key(self):
        return self.uuid

    def reference_id(self):
        """What get_resource returns."""
        return self.physical_id or self.name

    # -- steps ------------------------------------------------------------
    def observe(self):
        """Return the observed state (a dict) or None when it does not exist.

        Logical resources exist once created; cloud resources ask the driver.
        """
        return {} if self.physical_id else None

    def owned(self, shared=False):
        """Whether what ``physical_id`` (and ``data``) names is the
        stack's project's own, for an id that comes from outside: `stack
        adopt`'s file, a template's external_id. Asked with the
        project's own credentials, as a real cloud answers them (another
        project's object is not found). `shared`: another project's
        object that this one may use (a shared network, a public image)
        counts too: an external_id is only read, never changed or
        deleted. Default: a type that names nothing outside its own
        resource (a value, a random string)."""
        return True

    def create(self):
        """Bring the resource into existence; set self.physical_id.

        Return None when done, or a Wait to be called again later (never
        sleep: a sleeping step holds a worker thread)."""
        raise NotImplementedError

    def adopt(self, observed):
        """Take over the real thing an abandoned stack recorded (`stack
        adopt`, Heat's handle_adopt): ``physical_id`` and ``data`` are what
        the abandon file gave, `observed` is what is there now (it exists).
        Nothing may be created or run again; re-attach what the engine's
        side of the resource needs. Default: nothing more to do."""

    def update(self, prior, observed):
        """Make the real thing match self.properties in place.

        :param prior: the properties applied last time
        :param observed: what observe() returned
        Raise exception.UpdateReplace when that cannot be done in place.
        Return None when done, or a Wait (as create).
        """

    def delete(self):
        """Remove the real thing; absent already is success.

        Return None when it is gone, or a Wait (as create)."""

    def suspend(self, observed):
        """Stack suspend (dependents first): pause the real thing, if it
        can be. Return None when done, or a Wait (as create)."""

    def resume(self, observed):
        """Stack resume: undo suspend. Return None, or a Wait."""

    def snapshot(self, observed, snapshot_id):
        """Stack snapshot (Heat's handle_snapshot): keep a copy of the
        real thing's data in the cloud (a server's image, a volume's
        backup), named in ``self.data`` under the key
        ``restore_properties`` reads; the snapshot keeps the resource's
        data as this step leaves it. `snapshot_id` names the snapshot
        (one copy per snapshot: a step run again after a crash finds the
        copy it asked for by a key made from it). Return None when the
        copy is ready, or a Wait (as create). `observed` may be None
        when the step is run again after a wait. Default: nothing to
        copy (the snapshot's template and properties restore it)."""

    @classmethod
    def restore_properties(cls, resource_data):
        """Stack restore (Heat's handle_restore): the properties that
        bring the resource back from what its ``snapshot`` step kept in
        `resource_data`, {name: value} put in place of the snapshot's
        template's own (None takes one away); the stack's update then
        makes the real thing so (a server rebuilt from its image).
        Default: none."""
        return {}

    def delete_snapshot(self, resource_data):
        """The snapshot that kept `resource_data` is deleted: delete what
        ``snapshot`` made (Heat's handle_delete_snapshot). Asking once
        is enough (the cloud finishes it); gone already is success.
        Called outside any traversal, with the resource as the snapshot
        recorded it. Default: nothing."""

    def prepare_for_replace(self):
        """Make room for this resource's replacement, which is made before
        this one is deleted (Heat's prepare_for_replace: a port gives up
        its fixed IPs so the new one may have the same). Returns whether
        ``data`` changed (it is then written with the row before the
        replacement is made). Must be idempotent: a unit that died after
        it is run again. What it gives up it takes back in
        ``restore_after_replace``. Default: nothing."""
        return False

    def restore_after_replace(self):
        """Its replacement has been deleted and this resource stays (a
        rollback kept it): take back what prepare_for_replace gave up.
        Returns whether ``data`` changed. Idempotent. Default: nothing."""
        return False

    def check(self, observed):
        """Stack check: raise exception.ResourceFailure when unhealthy."""
        if observed is None:
            raise exception.ResourceFailure('%s does not exist' % self.name)

    def get_attributes(self, observed):
        """Return {attribute name: value} for every attribute in the schema."""
        return {}

    # -- members: the resources of its nested stack (Heat) -----------------
    def nested_stack_id(self):
        """The id of the stack this resource's members belong to (Heat:
        its nested stack), or None when it has no members. Their events
        are kept under this id."""
        return None

    def nested_stack_name(self):
        """Heat's name for the nested stack: parent-resource-shortid."""
        nested = self.nested_stack_id()
        return nested and '%s-%s-%s' % (self.stack.name, self.name,
                                        nested.replace('-', '')[:12])

    def members(self):
        """The resources of the nested stack, as the engine shows
        resources: a list of dicts with ``resource_name``,
        ``resource_type``, ``physical_resource_id``, ``action``,
        ``status``, ``status_reason``, ``updated_at`` (epoch seconds or
        None) and ``attributes``; None when it has none. Read-only: the
        engine's listings call it (``resource list --nested-depth``)."""
        return None

    # -- decisions the engine asks about ----------------------------------
    def drift(self, observed):
        """What differs from what was applied: names of the fields whose
        observed value differs, or {name: (observed, applied)}."""
        return set()

    #: True for a type whose update runs something again on its target (a
    #: software deployment's config on its server): previews call it
    #: "re-run"
    reruns = False
    #: False for a type whose drift() is not the real thing's (a nested
    #: stack's is its children's, observed on their own): observers and
    #: CHECK do not compare it
    observed_drift = True
    #: a type whose driver can list many of its resources in one call
    #: defines ``observe_many(cls, plugins)`` -> {id(plugin): observed}
    #: (a classmethod); observers then make one call per pass and driver
    observe_many = None

    #: True for a type whose state is not fully described by its
    #: definition (facts written by servers): every update visits it, and
    #: so what reads it (engine/changes.py)
    always_visit = False
    #: True for a type built from the stack's files and environment (a
    #: nested stack's template): a change of any of them visits it
    built_from_files = False

    def changed(self):
        """Whether what the resource is built from changed though its
        properties did not (a nested stack's provider file, say): it is
        then updated. Default: never."""
        return False

    def needs_update(self, prior):
        """Whether properties changed from `prior` call for an update
        (or a replacement) at all. Default: they do."""
        return True

    def needs_replace(self, prior):
        """True when the change from `prior` cannot be made in place.

        Default: a changed property that is not update_allowed.
        """
        for key, schema in self.properties_schema.items():
            if prior.get(key) != self.properties.get(key):
                if not schema.update_allowed:
                    return True
        return False

    @classmethod
    def validate_properties(cls, values, path=()):
        """Validate and coerce resolved property values against the schema.

        Values that are not yet known (UNKNOWN) are skipped. Returns the dict
        with defaults applied. Raises exception.InvalidTemplate naming the
        property path.

        Checks that span several properties belong in `validate_more`,
        which is called here once the schema checks produced a dict.
        """
        out = props_mod.validate(cls.properties_schema, values, path=path,
                                 allow_unknown=cls.allow_unknown_properties)
        if not isinstance(out, dict):  # UNKNOWN: nothing more to check
            return out
        return cls.validate_more(out, list(path))

    @classmethod
    def validate_update_policy(cls, values, path=()):
        """Validate and coerce a resolved update_policy against
        ``update_policy_schema`` (defaults applied), naming the bad key's
        path; unchanged when the plug-in declares none."""
        if cls.update_policy_schema is None or not isinstance(values, dict):
            return values
        return props_mod.validate(cls.update_policy_schema, values,
                                  path=path)

    @classmethod
    def validate_more(cls, values, path):
        """Plug-in checks beyond the schema; return the (coerced) values.

        :param values: the dict produced by the schema checks (defaults
            applied); items may still be UNKNOWN
        :param path: the property path, a list, for exception.InvalidTemplate
        Default: no further checks, `values` returned unchanged.
        """
        return values

    @classmethod
    def implied_requires(cls, props, others):
        """Names of the template's other resources this one must follow
        though its properties name none of them (Heat's
        ``add_dependencies``: a server waits for the subnets of the
        networks it is on, or Neutron refuses to boot it).

        :param props: its properties as far as they are known before
            anything is made, read with ``props.get(key)`` (a
            get_resource stands as the name, what waits on another
            resource is UNKNOWN)
        :param others: the template's other resources: ``others.of(cls,
            ...)`` lists (name, properties as known) of those whose
            plug-in is one of the classes or a subclass
        Default: none.
        """
        return ()

    @classmethod
    def attribute_names(cls):
        return set(cls.attributes_schema) | {'show'}

    #: the attributes that are credentials: shown only to those who may
    #: act with them (a project's members), masked for its readers
    credential_attributes = ()

    @classmethod
    def credentials(cls, attributes):
        """The credential texts among stored `attributes` (masked
        wherever they occur, for a caller who may not have them)."""
        return [attributes[k] for k in cls.credential_attributes
                if isinstance(attributes.get(k), str) and attributes[k]]

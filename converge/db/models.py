"""Tables of the engine's state.

A stack points at its current template (immutable rows, one per version)
and its current traversal. Resources are versions: a replacement is a new
row, so several rows may share a name. ``atomic_key`` is the fencing
counter: every write to a resource row is ``UPDATE ... WHERE atomic_key=:k``
and bumps it, so of two racing units of work exactly one commits.
"""

import datetime

from sqlalchemy import (Boolean, DateTime, Double, Float, ForeignKey, Index,
                        Integer, JSON, String, Text, UniqueConstraint)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# what may carry a hidden parameter's value or a credential is a Sealed
# column: encrypted at rest with the configured key (db/sealing.py)
from converge.db.sealing import Sealed


def utcnow():
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    pass


class Stack(Base):
    __tablename__ = 'stacks'
    # names are unique among a project's live stacks
    __table_args__ = (UniqueConstraint('project_id', 'name', 'deleted_marker',
                                       name='uq_stacks_project_name_live'),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    # '' while live, the stack id once deleted: keeps names unique among
    # live stacks on every backend (no partial indexes needed)
    deleted_marker: Mapped[str] = mapped_column(String(36), default='')
    project_id: Mapped[str] = mapped_column(String(64), default='converge')
    action: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    status_reason: Mapped[str] = mapped_column(Text, default='')
    template_id: Mapped[int | None] = mapped_column(
        ForeignKey('templates.id'), nullable=True)
    prev_template_id: Mapped[int | None] = mapped_column(
        ForeignKey('templates.id'), nullable=True)
    current_traversal: Mapped[str | None] = mapped_column(String(36),
                                                          nullable=True)
    disable_rollback: Mapped[bool] = mapped_column(Boolean, default=True)
    timeout_mins: Mapped[int | None] = mapped_column(Integer, nullable=True)
    tags: Mapped[list] = mapped_column(JSON, default=list)
    outputs: Mapped[dict | None] = mapped_column(Sealed, nullable=True)
    # a nested stack: the stack and the resource (a provider template's,
    # OS::Heat::Stack's, a group's) that own it, and how deep it is
    parent_id: Mapped[str | None] = mapped_column(String(36), nullable=True,
                                                  index=True)
    parent_resource: Mapped[str | None] = mapped_column(String(255),
                                                        nullable=True)
    nested_depth: Mapped[int] = mapped_column(Integer, default=0,
                                              server_default='0')
    # the cloud the stack lives in: a clouds.yaml name, None for the
    # simulated cloud (every unit of work acts in it, whoever runs it)
    cloud: Mapped[str | None] = mapped_column(String(255), nullable=True)
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime,
                                                          default=utcnow)
    updated_at: Mapped[datetime.datetime | None] = mapped_column(
        DateTime, nullable=True)
    deleted_at: Mapped[datetime.datetime | None] = mapped_column(
        DateTime, nullable=True)


class Template(Base):
    """One immutable version of a stack's desired state."""

    __tablename__ = 'templates'

    id: Mapped[int] = mapped_column(Integer, primary_key=True,
                                    autoincrement=True)
    stack_id: Mapped[str | None] = mapped_column(String(36), nullable=True,
                                                 index=True)
    # the Bundle (template, files, environment) as JSON
    bundle: Mapped[dict] = mapped_column(Sealed)
    # user parameters given on the command line
    parameters: Mapped[dict] = mapped_column(Sealed, default=dict)
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime,
                                                          default=utcnow)


class Resource(Base):
    __tablename__ = 'resources'
    # by physical id: Heat's API names a deployment group's nested stack
    # by the group's physical id (engine/group_stack.py finds it so)
    __table_args__ = (Index('ix_resources_stack_name', 'stack_id', 'name'),
                      Index('ix_resources_physical_id', 'physical_id'))

    id: Mapped[int] = mapped_column(Integer, primary_key=True,
                                    autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)
    stack_id: Mapped[str] = mapped_column(
        ForeignKey('stacks.id', ondelete='CASCADE'))
    name: Mapped[str] = mapped_column(String(255))
    # the plug-in's type (what the environment maps the template's to)
    type: Mapped[str] = mapped_column(String(255))
    # the type as the template names it (a provider's `My::Server`,
    # `OS::TripleO::Controller`), what users are shown, as Heat shows it;
    # NULL: the same as `type` (rows from before migration 0013)
    template_type: Mapped[str | None] = mapped_column(String(255),
                                                      nullable=True)
    action: Mapped[str] = mapped_column(String(16), default='INIT')
    status: Mapped[str] = mapped_column(String(16), default='COMPLETE')
    status_reason: Mapped[str] = mapped_column(Text, default='')
    physical_id: Mapped[str | None] = mapped_column(String(255),
                                                    nullable=True)
    # what get_resource returns (the physical id for most types)
    reference_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    # the template version whose desired state this row last reached
    template_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    properties: Mapped[dict | None] = mapped_column(Sealed, nullable=True)
    data: Mapped[dict] = mapped_column(Sealed, default=dict)
    attributes: Mapped[dict | None] = mapped_column(Sealed, nullable=True)
    observed: Mapped[dict | None] = mapped_column(Sealed, nullable=True)
    # when `observed` was read (epoch seconds), and how the real thing
    # differed from what was applied then (None: it did not)
    observed_at: Mapped[float | None] = mapped_column(Double, nullable=True)
    drift: Mapped[str | None] = mapped_column(Text, nullable=True)
    # the digest of the definition (template version's) it last converged
    # to: an update whose definition of it is the same need not visit it
    applied_digest: Mapped[str | None] = mapped_column(String(64),
                                                       nullable=True)
    # what cleaning it up does, as of its last convergence: Delete, Retain
    # or Snapshot (its DeletionPolicy; Retain for an external_id), so a
    # cleanup needs no parse of the template version it came from
    deletion_policy: Mapped[str | None] = mapped_column(String(16),
                                                        nullable=True)
    # names of the resources this row depended on when last converged
    requires: Mapped[list] = mapped_column(JSON, default=list)
    replaces: Mapped[int | None] = mapped_column(Integer, nullable=True)
    replaced_by: Mapped[int | None] = mapped_column(Integer, nullable=True)
    engine_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    atomic_key: Mapped[int] = mapped_column(Integer, default=0)
    # the traversal that last finished this row (duplicate-message guard)
    traversal_id: Mapped[str | None] = mapped_column(String(36),
                                                     nullable=True)
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime,
                                                          default=utcnow)
    updated_at: Mapped[datetime.datetime | None] = mapped_column(
        DateTime, nullable=True)


class Traversal(Base):
    """One walk of a stack's graph towards one template version."""

    __tablename__ = 'traversals'

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    stack_id: Mapped[str] = mapped_column(
        ForeignKey('stacks.id', ondelete='CASCADE'), index=True)
    action: Mapped[str] = mapped_column(String(16))
    template_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # running -> complete | failing -> failed | superseded | cancelled
    state: Mapped[str] = mapped_column(String(16), default='running')
    # persisted options: rollback, converge (observe reality), ...
    options: Mapped[dict] = mapped_column(JSON, default=dict)
    total: Mapped[int] = mapped_column(Integer, default=0)
    failure: Mapped[str] = mapped_column(Text, default='')
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime,
                                                          default=utcnow)
    finished_at: Mapped[datetime.datetime | None] = mapped_column(
        DateTime, nullable=True)


class SyncPoint(Base):
    """A node of a traversal's graph and how many inputs it still awaits.

    ``remaining`` starts at the number of predecessors; each one that
    completes decrements it in the same transaction that records its own
    result, so the node is released exactly once. The node ``stack``
    gathers the graph's roots: when it reaches zero the traversal is done.
    """

    __tablename__ = 'sync_points'

    traversal_id: Mapped[str] = mapped_column(
        ForeignKey('traversals.id', ondelete='CASCADE'), primary_key=True)
    node: Mapped[str] = mapped_column(String(300), primary_key=True)
    stack_id: Mapped[str] = mapped_column(String(36), index=True)
    resource_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    remaining: Mapped[int] = mapped_column(Integer, default=0)
    dependents: Mapped[list] = mapped_column(JSON, default=list)
    done: Mapped[bool] = mapped_column(Boolean, default=False)
    updated_at: Mapped[float] = mapped_column(Float, default=0.0)
    # a node whose unit of work returned "wait": when a timer in any live
    # engine sends it again (epoch seconds), and/or the event that sends
    # it at once (e.g. a signal); both NULL when it is not waiting
    # Double, not Float: MariaDB's FLOAT is single precision (epoch
    # seconds to within minutes)
    wake_at: Mapped[float | None] = mapped_column(Double, nullable=True,
                                                  index=True)
    wait_event: Mapped[str | None] = mapped_column(String(255),
                                                   nullable=True)
    # a signal finds the nodes waiting for it by (event, stack): with an
    # index on each column alone, SQLite took the stack's and read every
    # node of the stack per signal (22,000 on tripleo 1,000, 9,000 times)
    __table_args__ = (Index('ix_sync_points_wait_event_stack',
                            'wait_event', 'stack_id'),)


class SyncShard(Base):
    """A share of the inputs of a node with many (graph/plan.py
    shard_fan_in): they count down here, and the node counts its shards,
    so no one row is counted down by every input."""

    __tablename__ = 'sync_shards'

    traversal_id: Mapped[str] = mapped_column(
        ForeignKey('traversals.id', ondelete='CASCADE'), primary_key=True)
    node: Mapped[str] = mapped_column(String(300), primary_key=True)
    shard: Mapped[int] = mapped_column(Integer, primary_key=True,
                                       autoincrement=False)
    remaining: Mapped[int] = mapped_column(Integer)


class LeaseKey(Base):
    """One row per limited thing (a stack's in-progress cap, a cloud
    driver's rate): bumping ``gen`` serialises the takers of its leases on
    every backend (a row lock on PostgreSQL and MariaDB, the one writer
    on SQLite)."""

    __tablename__ = 'lease_keys'

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    gen: Mapped[int] = mapped_column(Integer, default=0)


class Lease(Base):
    """A counted slot of a limit, held until released or until it expires
    (so a holder that dies frees its slot by itself)."""

    __tablename__ = 'leases'

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    holder: Mapped[str] = mapped_column(String(255), primary_key=True)
    expires_at: Mapped[float] = mapped_column(Double, index=True)


class Event(Base):
    __tablename__ = 'events'
    __table_args__ = (Index('ix_events_stack_id_id', 'stack_id', 'id'),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True,
                                    autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(36))
    stack_id: Mapped[str] = mapped_column(String(36))
    traversal_id: Mapped[str | None] = mapped_column(String(36),
                                                     nullable=True)
    resource_name: Mapped[str] = mapped_column(String(255))
    resource_type: Mapped[str] = mapped_column(String(255), default='')
    physical_id: Mapped[str | None] = mapped_column(String(255),
                                                    nullable=True)
    action: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text, default='')
    # epoch seconds with microseconds: ordering and overlap are measured
    timestamp: Mapped[float] = mapped_column(Float)


class SoftwareConfig(Base):
    """Stored, immutable software configs (OS::Heat::SoftwareConfig)."""

    __tablename__ = 'software_configs'

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(255), default='')
    group: Mapped[str] = mapped_column(String(255), default='')
    config: Mapped[dict] = mapped_column(Sealed, default=dict)
    #: whose it is: the API lists and shows a project's own only (None:
    #: made before configs had owners, seen by no one's listing)
    project_id: Mapped[str | None] = mapped_column(String(64), index=True,
                                                   nullable=True)
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime,
                                                          default=utcnow)


class SoftwareDeployment(Base):
    """A deployment of a config to a server: what its agent pulls, and the
    result it signalled. ``run`` keys one run of one action: the agent runs
    each (id, action, run) once (docs/software.md)."""

    __tablename__ = 'software_deployments'

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    stack_id: Mapped[str | None] = mapped_column(String(36), index=True)
    project_id: Mapped[str] = mapped_column(String(64), default='converge')
    resource_name: Mapped[str | None] = mapped_column(String(255))
    #: the server's physical id (what its agent's credential is bound to)
    server_id: Mapped[str] = mapped_column(String(255), index=True)
    #: the derived config's name: deployments are ordered by it on a server
    name: Mapped[str] = mapped_column(String(255), default='')
    #: the member's name in a deployment group (None: a lone deployment)
    member: Mapped[str | None] = mapped_column(String(255))
    #: the event its signal wakes (the unit of the resource waiting on it)
    wake_event: Mapped[str | None] = mapped_column(String(255))
    #: the derived config: group, config, options, inputs, outputs
    config: Mapped[dict] = mapped_column(Sealed, default=dict)
    action: Mapped[str] = mapped_column(String(32))
    run: Mapped[str] = mapped_column(String(64), default='')
    status: Mapped[str] = mapped_column(String(16))
    status_reason: Mapped[str] = mapped_column(Text, default='')
    input_values: Mapped[dict] = mapped_column(Sealed, default=dict)
    output_values: Mapped[dict] = mapped_column(Sealed, default=dict)
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime,
                                                          default=utcnow)
    updated_at: Mapped[datetime.datetime] = mapped_column(DateTime,
                                                          default=utcnow)


class AgentCredential(Base):
    """The one credential of one server's agent: valid for that server's
    deployments and signals only; revoked when the server is deleted.
    The token is not stored (it is an HMAC of agent_id, engine_secrets)."""

    __tablename__ = 'agent_credentials'

    agent_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    stack_id: Mapped[str | None] = mapped_column(String(36), index=True)
    project_id: Mapped[str] = mapped_column(String(64), default='converge')
    resource_name: Mapped[str | None] = mapped_column(String(255))
    #: the server's physical id, once the cloud has given one
    server_id: Mapped[str | None] = mapped_column(String(255), index=True)
    #: bumped whenever a deployment of the server changes (the agent's ETag)
    version: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[float] = mapped_column(Double)
    revoked_at: Mapped[float | None] = mapped_column(Double)


class EngineSecret(Base):
    """Secrets the engine makes once and every process shares (the key
    agent tokens are derived with)."""

    __tablename__ = 'engine_secrets'

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(255))


class WaitConditionSignal(Base):
    """One signal to an OS::Heat::WaitConditionHandle (a repeated signal id
    replaces the earlier one, as in Heat)."""

    __tablename__ = 'wait_condition_signals'
    __table_args__ = (UniqueConstraint('handle_id', 'signal_id',
                                       name='uq_wait_condition_signal'),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True,
                                    autoincrement=True)
    handle_id: Mapped[str] = mapped_column(String(36), index=True)
    stack_id: Mapped[str | None] = mapped_column(String(36), index=True)
    signal_id: Mapped[str] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text, default='')
    data: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Double)


class ScalingSignal(Base):
    """One signal to an OS::Heat::ScalingPolicy and what became of it: a
    capacity its group is to converge to (SCALING), or why nothing was
    done (IGNORED, FAILED). A signal sent again under the same id is
    answered from its row, never applied twice."""

    __tablename__ = 'scaling_signals'
    __table_args__ = (UniqueConstraint('stack_id', 'policy', 'signal_id',
                                       name='uq_scaling_signal'),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True,
                                    autoincrement=True)
    stack_id: Mapped[str] = mapped_column(String(36), index=True)
    #: the policy's resource name
    policy: Mapped[str] = mapped_column(String(255))
    signal_id: Mapped[str | None] = mapped_column(String(255))
    #: the group's resource row uuid (a replaced group starts afresh)
    group_key: Mapped[str | None] = mapped_column(String(36), index=True)
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text, default='')
    capacity: Mapped[int | None] = mapped_column(Integer)
    cooldown: Mapped[float | None] = mapped_column(Double)
    created_at: Mapped[float] = mapped_column(Double)


class DeploymentAction(Base):
    """An action an operator ran on a deployment outside any stack
    operation (a day-2 action: backup, patch, ...), and its result."""

    __tablename__ = 'deployment_actions'

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    deployment_id: Mapped[str] = mapped_column(String(36), index=True)
    stack_id: Mapped[str | None] = mapped_column(String(36), index=True)
    project_id: Mapped[str] = mapped_column(String(64), default='converge')
    resource_name: Mapped[str | None] = mapped_column(String(255))
    #: the member of a deployment group it ran on (None: a lone one)
    member: Mapped[str | None] = mapped_column(String(255))
    server_id: Mapped[str] = mapped_column(String(255))
    action: Mapped[str] = mapped_column(String(64))
    input_values: Mapped[dict] = mapped_column(Sealed, default=dict)
    run: Mapped[str] = mapped_column(String(64), index=True)
    status: Mapped[str] = mapped_column(String(16))
    status_reason: Mapped[str] = mapped_column(Text, default='')
    output_values: Mapped[dict] = mapped_column(Sealed, default=dict)
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime,
                                                          default=utcnow)
    updated_at: Mapped[datetime.datetime] = mapped_column(DateTime,
                                                          default=utcnow)


class ApiToken(Base):
    """A token of converge's own for the REST API (where no keystone is
    configured): who it speaks for. Only its SHA-256 is kept; the token
    itself is shown once, when it is made."""

    __tablename__ = 'api_tokens'

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    project_id: Mapped[str] = mapped_column(String(64), index=True)
    user_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    roles: Mapped[list] = mapped_column(JSON, default=list)
    description: Mapped[str] = mapped_column(Text, default='')
    created_at: Mapped[float] = mapped_column(Double)
    expires_at: Mapped[float | None] = mapped_column(Double, nullable=True)
    revoked_at: Mapped[float | None] = mapped_column(Double, nullable=True)


class StackSnapshot(Base):
    """What `stack snapshot create` kept of a stack: its abandon document
    (template, files, environment, parameters, each resource's data).
    Restoring updates the stack back to it."""

    __tablename__ = 'stack_snapshots'

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    stack_id: Mapped[str] = mapped_column(String(36), index=True)
    project_id: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(255), default='')
    status: Mapped[str] = mapped_column(String(16))
    status_reason: Mapped[str] = mapped_column(Text, default='')
    data: Mapped[dict] = mapped_column(Sealed, default=dict)
    created_at: Mapped[float] = mapped_column(Double)


class ApiRate(Base):
    """Requests one caller made in one minute (`[api]
    max_requests_per_minute`): counted in the database so that the limit
    holds across every API process."""

    __tablename__ = 'api_rates'

    caller: Mapped[str] = mapped_column(String(160), primary_key=True)
    minute: Mapped[int] = mapped_column(Integer, primary_key=True)
    count: Mapped[int] = mapped_column(Integer, default=0)


class ConvergePolicy(Base):
    """A stack's continuous convergence (observers/loop.py): `observe`
    reports drift, `repair` also converges it; when it is next due, and
    how often its repairs failed in a row (the back-off)."""

    __tablename__ = 'converge_policies'

    stack_id: Mapped[str] = mapped_column(
        ForeignKey('stacks.id', ondelete='CASCADE'), primary_key=True)
    mode: Mapped[str] = mapped_column(String(16))
    interval: Mapped[float] = mapped_column(Double)
    jitter: Mapped[float] = mapped_column(Double, default=0.1)
    #: epoch seconds the next pass is due (an engine that takes the pass
    #: moves it on first, so one engine observes a stack at a time)
    next_at: Mapped[float] = mapped_column(Double, index=True)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    #: the traversal of the last repair this policy started
    repair_traversal: Mapped[str | None] = mapped_column(String(36),
                                                         nullable=True)


class Fact(Base):
    """One fact of a stack's fact store (OS::Converge::FactStore): a value
    a server's agent published under a key, with its own credential. Kept
    under the stack at the top of the tree, so every nested stack's
    servers share one store."""

    __tablename__ = 'facts'

    stack_id: Mapped[str] = mapped_column(
        ForeignKey('stacks.id', ondelete='CASCADE'), primary_key=True)
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    value: Mapped[dict | list | str | None] = mapped_column(JSON,
                                                            nullable=True)
    #: the agent that wrote it last
    writer: Mapped[str | None] = mapped_column(String(64), nullable=True)
    updated_at: Mapped[float] = mapped_column(Double)


class FactRefresh(Base):
    """A stack whose facts changed since its resources last read them: an
    observer (observers/loop.py) updates it once it is not in progress."""

    __tablename__ = 'fact_refreshes'

    stack_id: Mapped[str] = mapped_column(
        ForeignKey('stacks.id', ondelete='CASCADE'), primary_key=True)
    keys: Mapped[list] = mapped_column(JSON, default=list)
    since: Mapped[float] = mapped_column(Double)

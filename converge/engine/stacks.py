"""Stack operations. Each one that changes desired state starts a traversal
(converge/engine/traversal.py: one transaction, then the leaves are sent).
"""

import posixpath
import re

import sqlalchemy as sa
from oslo_log import log as logging

from converge import lazy
from converge import conf
from converge import exception
from converge import memory
from converge.db import api
from converge.db import models
from converge.engine import children
from converge.engine import definitions
from converge.engine import policies
from converge.engine import stack_size
from converge.engine import traversal
from converge.graph import dependencies
from converge.template import formats

# imported at first use (converge/lazy.py): a read-only CLI command,
# a process of its own, builds an engine and uses none of these (issue 41)
template = lazy.module('converge.template')

LOG = logging.getLogger(__name__)

# Heat's rule (heat/engine/stack.py): a letter, then letters, digits, "_",
# "-" or "."; 255 characters at most (the column's width)
STACK_NAME = re.compile(r'[a-zA-Z][a-zA-Z0-9_.-]{0,254}')


def check_name(name):
    """Refuse a stack name Heat would refuse."""
    if not isinstance(name, str) or not STACK_NAME.fullmatch(name):
        raise exception.InvalidInput(
            'Invalid stack name %r: it must start with a letter, contain '
            'only letters, digits and "_-.", and be at most 255 characters'
            % (name,))


def check_timeout(timeout):
    """A stack timeout is a positive number of minutes up to
    max_timeout_mins (or none): its deadline is a time, and a column."""
    if timeout is None:
        return None
    maximum = conf.CONF.max_timeout_mins
    if isinstance(timeout, bool) or not isinstance(timeout, int) or \
            not 0 < timeout <= maximum:
        raise exception.InvalidInput(
            'Invalid timeout %r: it must be a whole number of minutes from '
            '1 to %d ([DEFAULT] max_timeout_mins)' % (timeout, maximum))
    return timeout


def check_depth(depth):
    """Refuse a nested stack deeper than max_nested_stack_depth."""
    maximum = conf.CONF.max_nested_stack_depth
    if depth > maximum:
        raise exception.InvalidInput(
            'Recursion depth exceeds %d (max_nested_stack_depth): nested '
            'stacks (provider templates, OS::Heat::Stack) nest too deeply '
            'or include themselves' % maximum)


def _lineage(parent):
    if parent is None:
        return {}
    parent_id, resource, depth = parent
    return {'parent_id': parent_id, 'parent_resource': resource,
            'nested_depth': depth}


def validate(bundle, params, stack_name='stack', stack_id='',
             validate_values=True, project_id=None, depth=0, cloud=None,
             nested_properties=True):
    """The stack definition, checked through: its graph, and the nested
    stacks its provider templates (and inline OS::Heat::Stack templates)
    make, down to max_nested_stack_depth, with the property values
    known before anything is created; with `cloud` (a driver, the
    stack's), the values that must name something in it (custom
    constraints: an image, a flavor, a network ...). Without
    `nested_properties` (Heat's template validate, which reads no
    resource's properties) the nested stacks' resources' properties are
    not checked, and a value given for a parameter a nested template
    lacks is left out."""
    lenient = depth > 0 and not nested_properties
    if lenient:
        declared = formats.section(bundle.template, 'parameters')
        params = {k: v for k, v in params.items()
                  if isinstance(declared, dict) and k in declared}
    defn = template.StackDefinition(bundle, params, stack_name=stack_name,
                                    stack_id=stack_id,
                                    project_id=project_id or engine_project(),
                                    validate_values=validate_values,
                                    limits=definitions.limits(),
                                    stored=lenient)
    try:
        dependencies.check(defn.dependencies())
        if cloud is not None and validate_values:
            check_in_cloud(defn, cloud)
    except exception.InvalidTemplate as exc:
        if exc.path[:1] == ['resources']:
            # the dependency graph names HOT's section: the template's
            # own (CloudFormation's Resources), so that its line is found
            exc.path[0] = defn.format.section('resources')
        raise exc.locate(bundle.template_path, bundle.line_of(exc.path))
    for name, child, child_params in nested_children(defn):
        try:
            check_depth(depth + 1)
        except exception.InvalidInput as exc:
            fmt = defn.format
            path = [fmt.section('resources'), name, fmt.field('type')]
            raise exception.InvalidTemplate(str(exc), path=path).locate(
                bundle.template_path, bundle.line_of(path))
        try:
            validate(child, child_params,
                     stack_name='%s-%s' % (stack_name, name),
                     validate_values=False, project_id=project_id,
                     depth=depth + 1, nested_properties=nested_properties)
        except exception.InvalidTemplate as exc:
            raise _nested_error(exc, defn, name) from None
    return defn


def _nested_error(exc, defn, name):
    """`exc`, raised inside the nested stack of resource `name` of
    `defn`, as Heat names the way to it: each owner with its nested
    stack's template (a provider's file as the template or registry
    names it, else ``nested_stack``), then the resource inside."""
    rdef = defn.resources[name]
    label = rdef.type if getattr(rdef.plugin, 'provider', None) \
        else 'nested_stack'
    if label.startswith('file://'):   # a file the CLI read: its name
        label = posixpath.basename(template.url_path(label))
    if isinstance(exc, exception.NestedError):
        inner = exc.where
    elif exc.path:
        inner = '.'.join(str(p) for p in exc.path[:2])
    else:
        return exc
    return exception.NestedError(
        exc.reason, exc.path, exc.filename, exc.line,
        where='%s.%s<%s>.%s' % (defn.format.section('resources'), name,
                                label, inner))


def environment_shown(defn, params=None):
    """The environment a template was validated with, as Heat's validate
    answers it: its parameters (the request's too), parameter defaults,
    event sinks and resource registry, where each provider template the
    template names as a type is registered as itself."""
    env = defn.bundle.environment or {}
    registry = dict(env.get('resource_registry') or {})
    registry['resources'] = registry.get('resources') or {}
    for rdef in defn.resources.values():
        if template.is_provider(rdef.template_type):
            registry.setdefault(rdef.template_type, rdef.template_type)
    shown = {'parameters': dict(env.get('parameters') or {},
                                **(params or {})),
             'parameter_defaults': dict(env.get('parameter_defaults') or {}),
             'event_sinks': list(env.get('event_sinks') or []),
             'resource_registry': registry}
    if env.get('parameter_merge_strategies'):
        shown['parameter_merge_strategies'] = \
            env['parameter_merge_strategies']
    return shown


def nested_parameters(defn, project_id, depth=0, nested_properties=True):
    """Heat's validate with show_nested: {resource: its nested stack's
    Type, Description and Parameters (a value its properties give as
    Value), and its own NestedParameters}, for each nested stack whose
    template is known before anything is made."""
    out = {}
    for name, child, child_params in nested_children(defn):
        inner = validate(child, child_params,
                         stack_name='%s-%s' % (defn.stack_name, name),
                         validate_values=False, project_id=project_id,
                         depth=depth + 1,
                         nested_properties=nested_properties)
        info = inner.validate_info()
        entry = {'Type': defn.resources[name].template_type,
                 'Description': inner.description or '',
                 'Parameters': info['Parameters']}
        deeper = nested_parameters(inner, project_id, depth + 1,
                                   nested_properties)
        if deeper:
            entry['NestedParameters'] = deeper
        out[name] = entry
    return out


def check_in_cloud(defn, cloud):
    """Heat's custom constraints, against the stack's cloud: every
    parameter's ``custom_constraint`` and every property whose schema
    names one, each name looked up once."""
    from converge.resources import constraints
    cache = {}
    fmt = defn.format   # the keys the template writes
    for name, schema in defn.schemas.items():
        for kind, arg, _ in schema.constraints:
            if kind == 'custom_constraint':
                constraints.check_value(arg, defn.parameters.get(name),
                                        cloud, [fmt.section('parameters'),
                                                name], cache)
    for name, rdef in defn.resources.items():
        if rdef.plugin is None:
            continue
        _check_service(rdef, cloud, [fmt.section('resources'), name,
                                     fmt.field('type')])
        constraints.check(rdef.plugin, defn.unmade_properties(name), cloud,
                          [fmt.section('resources'), name,
                           fmt.field('properties')], cache=cache)


def _check_service(rdef, cloud, path):
    """Heat's ResourceTypeUnavailable: a type whose service (Swift,
    Aodh) or Neutron extension (vpnaas) the stack's cloud lacks is
    refused at validate, naming the service."""
    needs = getattr(rdef.plugin, 'required_service', None)
    if not needs or cloud is None:
        return
    client, service_type, extension = needs
    ok, why = cloud.available(service_type, extension)
    if not ok:
        raise exception.InvalidTemplate(
            'ResourceTypeUnavailable: HEAT-E99001 Service %s is not '
            'available for resource type %s, reason: %s' % (
                client, rdef.template_type, why), path=path)


def check_external(engine, defn, bundle, stack_id, project_id, cloud):
    """A template's external_id (known now) must name the project's own
    object (engine/ownership.py); one known only once what it names is
    made is checked when the resource is converged."""
    from converge.engine import ownership
    entries = {name: (rdef.plugin, rdef.type, rdef.external_id, {})
               for name, rdef in defn.resources.items()
               if rdef.external_id and rdef.plugin is not None}
    ownership.check(engine, stack_id, defn.stack_name, project_id, cloud,
                    entries, key='external_id', source=bundle.template_path,
                    line_of=bundle.line_of)


def nested_children(defn):
    """(resource name, child bundle, known parameters) of each nested
    stack whose template is known before anything is created."""
    for name, rdef in defn.resources.items():
        plan = getattr(rdef.plugin, 'child_to_validate', None)
        child = plan(defn.known_properties(name)) if plan else None
        if child is None:
            continue
        child['params'] = {k: v for k, v in
                           (child.get('params') or {}).items()
                           if v is not None and not template.is_unknown(v)}
        yield name, children.child_bundle(defn.bundle, defn.stack_name, name,
                                        child), child['params']


def check_stack_count(session, project_id):
    """Refuse a stack beyond `max_stacks_per_project` (counted in the
    transaction that stores the new one)."""
    cap = conf.CONF.max_stacks_per_project
    if cap and api.stack_count(session, project_id) >= cap:
        raise exception.Conflict(
            'You have reached the maximum stacks per project, %d. Please '
            'delete some stacks ([DEFAULT] max_stacks_per_project).' % cap)


def create(engine, name, bundle, params, disable_rollback=True,
           timeout=None, tags=None, project_id=None, stack_id=None,
           parent=None, converge_policy=None, cloud=None):
    """Store a new stack of `project_id` (default: the configured project)
    and start creating it; returns (stack id, traversal id). A nested
    stack has a `parent`: (parent stack id, owning resource, depth), and
    lives in its parent's cloud; a stack of its own lives in `cloud` (a
    clouds.yaml name; None: the simulated cloud)."""
    if parent is None:
        check_name(name)
    else:
        check_depth(parent[2])
    check_timeout(timeout)
    policy = converge_policy_of(bundle, converge_policy)
    stack_size.check_bundle(bundle, params)
    project_id = project_id or engine_project()
    stack_id = stack_id or api.new_id()
    defn = validate(bundle, params, stack_name=name, stack_id=stack_id,
                    project_id=project_id,
                    depth=parent[2] if parent else 0,
                    cloud=None if parent else engine.clients.for_stack(
                        cloud, project_id).cloud)
    if parent is None:   # a child's are checked as its parent's were
        check_external(engine, defn, bundle, stack_id, project_id, cloud)
    try:
        with engine.db.write() as s:
            if api.stack_name_taken(s, project_id, name):
                raise exception.Conflict('Stack %s already exists' % name)
            if parent is None:
                check_stack_count(s, project_id)
            else:
                above = api.stack_record(s, parent[0])
                cloud = getattr(above, 'cloud', None)
            s.add(models.Stack(id=stack_id, name=name, action='CREATE',
                               status='IN_PROGRESS', status_reason='',
                               disable_rollback=disable_rollback,
                               timeout_mins=timeout, tags=tags or [],
                               project_id=project_id, cloud=cloud,
                               **_lineage(parent)))
            s.flush()
            template_id = api.template_create(s, stack_id, bundle.to_dict(),
                                              params)
            stack = s.get(models.Stack, stack_id)
            if policy is not None:
                policies.set_policy(s, stack_id, *policy)
            engine.remember(template_id, stack, defn)
            trav = traversal.start(engine, s, stack, template_id,
                                   'CREATE', defn,
                                   rollback=not disable_rollback)
    except sa.exc.IntegrityError:
        # two creates of one name raced past the check: the unique
        # constraint (project, name, live) let one of them in
        raise exception.Conflict('Stack %s already exists' % name)
    traversal.kick(engine, trav)
    return stack_id, trav.id


def update(engine, ident, bundle=None, params=None, existing=False,
           rollback=None, clear_parameters=(), timeout=None, tags=None,
           project_id=None, only=None, converge=False,
           converge_policy=None, shown_action=None):
    """Update the stack to a new template, parameters or both. With
    `converge` (Heat's --converge), against reality: nested stacks are
    walked too, and every resource observed. `shown_action`: the
    stack's action, when not UPDATE (a snapshot's RESTORE)."""
    check_timeout(timeout)
    with memory.gc_paused():
        return _update(engine, ident, bundle, params, existing, rollback,
                       clear_parameters, timeout, tags, project_id, only,
                       converge, converge_policy, shown_action)


def _update(engine, ident, bundle, params, existing, rollback,
            clear_parameters, timeout, tags, project_id, only, converge,
            converge_policy, shown_action=None):
    old_env = {}
    stack, bundle, params, defn = planned(
        engine, ident, bundle, params, existing, clear_parameters,
        project_id, old_env=old_env)
    policy = converge_policy_of(bundle, converge_policy)
    stack_size.check_bundle(bundle, params or {})
    if policy is None and old_env.get('converge'):
        # the environment that set the policy is gone: so is it
        policy = ('off', None)
    if rollback is None:
        rollback = not stack.disable_rollback
    with engine.db.write() as s:
        stack = api.stack_get(s, stack.id, project_id=project_id)
        template_id = api.template_create(s, stack.id, bundle.to_dict(),
                                          params or {})
        stack.disable_rollback = not rollback
        if timeout is not None:
            stack.timeout_mins = timeout
        if tags is not None:
            stack.tags = list(tags)
        if policy is not None:
            policies.set_policy(s, stack.id, *policy)
        engine.remember(template_id, stack, defn)
        trav = traversal.start(engine, s, stack, template_id, 'UPDATE',
                               defn, rollback=rollback,
                               prev_template_id=stack.template_id,
                               only=only, converge=converge,
                               shown_action=shown_action)
    traversal.kick(engine, trav)
    return stack.id, trav.id


def converge_policy_of(bundle, text=None):
    """The stack's continuous convergence policy, (mode, interval or
    None): `text` (--converge-policy MODE[:SECONDS]) over the
    environment's ``converge`` section ({policy: MODE, interval:
    SECONDS}); None when neither says."""
    if text is not None:
        try:
            return policies.parse(text)
        except ValueError as e:
            raise exception.InvalidInput(str(e)) from None
    section = (bundle.environment.get('converge') or {}) if bundle else {}
    if not section:
        return None
    unknown = sorted(set(section) - {'policy', 'interval'})
    if unknown:
        raise exception.InvalidTemplate(
            'environment section "converge" has unknown key %s (known: '
            'policy, interval)' % ', '.join(unknown), path=['converge'])
    interval = section.get('interval')
    text = str(section.get('policy', 'observe'))
    if interval is not None:
        text += ':%s' % interval
    try:
        return policies.parse(text)
    except ValueError as e:
        raise exception.InvalidTemplate(
            'environment section "converge": %s' % e,
            path=['converge']) from None


def planned(engine, ident, bundle=None, params=None, existing=False,
            clear_parameters=(), project_id=None, old_env=None):
    """What an update would use: (the stack, its new bundle, parameters
    and definition, validated). --existing keeps the old template (when
    none is given), environment and parameters under the new ones.
    `old_env`, a dict, gets the old environment."""
    with engine.db.read() as s:
        stack = api.stack_get(s, ident, project_id=project_id)
        old = api.template_get(s, stack.template_id)
        old_bundle, old_params = old.bundle, dict(old.parameters)
    if old_env is not None:
        old_env.update(old_bundle.get('environment') or {})
    if existing:
        merged = dict(old_params)
        for key in clear_parameters:
            merged.pop(key, None)
        merged.update(params or {})
        params = merged
        if bundle is None:
            bundle = template.Bundle.from_dict(old_bundle)
        else:
            # --existing keeps the old environment under the new one
            bundle = bundle.merged_over(template.Bundle.from_dict(old_bundle))
        params = _declared_only(bundle, params)
    elif bundle is None:
        raise exception.InvalidInput('Need a template to update with '
                                     '(-t), or --existing')
    defn = validate(bundle, params or {}, stack_name=stack.name,
                    stack_id=stack.id, project_id=stack.project_id,
                    cloud=None if stack.parent_id else
                    engine.clients.for_stack(stack.cloud,
                                             stack.project_id).cloud)
    if not stack.parent_id:
        check_external(engine, defn, bundle, stack.id, stack.project_id,
                       stack.cloud)
    check_immutable(engine, stack, defn)
    return stack, bundle, params, defn


def _declared_only(bundle, params):
    """Heat's PATCH: the parameters kept from before (and those sent)
    that the template no longer declares are dropped, from the request's
    and from the environment's, not refused."""
    declared = formats.section(bundle.template, 'parameters')
    declared = declared if isinstance(declared, dict) else {}
    env = bundle.environment
    if isinstance(env.get('parameters'), dict):
        env['parameters'] = {k: v for k, v in env['parameters'].items()
                             if k in declared}
    return {k: v for k, v in (params or {}).items() if k in declared}


def check_immutable(engine, stack, defn):
    """Refuse an update that changes the value of a parameter the new
    template marks `immutable` (one the stack had before: a new one may
    take any value), as Heat does."""
    fixed = [n for n, p in defn.schemas.items() if p.immutable]
    if not fixed or stack.template_id is None:
        return   # the old template is parsed only when it matters
    old = engine.definition(stack.template_id, stack).parameters
    changed = sorted(n for n in fixed
                     if n in old and old[n] != defn.parameters.get(n))
    if changed:
        raise exception.ImmutableParameterModified(changed)


def delete(engine, ident, project_id=None):
    with engine.db.write() as s:
        stack = api.stack_get(s, ident, project_id=project_id)
        trav = traversal.start(engine, s, stack, stack.template_id,
                               'DELETE', None)
    traversal.kick(engine, trav)
    return stack.id, trav.id


def forget_trusts(engine, limit=50):
    """Delete the Keystone trusts of stacks deleted since the last call
    (drivers/trusts.py; the workers' sweeper calls this). The trust goes
    after the stack's delete committed, so no unit of the delete is left
    without it; a trust Keystone refuses to delete now is tried again
    next time. Returns the trusts deleted."""
    from converge.drivers import trusts
    if not conf.CONF.cloud.use_trusts:
        return []
    st = models.Stack.__table__
    with engine.db.read() as s:
        rows = s.execute(sa.select(st.c.id, st.c.cloud).where(
            st.c.deleted_at.is_not(None),
            st.c.cloud.like(trusts.PREFIX + '%')).limit(limit)).all()
    done = []
    for row in rows:
        trust_id = trusts.trust_of(row.cloud)
        try:
            trusts.forget(trust_id)
        except Exception as e:   # keystone away: next sweep
            LOG.warning('Trust %s of deleted stack %s not deleted: %s',
                        trust_id, row.id, e)
            continue
        with engine.db.write() as s:
            s.execute(st.update().where(st.c.id == row.id).values(
                cloud='trust-deleted:' + trust_id))
        done.append(trust_id)
    return done


def check(engine, ident, project_id=None, only=None):
    """Check every resource (only those named in `only`, if given)."""
    return _again(engine, ident, 'CHECK', project_id, only=only)


def suspend(engine, ident, project_id=None):
    """Suspend every resource, dependents first (Heat's order)."""
    return _again(engine, ident, 'SUSPEND', project_id)


def resume(engine, ident, project_id=None):
    return _again(engine, ident, 'RESUME', project_id)


def converge(engine, ident, project_id=None):
    """Walk the graph again against reality, resuming an unfinished action."""
    with engine.db.read() as s:
        stack = api.stack_get(s, ident, project_id=project_id)
    action = stack.action
    if action == 'SNAPSHOT' and stack.status == 'IN_PROGRESS':
        # its snapshot goes on where it was (a new traversal would end
        # it FAILED): what nobody is doing is sent again
        traversal.resend(engine, [stack.id])
        return stack.id, stack.current_traversal
    if stack.status == 'COMPLETE' or action in ('CHECK', 'INIT',
                                                'SNAPSHOT', 'RESTORE'):
        # a restore's resources were updated: so are they again
        action = 'UPDATE'
    if action == 'DELETE':
        return delete(engine, stack.id, project_id)
    return _again(engine, stack.id, action, project_id, converge=True)


def _again(engine, ident, action, project_id=None, converge=False,
           only=None):
    with engine.db.write() as s:
        stack = api.stack_get(s, ident, project_id=project_id)
        defn = engine.definition(stack.template_id, stack)
        trav = traversal.start(engine, s, stack, stack.template_id, action,
                               defn, rollback=False, converge=converge,
                               only=only)
    traversal.kick(engine, trav)
    return stack.id, trav.id


def cancel(engine, ident, rollback=True, project_id=None):
    """Stop a running create/update.

    With rollback: walk back to the previous template. Without: stop
    propagation, let running actions finish, end <ACTION>_FAILED.
    """
    with engine.db.write() as s:
        stack = api.stack_get(s, ident, project_id=project_id)
        if stack.status != 'IN_PROGRESS' or stack.action not in (
                'CREATE', 'UPDATE'):
            raise exception.Conflict(
                'Stack %s is %s_%s: only a stack being created or updated '
                'can be cancelled' % (stack.name, stack.action, stack.status))
        old = api.traversal_get(s, stack.current_traversal)
        if not rollback:
            # its nested stacks' running traversals stop with it (with
            # rollback, the walk back updates them anyway)
            for child_id in api.stack_tree(s, stack.id)[1:]:
                child = s.get(models.Stack, child_id)
                if child.status == 'IN_PROGRESS' and child.action in (
                        'CREATE', 'UPDATE'):
                    traversal.cancel(s, child)
            return stack.id, traversal.cancel(s, stack)
    return traversal.rollback_to_previous(engine, stack.id, old)


def engine_project():
    from converge import conf
    return conf.CONF.project_id

"""Stack operations. Each one that changes desired state starts a traversal
(converge/engine/traversal.py: one transaction, then the leaves are sent).
"""

import sqlalchemy as sa
from oslo_log import log as logging

from converge import exception
from converge import template
from converge.db import api
from converge.db import models
from converge.engine import definitions
from converge.engine import traversal
from converge.graph import dependencies

LOG = logging.getLogger(__name__)


def validate(bundle, params, stack_name='stack', stack_id='',
             validate_values=True):
    defn = template.StackDefinition(bundle, params, stack_name=stack_name,
                                    stack_id=stack_id,
                                    project_id=engine_project(),
                                    validate_values=validate_values,
                                    limits=definitions.limits())
    try:
        dependencies.build(defn.dependencies())
    except exception.InvalidTemplate as exc:
        raise exc.locate(bundle.template_path, bundle.line_of(exc.path))
    return defn


def create(engine, name, bundle, params, disable_rollback=True,
           timeout=None, tags=None):
    stack_id = api.new_id()
    defn = validate(bundle, params, stack_name=name, stack_id=stack_id)
    with engine.db.write() as s:
        if s.scalar(sa.select(models.Stack.id).where(
                models.Stack.name == name,
                models.Stack.deleted_at.is_(None))):
            raise exception.Conflict('Stack %s already exists' % name)
        s.add(models.Stack(id=stack_id, name=name, action='CREATE',
                           status='IN_PROGRESS', status_reason='',
                           disable_rollback=disable_rollback,
                           timeout_mins=timeout, tags=tags or [],
                           project_id=engine_project()))
        s.flush()
        template_id = api.template_create(s, stack_id, bundle.to_dict(),
                                          params)
        stack = s.get(models.Stack, stack_id)
        engine.remember(template_id, stack, defn)
        trav = traversal.start(engine, s, stack, template_id, 'CREATE',
                               defn, rollback=not disable_rollback)
    traversal.kick(engine, trav)
    return stack_id, trav.id


def update(engine, ident, bundle=None, params=None, existing=False,
           rollback=None, clear_parameters=()):
    with engine.db.read() as s:
        stack = api.stack_get(s, ident)
        old = api.template_get(s, stack.template_id)
        old_bundle, old_params = old.bundle, dict(old.parameters)
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
    elif bundle is None:
        raise exception.ConvergeError('Need a template to update with '
                                      '(-t), or --existing')
    defn = validate(bundle, params or {}, stack_name=stack.name,
                    stack_id=stack.id)
    if rollback is None:
        rollback = not stack.disable_rollback
    with engine.db.write() as s:
        stack = api.stack_get(s, ident)
        template_id = api.template_create(s, stack.id, bundle.to_dict(),
                                          params or {})
        stack.disable_rollback = not rollback
        engine.remember(template_id, stack, defn)
        trav = traversal.start(engine, s, stack, template_id, 'UPDATE',
                               defn, rollback=rollback,
                               prev_template_id=stack.template_id)
    traversal.kick(engine, trav)
    return stack.id, trav.id


def delete(engine, ident):
    with engine.db.write() as s:
        stack = api.stack_get(s, ident)
        trav = traversal.start(engine, s, stack, stack.template_id,
                               'DELETE', None)
    traversal.kick(engine, trav)
    return stack.id, trav.id


def check(engine, ident):
    return _again(engine, ident, 'CHECK')


def converge(engine, ident):
    """Walk the graph again against reality, resuming an unfinished action."""
    with engine.db.read() as s:
        stack = api.stack_get(s, ident)
    action = stack.action
    if stack.status == 'COMPLETE' or action in ('CHECK', 'INIT'):
        action = 'UPDATE'
    if action == 'DELETE':
        return delete(engine, ident)
    return _again(engine, ident, action)


def _again(engine, ident, action):
    with engine.db.write() as s:
        stack = api.stack_get(s, ident)
        defn = engine.definition(stack.template_id, stack)
        trav = traversal.start(engine, s, stack, stack.template_id, action,
                               defn, rollback=False)
    traversal.kick(engine, trav)
    return stack.id, trav.id


def cancel(engine, ident, rollback=True):
    """Stop a running create/update.

    With rollback: walk back to the previous template. Without: stop
    propagation, let running actions finish, end <ACTION>_FAILED.
    """
    with engine.db.write() as s:
        stack = api.stack_get(s, ident)
        if stack.status != 'IN_PROGRESS' or stack.action not in (
                'CREATE', 'UPDATE'):
            raise exception.Conflict(
                'Stack %s is %s_%s: only a stack being created or updated '
                'can be cancelled' % (stack.name, stack.action, stack.status))
        old = api.traversal_get(s, stack.current_traversal)
        if not rollback:
            return stack.id, traversal.cancel(s, stack)
    return traversal.rollback_to_previous(engine, stack.id, old)


def engine_project():
    from converge import conf
    return conf.CONF.project_id

"""converge's routes beyond Heat's: what the `converge` CLI does that
Heat's API has no route for, so that the CLI in remote mode (--os-url)
does everything it does embedded.

- the actions route's own verbs: `{"converge": null}` (walk the graph
  again against reality) and `{"resume_rollout": null}` (`stack update
  --resume`: move a rollout waiting for the operator on);
- a stack's dependency graph (DOT) and its drift;
- following a traversal: where it stands, its progress counts, its
  events by id;
- what the engine is doing now (`converge top`): one snapshot of the
  project's running traversals (every project's for an admin who asks);
- deployments' day-2 actions: run, list, show;
- a signal answered with what became of it (Heat's route answers 204).

Every route calls the service layer with the request context, under the
`@action(rule)` decorator and a `converge:*` rule of converge/api/policy.py.
A route that starts a traversal names it in common.TRAVERSAL_HEADER and
in its body, as the Heat routes do in the header.
"""

from converge import exception
from converge.api import policy
from converge.api.v1 import common
from converge.api.v1.common import action
from converge.engine import views

#: the actions route's verbs converge adds -> (policy rule, service method)
ACTIONS = {'converge': ('converge:stack_converge', 'stack_converge'),
           'resume_rollout': ('converge:stack_resume_rollout',
                              'stack_resume_rollout')}

#: a stack record's fields a follower reads (the CLI reads them as
#: attributes: stack.name, stack.action, stack.status ...)
STACK_FIELDS = ('id', 'name', 'project_id', 'action', 'status',
                'status_reason', 'current_traversal', 'disable_rollback',
                'timeout_mins', 'tags', 'parent_id', 'parent_resource')
STACK_TIMES = ('created_at', 'updated_at', 'deleted_at')


def stack_record(st):
    """A stack record (the service's stack_status) as JSON."""
    data = {k: getattr(st, k, None) for k in STACK_FIELDS}
    data.update({k: views.iso(getattr(st, k, None)) for k in STACK_TIMES})
    return data


def _ids(req, name):
    values = []
    for v in req.GET.getall(name):
        try:
            values.append(int(v))
        except ValueError:
            raise exception.InvalidInput('%s must be whole numbers, not %r'
                                         % (name, v))
    return values


class Controller(common.Controller):
    def __init__(self, engine, stacks):
        super().__init__(engine)
        #: Heat's stacks controller: its actions and its stack lookup
        self.stacks = stacks

    def _identify(self, ctx, stack_name, stack_id):
        return self.stacks._identify(ctx, stack_name, stack_id)

    # -- the actions route, with converge's verbs ----------------------------
    def actions(self, req, project_id, stack_name, stack_id):
        """converge's verbs here; Heat's (and any error) as Heat's route
        answers them."""
        data = common.body(req)
        verb = next(iter(data)) if len(data) == 1 else None
        if verb not in ACTIONS:
            return self.stacks.actions(req, project_id, stack_name, stack_id)
        rule, method = ACTIONS[verb]

        @action(rule)
        def run(self, req, ctx):
            begun = getattr(self.service, method)(
                ctx, self._identify(ctx, stack_name, stack_id))
            return common.started(common.accepted({'stack': begun}), begun)
        return run(self, req, project_id)

    # -- views of a stack ----------------------------------------------------
    @action('converge:stack_graph')
    def graph(self, req, ctx, stack_name, stack_id):
        return common.reply({'graph': self.service.stack_graph(
            ctx, self._identify(ctx, stack_name, stack_id))})

    @action('converge:stack_drift')
    def drift(self, req, ctx, stack_name, stack_id):
        return common.reply({'drift': self.service.stack_drift(
            ctx, self._identify(ctx, stack_name, stack_id))})

    @action('converge:stack_drift')
    def converge_preview(self, req, ctx, stack_name, stack_id):
        return common.reply({'repairs': self.service.stack_preview_converge(
            ctx, self._identify(ctx, stack_name, stack_id))})

    # -- following a traversal -------------------------------------------
    @action('converge:traversal_show')
    def traversal(self, req, ctx, stack_name, stack_id, traversal_id):
        ident = self._identify(ctx, stack_name, stack_id)
        found = self.service.traversal_status(ctx, ident, traversal_id)
        return common.reply({'traversal': {
            'id': traversal_id, 'stack': stack_record(found['stack']),
            'superseded_by': found['superseded_by']}})

    @action('converge:traversal_show')
    def progress(self, req, ctx, stack_name, stack_id, traversal_id):
        ident = self._identify(ctx, stack_name, stack_id)
        return common.reply({'progress': self.service.traversal_progress(
            ctx, ident, traversal_id)})

    @action('converge:traversal_show')
    def traversal_events(self, req, ctx, stack_name, stack_id):
        """Events of the traversals named by `traversal_id` (repeated)
        above `after_id`, among `id` (repeated) if given; only their ids
        with `ids_only=true`. What a follower reads, as the CLI embedded
        reads it (converge/cmd/progress.py)."""
        ident = self._identify(ctx, stack_name, stack_id)
        traversals = req.GET.getall('traversal_id')
        if not traversals:
            raise exception.InvalidInput('Name the traversals: '
                                         'traversal_id=...')
        after = common.integer(req.GET.get('after_id'), 'after_id') or 0
        if common.flag(req.GET.get('ids_only'), 'ids_only'):
            return common.reply({'event_ids': self.service.event_ids_since(
                ctx, ident, traversals, after)})
        return common.reply({'events': self.service.events_since(
            ctx, ident, traversals, after_id=after,
            ids=_ids(req, 'id') or None)})

    # -- what the engine is doing now -----------------------------------------
    @action('converge:activity')
    def activity(self, req, ctx):
        """One snapshot for `converge top`: the project's running
        traversals, waits, engines and slowest units; with
        `all_projects=true` (converge:activity_all_projects, an admin's)
        every project's, and every live engine."""
        q = req.GET
        everyone = common.flag(q.get('all_projects'), 'all_projects')
        if everyone:
            policy.check(ctx, 'converge:activity_all_projects')
        kwargs = {k: q[k] for k in ('window', 'due_within') if k in q}
        return common.reply({'activity': self.service.engine_activity(
            ctx, all_projects=everyone, **kwargs)})

    # -- deployments' day-2 actions ------------------------------------------
    @action('converge:deployment_action_run')
    def action_run(self, req, ctx, stack_name, stack_id, resource_name):
        ident = self._identify(ctx, stack_name, stack_id)
        data = common.body(req)
        members = data.get('members')
        if members is not None and not (isinstance(members, list) and all(
                isinstance(m, str) for m in members)):
            raise exception.InvalidInput('members must be a list of '
                                         'member names')
        return common.reply({'deployment_actions':
                             self.service.deployment_action_run(
                                 ctx, ident, resource_name,
                                 common.string(data, 'action',
                                               required=True),
                                 common.mapping(data, 'inputs'),
                                 members=members)}, 201)

    @action('converge:deployment_action_list')
    def action_list(self, req, ctx, stack_name, stack_id,
                    resource_name=None):
        ident = self._identify(ctx, stack_name, stack_id)
        return common.reply({'deployment_actions':
                             self.service.deployment_action_list(
                                 ctx, ident, resource_name)})

    @action('converge:deployment_action_list')
    def action_members(self, req, ctx, stack_name, stack_id, resource_name):
        ident = self._identify(ctx, stack_name, stack_id)
        return common.reply({'members':
                             self.service.deployment_action_members(
                                 ctx, ident, resource_name)})

    @action('converge:deployment_action_show')
    def action_show(self, req, ctx, action_id):
        return common.reply({'deployment_action':
                             self.service.deployment_action_show(
                                 ctx, action_id)})

    # -- a signal, with what became of it ------------------------------------
    @action('converge:resource_signal_result')
    def signal(self, req, ctx, stack_name, stack_id, resource_name):
        ident = self._identify(ctx, stack_name, stack_id)
        # the body is the signal's details, as on Heat's route
        details = common.body(req) if req.body else None
        result = self.service.resource_signal(
            ctx, ident, resource_name, details,
            signal_id=req.headers.get('Idempotency-Key') or None)
        resp = common.reply({'signal': result})
        if result.get('traversal_id'):
            common.started(resp, {'traversal_id': result['traversal_id']})
        return resp


def add_routes(route, engine, stacks):
    """Connect converge's routes with `route(url, handler, *methods)`.
    Called before Heat's: the actions route here takes converge's verbs
    and hands Heat's to `stacks` (Heat's stacks controller)."""
    ext = Controller(engine, stacks)
    p = '/v1/{project_id}'
    stack = p + '/stacks/{stack_name}/{stack_id}'
    res = stack + '/resources/{resource_name}'
    route(stack + '/actions', ext.actions, 'POST')
    route(stack + '/graph', ext.graph, 'GET')
    route(stack + '/drift', ext.drift, 'GET')
    route(stack + '/converge/preview', ext.converge_preview, 'GET')
    route(stack + '/traversal_events', ext.traversal_events, 'GET')
    route(stack + '/traversals/{traversal_id}', ext.traversal, 'GET')
    route(stack + '/traversals/{traversal_id}/progress', ext.progress,
          'GET')
    route(stack + '/deployment_actions', ext.action_list, 'GET')
    route(res + '/deployment_actions', ext.action_list, 'GET')
    route(res + '/deployment_actions', ext.action_run, 'POST')
    route(res + '/deployment_members', ext.action_members, 'GET')
    route(res + '/signal_result', ext.signal, 'POST')
    route(p + '/deployment_actions/{action_id}', ext.action_show, 'GET')
    route(p + '/activity', ext.activity, 'GET')

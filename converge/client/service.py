"""The service interface (converge/engine/service.py) over converge-api.

Each method takes the request context first, as the local service's do,
and answers with the same shapes: plain dicts with the same keys, and
records with attributes where a caller reads attributes (the stack
record of stack_status and traversal_status). The project is the
client's (its URL's); the context is taken for the interface's sake.

Heat's routes serve most methods; what Heat has no route for goes to
converge's own (converge/api/v1/extensions.py). Heat's answers carry
more than the service's (links, Heat's extra keys): those are taken off,
so a command prints the same columns in both modes.
"""

import types
import urllib.parse

from converge import breakpoints as hooks
from converge import exception
from converge.client import bundles

#: the header an answer names the traversal it started in
#: (converge/api/v1/common.py)
TRAVERSAL_HEADER = 'X-Converge-Traversal-Id'

#: what Heat's stack show adds to the service's stack_show
_HEAT_STACK_KEYS = ('template_description', 'capabilities',
                    'notification_topics', 'stack_owner',
                    'stack_user_project_id', 'links')
#: the pseudo parameters Heat's stack show adds to the parameters
_PSEUDO = ('OS::stack_id', 'OS::stack_name', 'OS::project_id')


class Record(types.SimpleNamespace):
    """A row as attributes, as the local service's records."""


def _q(text):
    return urllib.parse.quote(str(text), safe='')


def _stack_of(links):
    """(name, id) of the stack a Heat answer's `stack` link names."""
    for link in links or ():
        if link.get('rel') == 'stack':
            parts = urllib.parse.urlsplit(link['href']).path.split('/')
            return (urllib.parse.unquote(parts[-2]),
                    urllib.parse.unquote(parts[-1]))
    return None, None


def _event(e):
    """A Heat event as the service's event dict."""
    name, stack_id = _stack_of(e.get('links'))
    out = {'uuid': e['id'], 'resource_name': e['resource_name'],
           'physical_resource_id': e.get('physical_resource_id') or '',
           'resource_status': e['resource_status'],
           'resource_status_reason': e.get('resource_status_reason'),
           'event_time': e.get('event_time'),
           'stack_name': name, 'stack_id': stack_id}
    action, _, status = e['resource_status'].partition('_')
    out.update(action=action, status=status)
    if 'resource_type' in e:
        out['resource_type'] = e['resource_type']
    return out


def _sending(bundle, call):
    """`call()`, which sends `bundle`: the server names the template it
    was sent "template" in its errors; the user knows it by its path."""
    try:
        return call()
    except exception.InvalidTemplate as e:
        if bundle is not None and e.message.startswith('template:'):
            e.message = bundle.template_path + e.message[len('template'):]
            e.args = (e.message,)
        raise


class RemoteService:
    """The operations of a converge-api, on behalf of its client's
    project."""

    def __init__(self, client):
        self.http = client
        #: stack id -> its URL path (ids never change hands)
        self._paths = {}

    # -- helpers ------------------------------------------------------------
    def _path(self, ident):
        """/stacks/{name}/{id} of a stack named by name or id, from Heat's
        lookup (its 302 names both)."""
        if ident in self._paths:
            return self._paths[ident]
        found = self.http.request('GET', '/stacks/%s' % _q(ident)).body
        stack = found.get('stack') or {}
        path = '/stacks/%s/%s' % (_q(stack['stack_name']), _q(stack['id']))
        self._paths[stack['id']] = path
        return path

    def _started(self, answer, stack_id=None):
        stack = answer.body.get('stack') if isinstance(answer.body,
                                                       dict) else None
        traversal = answer.headers.get(TRAVERSAL_HEADER)
        if not traversal:
            # following whichever traversal owns the stack later could
            # follow another operation's and report its outcome as ours
            raise exception.ConvergeError(
                'converge-api at %s accepted the operation but did not '
                'name the traversal it started (%s): it is not a '
                'converge-api this command can follow'
                % (self.http.root, TRAVERSAL_HEADER))
        return {'id': stack_id or (stack or {}).get('id'),
                'traversal_id': traversal}

    def _act(self, ident, verb):
        path = self._path(ident)
        answer = self.http.request('POST', path + '/actions', {verb: None})
        return self._started(answer, path.rsplit('/', 1)[1])

    # -- templates ----------------------------------------------------------
    def template_validate(self, ctx, bundle, params, show_nested=False):
        return _sending(bundle, lambda: self.http.request(
            'POST', '/validate', dict(bundles.fields(bundle),
                                      parameters=params),
            query={'show_nested': 'True'} if show_nested else None)).body

    def resource_types(self, ctx, name=None, with_description=False):
        return self.http.get('/resource_types', name=name,
                             with_description=with_description or None
                             )['resource_types']

    def resource_type_show(self, ctx, type_name):
        return self.http.get('/resource_types/%s' % _q(type_name))

    def resource_type_template(self, ctx, type_name):
        return self.http.get('/resource_types/%s/template' % _q(type_name))

    def template_versions(self, ctx):
        return self.http.get('/template_versions')['template_versions']

    def template_functions(self, ctx, version, with_condition_func=False):
        return self.http.get(
            '/template_versions/%s/functions' % _q(version),
            with_condition_func=with_condition_func or None
        )['template_functions']

    def stack_preview(self, ctx, name, bundle, params):
        plan = _sending(bundle, lambda: self.http.request(
            'POST', '/stacks/preview', dict(
                bundles.fields(bundle), stack_name=name,
                parameters=params))).body['stack']
        return {'stack_name': plan['stack_name'],
                'resources': len(plan['resources']),
                'description': plan['description'],
                'parameters': {k: v for k, v in plan['parameters'].items()
                               if not k.startswith('OS::')},
                'preview': plan['resources'],
                'resource_list': plan['resource_list']}

    # -- starting traversals ------------------------------------------------
    def stack_create(self, ctx, name, bundle, params, disable_rollback=True,
                     timeout=None, tags=None, converge_policy=None):
        body = dict(bundles.fields(bundle), stack_name=name,
                    parameters=params, disable_rollback=disable_rollback)
        if converge_policy is not None:
            body['converge_policy'] = converge_policy
        if timeout is not None:
            body['timeout_mins'] = timeout
        if tags:
            body['tags'] = tags
        return self._started(_sending(bundle, lambda: self.http.request(
            'POST', '/stacks', body)))

    def stack_update(self, ctx, ident, bundle=None, params=None,
                     existing=False, rollback=None, clear_parameters=(),
                     timeout=None, tags=None, converge=False,
                     converge_policy=None):
        path = self._path(ident)
        body = dict(bundles.fields(bundle)) if bundle is not None else {}
        body['parameters'] = params or {}
        if clear_parameters:
            body['clear_parameters'] = list(clear_parameters)
        if rollback is not None:
            body['disable_rollback'] = not rollback
        if timeout is not None:
            body['timeout_mins'] = timeout
        if tags is not None:
            body['tags'] = list(tags)
        if converge:
            body['converge'] = True
        if converge_policy is not None:
            body['converge_policy'] = converge_policy
        answer = _sending(bundle, lambda: self.http.request(
            'PATCH' if existing else 'PUT', path, body))
        return self._started(answer, path.rsplit('/', 1)[1])

    def stack_resume_rollout(self, ctx, ident):
        return self._act(ident, 'resume_rollout')

    def stack_delete(self, ctx, ident):
        path = self._path(ident)
        return self._started(self.http.request('DELETE', path),
                             path.rsplit('/', 1)[1])

    def stack_check(self, ctx, ident):
        return self._act(ident, 'check')

    def stack_suspend(self, ctx, ident):
        return self._act(ident, 'suspend')

    def stack_resume(self, ctx, ident):
        return self._act(ident, 'resume')

    def stack_converge(self, ctx, ident):
        return self._act(ident, 'converge')

    def stack_cancel(self, ctx, ident, rollback=True):
        return self._act(ident, 'cancel_update' if rollback
                         else 'cancel_without_rollback')

    def stack_adopt(self, ctx, name, data, params=None, timeout=None,
                    source='<adopt data>'):
        body = {'stack_name': name, 'adopt_stack_data': data,
                'parameters': params or {}}
        if timeout is not None:
            body['timeout_mins'] = timeout
        return self._started(self.http.request('POST', '/stacks', body))

    def stack_abandon(self, ctx, ident, save=None):
        """As the local one: `save(document)` runs before the stack is
        forgotten, so a failed write leaves it. The server abandons in
        one request, so the document is exported and saved first, and
        saved again should the abandon's differ (a change in between)."""
        path = self._path(ident)
        if save is not None:
            saved = self.http.get(path + '/export')
            save(saved)
        doc = self.http.request('DELETE', path + '/abandon').body
        if save is not None and doc != saved:
            save(doc)
        return doc

    def stack_export(self, ctx, ident):
        return self.http.get(self._path(ident) + '/export')

    def stack_preview_update(self, ctx, ident, bundle=None, params=None,
                             existing=False, clear_parameters=(),
                             show_nested=False):
        path = self._path(ident)
        body = dict(bundles.fields(bundle)) if bundle is not None else {}
        body['parameters'] = params or {}
        if clear_parameters:
            body['clear_parameters'] = list(clear_parameters)
        # as Heat's update: PATCH keeps what the stack has (--existing)
        return _sending(bundle, lambda: self.http.request(
            'PATCH' if existing else 'PUT', path + '/preview' + (
                '?show_nested=True' if show_nested else ''), body)
        ).body['resource_changes']

    # -- snapshots ------------------------------------------------------------
    def stack_snapshot(self, ctx, ident, name=None):
        return self.http.request('POST', self._path(ident) + '/snapshots',
                                 {'name': name}).body

    def stack_snapshot_list(self, ctx, ident):
        return self.http.get(self._path(ident) + '/snapshots')['snapshots']

    def stack_snapshot_show(self, ctx, ident, snapshot_id):
        return self.http.get('%s/snapshots/%s' % (
            self._path(ident), _q(snapshot_id)))['snapshot']

    def stack_snapshot_delete(self, ctx, ident, snapshot_id):
        self.http.request('DELETE', '%s/snapshots/%s' % (
            self._path(ident), _q(snapshot_id)))

    def stack_snapshot_restore(self, ctx, ident, snapshot_id):
        path = self._path(ident)
        return self._started(self.http.request(
            'POST', '%s/snapshots/%s/restore' % (path, _q(snapshot_id))),
            path.rsplit('/', 1)[1])

    # -- stacks -------------------------------------------------------------
    def stack_list(self, ctx, show_nested=False, all_projects=False,
                   show_deleted=False, show_hidden=False, **query):
        q = {'show_nested': show_nested or None,
             'show_deleted': show_deleted or None,
             'show_hidden': show_hidden or None,
             'global_tenant': all_projects or None}
        for key, value in (query.pop('filters', None) or {}).items():
            q[key] = value
        q.update(query)
        rows = self.http.get('/stacks', **q)['stacks']
        keys = ('id', 'stack_name', 'stack_status', 'stack_status_reason',
                'creation_time', 'updated_time', 'deletion_time', 'tags',
                'project', 'parent')
        return [{k: r.get(k) for k in keys} for r in rows]

    def stack_identify(self, ctx, ident):
        path = self._path(ident)
        name, stack_id = path.split('/')[2:]
        return {'stack_name': urllib.parse.unquote(name),
                'id': urllib.parse.unquote(stack_id)}

    def stack_template(self, ctx, ident):
        path = self._path(ident)
        return {k: self.http.get('%s/%s' % (path, k))
                for k in ('template', 'environment', 'files')}

    def stack_show(self, ctx, ident, with_outputs=True):
        data = self.http.get(self._path(ident),
                             resolve_outputs=with_outputs)['stack']
        for key in _HEAT_STACK_KEYS:
            data.pop(key, None)
        params = data.get('parameters')
        if isinstance(params, dict):
            for key in _PSEUDO:
                params.pop(key, None)
        if not with_outputs:
            data.pop('outputs', None)
        return data

    def stack_status(self, ctx, stack_id):
        data = self.stack_show(ctx, stack_id, with_outputs=False)
        action, _, status = data['stack_status'].partition('_')
        return Record(id=data['id'], name=data['stack_name'],
                      action=action, status=status,
                      status_reason=data.get('stack_status_reason'),
                      project_id=data.get('project'),
                      parent_id=data.get('parent'), tags=data.get('tags'),
                      timeout_mins=data.get('timeout_mins'),
                      disable_rollback=data.get('disable_rollback'))

    def stack_graph(self, ctx, ident):
        return self.http.get(self._path(ident) + '/graph')['graph']

    def stack_drift(self, ctx, ident):
        return self.http.get(self._path(ident) + '/drift')['drift']

    def stack_preview_converge(self, ctx, ident):
        return self.http.get(self._path(ident) +
                             '/converge/preview')['repairs']

    # -- resources ----------------------------------------------------------
    def resource_list(self, ctx, ident, filters=None, nested_depth=0):
        rows = self.http.get(self._path(ident) + '/resources',
                             nested_depth=nested_depth or None,
                             **(filters or {}))['resources']
        out = []
        for r in rows:
            name, stack_id = _stack_of(r.get('links'))
            row = {k: v for k, v in r.items()
                   if k not in ('links', 'logical_resource_id')}
            row.setdefault('parent_resource', None)
            row.update(stack_name=name, stack_id=stack_id,
                       resource_action=r['resource_status'].partition(
                           '_')[0])
            out.append(row)
        return out

    def resource_show(self, ctx, ident, name):
        data = self.http.get('%s/resources/%s' % (self._path(ident),
                                                  _q(name)))['resource']
        data.pop('links', None)
        return data

    def resource_metadata(self, ctx, ident, name):
        return self.http.get('%s/resources/%s/metadata' % (
            self._path(ident), _q(name)))['metadata']

    def resource_mark_unhealthy(self, ctx, ident, name, unhealthy=True,
                                reason=''):
        self.http.request('PATCH', '%s/resources/%s' % (
            self._path(ident), _q(name)), {
                'mark_unhealthy': unhealthy,
                'resource_status_reason': reason})

    def resource_signal(self, ctx, ident, name, details=None,
                        signal_id=None):
        path = '%s/resources/%s/signal_result' % (self._path(ident),
                                                  _q(name))
        return self.http.request('POST', path, details).body['signal']

    # -- outputs ------------------------------------------------------------
    def output_list(self, ctx, ident):
        """From the stack's show: Heat's outputs route has no values."""
        outs = self.stack_show(ctx, ident).get('outputs') or []
        found = {}
        for o in outs:
            one = {'value': o.get('output_value'),
                   'description': o.get('description', '')}
            if 'output_error' in o:
                one['error'] = o['output_error']
            found[o['output_key']] = one
        return found

    def output_show(self, ctx, ident, key):
        return self.http.get('%s/outputs/%s' % (self._path(ident),
                                                _q(key)))['output']

    # -- events -------------------------------------------------------------
    def event_list(self, ctx, ident, resource_name=None, limit=None,
                   nested_depth=0, query=None):
        """As the local one. Heat's route also lists each stack's own
        events (read from its traversals): without `query`, as the CLI
        asks, they are left out, as the local service leaves them."""
        path = self._path(ident)
        if resource_name is not None:
            path += '/resources/%s' % _q(resource_name)
        q = dict(query or {})
        q.update(q.pop('filters', None) or {})
        rows = [_event(e) for e in self.http.get(
            path + '/events', nested_depth=nested_depth or None,
            **q)['events']]
        if query is None:
            rows = [e for e in rows if not (
                e['physical_resource_id'] == e['stack_id'] and
                e['resource_name'] == e['stack_name'])]
            if limit:
                rows = rows[-limit:]
        return rows

    def hook_poll(self, ctx, ident, nested_depth=0):
        """As the local one, read from Heat's routes as heatclient reads
        them: the events since the stack's last "Stack <ACTION>
        started"."""
        st = self.stack_show(ctx, ident, with_outputs=False)
        action, _, status = st['stack_status'].partition('_')
        hook = hooks.HOOK_OF_ACTION.get(action)
        if status != 'IN_PROGRESS' or hook is None:
            raise exception.InvalidInput(
                'Stack %s is %s: hooks are polled while it is created, '
                'updated or deleted' % (st['stack_name'], st['stack_status']))
        events = self.event_list(ctx, st['id'], nested_depth=nested_depth,
                                 query={'sort_dir': 'asc'})
        started = [i for i, e in enumerate(events)
                   if e['physical_resource_id'] == st['id'] and
                   e['resource_status_reason'].startswith(
                       'Stack %s started' % action)]
        return hooks.paused_events(events[started[-1]:] if started
                                   else events, hook,
                                   hooks.POST_HOOK_OF_ACTION.get(action))

    def hooks_paused(self, ctx, stack_id):
        """Over the API: whether a hook of the stack's action is pending
        (what else could run there is the server's to know)."""
        try:
            return bool(self.hook_poll(ctx, stack_id, nested_depth=10))
        except exception.InvalidInput:   # it ended meanwhile
            return False

    def event_show(self, ctx, ident, resource_name, event_id):
        return _event(self.http.get('%s/resources/%s/events/%s' % (
            self._path(ident), _q(resource_name), _q(event_id)))['event'])

    def events_since(self, ctx, stack_id, traversal_ids, after_id=0,
                     ids=None):
        return self.http.get(self._path(stack_id) + '/traversal_events',
                             traversal_id=list(traversal_ids),
                             after_id=after_id, id=list(ids or ()) or None
                             )['events']

    def event_ids_since(self, ctx, stack_id, traversal_ids, after_id):
        return self.http.get(self._path(stack_id) + '/traversal_events',
                             traversal_id=list(traversal_ids),
                             after_id=after_id, ids_only=True)['event_ids']

    # -- following a traversal ----------------------------------------------
    def traversal_status(self, ctx, stack_id, traversal_id):
        found = self.http.get('%s/traversals/%s' % (
            self._path(stack_id), _q(traversal_id)))['traversal']
        return {'stack': Record(**found['stack']),
                'superseded_by': found['superseded_by']}

    def traversal_progress(self, ctx, stack_id, traversal_id):
        return self.http.get('%s/traversals/%s/progress' % (
            self._path(stack_id), _q(traversal_id)))['progress']

    # -- what the engine is doing now (converge top) -------------------------
    def engine_activity(self, ctx, all_projects=False, window=10.0,
                        due_within=30.0):
        return self.http.get('/activity', all_projects=all_projects or None,
                             window=window,
                             due_within=due_within)['activity']

    def drain_local(self):
        """Nothing runs here: converge-api runs the work."""

    # -- software configs and deployments of no stack (Heat's API) ----------
    def software_config_create(self, ctx, data):
        return self.http.request('POST', '/software_configs',
                                 data).body['software_config']

    def software_config_list(self, ctx):
        return self.http.get('/software_configs')['software_configs']

    def software_config_show(self, ctx, config_id):
        return self.http.get('/software_configs/%s' % _q(config_id)
                             )['software_config']

    def software_config_delete(self, ctx, config_id):
        self.http.request('DELETE', '/software_configs/%s' % _q(config_id))

    def software_deployment_create(self, ctx, data):
        return self.http.request('POST', '/software_deployments',
                                 data).body['software_deployment']

    def software_deployment_list(self, ctx, server_id=None):
        return self.http.get('/software_deployments', server_id=server_id
                             )['software_deployments']

    def software_deployment_show(self, ctx, deployment_id):
        return self.http.get('/software_deployments/%s' % _q(deployment_id)
                             )['software_deployment']

    def software_deployment_update(self, ctx, deployment_id, data):
        return self.http.request(
            'PUT', '/software_deployments/%s' % _q(deployment_id),
            data).body['software_deployment']

    def software_deployment_delete(self, ctx, deployment_id):
        self.http.request('DELETE', '/software_deployments/%s'
                          % _q(deployment_id))

    def software_deployment_metadata(self, ctx, server_id):
        return self.http.get('/software_deployments/metadata/%s'
                             % _q(server_id))['metadata']

    # -- deployments: day-2 actions -------------------------------------------
    def deployment_action_run(self, ctx, stack, resource, action,
                              inputs=None, members=None):
        return self.http.request('POST', '%s/resources/%s/deployment_actions'
                                 % (self._path(stack), _q(resource)), {
                                     'action': action,
                                     'inputs': inputs or {},
                                     'members': members}
                                 ).body['deployment_actions']

    def deployment_action_members(self, ctx, stack, resource):
        return self.http.get('%s/resources/%s/deployment_members' % (
            self._path(stack), _q(resource)))['members']

    def deployment_action_show(self, ctx, action_id):
        return self.http.get('/deployment_actions/%s' % _q(action_id)
                             )['deployment_action']

    def deployment_action_list(self, ctx, stack, resource=None):
        path = self._path(stack)
        if resource is not None:
            path += '/resources/%s' % _q(resource)
        return self.http.get(path + '/deployment_actions'
                             )['deployment_actions']

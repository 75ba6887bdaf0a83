"""Heat's stacks routes: index, create (and adopt), preview, lookup,
show, update (PUT) and update --existing (PATCH), delete, abandon,
export, the stack's template, environment and files, its outputs, and
the actions route (check, suspend, resume, cancel_update,
cancel_without_rollback)."""

import re
from urllib import parse as urlparse

import webob

from converge import conf as conf_mod
from converge import exception
from converge import template
from converge.api import policy
from converge.api import wsgi
from converge.api.v1 import common
from converge.api.v1.common import action

#: the query keys of GET /stacks that filter (Heat's)
_FILTERS = ('id', 'status', 'name', 'action', 'tenant')
_TAGS = ('tags', 'tags_any', 'not_tags', 'not_tags_any')
#: Heat's stack ARN: project, name, id, then a sub-path
_ARN = re.compile(r'arn:openstack:heat::([^:/]*):stacks/([^/]+)/([^/]+)'
                  r'(?:/(.*))?')


def _bundle(data):
    names = data.get('environment_files')
    if names is not None and not (isinstance(names, list) and all(
            isinstance(n, str) for n in names)):
        raise exception.InvalidInput('environment_files must be a list of '
                                     'file names')
    env = data.get('environment')
    if env is not None and not isinstance(env, (dict, str)):
        raise exception.InvalidInput('environment must be a map')
    return template.bundle_from_request(
        data.get('template'), common.mapping(data, 'files'), env, names,
        max_size=conf_mod.CONF.max_template_size,
        base_url=data.get('template_base_url'))


def _files(data):
    """The files map the client sent, each a text (Heat's adopt reads a
    provider template the adopt data's template names from it)."""
    files = common.mapping(data, 'files')
    if not all(isinstance(v, str) for v in files.values()):
        raise exception.InvalidInput('files must map names to texts')
    return files


def _tags(value):
    if value in (None, ''):
        return None
    if isinstance(value, str):
        return [t for t in value.split(',') if t]
    if isinstance(value, list) and all(isinstance(t, str) for t in value):
        return value
    raise exception.InvalidInput('tags must be a list of strings or a '
                                 'comma-separated string')


def _update_bundle(data, existing):
    """An update's new bundle; None for PATCH without a template (the
    stack keeps its own)."""
    if data.get('template') is not None:
        return _bundle(data)
    if not existing:
        raise exception.InvalidInput('No template given: send "template" '
                                     '(or PATCH to keep the existing one)')
    return None


def _clear(data):
    clear = data.get('clear_parameters') or ()
    if not isinstance(clear, (list, tuple)) or not all(
            isinstance(c, str) for c in clear):
        raise exception.InvalidInput('clear_parameters must be a list of '
                                     'parameter names')
    return clear


def _timeout(data):
    return common.integer(data.get('timeout_mins'), 'timeout_mins', 1,
                          conf_mod.CONF.max_timeout_mins,
                          '[DEFAULT] max_timeout_mins')


def _converge_policy(data):
    """converge's own body key: MODE or MODE:SECONDS (off, observe,
    repair), checked by the engine."""
    value = data.get('converge_policy')
    if value is None:
        return None
    if not isinstance(value, str):
        raise exception.InvalidInput('converge_policy: a string such as '
                                     '"repair:60"')
    return value


class Controller(common.Controller):
    # -- the collection -----------------------------------------------------
    @action('stacks:index')
    def index(self, req, ctx):
        q = req.GET
        everyone = common.flag(q.get('global_tenant'), 'global_tenant')
        if everyone:
            policy.check(ctx, 'stacks:global_index')
        filters = {k: common.listed(req, k) for k in _FILTERS if k in q}
        rows = self.service.stack_list(
            ctx, show_nested=common.flag(q.get('show_nested'),
                                         'show_nested'),
            show_deleted=common.flag(q.get('show_deleted'), 'show_deleted'),
            show_hidden=common.flag(q.get('show_hidden'), 'show_hidden'),
            all_projects=everyone, filters=filters,
            sort_keys=common.listed(req, 'sort_keys'),
            sort_dir=q.get('sort_dir'), limit=common.integer(
                q.get('limit'), 'limit'), marker=q.get('marker'),
            **{t: common.listed(req, t) for t in _TAGS})
        out = {'stacks': [self._summary(req, ctx, r) for r in rows]}
        if common.flag(q.get('with_count'), 'with_count'):
            out['count'] = len(rows)
        return common.reply(out)

    detail = index

    def _summary(self, req, ctx, row):
        return {
            'id': row['id'], 'stack_name': row['stack_name'],
            'description': '', 'stack_status': row['stack_status'],
            'stack_status_reason': row['stack_status_reason'],
            'creation_time': row['creation_time'],
            'updated_time': row['updated_time'],
            'deletion_time': row['deletion_time'],
            'stack_owner': None, 'stack_user_project_id': None,
            'parent': row['parent'], 'tags': row['tags'],
            'project': row['project'],
            'links': common.stack_links(req, ctx, row['stack_name'],
                                        row['id'])}

    @action('stacks:create')
    def create(self, req, ctx):
        data = common.body(req)
        name = common.string(data, 'stack_name', required=True)
        params = common.mapping(data, 'parameters')
        if 'adopt_stack_data' in data:
            started = self.service.stack_adopt(
                ctx, name, common.json_value(data['adopt_stack_data'],
                                             'adopt_stack_data'),
                params, timeout=_timeout(data), source='adopt_stack_data',
                files=_files(data))
        else:
            started = self.service.stack_create(
                ctx, name, _bundle(data), params,
                disable_rollback=common.flag(
                    data.get('disable_rollback', True), 'disable_rollback'),
                timeout=_timeout(data), tags=_tags(data.get('tags')),
                converge_policy=_converge_policy(data))
        return common.started(common.reply({'stack': {
            'id': started['id'],
            'links': common.stack_links(req, ctx, name, started['id'])}},
            201), started)

    @action('stacks:preview')
    def preview(self, req, ctx):
        data = common.body(req)
        plan = self.service.stack_preview(
            ctx, common.string(data, 'stack_name') or 'preview',
            _bundle(data), common.mapping(data, 'parameters'))
        description = plan['description'] or 'No description'
        return common.reply({'stack': {
            # as Heat's: a stack not stored has the id 'None'
            'id': 'None', 'parent': None,
            'stack_name': plan['stack_name'],
            'description': description,
            'template_description': description,
            'parameters': dict(plan['parameters'], **{
                'OS::stack_id': 'None',
                'OS::stack_name': plan['stack_name'],
                'OS::project_id': ctx.project_id}),
            'disable_rollback': common.flag(
                data.get('disable_rollback', True), 'disable_rollback'),
            'timeout_mins': _timeout(data),
            'stack_owner': None, 'capabilities': [],
            'notification_topics': [],
            'resources': plan['preview'],
            # the flat list (requires too) converge's own CLI prints
            'resource_list': plan['resource_list']}})

    # -- finding a stack by name ------------------------------------------
    @action('stacks:lookup')
    def lookup(self, req, ctx, stack_name, path=None):
        """Heat's redirect from a name (or an id) to the stack's URL."""
        return self._redirect(req, ctx,
                              self.service.stack_identify(ctx, stack_name),
                              path)

    @staticmethod
    def _redirect(req, ctx, found, path):
        location = common.stack_url(req, ctx, found['stack_name'],
                                    found['id'])
        if path:
            location += '/' + path
        if req.query_string:
            location += '?' + req.query_string
        return webob.Response(status=302, location=location,
                              json={'stack': {'id': found['id'],
                                              'stack_name':
                                                  found['stack_name']}})

    @action('stacks:lookup')
    def lookup_arn(self, req, ctx, arn):
        """Heat's redirect from a stack's ARN (with a sub-path, e.g.
        .../resources/NAME) to the stack's URL."""
        found = _ARN.fullmatch(urlparse.unquote(arn))
        if found is None:
            raise exception.StackNotFound(arn)
        name, stack_id, path = found.group(2, 3, 4)
        return self._redirect(req, ctx, {
            'stack_name': name, 'id': self._identify(ctx, name, stack_id)},
            path)

    def _identify(self, ctx, stack_name, stack_id):
        """The stack a {name}/{id} URL names: both must agree."""
        found = self.service.stack_identify(ctx, stack_id)
        if stack_name not in (found['stack_name'], found['id']):
            raise exception.StackNotFound('%s/%s' % (stack_name, stack_id))
        return found['id']

    # -- one stack -----------------------------------------------------------
    @action('stacks:show')
    def show(self, req, ctx, stack_name, stack_id):
        ident = self._identify(ctx, stack_name, stack_id)
        outputs = common.flag(req.GET.get('resolve_outputs', True),
                              'resolve_outputs')
        data = self.service.stack_show(ctx, ident, with_outputs=outputs)
        data.setdefault('parameters', {}).update({
            'OS::stack_id': data['id'], 'OS::stack_name': data['stack_name'],
            'OS::project_id': ctx.project_id})
        data.update(template_description=data.get('description', ''),
                    capabilities=[], notification_topics=[],
                    stack_owner=None, stack_user_project_id=None,
                    links=common.stack_links(req, ctx, data['stack_name'],
                                             data['id']))
        return common.reply({'stack': data})

    def _update(self, req, ctx, stack_name, stack_id, existing):
        ident = self._identify(ctx, stack_name, stack_id)
        data = common.body(req)
        bundle = _update_bundle(data, existing)
        rollback = None
        if 'disable_rollback' in data:
            rollback = not common.flag(data['disable_rollback'],
                                       'disable_rollback')
        clear = _clear(data)
        return common.started(common.accepted(), self.service.stack_update(
            ctx, ident, bundle, common.mapping(data, 'parameters'),
            existing=existing, rollback=rollback,
            clear_parameters=clear,
            timeout=_timeout(data), tags=_tags(data.get('tags')),
            converge=common.flag(data.get('converge', False), 'converge'),
            converge_policy=_converge_policy(data)))

    @action('stacks:update')
    def update(self, req, ctx, stack_name, stack_id):
        return self._update(req, ctx, stack_name, stack_id, existing=False)

    @action('stacks:update_patch')
    def update_patch(self, req, ctx, stack_name, stack_id):
        return self._update(req, ctx, stack_name, stack_id, existing=True)

    def _preview_update(self, req, ctx, stack_name, stack_id, existing):
        ident = self._identify(ctx, stack_name, stack_id)
        data = common.body(req)
        bundle = _update_bundle(data, existing)
        changes = self.service.stack_preview_update(
            ctx, ident, bundle, common.mapping(data, 'parameters'),
            existing=existing, clear_parameters=_clear(data),
            show_nested=common.flag(req.GET.get('show_nested'),
                                    'show_nested'))
        return common.reply({'resource_changes': changes})

    @action('stacks:preview_update')
    def preview_update(self, req, ctx, stack_name, stack_id):
        return self._preview_update(req, ctx, stack_name, stack_id, False)

    @action('stacks:preview_update_patch')
    def preview_update_patch(self, req, ctx, stack_name, stack_id):
        return self._preview_update(req, ctx, stack_name, stack_id, True)

    @action('stacks:delete')
    def delete(self, req, ctx, stack_name, stack_id):
        return common.started(webob.Response(status=204),
                              self.service.stack_delete(
                                  ctx, self._identify(ctx, stack_name,
                                                      stack_id)))

    @action('stacks:abandon')
    def abandon(self, req, ctx, stack_name, stack_id):
        doc = self.service.stack_abandon(
            ctx, self._identify(ctx, stack_name, stack_id))
        return common.reply(doc)

    @action('stacks:export')
    def export(self, req, ctx, stack_name, stack_id):
        return common.reply(self.service.stack_export(
            ctx, self._identify(ctx, stack_name, stack_id)))

    @action('stacks:template')
    def template(self, req, ctx, stack_name, stack_id):
        return common.reply(self.service.stack_template(
            ctx, self._identify(ctx, stack_name, stack_id))['template'])

    @action('stacks:environment')
    def environment(self, req, ctx, stack_name, stack_id):
        return common.reply(self.service.stack_template(
            ctx, self._identify(ctx, stack_name, stack_id))['environment'])

    @action('stacks:files')
    def files(self, req, ctx, stack_name, stack_id):
        return common.reply(self.service.stack_template(
            ctx, self._identify(ctx, stack_name, stack_id))['files'])

    # -- snapshots -----------------------------------------------------------
    @action('stacks:snapshot')
    def snapshot(self, req, ctx, stack_name, stack_id):
        data = common.body(req)
        return common.reply(self.service.stack_snapshot(
            ctx, self._identify(ctx, stack_name, stack_id),
            common.string(data, 'name')))

    @action('stacks:list_snapshots')
    def snapshots(self, req, ctx, stack_name, stack_id):
        return common.reply({'snapshots': self.service.stack_snapshot_list(
            ctx, self._identify(ctx, stack_name, stack_id))})

    @action('stacks:show_snapshot')
    def snapshot_show(self, req, ctx, stack_name, stack_id, snapshot_id):
        return common.reply({'snapshot': self.service.stack_snapshot_show(
            ctx, self._identify(ctx, stack_name, stack_id), snapshot_id)})

    @action('stacks:delete_snapshot')
    def snapshot_delete(self, req, ctx, stack_name, stack_id, snapshot_id):
        self.service.stack_snapshot_delete(
            ctx, self._identify(ctx, stack_name, stack_id), snapshot_id)
        return None

    @action('stacks:restore_snapshot')
    def snapshot_restore(self, req, ctx, stack_name, stack_id, snapshot_id):
        return common.started(common.accepted(),
                              self.service.stack_snapshot_restore(
                                  ctx, self._identify(ctx, stack_name,
                                                      stack_id),
                                  snapshot_id))

    # -- outputs -------------------------------------------------------------
    @action('stacks:list_outputs')
    def outputs(self, req, ctx, stack_name, stack_id):
        outs = self.service.output_list(
            ctx, self._identify(ctx, stack_name, stack_id))
        return common.reply({'outputs': [
            {'output_key': k, 'description': v.get('description', '')}
            for k, v in sorted(outs.items())]})

    @action('stacks:show_output')
    def output(self, req, ctx, stack_name, stack_id, output_key):
        return common.reply({'output': self.service.output_show(
            ctx, self._identify(ctx, stack_name, stack_id), output_key)})

    # -- actions -------------------------------------------------------------
    _ACTIONS = ('check', 'suspend', 'resume', 'cancel_update',
                'cancel_without_rollback')

    def actions(self, req, project_id, stack_name, stack_id):
        data = common.body(req)
        if len(data) != 1 or next(iter(data)) not in self._ACTIONS:
            raise wsgi.Error(400, 'The body must name one action of: %s'
                             % ', '.join(self._ACTIONS))
        verb = next(iter(data))
        return self._action(req, project_id, verb, stack_name, stack_id)

    def _action(self, req, project_id, verb, stack_name, stack_id):
        @action('actions:' + verb)
        def run(self, req, ctx):
            ident = self._identify(ctx, stack_name, stack_id)
            svc = self.service
            if verb == 'check':
                begun = svc.stack_check(ctx, ident)
            elif verb == 'suspend':
                begun = svc.stack_suspend(ctx, ident)
            elif verb == 'resume':
                begun = svc.stack_resume(ctx, ident)
            else:
                begun = svc.stack_cancel(ctx, ident,
                                         rollback=verb == 'cancel_update')
            return common.started(common.accepted(), begun)
        return run(self, req, project_id)

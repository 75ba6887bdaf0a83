"""Heat's resources and events routes: list (nested_depth, with_detail,
filters), show, metadata, signal, mark unhealthy; a stack's events and a
resource's (filters, sort, limit, marker, nested_depth), one event."""

from converge import exception
from converge.api import auth
from converge.api import signals
from converge.api import wsgi
from converge.api.v1 import common
from converge.api.v1.common import action
from converge.api.v1.stacks import Controller as _Stacks

_RESOURCE_FILTERS = ('name', 'status', 'type', 'action', 'id',
                     'physical_resource_id')
_EVENT_FILTERS = ('resource_action', 'resource_status', 'resource_name',
                  'resource_type', 'physical_resource_id')


def _resource_url(req, ctx, stack_name, stack_id, name):
    return '%s/resources/%s' % (common.stack_url(req, ctx, stack_name,
                                                 stack_id), name)


class Controller(_Stacks):
    # -- resources -----------------------------------------------------------
    @action('resource:index')
    def index(self, req, ctx, stack_name, stack_id):
        ident = self._identify(ctx, stack_name, stack_id)
        q = req.GET
        depth = common.integer(q.get('nested_depth'), 'nested_depth') or 0
        filters = {k: common.listed(req, k)
                   for k in _RESOURCE_FILTERS if k in q}
        rows = self.service.resource_list(ctx, ident, filters,
                                          nested_depth=depth)
        detail = common.flag(q.get('with_detail'), 'with_detail')
        details = self.service.resource_details(ctx, ident) if detail \
            else {}
        out = []
        for r in rows:
            item = self._resource(req, ctx, r, depth > 0)
            if r['stack_id'] == ident and r['resource_name'] in details:
                item.update(details[r['resource_name']])
            out.append(item)
        return wsgi.json_list_response(
            'resources', out, hint='list the resources without '
            'with_detail, and show them one by one' if detail else None)

    def _resource(self, req, ctx, r, nested):
        url = _resource_url(req, ctx, r['stack_name'], r['stack_id'],
                            r['resource_name'])
        item = {
            'resource_name': r['resource_name'],
            'logical_resource_id': r['resource_name'],
            'physical_resource_id': r['physical_resource_id'],
            'resource_type': r['resource_type'],
            'resource_status': r['resource_status'],
            'resource_status_reason': r.get('resource_status_reason') or '',
            'creation_time': r.get('creation_time'),
            'updated_time': r['updated_time'],
            'required_by': r.get('required_by', []),
            'links': [{'href': url, 'rel': 'self'},
                      {'href': common.stack_url(req, ctx, r['stack_name'],
                                                r['stack_id']),
                       'rel': 'stack'}]}
        if nested or r.get('parent_resource'):
            item['parent_resource'] = r.get('parent_resource')
        return item

    @action('resource:show')
    def show(self, req, ctx, stack_name, stack_id, resource_name):
        ident = self._identify(ctx, stack_name, stack_id)
        data = self.service.resource_show(ctx, ident, resource_name)
        data['links'] = [
            {'href': _resource_url(req, ctx, stack_name, ident,
                                   resource_name), 'rel': 'self'},
            {'href': common.stack_url(req, ctx, stack_name, ident),
             'rel': 'stack'}]
        if data.get('nested_stack_id'):
            data['links'].append({'href': common.stack_url(
                req, ctx, data['nested_stack_name'],
                data['nested_stack_id']), 'rel': 'nested'})
        wanted = req.GET.getall('with_attr')
        if wanted:
            data['attributes'] = {k: v for k, v in
                                  (data.get('attributes') or {}).items()
                                  if k in wanted}
        return common.reply({'resource': data})

    @action('resource:metadata')
    def metadata(self, req, ctx, stack_name, stack_id, resource_name):
        ident = self._identify(ctx, stack_name, stack_id)
        return common.reply({'metadata': self.service.resource_metadata(
            ctx, ident, resource_name)})

    @action('resource:mark_unhealthy')
    def mark_unhealthy(self, req, ctx, stack_name, stack_id, resource_name):
        ident = self._identify(ctx, stack_name, stack_id)
        data = common.body(req)
        if 'mark_unhealthy' not in data:
            raise exception.InvalidInput('The body must say '
                                         '"mark_unhealthy": true or false')
        unknown = set(data) - {'mark_unhealthy', 'resource_status_reason'}
        if unknown:
            raise exception.InvalidInput('Unknown key(s) %s'
                                         % ', '.join(sorted(unknown)))
        self.service.resource_mark_unhealthy(
            ctx, ident, resource_name,
            common.flag(data['mark_unhealthy'], 'mark_unhealthy'),
            str(data.get('resource_status_reason') or ''))
        return None

    def signal(self, req, project_id, stack_name, stack_id, resource_name):
        """A user's signal (their API token), or a resource's own (its
        signal URL's token, checked against the resource)."""
        try:
            auth.context(self.engine, req, project_id)
        except exception.Unauthorized:
            return signals.Controller(self.engine).signal(
                req, project_id, stack_name, stack_id, resource_name)
        return self._user_signal(req, project_id, stack_name=stack_name,
                                 stack_id=stack_id,
                                 resource_name=resource_name)

    @action('resource:signal')
    def _user_signal(self, req, ctx, stack_name, stack_id, resource_name):
        ident = self._identify(ctx, stack_name, stack_id)
        # any JSON, or none: heatclient's signal() with no data sends
        # `null`, an alarm its own document
        details = wsgi.read_json(req) if req.body else None
        self.service.resource_signal(
            ctx, ident, resource_name, details,
            signal_id=req.headers.get('Idempotency-Key') or None)
        return None

    # -- events --------------------------------------------------------------
    @action('events:index')
    def events(self, req, ctx, stack_name, stack_id, resource_name=None):
        ident = self._identify(ctx, stack_name, stack_id)
        q = req.GET
        depth = common.integer(q.get('nested_depth'), 'nested_depth') or 0
        if resource_name is not None and resource_name != stack_name:
            # the resource must exist (or have events): Heat's 404; the
            # stack's own name lists the stack's own events
            self._known_resource(ctx, ident, resource_name)
        query = {'filters': {k: common.listed(req, k)
                             for k in _EVENT_FILTERS if k in q},
                 'sort_keys': common.listed(req, 'sort_keys'),
                 'sort_dir': q.get('sort_dir'),
                 'limit': common.integer(q.get('limit'), 'limit'),
                 'marker': q.get('marker')}
        rows = self.service.event_list(
            ctx, ident, resource_name=resource_name,
            nested_depth=depth, query=query)
        return common.reply({'events': [
            self._event(req, ctx, e, root=(stack_name, ident) if depth
                        else None) for e in rows]})

    def _known_resource(self, ctx, ident, name):
        names = {r['resource_name'] for r in
                 self.service.resource_list(ctx, ident)}
        if name not in names and not self.service.event_list(
                ctx, ident, resource_name=name, limit=1):
            raise exception.ResourceNotFound(ident, name)

    def _event(self, req, ctx, e, root=None, detail=False):
        stack_url = common.stack_url(req, ctx, e['stack_name'],
                                     e['stack_id'])
        res_url = '%s/resources/%s' % (stack_url, e['resource_name'])
        links = [{'href': '%s/events/%s' % (res_url, e['uuid']),
                  'rel': 'self'},
                 {'href': res_url, 'rel': 'resource'},
                 {'href': stack_url, 'rel': 'stack'}]
        if root is not None:
            links.append({'href': common.stack_url(req, ctx, *root),
                          'rel': 'root_stack'})
        out = {'id': e['uuid'], 'event_time': e['event_time'],
               'resource_name': e['resource_name'],
               'logical_resource_id': e['resource_name'],
               'physical_resource_id': e['physical_resource_id'],
               'resource_status': e['resource_status'],
               'resource_status_reason': e['resource_status_reason'],
               'links': links}
        if detail:
            out.update(resource_type=e['resource_type'],
                       resource_properties={})
        return out

    @action('events:show')
    def event(self, req, ctx, stack_name, stack_id, resource_name,
              event_id):
        ident = self._identify(ctx, stack_name, stack_id)
        e = self.service.event_show(ctx, ident, resource_name, event_id)
        e.setdefault('stack_id', ident)
        e.setdefault('stack_name', stack_name)
        return common.reply({'event': self._event(req, ctx, e,
                                                  detail=True)})

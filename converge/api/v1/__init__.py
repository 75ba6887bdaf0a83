"""Heat's orchestration API v1, under /v1/{project_id}: what
python-heatclient, `openstack stack` and Heat's other clients call.
Every controller calls the engine's service layer only."""

from converge.api.v1 import catalog
from converge.api.v1 import extensions
from converge.api.v1 import live
from converge.api.v1 import resources
from converge.api.v1 import software
from converge.api.v1 import stacks

#: the sub-paths a stack's name alone may be looked up with (redirected
#: to /stacks/{name}/{id}/..., any method: python-heatclient repeats the
#: request at the new address with its method and body)
_LOOKUP = (r'(resources|events|template|environment|files|outputs|actions'
           r'|abandon|export|snapshots|preview)(/.*)?')
_ANY = ('GET', 'POST', 'PUT', 'PATCH', 'DELETE')


def add_routes(mapper, engine, stopping=None):
    st = stacks.Controller(engine)
    rs = resources.Controller(engine)
    cat = catalog.Controller(engine)
    sw = software.Controller(engine)
    p = '/v1/{project_id}'
    stack = p + '/stacks/{stack_name}/{stack_id}'
    res = stack + '/resources/{resource_name}'

    def route(url, handler, *methods, **requirements):
        mapper.connect(url, handler=handler,
                       conditions={'method': list(methods)},
                       requirements=requirements)

    # converge's own routes first: its actions route takes converge's
    # verbs and hands Heat's to Heat's controller
    extensions.add_routes(route, engine, st)
    # a live view's (the dashboard's): its overview, layout, event stream
    live.add_routes(route, engine, st, stopping)
    # the collection, and names that are not stacks
    route(p + '/stacks', st.index, 'GET')
    route(p + '/stacks', st.create, 'POST')
    route(p + '/stacks/detail', st.detail, 'GET')
    route(p + '/stacks/preview', st.preview, 'POST')
    # a stack's ARN (a provider resource's reference, Heat's
    # arn:openstack:heat::{project}:stacks/{name}/{id}[/sub-path]):
    # redirected to the stack's URL (":" in a requirement is "\x3A")
    route(p + '/stacks/{arn}', st.lookup_arn, *_ANY,
          arn=r'arn\x3Aopenstack\x3Aheat\x3A.*')
    # a name alone: redirected to the stack's URL
    route(p + '/stacks/{stack_name}', st.lookup, *_ANY)
    route(p + '/stacks/{stack_name}/{path}', st.lookup, *_ANY,
          path=_LOOKUP)
    # one stack
    route(stack, st.show, 'GET')
    route(stack, st.update, 'PUT')
    route(stack, st.update_patch, 'PATCH')
    route(stack, st.delete, 'DELETE')
    route(stack + '/preview', st.preview_update, 'PUT')
    route(stack + '/preview', st.preview_update_patch, 'PATCH')
    route(stack + '/abandon', st.abandon, 'DELETE')
    route(stack + '/export', st.export, 'GET')
    route(stack + '/template', st.template, 'GET')
    route(stack + '/environment', st.environment, 'GET')
    route(stack + '/files', st.files, 'GET')
    route(stack + '/outputs', st.outputs, 'GET')
    route(stack + '/outputs/{output_key}', st.output, 'GET')
    route(stack + '/actions', st.actions, 'POST')
    route(stack + '/snapshots', st.snapshot, 'POST')
    route(stack + '/snapshots', st.snapshots, 'GET')
    route(stack + '/snapshots/{snapshot_id}', st.snapshot_show, 'GET')
    route(stack + '/snapshots/{snapshot_id}', st.snapshot_delete, 'DELETE')
    route(stack + '/snapshots/{snapshot_id}/restore', st.snapshot_restore,
          'POST')
    # resources and events
    route(stack + '/resources', rs.index, 'GET')
    route(stack + '/events', rs.events, 'GET')
    route(res, rs.show, 'GET')
    route(res, rs.mark_unhealthy, 'PATCH')
    route(res + '/metadata', rs.metadata, 'GET')
    route(res + '/signal', rs.signal, 'POST')
    route(res + '/events', rs.events, 'GET')
    route(res + '/events/{event_id}', rs.event, 'GET')
    # about the engine
    route(p + '/validate', cat.validate, 'POST')
    route(p + '/resource_types', cat.resource_types, 'GET')
    route(p + '/resource_types/{type_name}', cat.resource_type, 'GET')
    route(p + '/resource_types/{type_name}/template',
          cat.resource_type_template, 'GET')
    route(p + '/template_versions', cat.template_versions, 'GET')
    route(p + '/template_versions/{template_version}/functions',
          cat.template_functions, 'GET')
    route(p + '/build_info', cat.build_info, 'GET')
    route(p + '/services', cat.services, 'GET')
    # software configs and deployments
    route(p + '/software_configs', sw.configs, 'GET')
    route(p + '/software_configs', sw.config_create, 'POST')
    route(p + '/software_configs/{config_id}', sw.config_show, 'GET')
    route(p + '/software_configs/{config_id}', sw.config_delete, 'DELETE')
    route(p + '/software_deployments', sw.deployments, 'GET')
    route(p + '/software_deployments', sw.deployment_create, 'POST')
    route(p + '/software_deployments/metadata/{server_id}', sw.metadata,
          'GET')
    route(p + '/software_deployments/{deployment_id}', sw.deployment_show,
          'GET')
    route(p + '/software_deployments/{deployment_id}',
          sw.deployment_update, 'PUT')
    route(p + '/software_deployments/{deployment_id}',
          sw.deployment_delete, 'DELETE')

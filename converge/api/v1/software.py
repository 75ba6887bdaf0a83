"""Heat's software_configs and software_deployments routes (configs and
deployments outside any stack; a server's deployments as metadata)."""

from converge.api.v1 import common
from converge.api.v1.common import action
from converge.engine import listing


class Controller(common.Controller):
    # -- configs -------------------------------------------------------------
    @action('software_configs:index')
    def configs(self, req, ctx):
        rows = listing.page(self.service.software_config_list(ctx),
                            limit=common.integer(req.GET.get('limit'),
                                                 'limit'),
                            marker=req.GET.get('marker'))
        return common.reply({'software_configs': [
            {k: r[k] for k in ('id', 'name', 'group', 'creation_time')}
            for r in rows]})

    @action('software_configs:create')
    def config_create(self, req, ctx):
        return common.reply({'software_config':
                             self.service.software_config_create(
                                 ctx, common.body(req))})

    @action('software_configs:show')
    def config_show(self, req, ctx, config_id):
        return common.reply({'software_config':
                             self.service.software_config_show(
                                 ctx, config_id)})

    @action('software_configs:delete')
    def config_delete(self, req, ctx, config_id):
        self.service.software_config_delete(ctx, config_id)
        return None

    # -- deployments ---------------------------------------------------------
    @action('software_deployments:index')
    def deployments(self, req, ctx):
        return common.reply({'software_deployments':
                             self.service.software_deployment_list(
                                 ctx, req.GET.get('server_id'))})

    @action('software_deployments:create')
    def deployment_create(self, req, ctx):
        return common.reply({'software_deployment':
                             self.service.software_deployment_create(
                                 ctx, common.body(req))})

    @action('software_deployments:show')
    def deployment_show(self, req, ctx, deployment_id):
        return common.reply({'software_deployment':
                             self.service.software_deployment_show(
                                 ctx, deployment_id)})

    @action('software_deployments:update')
    def deployment_update(self, req, ctx, deployment_id):
        return common.reply({'software_deployment':
                             self.service.software_deployment_update(
                                 ctx, deployment_id, common.body(req))})

    @action('software_deployments:delete')
    def deployment_delete(self, req, ctx, deployment_id):
        self.service.software_deployment_delete(ctx, deployment_id)
        return None

    @action('software_deployments:metadata')
    def metadata(self, req, ctx, server_id):
        return common.reply({'metadata':
                             self.service.software_deployment_metadata(
                                 ctx, server_id)})

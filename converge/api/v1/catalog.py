"""Heat's routes about the engine rather than a stack: template
validate, resource types, template versions and their functions, build
info, services."""

from importlib import metadata

from converge import conf as conf_mod
from converge.api.v1 import common
from converge.api.v1.common import action
from converge.api.v1.stacks import _bundle


class Controller(common.Controller):
    @action('stacks:validate_template')
    def validate(self, req, ctx):
        data = common.body(req)
        return common.reply(self.service.template_validate(
            ctx, _bundle(data), common.mapping(data, 'parameters'),
            show_nested=common.flag(req.GET.get('show_nested'),
                                    'show_nested')))

    @action('stacks:list_resource_types')
    def resource_types(self, req, ctx):
        q = req.GET
        return common.reply({'resource_types': self.service.resource_types(
            ctx, q.get('name'),
            common.flag(q.get('with_description'), 'with_description'))})

    @action('stacks:resource_schema')
    def resource_type(self, req, ctx, type_name):
        return common.reply(self.service.resource_type_show(ctx, type_name))

    @action('stacks:generate_template')
    def resource_type_template(self, req, ctx, type_name):
        return common.reply(self.service.resource_type_template(ctx,
                                                                type_name))

    @action('stacks:list_template_versions')
    def template_versions(self, req, ctx):
        return common.reply({'template_versions':
                             self.service.template_versions(ctx)})

    @action('stacks:list_template_functions')
    def template_functions(self, req, ctx, template_version):
        return common.reply({'template_functions':
                             self.service.template_functions(
                                 ctx, template_version,
                                 common.flag(req.GET.get(
                                     'with_condition_func'),
                                     'with_condition_func'))})

    @action('build_info:build_info')
    def build_info(self, req, ctx):
        try:
            version = metadata.version('converge')
        except metadata.PackageNotFoundError:
            version = 'unknown'
        return common.reply({'api': {'revision': version},
                             'engine': {'revision': version},
                             'converge': {'embedded':
                                          conf_mod.is_embedded()}})

    @action('service:index')
    def services(self, req, ctx):
        return common.reply({'services': []})

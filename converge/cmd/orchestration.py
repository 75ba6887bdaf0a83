"""`converge orchestration template version list|resource type
list|show`: what the engine offers, as `openstack orchestration ...`."""

from cliff import lister
from cliff import show

from converge import exception


class ListTemplateVersions(lister.Lister):
    """List the template versions the engine reads."""

    def take_action(self, args):
        rows = self.app.service().template_versions(self.app.context())
        return ('Version', 'Type', 'Aliases'), [
            (v['version'], v['type'], ', '.join(v.get('aliases') or ()))
            for v in rows]


class ListResourceTypes(lister.Lister):
    """List the resource types (plug-ins) the engine has."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--filter', metavar='<key=value>',
                            action='append', default=[],
                            help='name=PATTERN: the types matching it (a '
                                 'glob, or a part of a name)')
        parser.add_argument('--long', action='store_true',
                            help='Also each type\'s description')
        return parser

    def take_action(self, args):
        name = None
        for item in args.filter:
            key, sep, value = item.partition('=')
            if key != 'name' or not sep:
                raise exception.InvalidInput(
                    '--filter takes name=PATTERN, not %r' % item)
            name = value
        rows = self.app.service().resource_types(
            self.app.context(), name=name, with_description=args.long)
        if args.long:
            return ('Resource Type', 'Description'), [
                (r['resource_type'], r['description']) for r in rows]
        return ('Resource Type',), [(r,) for r in rows]


class ShowResourceType(show.ShowOne):
    """Show a resource type's properties and attributes (or a template of
    one, with --template-type)."""

    @property
    def formatter_default(self):
        return 'yaml'

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('type', metavar='<resource-type>')
        parser.add_argument('--template-type', choices=['hot'],
                            help='Show a template of a resource of this '
                                 'type instead')
        return parser

    def take_action(self, args):
        svc, ctx = self.app.service(), self.app.context()
        if args.template_type:
            data = svc.resource_type_template(ctx, args.type)
        else:
            data = svc.resource_type_show(ctx, args.type)
        keys = sorted(data)
        return keys, [data[k] for k in keys]

"""`converge stack failures list STACK [--long]`, as `openstack stack
failures list`: the resources in a FAILED state, down nested stacks,
each with its status reason, and a failed deployment's stdout and
stderr. A failed resource that owns a nested stack is listed only when
nothing in that stack failed (the failure is further down)."""

from cliff import command

from converge import exception
from converge.cmd import columns

#: levels of nested stacks looked into (a bound, not a setting: deeper
#: nesting than Heat's max_nested_stack_depth is refused anyway)
DEPTH = 100
#: resource types whose failure is best explained by their run's output
DEPLOYMENTS = ('OS::Heat::StructuredDeployment',
               'OS::Heat::SoftwareDeployment')


def failed_resources(rows, top_name):
    """{dotted path: row} of the failed resources in `rows` (resource_list
    rows with nested_depth: a resource's nested rows follow it), in
    order. A failed owner whose nested rows include a failure is left
    out for them."""
    paths = {}      # row index -> its path
    owner_of = {}   # nested stack id -> index of the row owning it
    for i, row in enumerate(rows):
        stack_id = row.get('stack_id')
        if row.get('parent_resource') and stack_id not in owner_of and i:
            # the first row of a nested stack follows its owner's row (or
            # the owner's earlier nested rows, of another stack id)
            for j in range(i - 1, -1, -1):
                if rows[j]['resource_name'] == row['parent_resource'] and \
                        rows[j].get('stack_id') != stack_id:
                    owner_of[stack_id] = j
                    break
        parent = owner_of.get(stack_id)
        base = paths[parent] if parent is not None else [top_name]
        paths[i] = base + [row['resource_name']]
    failed = [i for i, r in enumerate(rows)
              if str(r.get('resource_status', '')).endswith('FAILED')]
    # an owner with a failure below it is explained by that one
    explained = set()
    for i in failed:
        j = owner_of.get(rows[i].get('stack_id'))
        while j is not None:
            explained.add(j)
            j = owner_of.get(rows[j].get('stack_id'))
    return {'.'.join(paths[i]): rows[i] for i in failed
            if i not in explained}


class ListStackFailures(command.Command):
    """Show information about failed stack resources."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('stack', metavar='<stack>',
                            help='Stack to display (name or ID)')
        parser.add_argument('--long', action='store_true',
                            help='Show full deployment logs in output')
        return parser

    def take_action(self, args):
        svc, ctx = self.app.service(), self.app.context()
        stack = svc.stack_show(ctx, args.stack, with_outputs=False)
        if not stack['stack_status'].endswith('FAILED'):
            return
        rows = svc.resource_list(ctx, stack['id'], nested_depth=DEPTH)
        out = self.app.stdout
        for path, row in failed_resources(rows,
                                          stack['stack_name']).items():
            out.write('%s:\n' % path)
            out.write('  resource_type: %s\n' % row['resource_type'])
            out.write('  physical_resource_id: %s\n' %
                      row['physical_resource_id'])
            out.write('  status: %s\n' % row['resource_status'])
            reason = columns.indent_and_truncate(
                row.get('resource_status_reason'), spaces=4,
                truncate=not args.long, prefix='...\n')
            out.write('  status_reason: |\n%s\n' % reason)
            if row['resource_type'] in DEPLOYMENTS:
                outputs = self._deployment_outputs(svc, ctx, row)
                if outputs:
                    for name in ('deploy_stdout', 'deploy_stderr'):
                        columns.deployment_output(out, outputs, name,
                                                  long=args.long)

    @staticmethod
    def _deployment_outputs(svc, ctx, row):
        """A deployment's attributes (its outputs, stdout and stderr),
        from its resource; none when it cannot be read alone (a group's
        member)."""
        try:
            return svc.resource_show(ctx, row['stack_id'],
                                     row['resource_name']).get('attributes')
        except exception.ConvergeError:
            return None

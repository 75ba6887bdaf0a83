"""Who may do what: oslo.policy with Heat's rule names.

The defaults give a project's readers the reads, its members the writes
and admins the listing across projects (`stacks:global_index`), as
Heat's do; a policy file ([oslo_policy] policy_file) overrides any rule.
"""

from oslo_policy import policy

from converge import exception

_BASE = [
    policy.RuleDefault('context_is_admin', 'role:admin',
                       'Who is an administrator.'),
    policy.RuleDefault('deny_stack_user', 'not role:heat_stack_user',
                       "Refuses Heat's in-instance stack users."),
    policy.RuleDefault('project_reader',
                       'role:reader or role:member or role:admin',
                       'Who may read a project\'s stacks.'),
    policy.RuleDefault('project_member',
                       '(role:member or role:admin) and '
                       'rule:deny_stack_user',
                       'Who may change a project\'s stacks.'),
]

READ = (
    'stacks:index', 'stacks:detail', 'stacks:show', 'stacks:lookup',
    'stacks:template', 'stacks:environment', 'stacks:files',
    'stacks:list_outputs', 'stacks:show_output', 'stacks:validate_template',
    'stacks:list_resource_types', 'stacks:resource_schema',
    'stacks:generate_template', 'stacks:list_template_versions',
    'stacks:list_template_functions', 'stacks:list_snapshots',
    'stacks:show_snapshot', 'resource:index', 'resource:show',
    'resource:metadata', 'events:index', 'events:show',
    'build_info:build_info', 'software_configs:index',
    'software_configs:show', 'software_deployments:index',
    'software_deployments:show', 'software_deployments:metadata',
)
WRITE = (
    'stacks:create', 'stacks:update', 'stacks:update_patch',
    'stacks:preview', 'stacks:preview_update',
    'stacks:preview_update_patch', 'stacks:delete', 'stacks:abandon',
    'stacks:export', 'stacks:snapshot', 'stacks:delete_snapshot',
    'stacks:restore_snapshot', 'actions:check', 'actions:suspend',
    'actions:resume', 'actions:cancel_update',
    'actions:cancel_without_rollback', 'actions:snapshot',
    'resource:signal', 'resource:mark_unhealthy',
    'software_configs:create', 'software_configs:delete',
    'software_deployments:create', 'software_deployments:update',
    'software_deployments:delete',
)
ADMIN = ('stacks:global_index', 'service:index',
         'converge:activity_all_projects')
#: converge's own routes beyond Heat's (converge/api/v1/extensions.py)
CONVERGE_READ = (
    'converge:stack_graph', 'converge:stack_drift',
    'converge:traversal_show', 'converge:deployment_action_list',
    'converge:deployment_action_show', 'converge:activity',
    'converge:stack_overview', 'converge:event_stream',
)
CONVERGE_WRITE = (
    'converge:stack_converge', 'converge:stack_resume_rollout',
    'converge:deployment_action_run', 'converge:resource_signal_result',
)
#: Heat's resource types that only an admin may use by default (its
#: ``resource_types:TYPE`` rules; ``NS::Service::*`` covers a service's
#: every type): others neither see them listed nor use them in a template
ADMIN_TYPES = (
    'OS::Nova::Flavor', 'OS::Nova::HostAggregate', 'OS::Nova::Quota',
    'OS::Cinder::VolumeType', 'OS::Cinder::EncryptedVolumeType',
    'OS::Cinder::Quota', 'OS::Cinder::QoSSpecs', 'OS::Cinder::QoSAssociation',
    'OS::Neutron::Quota', 'OS::Neutron::ProviderNet',
    'OS::Neutron::QoSPolicy', 'OS::Neutron::QoSBandwidthLimitRule',
    'OS::Neutron::QoSDscpMarkingRule',
    'OS::Neutron::QoSMinimumBandwidthRule',
    'OS::Neutron::QoSMinimumPacketRateRule', 'OS::Neutron::Segment',
    'OS::Octavia::Quota', 'OS::Octavia::Flavor',
    'OS::Octavia::FlavorProfile', 'OS::Octavia::AvailabilityZone',
    'OS::Octavia::AvailabilityZoneProfile', 'OS::Manila::ShareType',
    'OS::Blazar::Host', 'OS::Keystone::*',
)
TYPE_RULE = 'resource_types:%s'

#: who sees the credentials a stack hands out (its servers' agent
#: tokens in their user_data, its signal tokens and URLs) in what the
#: API answers; everyone else reads them as ******
CREDENTIALS = 'converge:show_credentials'


#: what a server's own Keystone user (POLL_SERVER_HEAT, HEAT_SIGNAL:
#: role heat_stack_user) may call besides: its server's metadata and its
#: deployments' signals (converge/transports/stack_user.py confines it
#: to its own server)
SERVER_USER = ('resource:metadata', 'resource:signal')


def _rule(name, base):
    if name in SERVER_USER:
        return policy.RuleDefault(name, '%s or role:heat_stack_user' % base)
    return policy.RuleDefault(name, base)


def list_rules():
    """Every rule with its default (oslopolicy-sample-generator's
    entry point)."""
    return (_BASE
            + [_rule(n, 'rule:project_reader')
               for n in READ + CONVERGE_READ]
            + [_rule(n, 'rule:project_member')
               for n in WRITE + CONVERGE_WRITE]
            + [policy.RuleDefault(
                CREDENTIALS, 'rule:project_member or role:heat_stack_user',
                'Who sees the agent and signal credentials of a stack in '
                'what the API answers (others read them as ******).')]
            + [policy.RuleDefault(n, 'rule:context_is_admin')
               for n in ADMIN]
            + [policy.RuleDefault(TYPE_RULE % t, 'rule:context_is_admin',
                                  'Who may use the resource type %s.' % t)
               for t in ADMIN_TYPES])


_ENFORCER = None


def enforcer():
    global _ENFORCER
    if _ENFORCER is None:
        # imported here: the sample generator imports this module for its
        # rules and must not get converge's command-line options
        from converge import conf as conf_mod
        e = policy.Enforcer(conf_mod.CONF)
        e.register_defaults(list_rules())
        _ENFORCER = e
    return _ENFORCER


def allowed(ctx, rule, target=None):
    target = dict(target or {}, project_id=ctx.project_id)
    return enforcer().enforce(rule, target, ctx.to_policy_values())


def check(ctx, rule, target=None):
    """Raise Forbidden unless the policy lets `ctx` do `rule`."""
    if not allowed(ctx, rule, target):
        raise exception.Forbidden('Policy does not allow %s' % rule)


def may_use_type(ctx, type_name):
    """Whether `ctx` may use the resource type `type_name`: its own rule
    and its service's wildcard (``OS::Keystone::*``), each where the
    policy has one (a type without a rule is anyone's, as in Heat)."""
    e = enforcer()
    e.load_rules()
    wildcard = '::'.join(type_name.split('::')[:-1] + ['*'])
    for name in (type_name, wildcard):
        rule = TYPE_RULE % name
        if rule in e.rules and not allowed(ctx, rule):
            return False
    return True

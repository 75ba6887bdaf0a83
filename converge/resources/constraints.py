"""Custom constraints, as Heat's: a value that names something in the cloud.

A property schema names one (``properties.Schema(..., constraint=
'glance.image')``) where Heat puts a CustomConstraint. `check` looks every
such value up in the stack's cloud (``cloud.resolve(kind, value)``,
drivers/cloud.py) and refuses the template, naming the property's path,
with Heat's words when the cloud has no such thing:

    resources.web.properties.image: Error validating value 'nope': The
    Image (nope) could not be found.

A value not known yet (properties.UNKNOWN: a reference to a resource not
created yet) is not looked up; nor is an empty one (a key pair's name
left out). The schema checks (properties.py) run first and never talk to
a cloud; this runs after them, once per resource, with the stack's
cloud.

Heat's constraints that need no cloud (``ip_addr``, ``net_cidr``,
``ip_or_cidr``, ``mac_addr``) are checked by `check_local`, which the
plug-ins call from their validate_more.
"""

import ipaddress
import re

from converge import exception
from converge.drivers import cloud as cloud_mod
from converge.resources import properties as p


def _neutron(resource):
    # neutronclient's words (Heat's neutron constraints)
    return "Unable to find %s with name or id '%%s'" % resource


def _entity(title):
    # heat.common.exception.EntityNotFound
    return 'The %s (%%s) could not be found.' % title


#: constraint -> (the kind resolved, Heat's message when not found)
CONSTRAINTS = {
    'neutron.network': ('network', _neutron('network')),
    'neutron.subnet': ('subnet', _neutron('subnet')),
    'neutron.port': ('port', _neutron('port')),
    'neutron.router': ('router', _neutron('router')),
    'neutron.security_group': ('security_group',
                               _neutron('security_group')),
    'neutron.subnetpool': ('subnetpool', _neutron('subnetpool')),
    'neutron.qos_policy': ('qos_policy', _neutron('policy')),
    'neutron.segment': ('segment', _neutron('segment')),
    'glance.image': ('image', _entity('Image')),
    'nova.flavor': ('flavor', _entity('Flavor')),
    'nova.keypair': ('keypair', _entity('Key')),
    'nova.server': ('server', _entity('Server')),
    'nova.server_group': ('server_group', _entity('ServerGroup')),
    'cinder.volume': ('volume', _entity('Volume')),
    'cinder.vtype': ('volume_type', _entity('VolumeType')),
    'cinder.snapshot': ('volume_snapshot', _entity('VolumeSnapshot')),
    'cinder.backup': ('volume_backup', _entity('Volume backup')),
    'keystone.domain': ('domain', _entity('Keystone domain')),
    'keystone.project': ('project', _entity('Keystone project')),
    'keystone.user': ('user', _entity('Keystone user')),
    'keystone.role': ('role', _entity('Keystone role')),
}


#: kinds every driver looks up besides the contract's (servers: a volume
#: attachment names one)
ALSO_RESOLVED = ('server',)


def resolvable(cloud, kind):
    """Whether `cloud` looks up objects of `kind` by name: every driver
    does for the contract's kinds and servers; a driver that can for more
    (volume types, snapshots, ...) lists them in ``resolvable_kinds``. A
    value of a kind the cloud cannot look up is not checked (the create
    reports it)."""
    return kind in cloud_mod.KINDS or kind in ALSO_RESOLVED or \
        kind in (getattr(cloud, 'resolvable_kinds', None) or ())


def check(plugin_cls, properties, cloud, path=(), cache=None):
    """Check every constrained value of `properties` (validated values of
    a resource of `plugin_cls`, nested lists and maps too) against
    `cloud`; raise exception.InvalidTemplate naming the first bad one's
    path (`path` is the properties' own, e.g. ['resources', 'web',
    'properties']).

    `cache`, a dict, may be shared by the calls of one validation: a name
    many resources use is looked up once."""
    if cloud is None or not isinstance(properties, dict):
        return
    cache = {} if cache is None else cache

    # the simulated cloud's servers boot on any network they name (a
    # network of that name of their own, as before the sim had networks):
    # a type lists the constraints the sim does not hold it to
    lenient = getattr(plugin_cls, 'sim_lenient', ()) \
        if getattr(cloud, 'name', None) == 'sim' else ()

    def visit(name, value, where):
        if name in CONSTRAINTS and name not in lenient:
            check_value(name, value, cloud, where, cache)

    _walk_map(plugin_cls.properties_schema, properties, list(path), visit)


def check_value(name, value, cloud, path=(), cache=None):
    """Check one value against the constraint called `name` (a template
    parameter's ``custom_constraint`` too; each item of a list): raise
    exception.InvalidTemplate at `path` when `cloud` has no such thing
    (or, for a constraint that needs no cloud, when the value is not an
    address, a CIDR ...). A constraint this module does not know, a kind
    the cloud cannot look up, and an empty or unknown value pass."""
    if value is None or value is p.UNKNOWN or value == '':
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            check_value(name, item, cloud, list(path) + [i], cache)
        return
    value = str(value)
    if name in LOCAL:
        problem = LOCAL[name](value)
    elif name in CONSTRAINTS and cloud is not None and \
            resolvable(cloud, CONSTRAINTS[name][0]):
        kind, not_found = CONSTRAINTS[name]
        cache = {} if cache is None else cache
        if (kind, value) not in cache:
            cache[(kind, value)] = _problem(cloud, kind, value, not_found)
        problem = cache[(kind, value)]
    else:
        return
    if problem:
        raise exception.InvalidTemplate(
            "Error validating value '%s': %s" % (value, problem),
            path=list(path))


def check_local(plugin_cls, properties, path=()):
    """The constraints that need no cloud (an IP address, a CIDR, a MAC
    address): a plug-in's validate_more calls this."""
    if not isinstance(properties, dict):
        return

    def visit(name, value, where):
        if name in LOCAL:
            check_value(name, value, None, where)

    _walk_map(plugin_cls.properties_schema, properties, list(path), visit)


def _walk_map(schemas, values, path, visit):
    for key, value in values.items():
        schema = schemas.get(key)
        if schema is not None:
            _walk(schema, value, path + [key], visit)


def _walk(schema, value, path, visit):
    """visit(constraint, value, path) for every constrained value known."""
    if value is p.UNKNOWN or value is None:
        return
    if schema.constraint and isinstance(value, (str, int)) and \
            not isinstance(value, bool):
        visit(schema.constraint, str(value), path)
    if schema.type == p.MAP and isinstance(schema.schema, dict) and \
            isinstance(value, dict):
        _walk_map(schema.schema, value, path, visit)
    elif schema.type == p.LIST and isinstance(value, list):
        item = schema.schema
        if isinstance(item, dict):
            item = p.Schema(p.MAP, schema=item)
        if item is not None:
            for i, v in enumerate(value):
                _walk(item, v, path + [i], visit)


def _problem(cloud, kind, value, not_found):
    """What is wrong with `value` as a name of `kind` (None: nothing)."""
    try:
        cloud.resolve(kind, value)
    except exception.CloudNotFound:
        return not_found % value
    except exception.CloudTransient:
        raise   # the cloud could not answer: not the template's fault
    except exception.CloudError as exc:
        if exc.code == 409:   # several of that name: the cloud's words
            return str(exc)
        raise
    return None


# -- constraints that need no cloud (Heat's common constraints) -------------
def _ip(value):
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return 'Invalid IP address'
    return None


def _cidr(value):
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return "'%s' is not a valid IP subnet" % value
    if '/' not in value:
        return "'%s' is not a valid IP subnet" % value
    return None


def _ip_or_cidr(value):
    if '/' in value:
        return _cidr(value)
    if _ip(value):
        return "'%s' is not a valid IP address" % value
    return None


def _mac(value):
    if not re.fullmatch(r'([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}', value):
        return 'Invalid MAC address.'
    return None


#: constraint -> test(value): the problem, or None
LOCAL = {
    'ip_addr': _ip,
    'net_cidr': _cidr,
    'ip_or_cidr': _ip_or_cidr,
    'mac_addr': _mac,
}

"""CloudFormation's intrinsic functions, as Heat runs them.

Each is a :class:`functions.Function` parsed and resolved as HOT's are;
where a HOT function has the same meaning (list_join, str_replace,
get_attr, resource_facade, Fn::Select) it is reused with CloudFormation's
argument shapes. The two version keys differ in what they allow, as in
Heat: ``HeatTemplateFormatVersion: 2012-12-12`` has no conditions and no
``Fn::If``; ``AWSTemplateFormatVersion: 2010-09-09`` has both.
"""

import re

from converge.resources.properties import UNKNOWN
from converge.template import functions as fn

#: Ref to it leaves out the property (or list item) holding it
NO_VALUE = 'AWS::NoValue'


def _resolved_name(fnc, parser, arg):
    """A name argument as far as it is known when the template is read
    (a function of parameters gives its value), or UNKNOWN."""
    if isinstance(arg, fn.Function):
        return fn.resolve(arg, fn.Context(parser.scope))
    return arg


class Ref(fn.Function):
    """A resource's reference id, or a parameter's (or pseudo
    parameter's) value: a resource of that name comes first."""

    def parse(self, parser, args):
        self.args = parser.parse(args, self.path)
        self.kind = None
        name = _resolved_name(self, parser, self.args)
        if name is UNKNOWN:
            return
        if not isinstance(name, str):
            raise self.error('the argument must be the name of a resource '
                             'or a parameter, not %s' % type(name).__name__)
        self.kind = self._kind(parser, name)
        if self.kind == 'resource':
            #: the resource it names (functions.referenced_resource)
            self.resource_name = name

    def _kind(self, parser, name):
        scope = parser.scope
        if name == NO_VALUE:
            return 'none'
        if scope.has_resource(name):
            parser.reference(name, self.path)
            return 'resource'
        if scope.has_param(name):
            return 'param'
        if scope.is_disabled(name):
            scope.check_reference(name, self.path)   # says it is disabled
        raise fn._err('The specified reference "%s" is incorrect: no '
                      'resource or parameter of that name.' % name,
                      self.path)

    def resolve(self, ctx):
        name = fn.resolve(self.args, ctx)
        if fn.has_unknown(name):
            return UNKNOWN
        kind = self.kind
        if kind is None:   # a name known only now
            if name == NO_VALUE:
                kind = 'none'
            elif ctx.scope.has_resource(name):
                kind = 'resource'
            else:
                ctx.scope.check_param(name, self.path)
                kind = 'param'
        if kind == 'none':
            return fn.OMIT
        if kind == 'param':
            return ctx.scope.param_value(name)
        if ctx.data is None:
            return name
        return ctx.data.reference_id(name)


class ParamRef(Ref):
    """Ref in a condition: parameters only (no resource exists yet)."""

    def _kind(self, parser, name):
        if name != NO_VALUE and parser.scope.has_param(name):
            return 'param'
        raise fn._err('The specified reference "%s" is incorrect: a '
                      'condition can only refer to a parameter.' % name,
                      self.path)


class GetAtt(fn.GetAttr):
    """Fn::GetAtt: [resource, attribute] and nothing more."""

    def parse(self, parser, args):
        if not isinstance(args, list) or len(args) != 2:
            raise self.error('arguments must be a list [resource_name, '
                             'attribute]')
        super().parse(parser, args)


class Join(fn.ListJoin):
    """Fn::Join: [delimiter, [items]]. A number joins as its text (a Ref
    to a Number parameter in a user-data script)."""

    def result(self, args, ctx):
        if isinstance(args[1], list):
            args = [args[0], [str(x) if isinstance(x, (int, float)) and
                              not isinstance(x, bool) else x
                              for x in args[1]]]
        return super().result(args, ctx)


class Split(fn.StrSplit):
    """Fn::Split: [delimiter, string] -> the list of parts."""

    def parse(self, parser, args):
        if not isinstance(args, list) or len(args) != 2:
            raise self.error('arguments must be a list [delimiter, string],'
                             ' e.g. [",", "str1,str2"]')
        self.args = parser.parse(args, self.path)

    def result(self, args, ctx):
        if not isinstance(args[1], str):
            raise self.error('the string to split must be a string, not %s'
                             % fn._type(args[1]))
        return super().result(args, ctx)


class Replace(fn.StrReplace):
    """Fn::Replace: [{key: value, ...}, string]; longer keys first."""

    def parse(self, parser, args):
        if not isinstance(args, list) or len(args) != 2:
            raise self.error('arguments must be a list [{"$var": "value"}, '
                             '"text with $var"]')
        self.args = parser.parse({'params': args[0], 'template': args[1]},
                                 self.path)


class Base64(fn.Function):
    """Fn::Base64: the string as it is (the compute API encodes user
    data itself, as Heat's does)."""

    def result(self, value, ctx):
        if not isinstance(value, str):
            raise self.error('the argument must be a string, not %s'
                             % fn._type(value))
        return value


class GetAZs(fn.Function):
    """Fn::GetAZs: the availability zones (one: the simulator's and a
    default cloud's)."""

    def result(self, region, ctx):
        return ['nova']


_MEMBER = re.compile(r'^\.member\.([0-9]+)\.(.*)$')


class MemberListToMap(fn.Function):
    """Fn::MemberListToMap: [key_name, value_name, [".member.N.<key_name>=k",
    ".member.N.<value_name>=v", ...]] -> {k: v, ...} (the AWS query
    API's way of sending a map)."""

    def parse(self, parser, args):
        if not isinstance(args, list) or len(args) != 3:
            raise self.error('arguments must be a list [key_name, '
                             'value_name, [".member.0.<key_name>=key", '
                             '".member.0.<value_name>=value", ...]]')
        for i in (0, 1):
            if not isinstance(args[i], str):
                raise self.error('the key and value names must be strings')
        self.args = parser.parse(args, self.path)

    def result(self, args, ctx):
        keyname, valuename, members = args
        if not isinstance(members, list):
            raise self.error('the member list must be a list')
        entries = {}
        for item in members:
            if not isinstance(item, str):
                raise self.error('member list items must be strings')
            key, _, value = item.partition('=')
            m = _MEMBER.match(key)
            if m:
                entries.setdefault(int(m.group(1)), {})[m.group(2)] = value
        return {e[keyname]: e[valuename] for _, e in sorted(entries.items())
                if keyname in e and valuename in e}


class ResourceFacade(fn.ResourceFacade):
    """Fn::ResourceFacade: Metadata, DeletionPolicy or UpdatePolicy of the
    resource that owns this (nested) stack."""

    NAMES = {'Metadata': 'metadata', 'DeletionPolicy': 'deletion_policy',
             'UpdatePolicy': 'update_policy'}

    def parse(self, parser, args):
        if args not in self.NAMES:
            raise self.error('the argument must be one of %s' %
                             ', '.join(self.NAMES))
        self.args = self.NAMES[args]


class FindInMap(fn.Function):
    """Fn::FindInMap: [mapping, key, value] from the Mappings section."""

    def parse(self, parser, args):
        if not isinstance(args, list) or len(args) != 3:
            raise self.error('arguments must be a list [mapping, key, '
                             'value]')
        self.args = parser.parse(args, self.path)
        known = [_resolved_name(self, parser, a) for a in self.args]
        if not fn.has_unknown(known):
            self._find(parser.scope, known)

    def _find(self, scope, args):
        node, names = scope.mappings, ('mapping', 'key', 'value')
        for what, key in zip(names, args):
            try:
                found = isinstance(node, dict) and key in node
            except TypeError:
                found = False
            if not found:
                raise self.error('the %s "%s" is not in %s' % (
                    what, key, 'Mappings' if what == 'mapping' else
                    'the mapping'))
            node = node[key]
        return node

    def result(self, args, ctx):
        return self._find(ctx.scope, args)


#: the functions of each version key (Heat's): conditions and Fn::If
#: came with AWSTemplateFormatVersion only
_HEAT = {'Fn::FindInMap': FindInMap, 'Fn::GetAZs': GetAZs, 'Ref': Ref,
         'Fn::GetAtt': GetAtt, 'Fn::Select': fn.Select, 'Fn::Join': Join,
         'Fn::Split': Split, 'Fn::Replace': Replace, 'Fn::Base64': Base64,
         'Fn::MemberListToMap': MemberListToMap,
         'Fn::ResourceFacade': ResourceFacade}
TABLES = {'2012-12-12': _HEAT,
          '2010-09-09': dict(_HEAT, **{'Fn::If': fn.If})}

#: condition operators (by the name HOT's evaluation uses)
CONDITION_OPS = {'Fn::Equals': 'equals', 'Fn::Not': 'not',
                 'Fn::And': 'and', 'Fn::Or': 'or'}
#: functions giving the values a condition compares
CONDITION_TABLE = {'Ref': ParamRef, 'Fn::FindInMap': FindInMap}

#: every name a CloudFormation template knows as a function: one the
#: version does not allow is an error, not data
KNOWN = set(TABLES['2010-09-09']) | set(CONDITION_OPS)


def function_table(version):
    return dict(TABLES[version])

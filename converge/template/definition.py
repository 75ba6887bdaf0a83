"""The parsed, validated stack definition built from a Bundle."""

import fnmatch
import hashlib
import json

from converge import exception
from converge import memory
from converge.resources import absent
from converge.resources import base as res_base
from converge.resources import registry as default_registry
from converge.resources.properties import UNKNOWN
from converge.template import cfn_functions
from converge.template import cfn_parameters
from converge.template import formats
from converge.template import functions as fn
from converge.template import parameters as params_mod
from converge.template import patterns
from converge.template import providers

TOP_KEYS = ('heat_template_version', 'description', 'parameter_groups',
            'parameters', 'resources', 'outputs', 'conditions')
RES_KEYS = ('type', 'properties', 'metadata', 'depends_on',
            'deletion_policy', 'update_policy', 'description')
RES_KEYS_NEWTON = RES_KEYS + ('condition', 'external_id')
OUT_KEYS = ('value', 'description')
POLICIES = ('Delete', 'Retain', 'Snapshot')
PROVIDER_SUFFIXES = ('.yaml', '.yml', '.template')
#: how deep a condition may nest, counting each named condition it
#: reads (and theirs) as a level
MAX_CONDITION_DEPTH = 100


def _token(value):
    """A value JSON cannot hold, as the digest sees it: UNKNOWN (what
    another resource gives) and OMIT by name, anything else by text."""
    if value is UNKNOWN:
        return '<unknown>'
    if value is fn.OMIT:
        return '<omitted>'
    return '<%s %s>' % (type(value).__name__, value)


def _sha(payload):
    try:
        text = json.dumps(payload, sort_keys=True, default=_token)
    except TypeError:   # keys of several types (YAML's 1: and a:) as text
        text = json.dumps(_str_keys(payload), sort_keys=True,
                          default=_token)
    return hashlib.sha256(text.encode()).hexdigest()


def _str_keys(value):
    if isinstance(value, dict):
        return {str(k): _str_keys(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_str_keys(v) for v in value]
    return value


def _check_resource_name(name, section='resources'):
    """Heat's rule: no "/" (the name is a segment of the resource's
    URL, where "a/b" could never be reached); and a name that can be
    stored and shown: a non-empty string of at most 255 characters (the
    column), no control characters (a NUL is no text to PostgreSQL)."""
    if not isinstance(name, str):
        why = 'it must be a string, not %s' % type(name).__name__
    elif not name:
        why = 'it is empty'
    elif '/' in name:
        why = 'Resource name may not contain "/"'
    elif any(ord(c) < 32 or ord(c) == 127 for c in name):
        why = 'it contains a control character'
    elif len(name) > 255:
        why = 'it is longer than 255 characters'
    else:
        return
    raise _err('Invalid resource name %s: %s' % (
        json.dumps(name if isinstance(name, str) else str(name))[:300],
        why), [section])


def _err(msg, path=()):
    return exception.InvalidTemplate(msg, path=list(path))


def is_provider(type_name):
    """Whether a resource type names a template file (a provider)."""
    return (type_name.endswith(PROVIDER_SUFFIXES) or '/' in type_name or
            '://' in type_name)


class ResourceDefinition:
    """One enabled resource of the template."""

    def __init__(self, name, type, plugin, depends_on=(), requires=(),
                 deletion_policy='Delete', update_policy=None,
                 external_id=None, description='', template_type=None):
        self.name = name
        self.type = type
        self.template_type = template_type or type
        self.plugin = plugin
        self.depends_on = set(depends_on)
        self.requires = set(requires)
        self.deletion_policy = deletion_policy
        self.update_policy = update_policy or {}
        self.external_id = external_id
        self.description = description
        self._properties = {}
        self._metadata = {}
        self._attrs = set()
        #: the names it reads (get_attr, get_resource): its inputs; the
        #: rest of `requires` is order only (depends_on)
        self.reads = set()
        #: property -> the resource of the template it names by
        #: reference and whose definition it reads (plug-in's
        #: ``definition_properties``: a LaunchConfigurationName)
        self.sources = {}
        #: its snippet as written (StackDefinition.digest)
        self._raw = None
        self._digest = None

    def __repr__(self):
        return '<ResourceDefinition %s (%s)>' % (self.name, self.type)


#: the plug-ins' default implied_requires: none to add
_NO_IMPLIED = res_base.Resource.implied_requires.__func__


class _Known:
    """A resource's properties as known before anything is made, each
    resolved when first read (a server's user_data is not resolved to
    find its networks)."""

    def __init__(self, parsed, vctx):
        self._parsed = parsed if isinstance(parsed, dict) else {}
        self._vctx = vctx
        self._seen = {}

    def get(self, key, default=None):
        if key not in self._seen:
            value = self._parsed.get(key)
            try:
                value = fn.resolve(value, self._vctx)
            except exception.ConvergeError:
                value = None   # its own check reports it, in its place
            self._seen[key] = value
        value = self._seen[key]
        return default if value is None else value


class _Others:
    """The resources of a definition as implied_requires sees them:
    by plug-in class, each with its properties as known (_Known)."""

    def __init__(self, resources, vctx):
        self._resources = resources
        self._vctx = vctx
        self._props = {}
        self._of = {}

    def props(self, name):
        found = self._props.get(name)
        if found is None:
            found = self._props[name] = _Known(
                self._resources[name]._properties, self._vctx)
        return found

    def of(self, *classes):
        # asked once per resource of a type that has implied requires:
        # the names of each kind are found once
        names = self._of.get(classes)
        if names is None:
            names = self._of[classes] = [
                n for n, rd in self._resources.items()
                if isinstance(rd.plugin, type) and
                issubclass(rd.plugin, classes)]
        return [(n, self.props(n)) for n in names]


class _Output:
    def __init__(self, name, value, description):
        self.name = name
        self.value = value
        self.description = description


class StackDefinition:
    """A template, its environment and parameter values, validated."""

    def __init__(self, bundle, params=None, *, stack_name='stack',
                 stack_id='', project_id='converge',
                 registry=default_registry, validate_values=True,
                 limits=None, stored=False):
        self.bundle = bundle
        self.files = bundle.files
        self.stack_name = stack_name
        self.stack_id = stack_id
        #: a nested stack's view of the resource owning it
        #: (``resource_facade``); None for a stack of its own
        self.facade = bundle.facade
        self.project_id = project_id
        self.registry = registry
        self.validate_values = validate_values
        #: a template stored already, its properties checked when it was:
        #: a worker's parse of it does not check them again (half of
        #: a parse; every worker parses a traversal's template before
        #: its first unit, while the others wait)
        self.stored = stored
        self.limits = dict(limits or {})
        try:
            with memory.gc_paused():
                self._build(dict(params or {}))
        except exception.InvalidTemplate as e:
            raise self._locate(e)

    # -- errors --------------------------------------------------------
    def _locate(self, e):
        if e.filename:
            return e
        line = None
        if e.path:
            try:
                line = self.bundle.line_of(e.path)
            except Exception:
                line = None
        return e.locate(filename=self.bundle.template_path, line=line)

    # -- construction --------------------------------------------------
    def _build(self, params):
        tmpl = self.bundle.template
        if not isinstance(tmpl, dict):
            raise _err('The template is not a JSON object or YAML mapping.')
        self._check_version(tmpl)
        fmt = self.format
        if fmt.is_cfn:
            allowed = (fmt.version_key,) + tuple(
                fmt.section(k) for k in ('description', 'parameters',
                                         'mappings', 'resources', 'outputs'))
            if self.version == '2010-09-09':
                allowed += ('Conditions',)
        else:
            allowed = TOP_KEYS if self.version >= '2016-10-14' else \
                tuple(k for k in TOP_KEYS if k != 'conditions')
        for key in tmpl:
            if key not in allowed:
                raise _err('"%s" is not a valid template section; valid '
                           'sections: %s' % (key, ', '.join(allowed)),
                           [key])
        self.description = tmpl.get(fmt.section('description')) or ''
        if fmt.is_cfn:
            self.table = cfn_functions.function_table(self.version)
            self.cond_table = cfn_functions.CONDITION_TABLE
            self.known_functions = cfn_functions.KNOWN
            self.condition_ops = cfn_functions.CONDITION_OPS
        else:
            self.table = fn.function_table(self.version)
            self.cond_table = fn.condition_table(self.version)
            self.known_functions = fn.ALL_NAMES
            self.condition_ops = {k: k for k in fn.CONDITION_NAMES}
        self.version_label = fmt.label(self.version)
        self._build_mappings(tmpl)
        self._build_parameters(tmpl, params)
        self._build_groups(tmpl)
        self._build_conditions(tmpl)
        self._build_resources(tmpl)
        self._build_outputs(tmpl)
        ref_attrs = {}
        for owner_attrs in self._all_attr_refs:
            for res, attr in owner_attrs:
                s = ref_attrs.setdefault(res, set())
                if attr is None:
                    plugin = self._plugins.get(res)
                    if plugin is not None:
                        s.update(plugin.attribute_names())
                else:
                    s.add(attr)
        self._ref_attrs = ref_attrs
        del self._all_attr_refs

    def _check_version(self, tmpl):
        keys = [k for k in ('heat_template_version',) + tuple(
            formats.CFN_VERSIONS) if k in tmpl]
        if len(keys) > 1:
            raise _err('Ambiguous versions (%s): a template has one'
                       % ', '.join(keys), [keys[1]])
        self.format = formats.of(tmpl)
        if self.format.is_cfn:
            self.version = formats.cfn_version(tmpl, self.format.version_key)
            return
        if 'heat_template_version' not in tmpl:
            raise _err('Template format version not found: '
                       'heat_template_version, HeatTemplateFormatVersion or '
                       'AWSTemplateFormatVersion is missing')
        raw = tmpl['heat_template_version']
        v = str(raw)
        v = fn.ALIASES.get(v, v)
        if v not in fn.VERSIONS:
            valid = list(fn.VERSIONS) + sorted(fn.ALIASES)
            raise _err('The template version is invalid: '
                       'heat_template_version: %s. Valid versions are: %s'
                       % (raw, ', '.join(valid)), ['heat_template_version'])
        self.version = v

    def _build_mappings(self, tmpl):
        """CloudFormation's Mappings: {map: {key: {name: value}}}."""
        self.mappings = {}
        if not self.format.is_cfn:
            return
        maps = tmpl.get('Mappings') or {}
        if not isinstance(maps, dict):
            raise _err('"Mappings" must be a map', ['Mappings'])
        for name, m in maps.items():
            if not isinstance(m, dict) or not all(
                    isinstance(v, dict) for v in m.values()):
                raise _err('Mapping %s must be a map of maps' % name,
                           ['Mappings', name])
        self.mappings = maps

    def _build_parameters(self, tmpl, params):
        key = self.format.section('parameters')
        decl = tmpl.get(key) or {}
        if not isinstance(decl, dict):
            raise _err('"%s" must be a map' % key, [key])
        env = self.bundle.environment
        user = dict(env.get('parameters') or {})
        user.update(params)
        pdefaults = env.get('parameter_defaults') or {}
        for name in user:
            if name not in decl:
                raise _err('The Parameter (%s) was not defined in template.'
                           % name)
        self.schemas = {}
        self.parameters = {}
        self.hidden_parameters = set()
        self._provided = {}
        # one time limit for the patterns RE2 cannot run, all of them
        with patterns.budget():
            for name, schema in decl.items():
                self._build_parameter(name, schema, user, pdefaults)
        if self.format.is_cfn:
            self._pseudo = {
                'AWS::StackName': self.stack_name,
                # Heat's form: an ARN naming the project and the stack
                'AWS::StackId': 'arn:openstack:heat::%s:stacks/%s/%s' % (
                    self.project_id, self.stack_name, self.stack_id),
                'AWS::Region': 'RegionOne',
                'AWS::AccountId': self.project_id}
        else:
            self._pseudo = {'OS::stack_name': self.stack_name,
                            'OS::stack_id': self.stack_id,
                            'OS::project_id': self.project_id,
                            'OS::region': 'RegionOne'}

    def _build_parameter(self, name, schema, user, pdefaults):
        path = [self.format.section('parameters'), name]
        if self.format.is_cfn:
            p = cfn_parameters.Parameter(name, schema, path)
        else:
            p = params_mod.Parameter(name, schema, self.version, path)
        self.schemas[name] = p
        if p.hidden:
            self.hidden_parameters.add(name)
        if name in user:
            value = p.coerce(user[name], path)
            self._provided[name] = value
        elif name in pdefaults:
            value = p.coerce(pdefaults[name], path)
            self._provided[name] = value
        elif p.has_default and p.default is not None:
            value = p.coerce(p.default, path + [
                'Default' if self.format.is_cfn else 'default'])
        elif self.validate_values:
            raise _err('The Parameter (%s) was not provided.' % name,
                       path)
        else:
            value = UNKNOWN
        self.parameters[name] = value

    def _build_groups(self, tmpl):
        groups = None if self.format.is_cfn else tmpl.get('parameter_groups')
        self.parameter_groups = groups or []
        if groups is None:
            return
        if not isinstance(groups, list):
            raise _err('parameter_groups must be a list',
                       ['parameter_groups'])
        seen = {}
        for i, g in enumerate(groups):
            path = ['parameter_groups', i]
            if not isinstance(g, dict):
                raise _err('each parameter group must be a map', path)
            names = g.get('parameters')
            if not isinstance(names, list):
                raise _err('Parameters must be provided for each parameter '
                           'group.', path)
            for name in names:
                if not isinstance(name, str) or name not in self.schemas:
                    raise _err('The grouped parameter %s does not reference'
                               ' a valid parameter.' % name,
                               path + ['parameters'])
                if name in seen:
                    raise _err('The %s parameter must be assigned to one '
                               'parameter group only.' % name,
                               path + ['parameters'])
                seen[name] = i

    # -- scope interface used by functions ------------------------------
    def check_param(self, name, path):
        # Heat's words for reading a parameter the template lacks
        if name not in self.parameters and name not in self._pseudo:
            raise _err('The Parameter (%s) was not provided.' % name, path)

    def param_value(self, name):
        if name in self.parameters:
            return self.parameters[name]
        return self._pseudo[name]

    def has_param(self, name):
        return name in self.parameters or name in self._pseudo

    def has_resource(self, name):
        return name in self._plugins

    def is_disabled(self, name):
        return name in self._disabled

    def check_reference(self, name, path):
        plugin = self._plugins.get(name)
        if plugin is not None:
            return plugin
        if name in self._disabled:
            raise _err('The specified reference "%s" is incorrect: that '
                       'resource is disabled by its condition.' % name, path)
        raise _err('The specified reference "%s" is incorrect: no such '
                   'resource.' % name, path)

    # -- conditions ----------------------------------------------------
    def _build_conditions(self, tmpl):
        key = self._conditions_key = self.format.section('conditions')
        conds = tmpl.get(key) or {}
        if not isinstance(conds, dict):
            raise _err('"%s" must be a map' % key, [key])
        self._cond_defs = conds
        self._cond_cache = {}
        self._cond_busy = set()
        self._cond_depth = 0
        for name in conds:
            self._named_condition(name, (key, name))

    def condition_value(self, expr, path):
        """Decide a condition (name, bool or expression); unknown → True."""
        return self._eval_cond(expr, tuple(path)) is not False

    def conditions(self):
        """name -> bool (unknown counts as True)."""
        return {k: v is not False for k, v in self._cond_cache.items()}

    def _named_condition(self, name, path):
        if not isinstance(name, str):
            raise _err('Invalid condition %r' % (name,), path)
        if name in self._cond_cache:
            return self._cond_cache[name]
        if name not in self._cond_defs:
            raise _err('Invalid condition "%s"' % name, path)
        if name in self._cond_busy:
            raise _err('Circular definition for condition "%s"' % name,
                       [self._conditions_key, name])
        self._cond_busy.add(name)
        try:
            expr = self._cond_defs[name]
            value = self._eval_cond(expr, (self._conditions_key, name),
                                    allow_name=False)
        finally:
            self._cond_busy.discard(name)
        self._cond_cache[name] = value
        return value

    def _eval_cond(self, expr, path, allow_name=True):
        # each level is Python's recursion: conditions naming conditions
        # (a chain of a few hundred, a few KB) were a RecursionError
        self._cond_depth += 1
        try:
            if self._cond_depth > MAX_CONDITION_DEPTH:
                raise _err('Conditions nest more than %d deep, counting '
                           'the conditions they name' % MAX_CONDITION_DEPTH,
                           path)
            return self._condition(expr, path, allow_name)
        finally:
            self._cond_depth -= 1

    def _condition(self, expr, path, allow_name):
        if isinstance(expr, bool):
            return expr
        if isinstance(expr, str):
            if allow_name:
                return self._named_condition(expr, path)
            raise _err('Invalid condition definition "%s": a condition must'
                       ' be a boolean or a condition function' % expr, path)
        if isinstance(expr, dict) and len(expr) == 1:
            (name, arg), = expr.items()
            p = path + (name,)
            k = self.condition_ops.get(name) if isinstance(name, str) \
                else None
            if name == 'Condition' and self.format.is_cfn:
                # {"Condition": name} inside Fn::And, Fn::Or, Fn::Not
                return self._named_condition(arg, p)
            if k == 'not' and self.format.is_cfn:
                if not isinstance(arg, list) or len(arg) != 1:
                    raise _err('Fn::Not: arguments must be a list '
                               '[condition]', p)
                arg, p = arg[0], p + (0,)
            if k == 'equals':
                if not isinstance(arg, list) or len(arg) != 2:
                    raise _err('%s: arguments must be a list of 2 '
                               'values' % name, p)
                a = self._cond_arg(arg[0], p + (0,))
                b = self._cond_arg(arg[1], p + (1,))
                if fn.has_unknown(a) or fn.has_unknown(b):
                    return UNKNOWN
                return a == b
            if k == 'not':
                v = self._eval_cond(arg, p)
                return UNKNOWN if v is UNKNOWN else not v
            if k in ('and', 'or'):
                if not isinstance(arg, list) or len(arg) < 2:
                    raise _err('%s: arguments must be a list of at least 2 '
                               'conditions' % name, p)
                unknown = False
                for i, item in enumerate(arg):
                    v = self._eval_cond(item, p + (i,))
                    if v is UNKNOWN:
                        unknown = True
                    elif k == 'and' and not v:
                        return False
                    elif k == 'or' and v:
                        return True
                return UNKNOWN if unknown else (k == 'and')
            if name in self.cond_table:
                v = self._cond_arg(expr, path)
                if v is UNKNOWN:
                    return UNKNOWN
                if not isinstance(v, bool):
                    raise _err('Invalid condition: %s returned %r, not a '
                               'boolean' % (name, v), p)
                return v
            if name in self.known_functions:
                raise _err('"%s" is not allowed in conditions' % name, p)
        raise _err('Invalid condition definition: expected a condition name'
                   ', a boolean or a condition function', path)

    def _cond_arg(self, value, path):
        parser = fn.Parser(self, self.cond_table, conditions=True)
        return fn.resolve(parser.parse(value, path), fn.Context(self))

    # -- resources -----------------------------------------------------
    def _overrides(self, name):
        """The registry and resource `name`'s own entries in it."""
        reg = self.bundle.environment.get('resource_registry') or {}
        per = reg.get('resources') or {}
        if isinstance(per, dict):
            if isinstance(per.get(name), dict):
                return reg, per[name]
            for pat, m in per.items():
                if isinstance(m, dict) and '*' in pat and \
                        fnmatch.fnmatchcase(name, pat):
                    return reg, m
        return reg, {}

    def _facade(self, name, type_name):
        """The type a provider template that resource `name`'s own
        registry entry maps its type to stands for (Heat's facade): the
        registry's entry for the type, else the built-in type; None when
        the resource has no entry of its own. (A type the registry maps
        for every resource is not held to the built-in's interface:
        Heat's instance group members map AWS::EC2::Instance to a
        template with one of its attributes.)"""
        reg, overrides = self._overrides(name)
        if not isinstance(overrides.get(type_name), str):
            return None
        facade = reg.get(type_name)
        facade = facade if isinstance(facade, str) else type_name
        if not is_provider(facade):
            return self.registry.get(facade)
        try:
            return providers.provider_class(self.bundle.file_key(facade),
                                            self.files, ())
        except exception.InvalidTemplate:
            return None

    def _map_type(self, name, type_name, path):
        reg, overrides = self._overrides(name)
        t = type_name
        seen = set()
        while True:
            if is_provider(t):
                return t
            if t in seen:
                raise _err('resource_registry maps type %s in a loop' %
                           type_name, path)
            seen.add(t)
            target = overrides.get(t)
            if not isinstance(target, str):
                target = reg.get(t) if t != 'resources' else None
            if not isinstance(target, str):
                target = None
                best = -1
                for key, val in reg.items():
                    if key.endswith('*') and isinstance(val, str) and \
                            t.startswith(key[:-1]) and len(key) > best:
                        best = len(key)
                        target = val
                        if val.endswith('*'):
                            target = val[:-1] + t[len(key) - 1:]
            if target is None or target == t:
                return t
            t = target

    def _build_resources(self, tmpl):
        fmt = self.format
        section = fmt.section('resources')
        res = tmpl.get(section) or {}
        if not isinstance(res, dict):
            raise _err('"%s" must be a map' % section, [section])
        maximum = self.limits.get('max_resources_per_stack')
        if maximum is not None and maximum >= 0 and len(res) > maximum:
            raise _err('You have reached the maximum resources per stack, '
                       '(%d). This template has %d resources.' % (
                           maximum, len(res)), [section])
        if fmt.is_cfn:
            keys = tuple(fmt.field(k) for k in RES_KEYS)
            if self.version == '2010-09-09':
                keys += (fmt.field('condition'),)
        else:
            keys = RES_KEYS_NEWTON if self.version >= '2016-10-14' \
                else RES_KEYS
        F = fmt.field
        self._res_fields = F
        self._plugins = {}
        self._disabled = set()
        types = {}
        # pass 1: shapes, conditions, types
        for name, r in res.items():
            _check_resource_name(name, section)
            path = [section, name]
            if not isinstance(r, dict):
                raise _err('Resource %s must be a map' % name, path)
            for k in r:
                if k not in keys:
                    raise _err('"%s" is not a valid keyword inside a '
                               'resource definition; valid: %s' % (
                                   k, ', '.join(keys)), path + [k])
            if F('type') not in r:
                raise _err('Resource %s is missing "%s"' % (name, F('type')),
                           path)
            t = r[F('type')]
            if not isinstance(t, str):
                raise _err('Resource %s: "%s" must be a string' % (
                    name, F('type')), path + [F('type')])
            if F('condition') in r and not self.condition_value(
                    r[F('condition')], path + [F('condition')]):
                self._disabled.add(name)
                continue
            mapped = self._map_type(name, t, path + [F('type')])
            if is_provider(mapped):
                plugin = providers.with_defaults(
                    providers.provider_class(self.bundle.file_key(mapped),
                                             self.files, path + [F('type')]),
                    self.bundle.environment.get('parameter_defaults'))
                facade = None if is_provider(t) else self._facade(name, t)
                if facade is not None:
                    plugin = providers.facaded(plugin, facade, t)
            else:
                plugin = self.registry.get(mapped)
            if plugin is None:
                # a type of a service converge does not drive: Heat's
                # answer on a cloud without that service
                absent_why = absent.unavailable(mapped)
                if absent_why:
                    raise _err(absent_why, path + [F('type')])
                extra = '' if mapped == t else ' (mapped from %s)' % t
                raise _err('Unknown resource type "%s"%s for resource %s'
                           % (mapped, extra, name), path + [F('type')])
            self._plugins[name] = plugin
            types[name] = mapped
        # pass 2: parse everything each resource uses
        self.resources = {}
        self._all_attr_refs = []
        vctx = fn.Context(self)
        later = []
        for name, plugin in self._plugins.items():
            r = res[name]
            path = (section, name)
            refs, attrs = set(), set()
            self._all_attr_refs.append(attrs)
            parser = fn.Parser(self, self.table, refs, attrs)
            depends = self._depends_on(r.get(F('depends_on')), path)
            policy = self._deletion_policy(parser, r, path, vctx)
            update_policy = plugin.validate_update_policy(
                self._resolved_map(parser, r, F('update_policy'), path,
                                   vctx),
                path + (F('update_policy'),))
            external_id = None
            if F('external_id') and r.get('external_id') is not None:
                external_id = fn.resolve(
                    parser.parse(r['external_id'], path + ('external_id',)),
                    vctx)
                if external_id is UNKNOWN or external_id is fn.OMIT:
                    external_id = None
                elif not isinstance(external_id, str):
                    raise _err('external_id must be a string',
                               path + ('external_id',))
            desc = r.get(F('description')) or ''
            props = self._parse_map(parser, r, F('properties'), path)
            meta = self._parse_map(parser, r, F('metadata'), path)
            rd = ResourceDefinition(
                name, types[name], plugin, depends_on=depends,
                requires=refs | depends, deletion_policy=policy,
                update_policy=update_policy, external_id=external_id,
                description=desc, template_type=r[F('type')])
            rd._properties = props
            rd._metadata = meta
            rd.reads = set(refs)
            rd._raw = r
            rd.sources = self._sources(plugin, props, path + (
                F('properties'),))
            self.resources[name] = rd
            # validate properties with references unknown; an external
            # resource is adopted as it is, so its properties are not used
            # (one reading another's definition once all are parsed)
            if external_id is None and not self.stored:
                if rd.sources:
                    later.append(rd)
                else:
                    self._check_props(rd, self._known(props, vctx), vctx)
            mvalues = fn.resolve(meta, vctx)
            if mvalues is not UNKNOWN and mvalues is not fn.OMIT and \
                    mvalues is not None and not isinstance(mvalues, dict):
                raise _err('%s must be a map' % F('metadata'),
                           path + (F('metadata'),))

        for rd in later:
            self._check_props(rd, self._known(rd._properties, vctx), vctx)
        self._add_implied(vctx)

    def _add_implied(self, vctx):
        """Order each resource after those its plug-in says it must
        follow though it names none of them (implied_requires), unless
        that would close a cycle (the other follows it already)."""
        others = _Others(self.resources, vctx)
        for name, rd in self.resources.items():
            hook = getattr(rd.plugin, 'implied_requires', None)
            if hook is None or getattr(hook, '__func__', None) is \
                    _NO_IMPLIED:
                continue
            props = others.props(name)
            for other in hook(props, others) or ():
                if other != name and other in self.resources and \
                        other not in rd.requires and \
                        not self._reaches(other, name):
                    rd.requires.add(other)
                    rd.depends_on.add(other)

    def _reaches(self, start, goal):
        seen, todo = set(), [start]
        while todo:
            n = todo.pop()
            if n == goal:
                return True
            if n in seen:
                continue
            seen.add(n)
            todo.extend(self.resources[n].requires if n in self.resources
                        else ())
        return False

    def _known(self, props, vctx):
        """A resource's property values as known before anything is
        made; a function failing in one is Heat's "Property error",
        naming the property."""
        try:
            return fn.resolve(props, vctx)
        except exception.OutputError:
            raise
        except exception.InvalidTemplate as e:
            if e.filename or len(e.path) < 4:
                raise
            # the path into the value, up to the function that failed
            where = list(e.path)
            for i in range(3, len(where)):
                if where[i] in self.known_functions:
                    where = where[:i]
                    break
            raise exception.PropertyError(
                e.reason, e.path,
                where='.'.join(str(p) for p in where)) from None

    @staticmethod
    def _sources(plugin, props, path):
        """The plug-in's definition_properties: each must name another
        resource of the template by reference (Ref, get_resource)."""
        out = {}
        for key in getattr(plugin, 'definition_properties', ()):
            if key not in props:
                continue
            name = fn.referenced_resource(props[key])
            if name is None:
                raise _err('%s must be a reference (Ref) to a resource of '
                           'this template' % key, path + (key,))
            out[key] = name
        return out

    def _with_sources(self, rd, values, ctx):
        """`values` with each definition property's reference given
        with what it names: {reference, name, properties, metadata}."""
        if not rd.sources or not isinstance(values, dict):
            return values
        values = dict(values)
        for key, name in rd.sources.items():
            src = self.resources.get(name)
            if src is None or key not in values:
                continue
            props = fn.resolve(src._properties, ctx)
            meta = fn.resolve(src._metadata, ctx)
            values[key] = {'reference': values[key], 'name': name,
                           'type': src.type,
                           'properties': props if isinstance(props, dict)
                           else {},
                           'metadata': meta if isinstance(meta, dict)
                           else {}}
        return values

    def _check_props(self, rd, values, ctx):
        if values is fn.OMIT or values is None:
            values = {}
        if values is UNKNOWN:
            return {}
        values = self._with_sources(rd, values, ctx)
        F = self._res_fields
        path = [self.format.section('resources'), rd.name, F('properties')]
        if not isinstance(values, dict):
            raise _err('%s must be a map' % F('properties'), path)
        return rd.plugin.validate_properties(values, path=path)

    def _parse_map(self, parser, r, key, path):
        if r.get(key) is None:
            return {}
        value = r[key]
        if not isinstance(value, dict):
            raise _err('Resource %s: "%s" must be a map' % (path[1], key),
                       path + (key,))
        return parser.parse(value, path + (key,))

    def _resolved_map(self, parser, r, key, path, vctx):
        parsed = self._parse_map(parser, r, key, path)
        value = fn.resolve(parsed, vctx)
        if value is fn.OMIT or value is None:
            return {}
        if value is not UNKNOWN and not isinstance(value, dict):
            raise _err('%s must be a map' % key, path + (key,))
        return value

    def _depends_on(self, deps, path):
        if deps is None:
            return set()
        p = path + (self._res_fields('depends_on'),)
        if isinstance(deps, str):
            deps = [deps]
        if not isinstance(deps, list):
            raise _err('depends_on must be a resource name or a list of '
                       'resource names', p)
        out = set()
        for i, d in enumerate(deps):
            if not isinstance(d, str):
                raise _err('depends_on must be a resource name or a list of'
                           ' resource names', p + (i,))
            if d in self._disabled:
                # Heat allows it: the order holds only when the resource
                # exists (TripleO's common/post.yaml orders each role's
                # post-config after roles a condition may leave out)
                continue
            self.check_reference(d, p + (i,) if len(deps) > 1 else p)
            out.add(d)
        return out

    def _deletion_policy(self, parser, r, path, vctx):
        key = self._res_fields('deletion_policy')
        if key not in r:
            return 'Delete'
        p = path + (key,)
        value = fn.resolve(parser.parse(r[key], p), vctx)
        if value is UNKNOWN or value is None or value is fn.OMIT:
            return 'Delete'
        if isinstance(value, str):
            if value in POLICIES:
                return value
            if self.version >= '2016-10-14' and \
                    value.capitalize() in POLICIES and value.islower():
                return value.capitalize()
        raise _err('Invalid deletion policy "%s"; valid policies: %s' % (
            value, ', '.join(POLICIES)), p)

    # -- outputs -------------------------------------------------------
    def _build_outputs(self, tmpl):
        fmt = self.format
        section = fmt.section('outputs')
        outs = tmpl.get(section) or {}
        if not isinstance(outs, dict):
            raise _err('"%s" must be a map' % section, [section])
        F = fmt.field
        keys = tuple(F(k) for k in OUT_KEYS)
        if self.version >= '2016-10-14' or self.version == '2010-09-09':
            keys += (F('condition'),)
        self.outputs = {}
        for name, o in outs.items():
            path = (section, name)
            if not isinstance(o, dict):
                raise _err('Output %s must be a map' % name, path)
            for k in o:
                if k not in keys:
                    raise _err('"%s" is not a valid keyword inside an output'
                               ' definition' % k, path + (k,))
            if F('value') not in o:
                raise _err('Each output definition must contain a %s '
                           'key.' % F('value'), path)
            # as Heat words an output described by nothing
            desc = o.get(F('description'))
            desc = 'No description given' if desc is None else str(desc)
            if F('condition') in o and not self.condition_value(
                    o[F('condition')], path + (F('condition'),)):
                # listed with no value, as Heat lists it; its value is
                # not parsed (it may name resources the condition left
                # out)
                self.outputs[name] = _Output(name, None, desc)
                continue
            attrs = set()
            self._all_attr_refs.append(attrs)
            parser = fn.Parser(self, self.table, set(), attrs)
            value = parser.parse(o[F('value')], path + (F('value'),))
            self.outputs[name] = _Output(name, value, desc)

    # -- public API ----------------------------------------------------
    def dependencies(self):
        """name -> the names it requires (read-only: built once)."""
        found = self.__dict__.get('_deps')
        if found is None:
            found = self._deps = {n: frozenset(rd.requires)
                                  for n, rd in self.resources.items()}
        return found

    def digest(self, name):
        """What the resource is made of in this definition, digested: its
        snippet, its properties and metadata as far as they are known
        before anything is created (parameters, conditions, files read;
        what it reads of other resources stays a reference: fn.shape), its
        type as mapped, and for a type built from files (a nested stack) every
        file and the environment. A row that last converged to the same
        digest, and reads nothing that changes, need not be visited by an
        update (engine/changes.py)."""
        rd = self._resource(name)
        if rd._digest is None:
            vctx = fn.Context(self)
            # the snippet's other keys as written (depends_on, policies,
            # condition, ...): its properties and metadata are in their
            # shapes
            F = self.format.field
            rest = {k: v for k, v in rd._raw.items()
                    if k not in (F('properties'), F('metadata'))}
            payload = [self.version, rd.type, rd.template_type, rest,
                       fn.shape(rd._properties, vctx),
                       fn.shape(rd._metadata, vctx),
                       # as resolved (they may read parameters)
                       rd.deletion_policy, rd.update_policy, rd.external_id]
            if rd.plugin.built_from_files:
                payload.append(self._files_digest())
                # the nested resources whose attributes the template
                # reads (resource.NAME.X): a new one is copied in by an
                # update visiting the resource
                members = sorted(a for a in self._ref_attrs.get(name, ())
                                 if a.startswith('resource.'))
                if members:
                    payload.append(members)
            # what it reads of another's definition (a launch
            # configuration's properties) is its own
            payload += [self.digest(n) for n in sorted(
                set(rd.sources.values())) if n != name]
            rd._digest = _sha(payload)
        return rd._digest

    def _files_digest(self):
        found = self.__dict__.get('_files_sha')
        if found is None:
            found = self._files_sha = _sha(
                [self.files, self.bundle.environment])
        return found

    def _resource(self, name):
        rd = self.resources.get(name)
        if rd is None:
            raise exception.ResourceNotFound(self.stack_name, name)
        return rd

    def resolve_properties(self, name, data):
        rd = self._resource(name)
        try:
            ctx = fn.Context(self, data)
            values = fn.resolve(rd._properties, ctx)
            return self._check_props(rd, values, ctx)
        except exception.InvalidTemplate as e:
            raise self._locate(e)

    def known_properties(self, name):
        """The resource's property values known before anything is
        created (those that read another resource are UNKNOWN)."""
        rd = self._resource(name)
        try:
            values = fn.resolve(rd._properties, fn.Context(self))
        except exception.InvalidTemplate as e:
            raise self._locate(e)
        return values if isinstance(values, dict) else {}

    def unmade_properties(self, name):
        """known_properties, with what reads another resource UNKNOWN
        (a get_resource too, which known_properties gives as the
        resource's name): what can be checked against the cloud before
        anything is made."""
        rd = self._resource(name)
        try:
            values = fn.resolve(rd._properties, fn.Context(self, _UNMADE))
        except exception.InvalidTemplate as e:
            raise self._locate(e)
        return values if isinstance(values, dict) else {}

    def resolve_metadata(self, name, data):
        rd = self._resource(name)
        try:
            value = fn.resolve(rd._metadata, fn.Context(self, data))
        except exception.InvalidTemplate as e:
            raise self._locate(e)
        if value is fn.OMIT or value is None or value is UNKNOWN:
            return {}
        return value

    def resolve_outputs(self, data):
        out = {}
        ctx = fn.Context(self, data)
        for name, o in self.outputs.items():
            try:
                value = fn.resolve(o.value, ctx)
                if value is fn.OMIT or value is UNKNOWN:
                    value = None
                out[name] = {'value': value, 'description': o.description}
            except Exception as e:
                reason = str(e)
                if isinstance(e, exception.InvalidTemplate):
                    reason = e.reason
                    e = self._locate(e)
                # `reason`: as a parent reading it says it (Heat's)
                out[name] = {'error': str(e), 'reason': reason,
                             'description': o.description}
        return out

    def referenced_attributes(self, name):
        return set(self._ref_attrs.get(name, ()))

    def validate_info(self):
        info = {'Description': self.description or 'No description',
                'Parameters': {}}
        for name, p in self.schemas.items():
            d = p.info()
            if name in self._provided:
                d['Value'] = '******' if p.hidden else self._provided[name]
            info['Parameters'][name] = d
        if self.parameter_groups:
            info['ParameterGroups'] = self.parameter_groups
        return info


class _Unmade:
    """Run-time data before anything is created: every reference and
    attribute unknown."""

    def reference_id(self, name):
        return UNKNOWN

    def attributes(self, name):
        return UNKNOWN


_UNMADE = _Unmade()

"""Provider templates: a template file used as a resource type.

The resource's properties are the file's parameters (typed as Heat types
them, required when the parameter has no default) and its attributes are
the file's outputs. One class per file content, built here from the
files map the client sent (the engine never reads the disk) and kept
while the process lives: a TripleO overcloud uses a few hundred files
thousands of times.
"""

import copy
import functools
import hashlib

from converge import exception
from converge.resources import nested
from converge.resources import properties as p
from converge.template import cfn_parameters
from converge.template import formats
from converge.template import loader

#: Heat's parameter types -> the property schema types a provider's
#: resource checks its values against (the child's parameters check
#: them fully again: a comma_delimited_list may be a list or a string)
_TYPES = {'string': p.STRING, 'number': p.NUMBER, 'boolean': p.BOOLEAN,
          'json': p.ANY, 'comma_delimited_list': p.ANY}


def provider_class(type_name, files, path):
    """The plug-in class of provider file `type_name`: its text from
    `files` (the key as the template or the environment names it)."""
    text = files.get(type_name)
    if text is None:
        raise exception.InvalidTemplate(
            'Could not fetch provider template "%s": it is not in the '
            'files the client sent (the CLI sends every file a template '
            'or environment names)' % type_name, path=list(path))
    return _build(type_name, hashlib.sha256(text.encode()).hexdigest(),
                  text)


@functools.lru_cache(maxsize=1024)
def _build(type_name, digest, text):
    tmpl = loader.parse_text(text, type_name)
    if not isinstance(tmpl, dict):
        raise exception.InvalidTemplate(
            'The provider template is not a YAML mapping',
            filename=type_name)
    fmt = formats.of(tmpl)
    section = fmt.section('parameters')
    params = tmpl.get(section) or {}
    if not isinstance(params, dict):
        raise exception.InvalidTemplate('"%s" must be a map' % section,
                                        path=[section],
                                        filename=type_name)
    # CloudFormation's keys, or HOT's
    type_key, desc_key, default_key = ('Type', 'Description', 'Default') \
        if fmt.is_cfn else ('type', 'description', 'default')
    schema = {}
    for name, decl in params.items():
        if not isinstance(decl, dict):
            continue   # the child's own validation names it
        ptype = decl.get(type_key)
        if fmt.is_cfn:
            ptype = cfn_parameters.TYPES.get(ptype, 'string')
        schema[name] = p.Schema(
            _TYPES.get(ptype, p.ANY), decl.get(desc_key) or '',
            required=default_key not in decl, update_allowed=True)
    return type('Provider', (nested.TemplateResource,), {
        'properties_schema': schema,
        'allow_unknown_properties': False,
        'provider': type_name,
        'provider_template': tmpl,
        '__doc__': 'The resource type of provider template %s' % type_name,
    })


#: a parameter type -> the property type Heat gives it, as a facade's
#: property type is compared with it
_HEAT_PARAM_TYPES = {'string': 'String', 'number': 'Number',
                     'comma_delimited_list': 'List', 'json': 'Map',
                     'boolean': 'Boolean'}
#: a plug-in's property type as Heat compares it with a parameter's
#: (an integer takes a number parameter); ANY matches anything
_HEAT_PROPERTY_TYPES = {p.STRING: 'String', p.INTEGER: 'Number',
                        p.NUMBER: 'Number', p.BOOLEAN: 'Boolean',
                        p.MAP: 'Map', p.LIST: 'List'}


def _property_types(cls):
    """name -> (required, Heat's type or None) of a plug-in's
    properties: a provider's from its template's parameters."""
    tmpl = getattr(cls, 'provider_template', None)
    if tmpl is None:
        return {n: (s.required, _HEAT_PROPERTY_TYPES.get(s.type))
                for n, s in cls.properties_schema.items()}
    fmt = formats.of(tmpl)
    params = formats.section(tmpl, 'parameters') or {}
    type_key = 'Type' if fmt.is_cfn else 'type'
    out = {}
    for name, schema in cls.properties_schema.items():
        ptype = params[name].get(type_key)
        if fmt.is_cfn:
            ptype = cfn_parameters.TYPES.get(ptype, 'string')
        out[name] = (schema.required, _HEAT_PARAM_TYPES.get(ptype))
    return out


def facade_error(provider, facade, type_name):
    """Heat's check of a provider template standing for another type
    (its facade: the registry's entry for the type that this resource's
    own entry overrides, or the built-in type itself), as Heat words
    what fails; None when the provider can stand for it."""
    mine, theirs = _property_types(provider), _property_types(facade)
    for name, (required, ftype) in theirs.items():
        if required and name not in mine:
            return ('Required property %s for facade %s missing in '
                    'provider' % (name, type_name))
        ptype = mine.get(name, (None, None))[1]
        if name in mine and ftype and ptype and ftype != ptype:
            return ('Property %s type mismatch between facade %s (%s) '
                    'and provider (%s)' % (name, type_name, ftype, ptype))
    for name, (required, _) in mine.items():
        if required and name not in theirs:
            return ('Provider requires property %s unknown in facade %s'
                    % (name, type_name))
    wanted = facade.attribute_names() - {'OS::stack_id'}
    have = provider.attribute_names()
    for name in sorted(wanted):
        if name not in have:
            return ('Attribute %s for facade %s missing in provider'
                    % (name, type_name))
    return None


@functools.lru_cache(maxsize=1024)
def facaded(provider, facade, type_name):
    """`provider`, or (when it cannot stand for `facade`, Heat's check)
    its subclass whose create and update fail saying why."""
    error = facade_error(provider, facade, type_name)
    if error is None:
        return provider
    return type('Provider', (provider,), {'facade_error': error})


@functools.lru_cache(maxsize=1024)
def defaulted(provider, names):
    """`provider` with the properties `names` (parameters without a
    default, given one by the environment's parameter_defaults) no
    longer required, as Heat builds a provider's schema: the nested
    stack, not given them, takes the defaults."""
    schema = dict(provider.properties_schema)
    for name in names:
        schema[name] = copy.copy(schema[name])
        schema[name].required = False
    return type('Provider', (provider,), {'properties_schema': schema})


def with_defaults(provider, parameter_defaults):
    """`provider`, or its `defaulted` subclass for the parameter
    defaults of the environment (a map) that meet a required one."""
    if not isinstance(parameter_defaults, dict) or not parameter_defaults:
        return provider
    names = frozenset(n for n, s in provider.properties_schema.items()
                      if s.required and n in parameter_defaults)
    return defaulted(provider, names) if names else provider

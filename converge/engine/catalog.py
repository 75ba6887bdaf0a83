"""What the engine knows how to do, as Heat's API tells it: resource
types (each plug-in's schema), template versions and their functions.
Read from the plug-ins and the function tables, never written."""

import fnmatch

from converge import exception
from converge.resources import registry
from converge.template import cfn_functions
from converge.template import formats
from converge.template import functions


def _description(cls):
    doc = (cls.__doc__ or '').strip()
    return doc.split('\n\n')[0].replace('\n', ' ') if doc else ''


def hidden(cls):
    """Whether Heat hides the type (support status HIDDEN: kept running
    for the templates that have it, left out of the type list, its
    schema refused)."""
    return getattr(cls, 'support_status', None) == 'HIDDEN'


def resource_types(name=None, with_description=False, usable=None):
    """Names of the registered types (`name`: a glob or a part of one),
    but for hidden ones and (`usable`, a function of the plug-in class)
    those the cloud cannot serve."""
    names = [n for n in registry.names() if not hidden(registry.get(n))]
    if name:
        pattern = name if any(c in name for c in '*?[') else '*%s*' % name
        names = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
    if usable is not None:
        names = [n for n in names if usable(registry.get(n))]
    if with_description:
        return [{'resource_type': n,
                 'description': _description(registry.get(n))}
                for n in names]
    return names


def _cls(type_name):
    cls = registry.get(type_name)
    if cls is None:
        raise exception.NotFound('The Resource Type (%s) could not be '
                                 'found.' % type_name)
    return cls


def _prop(schema):
    out = {'type': schema.type, 'description': schema.description,
           'required': bool(schema.required),
           'update_allowed': bool(schema.update_allowed),
           'immutable': bool(schema.immutable)}
    if schema.default is not None:
        out['default'] = schema.default
    constraints = []
    if schema.allowed_values:
        constraints.append({'allowed_values': list(schema.allowed_values)})
    if schema.min is not None or schema.max is not None:
        constraints.append({'range': {k: v for k, v in (
            ('min', schema.min), ('max', schema.max)) if v is not None}})
    if schema.min_length is not None or schema.max_length is not None:
        constraints.append({'length': {k: v for k, v in (
            ('min', schema.min_length), ('max', schema.max_length))
            if v is not None}})
    if schema.pattern:
        constraints.append({'allowed_pattern': schema.pattern})
    if getattr(schema, 'constraint', None):
        constraints.append({'custom_constraint': schema.constraint})
    if constraints:
        out['constraints'] = constraints
    if isinstance(schema.schema, dict):
        out['schema'] = {k: _prop(v) for k, v in schema.schema.items()
                         if hasattr(v, 'type')}
    elif schema.schema is not None and hasattr(schema.schema, 'type'):
        out['schema'] = {'*': _prop(schema.schema)}
    return out


def resource_type(type_name):
    """Heat's resource type schema: properties, attributes, support."""
    cls = _cls(type_name)
    if hidden(cls):
        raise exception.InvalidInput('%s is not supported.' % type_name)
    attrs = dict(cls.attributes_schema or {})
    attrs.setdefault('show', 'Detailed information about the resource.')
    return {'resource_type': type_name,
            'description': _description(cls),
            'properties': {k: _prop(v) for k, v in
                           sorted((cls.properties_schema or {}).items())},
            'attributes': {k: {'description': v} for k, v in
                           sorted(attrs.items())},
            'support_status': {'status': 'SUPPORTED', 'version': None,
                               'message': None, 'previous_status': None}}


def resource_type_template(type_name, version='2016-10-14'):
    """A HOT template with one resource of the type, every property a
    parameter and every attribute an output (Heat's generate_template)."""
    schema = resource_type(type_name)
    params = {}
    for k, p in schema['properties'].items():
        param = {'type': {'integer': 'number', 'map': 'json',
                          'list': 'comma_delimited_list',
                          'any': 'json'}.get(p['type'], p['type']),
                 'description': p['description']}
        if 'default' in p:
            param['default'] = p['default']
        params[k] = param
    return {
        'heat_template_version': version,
        'description': 'Initial template of %s' % type_name,
        'parameters': params,
        'resources': {type_name.split('::')[-1]: {
            'type': type_name,
            'properties': {k: {'get_param': k} for k in params}}},
        'outputs': {k: {'description': v['description'],
                        'value': {'get_attr': [type_name.split('::')[-1],
                                               k]}}
                    for k, v in schema['attributes'].items()}}


def template_versions():
    aliases = {}
    for alias, version in functions.ALIASES.items():
        aliases.setdefault(version, []).append(alias)
    return [{'version': 'heat_template_version.%s' % v, 'type': 'hot',
             'aliases': sorted(aliases.get(v, []))}
            for v in functions.VERSIONS] + [
        {'version': '%s.%s' % kv, 'type': 'cfn', 'aliases': []}
        for kv in sorted(formats.CFN_VERSIONS.items())]


def template_functions(version, with_condition_func=False):
    """The functions a template version offers, with descriptions."""
    key, _, v = version.rpartition('.')
    if formats.CFN_VERSIONS.get(key) == v:
        table = cfn_functions.function_table(v)
        conditions = cfn_functions.CONDITION_OPS if v == '2010-09-09' \
            else ()
    else:
        v = functions.ALIASES.get(v, v)
        if v not in functions.VERSIONS:
            raise exception.NotFound('Template with version %s not found'
                                     % version)
        table = functions.function_table(v)
        conditions = functions.CONDITION_NAMES
    if with_condition_func:
        table = dict(table, **{n: None for n in conditions})
    out = []
    for name, cls in sorted(table.items()):
        if cls is not None and cls.__name__ in ('Removed', 'NotYet'):
            continue
        out.append({'functions': name,
                    'description': _description(cls) if cls else
                    'A condition function.'})
    return out

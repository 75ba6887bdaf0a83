"""Provider templates: a template file used as a resource type.

The resource's properties are the file's parameters (typed as Heat types
them, required when the parameter has no default) and its attributes are
the file's outputs. One class per file content, built here from the
files map the client sent (the engine never reads the disk) and kept
while the process lives: a TripleO overcloud uses a few hundred files
thousands of times.
"""

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

"""HOT templates: loading (client side) and the validated stack definition.

Public API: load_bundle, bundle_from_request, Bundle, StackDefinition, ResourceDefinition,
UNKNOWN, is_unknown, parse_text, is_provider, join_url, url_path,
walk_get_file, walk_types, template_refs.
"""

import importlib

#: each public name -> the module it lives in (and its name there). They
#: are imported at first use (PEP 562): `from converge.template import
#: formats` (secrecy's, a read-only command's) then loads formats alone,
#: not the definition, functions and loader, a tenth of a second of a
#: command's start (issue 41)
_WHERE = {
    'UNKNOWN': ('converge.resources.properties', 'UNKNOWN'),
    'is_provider': ('converge.template.definition', 'is_provider'),
    'is_unknown': ('converge.template.functions', 'has_unknown'),
    'ResourceDefinition': ('converge.template.definition',
                           'ResourceDefinition'),
    'StackDefinition': ('converge.template.definition', 'StackDefinition'),
    'Bundle': ('converge.template.loader', 'Bundle'),
    'bundle_from_request': ('converge.template.loader',
                            'bundle_from_request'),
    'load_bundle': ('converge.template.loader', 'load_bundle'),
    'join_url': ('converge.template.loader', 'join_url'),
    'parse_text': ('converge.template.loader', 'parse_text'),
    'url_path': ('converge.template.loader', 'url_path'),
    'walk_get_file': ('converge.template.loader', 'walk_get_file'),
    'template_refs': ('converge.template.loader', 'template_refs'),
    'walk_types': ('converge.template.loader', 'walk_types'),
}


def __getattr__(name):
    if name not in _WHERE:
        # a submodule (`template.loader.Loader`), as when this package
        # imported them all
        try:
            value = importlib.import_module(__name__ + '.' + name)
        except ModuleNotFoundError as exc:
            if exc.name != __name__ + '.' + name:
                raise
            raise AttributeError('module %r has no attribute %r'
                                 % (__name__, name)) from None
        globals()[name] = value
        return value
    module, attr = _WHERE[name]
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


__all__ = ['load_bundle', 'bundle_from_request', 'Bundle', 'StackDefinition', 'ResourceDefinition',
           'UNKNOWN', 'is_unknown', 'parse_text', 'is_provider', 'url_path',
           'join_url', 'walk_get_file', 'walk_types', 'template_refs']

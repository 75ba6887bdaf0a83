"""Which resource types a caller may use: Heat's ``resource_types:TYPE``
policy rules (OS::Nova::Flavor, OS::Cinder::VolumeType, OS::Keystone::*
... are an admin's by default; api/policy.py holds the rules).

The API puts its answer on the request context (``may_use_type``); a
context without one (the embedded CLI: the home's owner) may use every
type. A type the caller may not use is left out of the type listing and
refused (403, Heat's "You are not authorized to use TYPE.") in any
template it sends: the template's own resources, a group's member
definition, the environment's mappings and every template among the
files sent (a provider template), so a nested stack cannot carry one
past the check.
"""

from converge import exception
from converge.template import loader


def allowed(ctx, type_name):
    may = getattr(ctx, 'may_use_type', None)
    return may is None or may(type_name)


def visible(ctx, names):
    """Of the type names `names`, those the caller may use."""
    return [n for n in names if allowed(ctx, n)]


def check_type(ctx, type_name):
    """Refuse a type the caller may not use (its schema, its template)."""
    if not allowed(ctx, type_name):
        raise exception.Forbidden(
            'You are not authorized to use %s.' % type_name)


def check(ctx, template, files=None, environment=None):
    """Refuse (exception.Forbidden) the first type the caller may not
    use, of those the template, the files and the environment name."""
    if getattr(ctx, 'may_use_type', None) is None:
        return
    for type_name in sorted(_types(template, files, environment)):
        check_type(ctx, type_name)


def check_bundle(ctx, bundle):
    if bundle is not None:
        check(ctx, bundle.template, bundle.files, bundle.environment)


def _types(template, files, environment):
    found = set()
    _template_types(template, found)
    for text in (files or {}).values():
        if not isinstance(text, str) or 'esources' not in text:
            continue   # no template: nothing it could declare
        try:
            # the loader's own parse: bounded as every template's is
            _template_types(loader.parse_text(text), found)
        except (exception.ConvergeError, RecursionError):
            continue   # no template a stack could use (the create says)
    registry = (environment or {}).get('resource_registry') \
        if isinstance(environment, dict) else None
    _registry_types(registry, found)
    return found


def _template_types(tmpl, found):
    if not isinstance(tmpl, dict):
        return
    resources = tmpl.get('resources', tmpl.get('Resources'))
    if not isinstance(resources, dict):
        return
    for res in resources.values():
        if not isinstance(res, dict):
            continue
        rtype = res.get('type', res.get('Type'))
        if isinstance(rtype, str):
            found.add(rtype)
        props = res.get('properties', res.get('Properties'))
        member = props.get('resource_def') if isinstance(props, dict) \
            else None
        if isinstance(member, dict) and isinstance(member.get('type'), str):
            found.add(member['type'])   # a group's members
        chain = props.get('resources') if isinstance(props, dict) else None
        if isinstance(chain, list):   # a chain's members
            found.update(t for t in chain if isinstance(t, str))


def _registry_types(registry, found):
    if not isinstance(registry, dict):
        return
    for key, value in registry.items():
        if key == 'resources':
            for inner in (value.values() if isinstance(value, dict) else ()):
                _registry_types(inner, found)
        elif isinstance(value, str):
            found.add(value)

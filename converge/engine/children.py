"""What a nested stack is built from: its id, name, environment and
Bundle, derived from the owning resource and the parent's template
version, and the digests that tell when it must be updated. Pure: no
database, no engine (stacks.py validates children with it, nested.py
creates and updates them).
"""

import fnmatch
import hashlib
import json
import uuid

from converge import lazy
from converge import exception

# imported at first use (converge/lazy.py): a read-only CLI command,
# a process of its own, builds an engine and uses none of these (issue 41)
template = lazy.module('converge.template')
providers = lazy.module('converge.template.providers')

#: child stack ids are derived from the owning resource's uuid, so a
#: create asked again (a unit that died after asking) finds its child
_NAMESPACE = uuid.UUID('0b7c2a52-53f6-4bd1-a6c3-2f1b1d0b6a11')

def child_id(key):
    return str(uuid.uuid5(_NAMESPACE, key))


def child_name(parent_name, resource_name, stack_id):
    """Heat's name for a nested stack: parent-resource-shortid (the
    parent's part cut so that it fits the column)."""
    tail = '-%s-%s' % (resource_name, stack_id.replace('-', '')[:12])
    return parent_name[:max(1, 255 - len(tail))] + tail


def child_environment(env, resource_name):
    """The environment a child inherits: the registry (the entries kept
    for `resource_name` under ``resources`` become the child's own
    per-resource entries) and the parameter defaults; not the parent's
    parameters (the child's are the resource's properties)."""
    registry = {k: v for k, v in (env.get('resource_registry') or {}).items()
                if k != 'resources'}
    entries = (env.get('resource_registry') or {}).get('resources') or {}
    # as Heat's: the entries of every glob matching the resource, then its
    # own name's (which wins); a hook set as nested_res/child_res reaches
    # the child this way
    inner = {}
    for pattern, mine in entries.items():
        if pattern != resource_name and isinstance(mine, dict) and \
                fnmatch.fnmatchcase(resource_name, pattern):
            inner.update((k, v) for k, v in mine.items()
                         if isinstance(v, dict))
    mine = entries.get(resource_name)
    if isinstance(mine, dict):
        inner.update((k, v) for k, v in mine.items() if isinstance(v, dict))
    if inner:
        registry['resources'] = inner
    out = {'resource_registry': registry,
           'parameter_defaults': dict(env.get('parameter_defaults') or {})}
    for key in ('parameter_merge_strategies', 'event_sinks'):
        if env.get(key):
            out[key] = env[key]
    return out


def child_bundle(pbundle, parent_name, resource_name, child):
    """The Bundle of the child stack `child` describes ({template: a map
    or text, path: a provider's files-map key, facade}), built from the
    parent's Bundle `pbundle`."""
    tmpl = child['template']
    if tmpl is None and child.get('path'):
        # a template named by URL (AWS::CloudFormation::Stack's
        # TemplateURL): the client sent it in the files map
        child = dict(child, path=pbundle.file_key(child['path']))
        tmpl = pbundle.files.get(child['path'])
        if tmpl is None:
            raise exception.InvalidTemplate(
                'Could not fetch the nested template %s: it is not in the '
                'files the client sent (the CLI sends the local files a '
                'template names; converge fetches no URL)' % child['path'])
    path = child.get('path') or '%s.%s' % (parent_name, resource_name)
    if path.startswith('file://'):   # named as the user knows it
        path = template.url_path(path)
    text = pbundle.files.get(child['path']) if child.get('path') else None
    if isinstance(tmpl, str):
        text = tmpl
        tmpl = template.parse_text(tmpl, path)
    if not isinstance(tmpl, dict):
        raise exception.InvalidTemplate(
            'The nested stack\'s template is not a YAML mapping',
            filename=path)
    env = child_environment(pbundle.environment, resource_name)
    provider = child.get('path')
    if provider:
        # as Heat's (its item_to_remove): the registry entry that made
        # this resource a provider does not reach inside it, so a
        # template overriding a built-in type uses the built-in itself
        registry = env['resource_registry']
        for key in [k for k, v in registry.items() if k != 'resources' and
                    isinstance(v, str) and provider in (
                        v, pbundle.file_key(v))]:
            del registry[key]
    # a provider's references are relative to its own file; an inline
    # template's to the parent's
    base = child['path'] if '://' in (child.get('path') or '') \
        else pbundle.base_url
    return template.Bundle(tmpl, pbundle.files, env, path, text,
                           facade=child.get('facade'), base_url=base)


def _refs(tmpl):
    """The get_file targets and template-file types a template names."""
    found = []
    template.walk_get_file(tmpl, [], found)
    found += template.template_refs(tmpl)
    return [name for name, _ in found]


def files_read(bundle):
    """The files-map keys a child stack reads: its get_file targets and
    provider templates, theirs in turn, and the registry's templates."""
    registry = bundle.environment.get('resource_registry') or {}
    todo = [(bundle.template, bundle.base_url)]
    todo += [(None, v) for v in _registry_values(registry)
             if template.is_provider(v)]
    seen = set()
    while todo:
        tmpl, base = todo.pop()
        if tmpl is None:   # a registry entry: a key already
            refs, base = [base], None
        else:
            refs = _refs(tmpl)
        for ref in refs:
            key = ref if ref in bundle.files or not base \
                else template.join_url(base, ref)
            if key in seen or key not in bundle.files:
                continue
            seen.add(key)
            if template.is_provider(key):
                try:
                    parsed = providers.provider_class(
                        key, bundle.files, ()).provider_template
                except exception.InvalidTemplate:
                    continue   # the child's own validation says so
                todo.append((parsed, key))
    return sorted(seen)


def _registry_values(registry):
    for key, value in registry.items():
        if isinstance(value, str):
            yield value
        elif key == 'resources' and isinstance(value, dict):
            for sub in value.values():
                if isinstance(sub, dict):
                    yield from (v for v in sub.values()
                                if isinstance(v, str))


def digest(bundle, params):
    """What a child is made of, digested: a change to any of it (its
    template, parameters, environment, the owner's facade, a file it
    reads) updates the child; nothing else does."""
    files = {k: bundle.files[k] for k in files_read(bundle)}
    return hashlib.sha256(json.dumps(
        [bundle.template, params, bundle.environment, bundle.facade, files],
        sort_keys=True, default=str).encode()).hexdigest()


def surroundings(bundle):
    """What the child's resources read beside their own definitions,
    digested: the environment and the files (a provider template, a
    get_file target). A group updates every member when it changes, in
    batches as its policy says."""
    files = {k: bundle.files[k] for k in files_read(bundle)}
    return hashlib.sha256(json.dumps(
        [bundle.environment, files], sort_keys=True,
        default=str).encode()).hexdigest()

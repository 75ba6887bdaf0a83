"""A template bundle as a request body: Heat's create body, as
python-heatclient sends it (converge/template/loader.py:
bundle_from_request reads it)."""

import copy

from converge import template


def fields(bundle):
    """{'template', 'files', 'environment'} of a Bundle the CLI read from
    the disk. Its files are keyed by their file:// URLs, and the
    template names them relative to itself: the server has no such
    place to resolve them from, so the template's references are
    rewritten to those keys, as python-heatclient rewrites them. (A
    provider template's references stay relative: the server reads
    them relative to the provider's own key.)"""
    tmpl = bundle.template
    if bundle.base_url and isinstance(tmpl, dict):
        tmpl = copy.deepcopy(tmpl)
        found = []
        template.walk_get_file(tmpl, [], found)
        template.walk_types(tmpl.get('resources'), ['resources'], found)
        for ref, path in found:
            key = template.join_url(bundle.base_url, ref)
            if ref not in bundle.files and key in bundle.files:
                _put(tmpl, path, key)
    return {'template': tmpl, 'files': dict(bundle.files),
            'environment': dict(bundle.environment)}


def _put(node, path, value):
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value

"""HOT templates: loading (client side) and the validated stack definition.

Public API: load_bundle, bundle_from_request, Bundle, StackDefinition, ResourceDefinition,
UNKNOWN, is_unknown, parse_text, is_provider, join_url, url_path,
walk_get_file, walk_types, template_refs.
"""

from converge.resources.properties import UNKNOWN
from converge.template.definition import is_provider
from converge.template.functions import has_unknown as is_unknown
from converge.template.definition import ResourceDefinition
from converge.template.definition import StackDefinition
from converge.template.loader import Bundle
from converge.template.loader import bundle_from_request
from converge.template.loader import load_bundle
from converge.template.loader import join_url
from converge.template.loader import parse_text
from converge.template.loader import url_path
from converge.template.loader import walk_get_file
from converge.template.loader import template_refs
from converge.template.loader import walk_types

__all__ = ['load_bundle', 'bundle_from_request', 'Bundle', 'StackDefinition', 'ResourceDefinition',
           'UNKNOWN', 'is_unknown', 'parse_text', 'is_provider', 'url_path',
           'join_url', 'walk_get_file', 'walk_types', 'template_refs']

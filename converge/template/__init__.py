"""HOT templates: loading (client side) and the validated stack definition.

Public API: load_bundle, Bundle, StackDefinition, ResourceDefinition,
UNKNOWN.
"""

from converge.resources.properties import UNKNOWN
from converge.template.definition import ResourceDefinition
from converge.template.definition import StackDefinition
from converge.template.loader import Bundle
from converge.template.loader import load_bundle

__all__ = ['load_bundle', 'Bundle', 'StackDefinition', 'ResourceDefinition',
           'UNKNOWN']

"""The two template formats Heat runs: HOT and CloudFormation's.

Both describe the same things (parameters, resources, outputs, ...)
under different keys. The definition (definition.py) and the modules
that read a raw template (the loader, providers, secrecy) ask the
template's format for the key of a section or of a resource's field,
so that errors name the key the author wrote and its line.
"""

from converge import exception

HOT = 'hot'
CFN = 'cfn'

#: CloudFormation's version keys and the version each accepts
CFN_VERSIONS = {'HeatTemplateFormatVersion': '2012-12-12',
                'AWSTemplateFormatVersion': '2010-09-09'}

_HOT_SECTIONS = {k: k for k in (
    'description', 'parameter_groups', 'parameters', 'resources',
    'outputs', 'conditions')}
_CFN_SECTIONS = {'description': 'Description', 'parameters': 'Parameters',
                 'mappings': 'Mappings', 'resources': 'Resources',
                 'outputs': 'Outputs', 'conditions': 'Conditions'}
_HOT_FIELDS = {k: k for k in (
    'type', 'properties', 'metadata', 'depends_on', 'deletion_policy',
    'update_policy', 'description', 'condition', 'external_id', 'value')}
_CFN_FIELDS = {'type': 'Type', 'properties': 'Properties',
               'metadata': 'Metadata', 'depends_on': 'DependsOn',
               'deletion_policy': 'DeletionPolicy',
               'update_policy': 'UpdatePolicy', 'description': 'Description',
               'condition': 'Condition', 'value': 'Value'}


class Format:
    """What a template's format calls each thing."""

    def __init__(self, kind, version_key, sections, fields):
        self.kind = kind
        self.version_key = version_key
        self._sections = sections
        self._fields = fields

    @property
    def is_cfn(self):
        return self.kind == CFN

    def section(self, name):
        """The key of section `name` (HOT's name for it), or None when
        the format has no such section."""
        return self._sections.get(name)

    def field(self, name):
        """The key of a resource's or an output's field `name` (HOT's
        name for it), or None when the format has no such field."""
        return self._fields.get(name)

    def label(self, version):
        """How an error names the template's version."""
        if self.is_cfn:
            return '%s %s' % (self.version_key, version)
        return 'HOT (%s)' % version


HOT_FORMAT = Format(HOT, 'heat_template_version', _HOT_SECTIONS, _HOT_FIELDS)
_CFN_FORMATS = {k: Format(CFN, k, _CFN_SECTIONS, _CFN_FIELDS)
                for k in CFN_VERSIONS}


def of(tmpl):
    """The format of a raw template (a mapping); HOT when it names no
    CloudFormation version key (the definition says what is missing)."""
    if isinstance(tmpl, dict) and 'heat_template_version' not in tmpl:
        for key in CFN_VERSIONS:
            if key in tmpl:
                return _CFN_FORMATS[key]
    return HOT_FORMAT


def is_template(doc):
    """Whether a parsed document is a template of either format."""
    return isinstance(doc, dict) and (
        'heat_template_version' in doc or
        any(k in doc for k in CFN_VERSIONS))


def section(tmpl, name):
    """Section `name` (HOT's name) of a raw template in its own format,
    or None."""
    if not isinstance(tmpl, dict):
        return None
    key = of(tmpl).section(name)
    return tmpl.get(key) if key is not None else None


def field(tmpl, snippet, name):
    """Field `name` (HOT's name) of a resource or output snippet of raw
    template `tmpl`, or None."""
    if not isinstance(snippet, dict):
        return None
    key = of(tmpl).field(name)
    return snippet.get(key) if key is not None else None


def cfn_version(tmpl, path_key):
    """The version a CloudFormation template names under `path_key`,
    checked: Heat accepts one version for each key."""
    raw = tmpl[path_key]
    want = CFN_VERSIONS[path_key]
    if str(raw) != want:
        raise exception.InvalidTemplate(
            'The template version is invalid: %s: %s. Valid versions are: '
            '%s' % (path_key, raw, want), path=[path_key])
    return want

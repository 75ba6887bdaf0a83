"""OS::Heat::StructuredConfig, and the input substitution its deployments
do (`substitute`).

A StructuredConfig is a SoftwareConfig whose ``config`` is a map (for
tools whose configuration is JSON or YAML, such as os-apply-config or
cfn-init): stored as the data structure itself, immutable, replaced on any
change. Such tools know nothing of inputs, so the deployment
(OS::Heat::StructuredDeployment) fills them in: every ``{get_input: NAME}``
in the structure becomes the value of input NAME.
"""

from converge import exception
from converge.resources import properties as p
from converge.resources import software_config as sc

VALIDATE_MODES = ('LAX', 'STRICT')


class MissingInput(exception.InvalidInput):
    """STRICT substitution met an input that has no value."""

    def __init__(self, name, path):
        self.name = name
        self.path = list(path)
        where = ''.join('[%r]' % (k,) for k in self.path) or '(the top)'
        super().__init__(
            'The input "%s" was not provided: config%s uses it and '
            'input_values_validate is STRICT' % (name, where))


def substitute(config, input_values, input_key='get_input',
               validate='LAX'):
    """The derived config of a StructuredDeployment.

    The interface the deployment side calls (Heat's StructuredDeployment
    semantics):

    :param config: the StructuredConfig's stored ``config`` (any JSON
        data: maps, lists, scalars); not changed
    :param input_values: {input name: value}: the deployment's derived
        inputs, i.e. the config's declared inputs with their values or
        defaults, the extra ``input_values`` and the ``deploy_*`` inputs
    :param input_key: the deployment's ``input_key`` property (Heat's
        default ``get_input``): a map with this one key and a string
        value is a reference to that input
    :param validate: the deployment's ``input_values_validate``: ``LAX``
        puts None (JSON null) for a name with no value, as Heat does;
        ``STRICT`` raises MissingInput (an exception.InvalidInput) naming
        the input and where in the config it is used
    :returns: a new structure, every reference replaced by the input's
        value (the value itself, not a copy of its text: a list input
        gives a list). Only values are substituted, never map keys; a map
        of one key `input_key` whose value is not a string is not a
        reference (its value is searched like any other).
    """
    if validate not in VALIDATE_MODES:
        raise ValueError('validate must be LAX or STRICT, not %r'
                         % (validate,))
    values = dict(input_values or {})
    return _sub(config, values, input_key, validate == 'STRICT', [])


def _sub(node, values, key, strict, path):
    if isinstance(node, dict):
        if len(node) == 1 and key in node and isinstance(node[key], str):
            name = node[key]
            if name not in values and strict:
                raise MissingInput(name, path)
            return values.get(name)
        return {k: _sub(v, values, key, strict, path + [k])
                for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [_sub(v, values, key, strict, path + [i])
                for i, v in enumerate(node)]
    return node


class StructuredConfig(sc.SoftwareConfig):
    """A software config whose config is a map (stored as data)."""

    properties_schema = dict(
        sc.SoftwareConfig.properties_schema,
        config=p.Schema(
            p.MAP, 'Map representing the configuration data structure '
            'which will be serialized to JSON format.'))

    def _body(self):
        body = super()._body()
        body['config'] = self.properties.get('config') or {}
        return body

    def get_attributes(self, observed):
        if isinstance(observed, dict) and 'config' in observed:
            return {'config': observed.get('config')}
        return {'config': self._body()['config'] if self.physical_id
                else None}

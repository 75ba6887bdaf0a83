"""CloudFormation parameters (Type, Default, NoEcho, AllowedValues, ...)
read into the same checks and coercions as HOT's (parameters.py)."""

from converge.template import parameters as hot

KEYS = ('Type', 'Default', 'NoEcho', 'AllowedValues', 'AllowedPattern',
        'MaxLength', 'MinLength', 'MaxValue', 'MinValue', 'Description',
        'ConstraintDescription', 'Label')
TYPES = {'String': 'string', 'Number': 'number',
         'CommaDelimitedList': 'comma_delimited_list', 'Json': 'json',
         'Boolean': 'boolean'}
#: AWS's typed parameters are strings (a list type a list of them):
#: their value is checked by the resource that uses it
_AWS_LIST = ('List<', 'CommaDelimitedList<')


def _type_of(name):
    if name in TYPES:
        return TYPES[name]
    if isinstance(name, str) and name.startswith(_AWS_LIST):
        return 'comma_delimited_list'
    if isinstance(name, str) and name.startswith('AWS::'):
        return 'string'
    return None


#: HOT constraint kind -> (its CloudFormation keys, what they set)
_BOUNDS = (('range', 'MinValue', 'MaxValue'),
           ('length', 'MinLength', 'MaxLength'))


class Parameter(hot.Parameter):
    """One parameter of a CloudFormation template."""

    def __init__(self, name, schema, path):
        self.name = name
        self.path = path
        if not isinstance(schema, dict):
            raise hot._err('The parameter (%s) must be a map' % name, path)
        for key in schema:
            if key not in KEYS:
                raise hot._err('Invalid key "%s" for parameter (%s); valid '
                               'keys: %s' % (key, name, ', '.join(KEYS)),
                               path + [key])
        if 'Type' not in schema:
            raise hot._err('Missing parameter type for parameter: %s' % name,
                           path)
        self.type = _type_of(schema['Type'])
        if self.type is None:
            raise hot._err('Invalid type (%s) for parameter (%s); allowed: '
                           '%s, AWS::... and List<AWS::...>' % (
                               schema['Type'], name, ', '.join(TYPES)),
                           path + ['Type'])
        self.cfn_type = schema['Type']
        self.description = schema.get('Description', '')
        self.label = schema.get('Label')
        # Heat's rule: NoEcho hides the value when it reads "true"
        self.hidden = str(schema.get('NoEcho', 'false')).lower() == 'true'
        self.immutable = False
        self.tags = None
        self.has_default = 'Default' in schema
        self.default = schema.get('Default')
        self.constraints = self._cfn_constraints(schema, path)
        if self.has_default and self.default is not None:
            self.coerce(self.default, path + ['Default'], 'default value')

    def _cfn_constraints(self, schema, path):
        """The constraints as HOT writes them, checked by HOT's parser
        (errors name the CloudFormation key)."""
        desc = schema.get('ConstraintDescription')
        out = []
        for kind, lo, hi in _BOUNDS:
            bound = {k: schema[key] for k, key in (('min', lo), ('max', hi))
                     if key in schema}
            if bound:
                out.append(({kind: bound, 'description': desc},
                            lo if lo in schema else hi))
        for kind, key in (('allowed_values', 'AllowedValues'),
                          ('allowed_pattern', 'AllowedPattern')):
            if key in schema:
                out.append(({kind: schema[key], 'description': desc}, key))
        parsed = []
        for c, key in out:
            parsed += self._parse_constraints([c], path + [key])
        return parsed

    def _parse_constraints(self, cons, path):
        try:
            return super()._parse_constraints(cons, path)
        except hot.exception.InvalidTemplate as e:
            # HOT's parser names [constraints, 0, kind]: name the key
            raise hot._err(e.reason, path)

    def info(self):
        d = super().info()
        d['Type'] = self.cfn_type
        return d

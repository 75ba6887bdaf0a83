"""Property schemas for resource plug-ins, with Heat's coercions.

Types: string, integer, number, boolean, map, list, any. A value that cannot
be known yet at validation time (it depends on another resource) is the
UNKNOWN sentinel and passes every check.
"""

import math
import re

from converge import exception


class _Unknown:
    """A value that depends on a resource not created yet."""

    _inst = None

    def __new__(cls):
        if cls._inst is None:
            cls._inst = super().__new__(cls)
        return cls._inst

    def __repr__(self):
        return '<unknown>'

    def __bool__(self):
        return False


UNKNOWN = _Unknown()

STRING, INTEGER, NUMBER, BOOLEAN, MAP, LIST, ANY = (
    'string', 'integer', 'number', 'boolean', 'map', 'list', 'any')

_TRUE = {'true', 't', 'yes', 'y', 'on', '1'}
_FALSE = {'false', 'f', 'no', 'n', 'off', '0'}


class Schema:
    def __init__(self, type, description='', required=False, default=None,
                 update_allowed=False, allowed_values=None, min=None,
                 max=None, min_length=None, max_length=None, pattern=None,
                 schema=None, immutable=False, constraint=None):
        """
        :param schema: for map, a dict name -> Schema of known keys; for list,
            a Schema every item must match (or a dict, meaning items are maps
            with those keys)
        :param constraint: the name of a custom constraint (Heat's, e.g.
            'glance.image'): the value must name something that exists in
            the stack's cloud. Checked against the cloud at validate
            (converge/resources/constraints.py), not here: this module
            never talks to a cloud
        """
        self.type = type
        self.description = description
        self.required = required
        self.default = default
        self.update_allowed = update_allowed
        self.allowed_values = allowed_values
        self.min, self.max = min, max
        self.min_length, self.max_length = min_length, max_length
        self.pattern = pattern
        self.schema = schema
        self.immutable = immutable
        self.constraint = constraint


def _err(msg, path):
    return exception.InvalidTemplate(msg, path=list(path))


def _coerce(schema, value, path):
    t = schema.type
    if value is UNKNOWN or t == ANY:
        return value
    if t == STRING:
        if isinstance(value, bool):
            return 'true' if value else 'false'
        if isinstance(value, (int, float)):
            return str(value)
        if not isinstance(value, str):
            raise _err('Value must be a string, not %s' % type(value).__name__,
                       path)
        return value
    if t in (INTEGER, NUMBER):
        if isinstance(value, bool):
            raise _err('Value must be a number, not a boolean', path)
        if isinstance(value, str):
            try:
                value = int(value) if t == INTEGER else _num(value)
            except ValueError:
                # Heat's words
                raise _err("Value '%s' is not %s" % (
                    value, 'an integer' if t == INTEGER else 'a number'),
                    path)
        if t == INTEGER:
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if not isinstance(value, int):
                raise _err('Value must be an integer', path)
        elif not isinstance(value, (int, float)):
            raise _err('Value must be a number', path)
        elif isinstance(value, float) and not math.isfinite(value):
            # a function's result: nan passes any min and max
            raise _err('Value must be a finite number, not %s' % value,
                       path)
        return value
    if t == BOOLEAN:
        if isinstance(value, bool):
            return value
        if isinstance(value, (str, int)):
            s = str(value).lower()
            if s in _TRUE:
                return True
            if s in _FALSE:
                return False
        raise _err('"%s" is not a valid boolean' % (value,), path)
    if t == MAP:
        if not isinstance(value, dict):
            raise _err('Value must be a map, not %s' % type(value).__name__,
                       path)
        if isinstance(schema.schema, dict):
            return validate(schema.schema, value, path, allow_unknown=False)
        return value
    if t == LIST:
        if isinstance(value, str) and schema.schema is None:
            # Heat accepts a comma-delimited string for a list of strings
            return [v for v in value.split(',')] if value else []
        if not isinstance(value, (list, tuple)):
            raise _err('Value must be a list, not %s' % type(value).__name__,
                       path)
        item = schema.schema
        if isinstance(item, dict):
            item = Schema(MAP, schema=item)
        if item is None:
            return list(value)
        return [_coerce(item, v, list(path) + [i]) if v is not UNKNOWN else v
                for i, v in enumerate(value)]
    raise _err('Unknown property type %s' % t, path)


def _num(s):
    try:
        return int(s)
    except ValueError:
        value = float(s)
        if not math.isfinite(value):
            raise ValueError(s)
        return value


def _constraints(schema, value, path):
    if value is UNKNOWN or value is None:
        return
    if schema.allowed_values is not None and value not in schema.allowed_values:
        raise _err('"%s" is not an allowed value %s' % (
            value, list(schema.allowed_values)), path)
    if schema.min is not None and isinstance(value, (int, float)) \
            and value < schema.min:
        raise _err('%s is out of range (min: %s)' % (value, schema.min), path)
    if schema.max is not None and isinstance(value, (int, float)) \
            and value > schema.max:
        raise _err('%s is out of range (max: %s)' % (value, schema.max), path)
    if isinstance(value, (str, list, dict)):
        n = len(value)
        if schema.min_length is not None and n < schema.min_length:
            raise _err('length %d is less than %d' % (n, schema.min_length),
                       path)
        if schema.max_length is not None and n > schema.max_length:
            raise _err('length %d is more than %d' % (n, schema.max_length),
                       path)
    if schema.pattern is not None and isinstance(value, str):
        if not re.fullmatch(schema.pattern, value):
            raise _err('"%s" does not match pattern "%s"' % (
                value, schema.pattern), path)


def validate(schemas, values, path=(), allow_unknown=False):
    """Check `values` (a dict) against `schemas`; return it with defaults.

    Raises InvalidTemplate naming the first bad property's path.
    """
    path = list(path)
    if values is UNKNOWN:
        return values
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise _err('Properties must be a map', path)
    out = {}
    for key, value in values.items():
        schema = schemas.get(key)
        if schema is None:
            if allow_unknown:
                out[key] = value
                continue
            raise _err('Unknown property %s' % key, path + [key])
        if value is None:
            continue
        value = _coerce(schema, value, path + [key])
        _constraints(schema, value, path + [key])
        out[key] = value
    for key, schema in schemas.items():
        if key in out:
            continue
        if schema.required:
            raise _err('Property %s not assigned' % key, path + [key])
        if schema.default is not None:
            out[key] = schema.default
    return out

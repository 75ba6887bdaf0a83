"""HOT parameters: schema checks, coercion and constraints."""

import json
import math
import re

from converge import exception
from converge.resources.properties import UNKNOWN
from converge.template import bounds
from converge.template import patterns

TYPES = {'string': 'String', 'number': 'Number', 'json': 'Json',
         'boolean': 'Boolean', 'comma_delimited_list': 'CommaDelimitedList'}
KEYS = ('type', 'default', 'description', 'label', 'hidden', 'constraints',
        'immutable', 'tags')
CONSTRAINTS = ('length', 'range', 'allowed_values', 'allowed_pattern',
               'custom_constraint', 'modulo')
APPLIES = {
    'length': ('string', 'comma_delimited_list', 'json'),
    'range': ('number',),
    'modulo': ('number',),
    'allowed_values': ('string', 'number', 'comma_delimited_list',
                       'boolean', 'json'),
    'allowed_pattern': ('string', 'comma_delimited_list'),
    'custom_constraint': tuple(TYPES),
}
_TRUE = {'true', 't', 'yes', 'y', 'on', '1'}
_FALSE = {'false', 'f', 'no', 'n', 'off', '0'}
PSEUDO = ('OS::stack_name', 'OS::stack_id', 'OS::project_id', 'OS::region')


def _err(msg, path):
    return exception.InvalidTemplate(msg, path=list(path))


def _num(v):
    if isinstance(v, bool):
        raise ValueError('%r is not a number' % (v,))
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        number = v
    else:
        s = str(v).strip()
        try:
            return int(s)
        except ValueError:
            pass
        try:
            number = float(s)
        except ValueError:
            raise ValueError('"%s" is not a number' % (v,))
    # nan passes every range (its comparisons are all false) and neither
    # it nor an infinity is JSON: the API could not answer with it
    if not math.isfinite(number):
        raise ValueError('"%s" is not a finite number' % (v,))
    return number


class Parameter:
    def __init__(self, name, schema, version, path):
        self.name = name
        self.path = path
        if not isinstance(schema, dict):
            raise _err('The parameter (%s) must be a map' % name, path)
        for key in schema:
            if key not in KEYS or (key == 'tags' and version < '2018-03-02'):
                raise _err('Invalid key "%s" for parameter (%s)' % (key, name),
                           path + [key])
        if 'type' not in schema:
            raise _err('Missing parameter type for parameter: %s' % name,
                       path)
        self.type = schema['type']
        if not isinstance(self.type, str) or self.type not in TYPES:
            raise _err('Invalid type (%s) for parameter (%s); allowed: %s' % (
                self.type, name, ', '.join(TYPES)), path + ['type'])
        self.description = schema.get('description', '')
        self.label = schema.get('label')
        hidden = schema.get('hidden', False)
        if isinstance(hidden, str) and hidden.lower() in _TRUE | _FALSE:
            hidden = hidden.lower() in _TRUE
        if not isinstance(hidden, bool):
            raise _err('"hidden" must be a boolean', path + ['hidden'])
        self.hidden = hidden
        self.immutable = bool(schema.get('immutable', False))
        self.tags = schema.get('tags')
        self.has_default = 'default' in schema
        self.default = schema.get('default')
        self.constraints = self._parse_constraints(schema.get('constraints'),
                                                   path + ['constraints'])
        if self.has_default and self.default is not None:
            self.coerce(self.default, path + ['default'], 'default value')

    def _parse_constraints(self, cons, path):
        if cons is None:
            return []
        if not isinstance(cons, list):
            raise _err('Invalid parameter constraints for parameter %s, '
                       'expected a list' % self.name, path)
        out = []
        for i, c in enumerate(cons):
            p = path + [i]
            if not isinstance(c, dict):
                raise _err('Invalid parameter constraints for parameter %s,'
                           ' expected a map' % self.name, p)
            kinds = [k for k in c if k != 'description']
            if len(kinds) != 1 or kinds[0] not in CONSTRAINTS:
                raise _err('Invalid constraint %s for parameter %s; '
                           'allowed: %s' % (', '.join(map(str, kinds)) or
                                            '(none)', self.name,
                                            ', '.join(CONSTRAINTS)), p)
            kind = kinds[0]
            arg = c[kind]
            desc = c.get('description')
            if desc is not None and not isinstance(desc, str):
                # it is said in place of the constraint's own words, and
                # joined into validate's ConstraintDescription (a
                # boolean there was a TypeError: a 500)
                raise _err('a constraint\'s description must be a string, '
                           'not %s' % type(desc).__name__,
                           p + ['description'])
            p = p + [kind]
            if self.type not in APPLIES[kind]:
                raise _err('%s constraint invalid for parameter type %s' % (
                    kind, self.type), p)
            if kind in ('length', 'range', 'modulo'):
                if not isinstance(arg, dict):
                    raise _err('%s constraint must be a map' % kind, p)
                allowed = ('step', 'offset') if kind == 'modulo' else \
                    ('min', 'max')
                bad = set(arg) - set(allowed)
                if bad or not arg:
                    raise _err('%s constraint takes %s' % (
                        kind, ' and '.join(allowed)), p)
                try:
                    arg = {k: _num(v) for k, v in arg.items()}
                except ValueError as e:
                    raise _err('%s constraint: %s' % (kind, e), p)
                if kind == 'modulo' and (not arg.get('step') or
                                         'offset' not in arg):
                    raise _err('modulo constraint needs a non-zero step and '
                               'an offset', p)
            elif kind == 'allowed_values':
                if not isinstance(arg, list):
                    raise _err('allowed_values must be a list', p)
            elif kind in ('allowed_pattern', 'custom_constraint'):
                if not isinstance(arg, str):
                    raise _err('%s must be a string' % kind, p)
                if kind == 'allowed_pattern':
                    try:
                        patterns.compile(arg)
                    except re.error as e:
                        raise _err('invalid allowed_pattern: %s' % e, p)
            out.append((kind, arg, c.get('description')))
        return out

    # -- values --------------------------------------------------------
    def coerce(self, value, path, what='value'):
        """Coerce a supplied value and check constraints."""
        try:
            value = self._convert(value)
        except ValueError as e:
            raise _err('Parameter \'%s\' is invalid: %s' % (self.name, e),
                       path)
        self._check(value, path)
        return value

    def _convert(self, v):
        t = self.type
        if t == 'string':
            if isinstance(v, bool):
                return 'true' if v else 'false'
            if isinstance(v, (int, float)):
                return str(v)
            if not isinstance(v, str):
                raise ValueError('Value must be a string, not %s' %
                                 type(v).__name__)
            return v
        if t == 'number':
            if isinstance(v, (list, dict)) or v is None:
                raise ValueError('Value must be a number')
            return _num(v)
        if t == 'boolean':
            if isinstance(v, bool):
                return v
            s = str(v).lower()
            if s in _TRUE:
                return True
            if s in _FALSE:
                return False
            raise ValueError('Unrecognized value "%s", acceptable values '
                             'are: %s' % (v, ', '.join(sorted(
                                 _TRUE | _FALSE))))
        if t == 'comma_delimited_list':
            if isinstance(v, list):
                return [x if isinstance(x, str) else
                        (json.dumps(x) if isinstance(x, (dict, list))
                         else str(x)) for x in v]
            if v is None:
                return []
            if isinstance(v, dict):
                raise ValueError('Value must be a comma-delimited list '
                                 'string or a list')
            s = v if isinstance(v, str) else str(v)
            return s.split(',') if s else []
        if t == 'json':
            if isinstance(v, str):
                if not v.strip():
                    return {}
                try:
                    return bounds.loads_json(v)
                except bounds.NotPlainJSON:
                    raise
                except ValueError as e:
                    raise ValueError('Value must be valid JSON: %s' % e)
            bounds.check_json(v)
            return json.loads(json.dumps(v))
        return v

    def _check(self, value, path):
        for kind, arg, desc in self.constraints:
            try:
                msg = self._violation(kind, arg, value)
            except patterns.TooSlow as e:
                # not a verdict on the value: the description would lie
                raise _err('Parameter \'%s\' is invalid: allowed_pattern '
                           '"%s": %s' % (self.name, arg, e), path)
            if msg is not None and self.hidden and not desc:
                msg = 'the value does not satisfy the %s constraint' % kind
            if msg is not None:
                raise _err('Parameter \'%s\' is invalid: %s' % (
                    self.name, desc or msg), path)

    def _violation(self, kind, arg, value):
        if kind == 'length':
            try:
                n = len(value)
            except TypeError:
                return None
            lo, hi = arg.get('min'), arg.get('max')
            if (lo is not None and n < lo) or (hi is not None and n > hi):
                return 'length (%d) is out of range (%s)' % (n, _bounds(arg))
        elif kind == 'range':
            lo, hi = arg.get('min'), arg.get('max')
            if (lo is not None and value < lo) or \
                    (hi is not None and value > hi):
                return '%s is out of range (%s)' % (value, _bounds(arg))
        elif kind == 'modulo':
            step, offset = arg['step'], arg['offset']
            if value % step != offset % step:
                return '%s is not a multiple of %s with an offset of %s' % (
                    value, step, offset)
        elif kind == 'allowed_values':
            allowed = arg
            if self.type == 'number':
                allowed = []
                for a in arg:
                    try:
                        allowed.append(_num(a))
                    except ValueError:
                        allowed.append(a)
            elif self.type == 'boolean':
                allowed = [self._convert(a) if isinstance(a, (str, bool))
                           else a for a in arg]
            elif self.type == 'string':
                allowed = [str(a) if not isinstance(a, (dict, list)) else a
                           for a in arg]
            items = value if self.type == 'comma_delimited_list' \
                else [value]
            for item in items:
                if item not in allowed:
                    return '"%s" is not an allowed value %s' % (
                        item, [str(a) for a in arg])
        elif kind == 'allowed_pattern':
            items = value if isinstance(value, list) else [value]
            pattern = patterns.compile(arg)
            with patterns.budget():
                for item in items:
                    if not pattern.fullmatch(item):
                        return '"%s" does not match pattern "%s"' % (
                            item, arg)
        return None

    def text(self, value):
        """`value` (of this type, converted) as stack show gives it: a
        string, as Heat's (a list joined by commas, JSON as JSON text, a
        boolean True or False, a number as written)."""
        if self.type == 'comma_delimited_list' and isinstance(value, list):
            return ','.join(value)
        if self.type == 'json':
            return json.dumps(value)
        return str(value)

    # -- validate info ---------------------------------------------------
    def info(self):
        d = {'Type': TYPES[self.type], 'Description': self.description,
             'Label': self.label if self.label is not None else self.name,
             'NoEcho': 'true' if self.hidden else 'false'}
        if self.has_default:
            d['Default'] = self.default
        if self.tags:
            d['Tags'] = self.tags
        if self.immutable:
            d['Immutable'] = True
        descs = []
        for kind, arg, desc in self.constraints:
            if desc:
                descs.append(desc)
            if kind == 'length':
                if 'min' in arg:
                    d['MinLength'] = arg['min']
                if 'max' in arg:
                    d['MaxLength'] = arg['max']
            elif kind == 'range':
                if 'min' in arg:
                    d['MinValue'] = arg['min']
                if 'max' in arg:
                    d['MaxValue'] = arg['max']
            elif kind == 'allowed_values':
                d['AllowedValues'] = arg
            elif kind == 'allowed_pattern':
                d['AllowedPattern'] = arg
            elif kind == 'custom_constraint':
                d['CustomConstraint'] = arg
            elif kind == 'modulo':
                d['Modulo'] = arg
        if descs:
            d['ConstraintDescription'] = ' '.join(descs)
        return d


def _bounds(arg):
    parts = []
    if arg.get('min') is not None:
        parts.append('min: %s' % arg['min'])
    if arg.get('max') is not None:
        parts.append('max: %s' % arg['max'])
    return ', '.join(parts)


__all__ = ['Parameter', 'PSEUDO', 'UNKNOWN']

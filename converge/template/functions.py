"""HOT intrinsic functions: parsing (validation) and resolution.

A template snippet is parsed once into a tree of plain data and
:class:`Function` nodes. ``resolve(tree, ctx)`` turns it into data. With
``ctx.data`` None (validation), get_resource gives the resource name and
get_attr gives UNKNOWN; any function whose inputs include UNKNOWN gives
UNKNOWN.
"""

import collections.abc  # noqa: F401  (yaql 3.2 needs it imported first)
import hashlib
import itertools
import json
from urllib import parse as urlparse

from converge import exception
from converge.resources.properties import UNKNOWN
from converge.template import bounds
from converge.template import yaql_eval


class _Omit:
    """Result of a 2-argument `if` whose condition is false."""

    def __repr__(self):
        return '<omitted>'


OMIT = _Omit()


def _err(msg, path):
    return exception.InvalidTemplate(msg, path=list(path))


def has_unknown(v):
    if v is UNKNOWN:
        return True
    if isinstance(v, dict):
        return any(has_unknown(x) for x in v.values())
    if isinstance(v, list):
        return any(has_unknown(x) for x in v)
    return False


def referenced_resource(v):
    """The resource a parsed snippet names by reference (get_resource,
    CloudFormation's Ref of a resource), or None."""
    name = getattr(v, 'resource_name', None)
    if isinstance(v, GetResource) and isinstance(v.args, str):
        name = v.args
    return name


def resolve(v, ctx):
    if isinstance(v, Function):
        return v.resolve(ctx)
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            r = resolve(x, ctx) if isinstance(x, (Function, dict, list)) else x
            if r is not OMIT:
                out[k] = r
        return out
    if isinstance(v, list):
        out = []
        for x in v:
            r = resolve(x, ctx) if isinstance(x, (Function, dict, list)) else x
            if r is not OMIT:
                out.append(r)
        return out
    return v


def shape(v, ctx):
    """The parsed tree as far as it is known in `ctx` (a validation
    context: no resource data), for comparing two definitions: a function
    whose value is known stands as its value (parameters, conditions,
    files); one whose value waits on another resource stands as its name
    and the shape of its arguments, so a parameter read next to a get_attr
    still counts."""
    if isinstance(v, Function):
        value = v.resolve(ctx)
        if not has_unknown(value):
            return {'<value>': '<omitted>' if value is OMIT else value}
        return {'<%s>' % v.name: shape(getattr(v, 'args', None), ctx)}
    if isinstance(v, dict):
        return {k: shape(x, ctx) for k, x in v.items()}
    if isinstance(v, list):
        return [shape(x, ctx) for x in v]
    return v


class Context:
    """What resolution needs: the definition and (at run time) data."""

    def __init__(self, scope, data=None):
        self.scope = scope
        self.data = data
        #: bytes the functions of this resolution (a resource's
        #: properties, a stack's outputs, a template's values as it is
        #: checked) built: each call is bounded, and so is their sum (a
        #: thousand calls of 4 MB in one list, or in as many resources)
        self.built = 0


def _dumps(v):
    return json.dumps(v, sort_keys=True, separators=(', ', ': '))


def _type(v):
    return type(v).__name__


class Function:
    """One intrinsic function call."""

    def __init__(self, parser, name, args, path):
        self.name = name
        self.path = path + (name,)
        self.version = parser.scope.version
        self.parse(parser, args)

    def parse(self, parser, args):
        self.args = parser.parse(args, self.path)

    def error(self, msg):
        return _err('%s: %s' % (self.name, msg), self.path)

    def resolve(self, ctx):
        args = resolve(self.args, ctx)
        if args is OMIT:
            args = None
        if has_unknown(args):
            return UNKNOWN
        try:
            return self.result(args, ctx)
        except exception.InvalidTemplate:
            raise
        except (TypeError, ValueError, KeyError, IndexError,
                AttributeError) as e:
            raise self.error(str(e))

    def result(self, args, ctx):
        raise NotImplementedError

    def _limit(self, ctx):
        return _ResultLimit(self, ctx)

    def __repr__(self):
        return '{%s: %r}' % (self.name, self.args)


class _ResultLimit:
    """[DEFAULT] max_function_result_size for one call: functions whose
    result can be far bigger than their arguments (str_replace, list_join,
    repeat, list_concat) count it as they build it."""

    def __init__(self, fn, ctx):
        self.fn, self.ctx = fn, ctx
        self.size = bounds.limit('max_function_result_size')
        self.total = bounds.limit('max_stack_size')
        self.counted = 0

    def over(self, size):
        return self.fn.error('the result would be larger than %d bytes '
                             '(limit [DEFAULT] max_function_result_size)'
                             % self.size)

    def check(self, size):
        if size > self.size:
            raise self.over(size)
        # the resolution's sum: what this call added since its last look
        self.ctx.built += size - self.counted
        self.counted = size
        if self.ctx.built > self.total:
            raise self.fn.error(
                'with the functions evaluated before it (of this '
                'resource, or of the whole template when it is checked) '
                'it built more than %d bytes (limit [DEFAULT] '
                'max_stack_size: more than a stack may store)'
                % self.total)


def _json_size(v):
    return len(v) if isinstance(v, str) else len(_dumps(v))


def _walk(value, path, on_miss, strict_index=False):
    for key in path:
        if isinstance(value, dict):
            try:
                if key not in value:
                    return on_miss
            except TypeError:
                raise TypeError('Path component %r is not a valid key' %
                                (key,))
            value = value[key]
        elif isinstance(value, list):
            if isinstance(key, bool):
                raise TypeError('Path component %r is not a valid index' %
                                (key,))
            if isinstance(key, str):
                if strict_index:
                    return on_miss
                # ASCII digits (isdigit takes '²', which int() does not),
                # few enough for int() to read
                digits = key[1:] if key.startswith('-') else key
                if not (digits.isascii() and digits.isdigit()) or \
                        len(digits) > 30:
                    raise TypeError('Path component %r is not a valid index'
                                    % (key,))
                key = int(key)
            if not isinstance(key, int):
                raise TypeError('Path component %r is not a valid index' %
                                (key,))
            if not -len(value) <= key < len(value):
                return on_miss
            value = value[key]
        else:
            return on_miss
    return value


class GetParam(Function):
    def parse(self, parser, args):
        if isinstance(args, list):
            if not args:
                raise self.error('a parameter name is required')
        elif not isinstance(args, (str, dict)):
            raise self.error('the argument must be a parameter name or a '
                             'list [name, path...]')
        # a name the template lacks is refused where it is read, as in
        # Heat: a resource's properties are read as it is validated, an
        # output's only when it is shown (its error then)
        self.args = parser.parse(args, self.path)

    def resolve(self, ctx):
        args = resolve(self.args, ctx)
        if has_unknown(args):
            return UNKNOWN
        if isinstance(args, list):
            name, path = args[0], args[1:]
        else:
            name, path = args, []
        if not isinstance(name, str):
            raise self.error('the parameter name must be a string, not %s'
                             % _type(name))
        ctx.scope.check_param(name, self.path)
        value = ctx.scope.param_value(name)
        if value is UNKNOWN:
            return UNKNOWN
        try:
            return _walk(value, path, '')
        except TypeError as e:
            raise self.error(str(e))


class GetResource(Function):
    def parse(self, parser, args):
        self.args = parser.parse(args, self.path)
        name = self.args
        if isinstance(name, Function):
            name = resolve(name, Context(parser.scope))
        if name is UNKNOWN:
            return
        if not isinstance(name, str):
            raise self.error('the argument must be a resource name')
        parser.reference(name, self.path)

    def result(self, name, ctx):
        if not isinstance(name, str):
            raise self.error('the argument must be a resource name')
        if ctx.data is None:
            return name
        return ctx.data.reference_id(name)


class GetAttr(Function):
    def parse(self, parser, args):
        minimum = 1 if self.version >= '2015-10-15' else 2
        if not isinstance(args, list) or len(args) < minimum:
            raise self.error('arguments must be a list [resource, attribute'
                             ', path...]' if minimum == 2 else
                             'arguments must be a list [resource, '
                             'attribute, path...] or [resource]')
        self.args = parser.parse(args, self.path)
        #: a group's member attribute: the path applies to each member's
        self.per_member = False
        vctx = Context(parser.scope)
        name = self.args[0]
        if isinstance(name, Function):
            name = resolve(name, vctx)
        if name is UNKNOWN:
            return
        if not isinstance(name, str):
            raise self.error('the resource name must be a string')
        plugin = parser.reference(name, self.path)
        attr = None
        if len(self.args) > 1:
            attr = self.args[1]
            if isinstance(attr, Function):
                attr = resolve(attr, vctx)
            if attr is UNKNOWN:
                return
            if not isinstance(attr, str):
                raise self.error('the attribute name must be a string')
        parser.attribute(name, attr)
        per_member = getattr(plugin, 'path_per_member', None)
        self.per_member = bool(attr is not None and per_member is not None
                               and per_member(attr))
        if attr is not None and plugin is not None:
            if getattr(plugin, 'allow_unknown_attributes',
                       getattr(plugin, 'allow_unknown_properties', False)):
                return
            check = getattr(plugin, 'has_attribute', None)
            ok = check(attr) if check is not None else \
                attr in plugin.attribute_names()
            if not ok:
                raise _err('The Referenced Attribute (%s %s) is incorrect.'
                           % (name, attr), self.path)

    def resolve(self, ctx):
        if ctx.data is None:
            return UNKNOWN
        args = resolve(self.args, ctx)
        if has_unknown(args):
            return UNKNOWN
        name = args[0]
        attrs = ctx.data.attributes(name)
        if attrs is None:
            return None
        if attrs is UNKNOWN:   # not made yet (definition.unmade_properties)
            return UNKNOWN
        if len(args) == 1:
            return attrs
        attr, path = args[1], args[2:]
        if isinstance(attr, str) and attr.count('.') == 1 and \
                attr.startswith('resource.') and path and \
                isinstance(attrs, dict) and \
                '%s.%s' % (attr, path[0]) in attrs:
            # Heat's [res, resource.NAME, X, ...] is the nested
            # resource NAME's attribute X, as [res, resource.NAME.X, ...]
            attr, path = '%s.%s' % (attr, path[0]), path[1:]
        value = attrs.get(attr) if isinstance(attrs, dict) else None
        if value is None:
            why = getattr(ctx.data, 'attribute_error', None)
            why = why(name, attr) if why is not None else None
            if why:
                # the nested stack's output had an error: Heat's words
                raise exception.OutputError('Error in %s output %s: %s'
                                            % (name, attr, why), self.path)
        if self.per_member and value is None and \
                isinstance(attrs.get('refs'), list):
            # an attribute no member has: None for each (Heat)
            value = [None] * len(attrs['refs'])
        try:
            if self.per_member and isinstance(value, list) and path:
                # Heat: [group, X, key] is each member's X's key
                return [_walk(v, path, None, strict_index=True)
                        for v in value]
            return _walk(value, path, None, strict_index=True)
        except TypeError:
            return None


class StrReplace(Function):
    strict = False
    vstrict = False

    def parse(self, parser, args):
        if not isinstance(args, dict):
            raise self.error('arguments must be a map with "template" and '
                             '"params"')
        for key in ('template', 'params'):
            if key not in args:
                raise self.error('"%s" is missing' % key)
        self.args = parser.parse({'template': args['template'],
                                  'params': args['params']}, self.path)

    def result(self, args, ctx):
        tmpl, params = args.get('template'), args.get('params')
        if not isinstance(tmpl, str):
            raise self.error('"template" must be a string, not %s' %
                             _type(tmpl))
        if not isinstance(params, dict):
            raise self.error('"params" must be a map, not %s' %
                             _type(params))
        items = []
        for k, v in params.items():
            if not isinstance(k, str):
                raise self.error('"params" keys must be strings, not %s'
                                 % _type(k))
            if self.vstrict and (v is None or v == '' or v == [] or
                                 v == {}):
                raise self.error('"%s" has an empty value' % k)
            if v is None:
                v = ''
            elif isinstance(v, (list, dict)):
                if self.version < '2015-10-15':
                    raise self.error('"params" values must be strings or '
                                     'numbers, not %s' % _type(v))
                v = _dumps(v)
            elif not isinstance(v, str):
                v = str(v)
            if (self.strict or self.vstrict) and k not in tmpl:
                raise self.error('"%s" was not found in the template' % k)
            if k:
                items.append((k, v))
        items.sort(key=lambda kv: (-len(kv[0]), kv[0]))
        limit = self._limit(ctx)
        out = _replace(tmpl, items, limit)
        limit.check(len(out))
        return out


def _replace(tmpl, items, limit):
    """tmpl with each (key, value) of items replaced, longest key first
    (a value put in is not searched again); the result is counted as it
    is built and refused past `limit`.

    One key at a time over the pieces of text not replaced yet, not one
    level of recursion per key: a map of a few thousand params (a few
    KB) was a RecursionError."""
    pieces = [(tmpl, False)]   # (text, whether it is a value put in)
    size = len(tmpl)
    for k, v in items:
        out = []
        for text, done in pieces:
            if done or k not in text:
                out.append((text, done))
                continue
            parts = text.split(k)
            size += (len(parts) - 1) * (len(v) - len(k))
            if size > limit.size:
                raise limit.over(size)
            for i, part in enumerate(parts):
                if i:
                    out.append((v, True))
                if part:
                    out.append((part, False))
        pieces = out
    return ''.join(text for text, _ in pieces)


class StrReplaceStrict(StrReplace):
    strict = True


class StrReplaceVStrict(StrReplace):
    vstrict = True


class ListJoin(Function):
    def parse(self, parser, args):
        multi = self.version >= '2015-10-15'
        if not isinstance(args, list) or len(args) < 2 or \
                (not multi and len(args) != 2):
            raise self.error('arguments must be a list [delimiter, list%s]'
                             % (', ...' if multi else ''))
        self.args = parser.parse(args, self.path)

    def result(self, args, ctx):
        delim = args[0]
        if not isinstance(delim, str):
            raise self.error('the delimiter must be a string')
        multi = self.version >= '2015-10-15'
        items = []
        for lst in args[1:]:
            if lst is None:
                continue
            if not isinstance(lst, list):
                raise self.error('expected a list, got %s' % _type(lst))
            items.extend(lst)
        out = []
        limit = self._limit(ctx)
        size = -len(delim)
        for item in items:
            if item is None:
                item = ''
            elif multi and isinstance(item, (list, dict)):
                item = _dumps(item)
            elif not isinstance(item, str):
                raise self.error('items to join must be strings%s, not %s'
                                 % (', lists or maps' if multi else '',
                                    _type(item)))
            size += len(delim) + len(item)
            limit.check(size)
            out.append(item)
        return delim.join(out)


class GetFile(Function):
    def result(self, name, ctx):
        if not isinstance(name, str):
            raise self.error('the argument must be a file name')
        files = ctx.scope.files
        key = ctx.scope.bundle.file_key(name)
        if key not in files:
            raise self.error('No content found in the files section for '
                             '%s' % name)
        return files[key]


class Digest(Function):
    def parse(self, parser, args):
        if not isinstance(args, list) or len(args) != 2:
            raise self.error('arguments must be a list [algorithm, value]')
        self.args = parser.parse(args, self.path)

    def result(self, args, ctx):
        alg, value = args
        if not isinstance(alg, str) or not isinstance(value, str):
            raise self.error('the algorithm and the value must be strings')
        alg = alg.lower()
        if alg not in hashlib.algorithms_available or alg.startswith(
                'shake'):
            raise self.error('Algorithm must be one of %s' % ', '.join(
                sorted(a for a in hashlib.algorithms_guaranteed
                       if not a.startswith('shake'))))
        return hashlib.new(alg, value.encode('latin-1')).hexdigest()


class Repeat(Function):
    def parse(self, parser, args):
        if not isinstance(args, dict) or 'for_each' not in args or \
                'template' not in args:
            raise self.error('arguments must be a map with "for_each" and '
                             '"template"')
        keep = {'for_each': args['for_each'], 'template': args['template']}
        if self.version >= '2017-09-01' and 'permutations' in args:
            keep['permutations'] = args['permutations']
        self.args = parser.parse(keep, self.path)
        if not isinstance(self.args['for_each'], (dict, Function)):
            raise self.error('"for_each" must be a map')

    def result(self, args, ctx):
        for_each = args['for_each']
        if not isinstance(for_each, dict):
            raise self.error('"for_each" must be a map')
        perms = args.get('permutations', True)
        if not isinstance(perms, bool):
            raise self.error('"permutations" must be a boolean')
        keys, lists = [], []
        for k, v in for_each.items():
            if v is None:
                v = []
            elif isinstance(v, dict) and self.version >= '2016-10-14':
                v = list(v)
            elif not isinstance(v, list):
                raise self.error('The values of the "for_each" argument '
                                 'must be lists')
            keys.append(k)
            lists.append(v)
        if perms:
            combos = itertools.product(*lists)
        else:
            if any(isinstance(for_each[k], dict) for k in keys) or \
                    len({len(x) for x in lists}) > 1:
                raise self.error('With permutations false, the loop '
                                 'lists must be lists of the same length')
            combos = zip(*lists)
        tmpl = args['template']
        out = []
        limit = self._limit(ctx)
        size = 0
        for combo in combos:
            item = _subst(tmpl, list(zip(keys, combo)),
                          _Budget(limit, size))
            # an item costs at least a byte, so an endless product of
            # lists stops too
            size += max(1, _json_size(item))
            limit.check(size)
            out.append(item)
        return out


class _Budget:
    """What one repeated item may still grow to: the text a key
    replaces in is counted before it is built (a key of '' or 'a' in a
    long text, replaced by a long value, was gigabytes before the item
    was measured)."""

    def __init__(self, limit, used):
        self.limit, self.left = limit, limit.size - used

    def fits(self, size):
        if size > self.left:
            raise self.limit.over(self.limit.size - self.left + size)

    def take(self, size):
        self.fits(size)
        self.left -= size


def _subst(v, pairs, budget):
    if isinstance(v, str):
        for k, x in pairs:
            if isinstance(k, str) and isinstance(x, str) and k in v:
                budget.fits(len(v) + v.count(k) * (len(x) - len(k)))
            v = v.replace(k, x)
        budget.take(len(v))
        return v
    if isinstance(v, dict):
        return {_subst(k, pairs, budget): _subst(x, pairs, budget)
                for k, x in v.items()}
    if isinstance(v, list):
        return [_subst(x, pairs, budget) for x in v]
    return v


class MapMerge(Function):
    def result(self, args, ctx):
        if not isinstance(args, list):
            raise self.error('the argument must be a list of maps')
        out = {}
        for m in args:
            if m is None:
                continue
            if not isinstance(m, dict):
                raise self.error('items must be maps, not %s' % _type(m))
            out.update(m)
        return out


class MapReplace(Function):
    def parse(self, parser, args):
        if not isinstance(args, list) or len(args) != 2:
            raise self.error('arguments must be a list [map, {keys: ..., '
                             'values: ...}]')
        if isinstance(args[1], dict):
            extra = set(args[1]) - {'keys', 'values'}
            if extra:
                raise self.error('unknown key(s) %s; only "keys" and '
                                 '"values" are allowed' % ', '.join(
                                     sorted(map(str, extra))))
        self.args = parser.parse(args, self.path)

    def result(self, args, ctx):
        inp, repl = args
        inp = {} if inp is None else inp
        repl = {} if repl is None else repl
        if not isinstance(inp, dict):
            raise self.error('the first argument must be a map')
        if not isinstance(repl, dict):
            raise self.error('the second argument must be a map')
        extra = set(repl) - {'keys', 'values'}
        if extra:
            raise self.error('unknown key(s) %s; only "keys" and "values" '
                             'are allowed' % ', '.join(sorted(map(str,
                                                                  extra))))
        keys = repl.get('keys') or {}
        values = repl.get('values') or {}
        if not isinstance(keys, dict) or not isinstance(values, dict):
            raise self.error('"keys" and "values" must be maps')
        out = {}
        for k, v in inp.items():
            nk = keys.get(k, k)
            if k in keys and nk != k and nk in inp:
                raise self.error('key replacement %s collides with a key '
                                 'in the input map' % nk)
            if nk in out:
                raise self.error('key replacement %s creates a duplicate '
                                 'key' % nk)
            try:
                if v in values:
                    v = values[v]
            except TypeError:
                pass
            out[nk] = v
        return out


class StrSplit(Function):
    def parse(self, parser, args):
        if not isinstance(args, list) or len(args) not in (2, 3):
            raise self.error('arguments must be a list [delimiter, string]'
                             ' or [delimiter, string, index]')
        self.args = parser.parse(args, self.path)

    def result(self, args, ctx):
        delim, s = args[0], args[1]
        if s is None:
            return None
        if not isinstance(delim, str) or not isinstance(s, str):
            raise self.error('the delimiter and the string must be strings')
        parts = s.split(delim)
        if len(args) == 3:
            idx = args[2]
            try:
                idx = int(idx)
            except (TypeError, ValueError, OverflowError):
                raise self.error('the index must be an integer')
            try:
                return parts[idx]
            except IndexError:
                raise self.error('index %d out of range' % idx)
        return parts


class ListConcat(Function):
    unique = False

    def result(self, args, ctx):
        if not isinstance(args, list):
            raise self.error('the argument must be a list of lists')
        out = []
        limit = self._limit(ctx)
        size = 0
        for item in args:
            if item is None:
                continue
            if not isinstance(item, list):
                raise self.error('Incorrect arguments: Items to concat must'
                                 ' be lists. %s' % json.dumps(item))
            size += _json_size(item)
            limit.check(size)
            out.extend(item)
        if self.unique:
            seen = _Seen()
            out = [x for x in out if not seen.again(x)]
        return out


class _Seen:
    """Which values came before, as `in` on a list says (1 and 1.0 and
    true the same), in linear time: hashable values by a set, the rest
    (maps, lists: few, and never equal to a hashable one) by a list. A
    list's `in` for each of a few hundred thousand items took hours."""

    def __init__(self, values=()):
        self._hashed, self._others = set(), []
        for v in values:
            self.again(v)

    def __contains__(self, value):
        try:
            return value in self._hashed
        except TypeError:
            return value in self._others

    def again(self, value):
        """Whether `value` came before; it has now."""
        if value in self:
            return True
        try:
            self._hashed.add(value)
        except TypeError:
            self._others.append(value)
        return False


class ListConcatUnique(ListConcat):
    unique = True


class Contains(Function):
    def parse(self, parser, args):
        if not isinstance(args, list) or len(args) != 2:
            raise self.error('arguments must be a list [value, sequence]')
        self.args = parser.parse(args, self.path)

    def result(self, args, ctx):
        value, seq = args
        if not isinstance(seq, (list, str)):
            raise self.error('the second argument must be a list or a '
                             'string')
        if isinstance(seq, str) and not isinstance(value, str):
            return False
        return value in seq


class Filter(Function):
    def parse(self, parser, args):
        if not isinstance(args, list) or len(args) != 2:
            raise self.error('arguments must be a list [values, list]')
        self.args = parser.parse(args, self.path)

    def result(self, args, ctx):
        values, lst = args
        if not lst:
            return lst
        if not isinstance(lst, list):
            raise self.error('the second argument must be a list')
        if not values:
            return lst
        if not isinstance(values, list):
            raise self.error('the first argument must be a list')
        values = _Seen(values)
        return [x for x in lst if x not in values]


class MakeUrl(Function):
    KEYS = ('scheme', 'username', 'password', 'host', 'port', 'path',
            'query', 'fragment')

    def parse(self, parser, args):
        if not isinstance(args, dict):
            raise self.error('the argument must be a map')
        extra = set(args) - set(self.KEYS)
        if extra:
            raise self.error('unknown argument(s) %s; allowed: %s' % (
                ', '.join(sorted(map(str, extra))), ', '.join(self.KEYS)))
        self.args = parser.parse(args, self.path)

    def result(self, args, ctx):
        if not isinstance(args, dict):
            raise self.error('the argument must be a map')
        a = {k: v for k, v in args.items() if v is not None}
        for k in ('scheme', 'username', 'password', 'host', 'path',
                  'fragment'):
            if k in a and not isinstance(a[k], str):
                raise self.error('"%s" must be a string' % k)
        scheme = a.get('scheme', '')
        if ':' in scheme:
            raise self.error('"scheme" must not contain ":"')
        netloc = ''
        user, pw = a.get('username'), a.get('password')
        if user or pw:
            netloc = urlparse.quote(user or '', safe='')
            if pw:
                netloc += ':' + urlparse.quote(pw, safe='')
            netloc += '@'
        host = a.get('host', '')
        if host.startswith('[') and host.endswith(']'):
            host = host[1:-1]
        host = urlparse.quote(host, safe=':')
        if ':' in host:
            host = '[%s]' % host
        netloc += host
        if 'port' in a:
            port = a['port']
            try:
                if isinstance(port, bool):
                    raise ValueError()
                port = int(port)
            except (TypeError, ValueError, OverflowError):
                raise self.error('"port" must be an integer')
            if not 1 <= port <= 65535:
                raise self.error('"port" must be between 1 and 65535')
            netloc += ':%d' % port
        path = urlparse.quote(a.get('path', ''), safe='/')
        query = a.get('query', {})
        if not isinstance(query, dict):
            raise self.error('"query" must be a map')
        query = urlparse.urlencode(query).replace('%2F', '/')
        fragment = urlparse.quote(a.get('fragment', ''))
        return urlparse.urlunsplit((scheme, netloc, path, query, fragment))


def _plain(v):
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [_plain(x) for x in v]
    return v


class Yaql(Function):
    def parse(self, parser, args):
        if not isinstance(args, dict) or 'expression' not in args:
            raise self.error('arguments must be a map with "expression" '
                             'and optional "data"')
        extra = set(args) - {'expression', 'data'}
        if extra:
            raise self.error('unknown key(s) %s' % ', '.join(
                sorted(map(str, extra))))
        self.args = parser.parse({'expression': args['expression'],
                                  'data': args.get('data', {})}, self.path)
        self._parsed = None
        if isinstance(self.args['expression'], str):
            self._parsed = self._compile(self.args['expression'])

    def _compile(self, expr):
        try:
            return yaql_eval.parse(expr)
        except Exception as e:
            raise self.error('Bad expression %s' % e)

    def result(self, args, ctx):
        expr = args['expression']
        if not isinstance(expr, str):
            raise self.error('"expression" must be a string')
        parsed = self._parsed or self._compile(expr)
        try:
            out = yaql_eval.evaluate(parsed, {'data': args['data']})
        except yaql_eval.TimeLimitExceeded as e:
            raise self.error(str(e))
        except Exception as e:
            raise self.error('Bad expression: %s' % e)
        out = _plain(out)
        try:
            # float('nan') is a yaql expression: nan passes every range
            # constraint, and is no JSON to store or answer
            bounds.check_json(out)
        except bounds.NotPlainJSON as e:
            raise self.error('the result: %s' % e)
        return out


class Select(Function):
    """Fn::Select (HOT 2013-05-23 .. 2015-04-30)."""

    def parse(self, parser, args):
        if not isinstance(args, list) or len(args) != 2:
            raise self.error('arguments must be a list [index, collection]')
        self.args = parser.parse(args, self.path)

    def result(self, args, ctx):
        index, coll = args
        if coll is None:
            return ''
        if isinstance(coll, str):
            try:
                coll = bounds.loads_json(coll)
            except bounds.NotPlainJSON as e:
                raise self.error('the collection: %s' % e)
            except ValueError:
                raise self.error('the collection must be a list or a map')
        if isinstance(coll, dict):
            return coll.get(index, '') if isinstance(index, str) else ''
        if isinstance(coll, list):
            try:
                index = int(index)
            except (TypeError, ValueError, OverflowError):
                raise self.error('the index must be an integer')
            return coll[index] if 0 <= index < len(coll) else ''
        raise self.error('the collection must be a list or a map')


class Removed(Function):
    def parse(self, parser, args):
        raise _err('"%s" is not supported in this version of HOT (%s)' % (
            self.name, self.version), self.path)


class ResourceFacade(Function):
    """What the resource owning this (nested) stack says of itself:
    its metadata, deletion_policy or update_policy."""

    CHOICES = ('metadata', 'deletion_policy', 'update_policy')
    DEFAULTS = {'metadata': {}, 'deletion_policy': 'Delete',
                'update_policy': {}}

    def parse(self, parser, args):
        if args not in self.CHOICES:
            raise self.error('the argument must be one of %s' %
                             ', '.join(self.CHOICES))
        self.args = args

    def resolve(self, ctx):
        facade = getattr(ctx.scope, 'facade', None) or {}
        return facade.get(self.args, self.DEFAULTS[self.args])


class If(Function):
    """Handled by the parser (it is a macro); never resolved."""


CFN = ('Fn::GetAZs', 'Fn::Join', 'Fn::Split', 'Fn::Replace', 'Fn::Base64',
       'Fn::MemberListToMap', 'Fn::ResourceFacade', 'Ref')

VERSIONS = ('2013-05-23', '2014-10-16', '2015-04-30', '2015-10-15',
            '2016-04-08', '2016-10-14', '2017-02-24', '2017-09-01',
            '2018-03-02', '2018-08-31', '2021-04-16')
ALIASES = {'newton': '2016-10-14', 'ocata': '2017-02-24',
           'pike': '2017-09-01', 'queens': '2018-03-02',
           'rocky': '2018-08-31', 'wallaby': '2021-04-16'}

ADDED = {
    '2013-05-23': {'get_param': GetParam, 'get_resource': GetResource,
                   'get_attr': GetAttr, 'list_join': ListJoin,
                   'str_replace': StrReplace, 'get_file': GetFile,
                   'resource_facade': ResourceFacade,
                   'Fn::Select': Select},
    '2015-04-30': {'repeat': Repeat, 'digest': Digest},
    '2015-10-15': {'str_split': StrSplit},
    '2016-04-08': {'map_merge': MapMerge},
    '2016-10-14': {'yaql': Yaql, 'map_replace': MapReplace, 'if': If},
    '2017-02-24': {'filter': Filter, 'str_replace_strict': StrReplaceStrict},
    '2017-09-01': {'make_url': MakeUrl, 'list_concat': ListConcat,
                   'list_concat_unique': ListConcatUnique,
                   'str_replace_vstrict': StrReplaceVStrict,
                   'contains': Contains},
}

CONDITION_NAMES = ('equals', 'not', 'and', 'or')
ALL_NAMES = set(CFN) | set(CONDITION_NAMES)
for _v in ADDED.values():
    ALL_NAMES |= set(_v)


def function_table(version):
    """name -> class for a (canonical) version."""
    table = {}
    for v in VERSIONS:
        if v > version:
            break
        table.update(ADDED.get(v, {}))
    if version == '2013-05-23':
        # Heat's first HOT kept CloudFormation's functions beside its own
        from converge.template import cfn_functions
        table.update({name: cfn_functions.TABLES['2012-12-12'][name]
                      for name in CFN})
    else:
        table.update(dict.fromkeys(CFN, Removed))
    if version >= '2015-10-15':
        table['Fn::Select'] = Removed
    return table


def condition_table(version):
    """Functions usable as values inside condition expressions."""
    table = {'get_param': GetParam}
    if version >= '2017-09-01':
        table['yaql'] = Yaql
        table['contains'] = Contains
    return table


class Parser:
    """Parses snippets for one owner (a resource, an output, ...).

    :param refs: set receiving names of resources referenced
    :param attrs: set receiving (resource, attribute-or-None) pairs
    """

    def __init__(self, scope, table, refs=None, attrs=None,
                 conditions=False):
        self.scope = scope
        self.table = table
        self.refs = refs if refs is not None else set()
        self.attrs = attrs if attrs is not None else set()
        self.conditions = conditions

    def parse(self, v, path):
        if isinstance(v, dict):
            if len(v) == 1:
                for k in v:
                    pass
                cls = self.table.get(k) if isinstance(k, str) else None
                if cls is not None:
                    if cls is If:
                        return self.parse_if(v[k], path + (k,))
                    return cls(self, k, v[k], path)
                known = getattr(self.scope, 'known_functions', ALL_NAMES)
                if isinstance(k, str) and k in known and \
                        k not in getattr(self.scope, 'condition_ops',
                                         CONDITION_NAMES):
                    if self.conditions:
                        raise _err('"%s" is not allowed in conditions' % k,
                                   path + (k,))
                    raise _err('"%s" is not supported in this version of '
                               '%s' % (k, getattr(
                                   self.scope, 'version_label',
                                   'HOT (%s)' % self.scope.version)),
                               path + (k,))
            out = {}
            for k, x in v.items():
                if isinstance(x, (dict, list)):
                    x = self.parse(x, path + (k,))
                    if x is OMIT:
                        continue
                out[k] = x
            return out
        if isinstance(v, list):
            out = []
            for i, x in enumerate(v):
                if isinstance(x, (dict, list)):
                    x = self.parse(x, path + (i,))
                    if x is OMIT:
                        continue
                out.append(x)
            return out
        return v

    def parse_if(self, args, path):
        two = self.scope.version >= '2021-04-16'
        if not isinstance(args, list) or not (
                len(args) == 3 or (two and len(args) == 2)):
            raise _err('if: arguments must be a list [condition, '
                       'value_if_true%s]' % (
                           ', [value_if_false]' if two
                           else ', value_if_false'), path)
        cond = self.scope.condition_value(args[0], path + (0,))
        if cond:
            return self.parse(args[1], path + (1,))
        if len(args) == 2:
            return OMIT
        return self.parse(args[2], path + (2,))

    def reference(self, name, path):
        plugin = self.scope.check_reference(name, path)
        self.refs.add(name)
        return plugin

    def attribute(self, name, attr):
        self.attrs.add((name, attr))

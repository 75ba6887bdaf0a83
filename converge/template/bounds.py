"""Bounds on template input: what a document may expand to when loaded,
and what a function may produce when evaluated.

A few hundred bytes of YAML can stand for gigabytes (aliases that nest and
multiply), and a function can turn a short template into a huge value
(str_replace, repeat, list_join); a yaql expression or a regex can run for
hours. Each of these is refused as soon as it goes over its limit, with an
error naming where. The limits are [DEFAULT] options (converge/opts.py);
they are read here, on use, so the template package needs no set-up.
"""

import json
import math
import re

from converge import exception

# the option names, with the defaults used when converge.conf was never
# imported (the template package used as a library)
_DEFAULTS = {
    'max_template_size': 16 * 1024 * 1024,
    'max_template_nodes': 2000000,
    'max_template_depth': 64,
    'max_function_result_size': 4 * 1024 * 1024,
    'max_stack_size': 64 * 1024 * 1024,
    'max_resources_per_stack': 30000,
    'yaql_time_limit': 2.0,
    'pattern_time_limit': 0.5,
    'yaql_limit_iterators': 200,
    'yaql_memory_quota': 10000,
}


def limit(name):
    """The option's current value."""
    try:
        from converge import conf
        return getattr(conf.CONF, name)
    except Exception:  # noqa: BLE001 - unparsed or unregistered: default
        return _DEFAULTS[name]


class Expansion:
    """Counts what a YAML document stands for with every alias expanded.

    ``nodes``: scalars, maps and lists (a map's keys are scalars too);
    ``chars``: characters of every scalar; ``depth``: how deeply maps and
    lists nest. An alias adds what its anchor counted, once per use, which
    is what the document costs in memory and in the database once anything
    walks or stores it.
    """

    def __init__(self, filename=None, max_nodes=None, max_chars=None,
                 max_depth=None):
        self.filename = filename
        self.max_nodes = limit('max_template_nodes') \
            if max_nodes is None else max_nodes
        self.max_chars = limit('max_template_size') \
            if max_chars is None else max_chars
        self.max_depth = limit('max_template_depth') \
            if max_depth is None else max_depth
        self.nodes = 0
        self.chars = 0
        # deepest level reached so far; the loaders set it back while they
        # build an anchored node, to learn how deep that node alone goes
        self.level = 0

    def add(self, nodes, chars, line, alias=None):
        self.nodes += nodes
        self.chars += chars
        if self.nodes > self.max_nodes:
            raise self._over('more than %d nodes' % self.max_nodes,
                             'max_template_nodes', line, alias)
        if self.chars > self.max_chars:
            raise self._over('more than %d characters of values' %
                             self.max_chars, 'max_template_size', line, alias)

    def enter(self, depth, line, alias=None):
        """A map or list `depth` levels deep (for an alias: the deepest
        level the anchored node reaches from there)."""
        if depth > self.level:
            self.level = depth
            if depth > self.max_depth:
                raise self.too_deep(line, alias)

    def too_deep(self, line, alias=None):
        """The error of a document nested past the depth limit."""
        return self._over('maps and lists nested more than %d deep'
                          % self.max_depth, 'max_template_depth', line, alias)

    def _over(self, what, option, line, alias):
        by = ' at the alias *%s' % alias if alias is not None else ''
        return exception.InvalidTemplate(
            'The document expands to %s%s (limit [DEFAULT] %s)' % (
                what, by, option), filename=self.filename, line=line)

    def recursive(self, alias, line):
        return exception.InvalidTemplate(
            'The alias *%s refers to a node that contains it: it stands for '
            'an endless document' % alias, filename=self.filename,
            line=line)


def duplicate_key(key, line, first_line, filename):
    return exception.InvalidTemplate(
        'duplicate key %r at line %s (first at line %s)' % (
            key, line, first_line), filename=filename, line=line)


class NotPlainJSON(ValueError):
    """A JSON document nested past max_template_depth, or holding a
    number JSON has not (NaN, an infinity), or text that is not Unicode
    (a lone surrogate)."""


#: a UTF-16 surrogate on its own: JSON's "\ud800" (and yaql's '\ud800')
#: give one, and it is no Unicode character: no UTF-8 encodes it, so
#: no database stores it (a resource name holding one failed the
#: create's insert: a 500) and no terminal shows it
_SURROGATE = re.compile('[\ud800-\udfff]')


def lone_surrogate(text):
    """Whether `text` holds a lone surrogate."""
    return _SURROGATE.search(text) is not None


def _not_text(text):
    return NotPlainJSON('%s holds a lone surrogate (%s), which is not '
                        'Unicode text' % (
                            json.dumps(text[:40]),
                            ascii(_SURROGATE.search(text).group())[1:-1]))


def loads_json(text, check=True):
    """The JSON document `text` holds, within max_template_depth and
    with finite numbers only (`check`: else only what json.loads can
    build at all); NotPlainJSON if not, json's ValueError if malformed.

    Python's json reads NaN and Infinity, which no JSON parser reads
    back (the API would answer them), and recurses once per level (a
    deep enough document is a RecursionError there, and a value a bit
    less deep one later, in whatever walks it)."""
    try:
        doc = json.loads(text)
    except RecursionError:
        raise NotPlainJSON(_deeper(limit('max_template_depth')))
    if check:
        check_json(doc)
    return doc


def check_json(value, max_depth=None):
    """Refuse (NotPlainJSON) a value nested more than `max_depth`
    (default: max_template_depth) maps and lists deep, or holding a
    number that is not finite or text that is not Unicode (in a value
    or a key). Iterative: the value may be too deep for anything
    recursive."""
    if max_depth is None:
        max_depth = limit('max_template_depth')
    todo = [(value, 0)]
    while todo:
        v, depth = todo.pop()
        if isinstance(v, dict):
            items = v.values()
            for key in v:
                if isinstance(key, str) and lone_surrogate(key):
                    raise _not_text(key)
        elif isinstance(v, (list, tuple)):
            items = v
        else:
            if isinstance(v, float) and not math.isfinite(v):
                raise NotPlainJSON('%s is not a finite number' % v)
            if isinstance(v, str) and lone_surrogate(v):
                raise _not_text(v)
            continue
        if depth + 1 > max_depth:
            raise NotPlainJSON(_deeper(max_depth))
        todo.extend((x, depth + 1) for x in items)


def _deeper(max_depth):
    return ('maps and lists nested more than %d deep (limit [DEFAULT] '
            'max_template_depth)' % max_depth)

"""The `yaql` function's evaluation, bounded in time and memory.

yaql's own engine options bound the size of what an expression builds
(``yaql.limitIterators``: items a collection may have; ``yaql.memoryQuota``:
bytes a value may take), but not the time it takes: nested loops over
small collections, or a regex that backtracks catastrophically
(``regex('^(a+)+$').matches(...)``), run for hours inside one call.

So, per evaluation:

- a deadline (``[DEFAULT] yaql_time_limit``), checked every time yaql
  looks a function up (the root context below sees every lookup), which
  stops any expression that calls functions in a loop;
- yaql's regex functions are replaced by the same functions on the
  ``regex`` package, whose matching takes a ``timeout``: Python's ``re``
  runs a match in C with no way to stop it from another thread, and
  template functions are evaluated in the engine's worker threads, where
  no signal reaches; ``regex`` is well kept, ``re``-compatible and times
  out a match from within (the remaining budget is the timeout);
- ``pow`` and ``shiftBitsLeft`` refuse a result over the memory quota
  before computing it: each is one C call that cannot be stopped.
"""

import collections.abc  # noqa: F401  (yaql 3.2 needs it imported first)
import itertools
import math
import string as _string
import threading
import time

import regex

from converge.template import bounds


class TimeLimitExceeded(Exception):
    def __init__(self, seconds):
        super().__init__('the expression ran for more than %g s (limit '
                         '[DEFAULT] yaql_time_limit)' % seconds)


_LOCAL = threading.local()
_CACHE = {}
_LOCK = threading.Lock()
REGEX_TYPE = type(regex.compile('.'))


def engine_and_context():
    """(engine, root context) for the current limits, built once each."""
    key = (bounds.limit('yaql_limit_iterators'),
           bounds.limit('yaql_memory_quota'))
    with _LOCK:
        if key not in _CACHE:
            _CACHE[key] = _build(*key)
        return _CACHE[key]


#: yaql's parser (ply's lexer and parser, one per engine) keeps the text
#: it reads in itself: two threads parsing at once each saw the other's
#: tokens ("Parse error: unexpected end of statement" for a valid
#: expression, now and then, on a group's members resolved side by side)
_PARSE_LOCK = threading.Lock()


def parse(expression):
    """The parsed expression (yaql's errors as it raises them)."""
    engine, _ = engine_and_context()
    with _PARSE_LOCK:
        return engine(expression)


def evaluate(parsed, data):
    """Evaluate a parsed expression on `data` within the time limit."""
    _, context = engine_and_context()
    seconds = bounds.limit('yaql_time_limit')
    outer = getattr(_LOCAL, 'deadline', None)
    _LOCAL.deadline = (time.monotonic() + seconds, seconds)
    try:
        return parsed.evaluate(data=data,
                               context=context.create_child_context())
    finally:
        _LOCAL.deadline = outer


def _remaining():
    """Seconds left of the current evaluation's budget (None: no limit)."""
    deadline = getattr(_LOCAL, 'deadline', None)
    if deadline is None:
        return None
    left = deadline[0] - time.monotonic()
    if left <= 0:
        raise TimeLimitExceeded(deadline[1])
    return left


def _build(limit_iterators, memory_quota):
    import yaql
    from yaql.language import contexts
    from yaql.language import conventions

    class _Root(contexts.Context):
        """The bottom of every evaluation's context chain: every function
        lookup reaches it, so it is where the deadline is checked."""

        def get_functions(self, name, predicate=None,
                          use_convention=False):
            _remaining()
            return super().get_functions(name, predicate, use_convention)

    engine = yaql.YaqlFactory().create(options={
        'yaql.limitIterators': limit_iterators,
        'yaql.memoryQuota': memory_quota,
        'yaql.convertInputData': True,
        'yaql.convertOutputData': True})
    # yaql's own root context names its functions by the CamelCase
    # convention (toLower, selectMany), as Heat's templates call them; a
    # root of our own must say so, or they are found only by their
    # Python names (to_lower)
    context = yaql.create_context(
        context=_Root(convention=conventions.CamelCaseConvention()),
        regex=False)
    # a layer of its own: pow and shiftBitsLeft here are found before
    # yaql's own
    context = context.create_child_context()
    _register(context, memory_quota)
    return engine, context


def _timed_format(template, args, kwargs, memory_quota):
    """str.format, its result within the memory quota (a width such as
    {0:>999999999} would build a string of gigabytes)."""
    for _, _, spec, _ in _string.Formatter().parse(template):
        width = ''.join(c for c in (spec or '') if c.isdigit())
        if memory_quota > 0 and width and int(width) > memory_quota:
            from yaql.language import exceptions
            raise exceptions.MemoryQuotaExceededException()
    return template.format(*args, **kwargs)


def _ticking(iterable):
    for i, item in enumerate(iterable):
        if not i & 1023:
            _remaining()
        yield item


def _timed(call, *args, **kw):
    try:
        return call(*args, timeout=_remaining(), **kw)
    except TimeoutError:
        deadline = getattr(_LOCAL, 'deadline', None)
        raise TimeLimitExceeded(deadline[1] if deadline else 0)


def _register(context, memory_quota):
    from yaql.language import exceptions
    from yaql.language import specs
    from yaql.language import yaqltypes

    string = yaqltypes.String()

    @specs.parameter('pattern', string)
    def regex_(pattern, ignore_case=False, multi_line=False,
               dot_all=False):
        flags = regex.UNICODE | regex.VERSION0  # re's semantics
        if ignore_case:
            flags |= regex.IGNORECASE
        if multi_line:
            flags |= regex.MULTILINE
        if dot_all:
            flags |= regex.DOTALL
        return regex.compile(pattern, flags)

    def _found(pattern, s):
        if not isinstance(pattern, REGEX_TYPE):
            pattern = regex.compile(pattern, regex.UNICODE | regex.VERSION0)
        return _timed(pattern.search, s) is not None

    @specs.parameter('regexp', REGEX_TYPE)
    @specs.parameter('string', string)
    @specs.method
    def matches(regexp, string):
        return _found(regexp, string)

    @specs.parameter('string', string)
    @specs.parameter('regexp', string)
    @specs.method
    @specs.name('matches')
    def string_matches(string, regexp):
        return _found(regexp, string)

    @specs.parameter('regexp', REGEX_TYPE)
    @specs.parameter('string', string)
    @specs.name('#operator_=~')
    def op_matches(string, regexp):
        return _found(regexp, string)

    @specs.parameter('pattern', string)
    @specs.parameter('string', string)
    @specs.name('#operator_=~')
    def op_matches_string(string, pattern):
        return _found(pattern, string)

    @specs.parameter('regexp', REGEX_TYPE)
    @specs.parameter('string', string)
    @specs.name('#operator_!~')
    def op_not_matches(string, regexp):
        return not _found(regexp, string)

    @specs.parameter('pattern', string)
    @specs.parameter('string', string)
    @specs.name('#operator_!~')
    def op_not_matches_string(string, pattern):
        return not _found(pattern, string)

    def _publish(ctx, match):
        """$1 is the whole match, $2... the groups, $name a named group:
        each {value, start, end}."""
        def rec(g):
            return {'value': match.group(g), 'start': match.start(g),
                    'end': match.end(g)}
        ctx['$1'] = rec(0)
        for i in range(1, len(match.groups()) + 1):
            ctx['$%d' % (i + 1)] = rec(i)
        for name in match.groupdict():
            ctx['$' + name] = rec(name)

    @specs.parameter('regexp', REGEX_TYPE)
    @specs.parameter('string', string)
    @specs.parameter('selector', yaqltypes.Lambda(with_context=True))
    @specs.method
    def search(context, regexp, string, selector=None):
        match = _timed(regexp.search, string)
        if match is None:
            return None
        if selector is None:
            return match.group()
        child = context.create_child_context()
        _publish(child, match)
        return selector(child)

    @specs.parameter('regexp', REGEX_TYPE)
    @specs.parameter('string', string)
    @specs.parameter('selector', yaqltypes.Lambda(with_context=True))
    @specs.method
    def search_all(context, regexp, string, selector=None):
        for match in _timed(regexp.finditer, string):
            if selector is None:
                yield match.group()
            else:
                child = context.create_child_context()
                _publish(child, match)
                yield selector(child)

    @specs.parameter('regexp', REGEX_TYPE)
    @specs.parameter('string', string)
    @specs.parameter('max_split', int)
    @specs.method
    def split(regexp, string, max_split=0):
        return _timed(regexp.split, string, max_split)

    @specs.parameter('regexp', REGEX_TYPE)
    @specs.parameter('string', string)
    @specs.parameter('max_split', int)
    @specs.method
    @specs.name('split')
    def split_string(string, regexp, max_split=0):
        return _timed(regexp.split, string, max_split)

    @specs.parameter('regexp', REGEX_TYPE)
    @specs.parameter('string', string)
    @specs.parameter('repl', string)
    @specs.parameter('count', int)
    @specs.method
    def replace(regexp, string, repl, count=0):
        return _timed(regexp.sub, repl, string, count)

    @specs.parameter('regexp', REGEX_TYPE)
    @specs.parameter('string', string)
    @specs.parameter('repl', string)
    @specs.parameter('count', int)
    @specs.method
    @specs.name('replace')
    def replace_string(string, regexp, repl, count=0):
        return _timed(regexp.sub, repl, string, count)

    def _sub_by(context, regexp, string, repl, count):
        def each(match):
            child = context.create_child_context()
            _publish(child, match)
            return str(repl(child))
        return _timed(regexp.sub, each, string, count)

    @specs.parameter('regexp', REGEX_TYPE)
    @specs.parameter('string', string)
    @specs.parameter('repl', yaqltypes.Lambda(with_context=True))
    @specs.parameter('count', int)
    @specs.method
    def replace_by(context, regexp, string, repl, count=0):
        return _sub_by(context, regexp, string, repl, count)

    @specs.parameter('regexp', REGEX_TYPE)
    @specs.parameter('string', string)
    @specs.parameter('repl', yaqltypes.Lambda(with_context=True))
    @specs.parameter('count', int)
    @specs.method
    def replace_by_string(context, string, regexp, repl, count=0):
        return _sub_by(context, regexp, string, repl, count)

    @specs.parameter('string', string)
    def escape_regex(string):
        return regex.escape(string)

    def is_regex(value):
        return isinstance(value, REGEX_TYPE)

    bits = memory_quota * 8 if memory_quota > 0 else None

    @specs.parameter('a', yaqltypes.Number())
    @specs.parameter('b', yaqltypes.Number())
    @specs.parameter('c', yaqltypes.Number(nullable=True))
    def pow_(a, b, c=None):
        if bits is not None and c is None and isinstance(a, int) and \
                isinstance(b, int) and abs(a) > 1 and \
                b * math.log2(abs(a)) > bits:
            raise exceptions.MemoryQuotaExceededException()
        return pow(a, b, c)

    @specs.parameter('value', int)
    @specs.parameter('bits_number', int)
    def shift_bits_left(value, bits_number):
        if bits is not None and value and \
                value.bit_length() + bits_number > bits:
            raise exceptions.MemoryQuotaExceededException()
        return value << bits_number

    # the sources of long or endless collections tick: a consumer such as
    # len() or sum() loops over them in one call, with no lookup between
    @specs.parameter('stop', int)
    @specs.name('range')
    def range_stop(stop):
        return _ticking(range(stop))

    @specs.parameter('start', int)
    @specs.parameter('stop', int)
    @specs.parameter('step', int)
    @specs.name('range')
    def range_start_stop(start, stop, step=1):
        return _ticking(range(start, stop, step))

    @specs.parameter('start', int)
    @specs.parameter('step', int)
    def sequence(start=0, step=1):
        return _ticking(itertools.count(start, step))

    @specs.method
    @specs.parameter('value', nullable=True)
    @specs.parameter('times', int)
    def repeat(value, times=-1):
        return _ticking(itertools.repeat(value) if times < 0 else
                        itertools.repeat(value, times))

    @specs.method
    @specs.parameter('collection', yaqltypes.Iterable())
    def cycle(collection):
        return _ticking(itertools.cycle(collection))

    # yaql 3 dropped string.format (CVE-2024-29156: a field such as
    # {0.__class__} reached any attribute of an argument); templates still
    # call it (TripleO's roles: "{0}".format($.data)). This one fills
    # fields by position or name only, and refuses attribute and index
    # lookups in a field
    @specs.parameter('template', string)
    @specs.method
    def format_(template, *args, **kwargs):
        for _, field, spec, _ in _string.Formatter().parse(template):
            if field and ('.' in field or '[' in field):
                raise ValueError(
                    'format: the field {%s} looks an attribute or an index '
                    'up: only {}, {0} or {name}' % field)
            if spec and '{' in spec:
                raise ValueError('format: nested fields are not allowed')
        return _timed_format(template, args, kwargs, memory_quota)

    for f in (range_stop, range_start_stop, sequence, repeat, cycle):
        context.register_function(f)
    context.register_function(format_, name='format')

    for f in (matches, string_matches, op_matches,
              op_matches_string, op_not_matches, op_not_matches_string,
              search, split, split_string, replace, replace_string):
        context.register_function(f)
    for name, f in (('regex', regex_), ('searchAll', search_all),
                    ('replaceBy', replace_by), ('replaceBy', replace_by_string),
                    ('escapeRegex', escape_regex), ('isRegex', is_regex),
                    ('pow', pow_), ('shiftBitsLeft', shift_bits_left)):
        context.register_function(f, name=name)

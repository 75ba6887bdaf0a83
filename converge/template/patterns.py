"""Regular expressions a template supplies (a parameter's
``allowed_pattern``), matched in bounded time.

Python's ``re`` backtracks: ``(a+)+$`` against thirty characters runs for
minutes, holding the interpreter lock, and so every thread of the API
with it. A pattern is run by RE2 (google-re2), whose matching is linear
in the text, whenever RE2 reads it as ``re`` does:

- the classes ``re`` gives Unicode meanings (``\\d``, ``\\w``, ``\\s``) are
  rewritten as the Unicode classes RE2 knows (ASCII in RE2's own), and
  ``\\Z`` as RE2's ``\\z``;
- what RE2 would read otherwise is left to the fallback: ``\\b``/``\\B``
  (ASCII in RE2), ``[:alpha:]`` inside a class (a POSIX class in RE2,
  characters in ``re``), ``{,n}`` (a repeat in ``re``, text in RE2),
  ``\\W``/``\\S`` inside a class (no union with a complement in RE2), and
  a ``$`` the pattern goes on after (``re``'s also matches before a last
  newline).

Heat's patterns are ``re`` syntax, and operators write look-aheads
(password rules such as ``(?=.*[0-9])``) and back-references, which RE2
has not. Refusing those would refuse templates Heat takes, so they run on
the ``regex`` package (``re``'s semantics, VERSION0) with a time limit
(``[DEFAULT] pattern_time_limit``): ``regex`` releases the interpreter
lock while it matches a ``str`` and stops itself at the limit, so such a
pattern costs its own request at most the limit and the other threads
nothing. Refused patterns are those ``re`` refuses, as in Heat.
"""

import contextlib
import functools
import re
import threading
import time
import warnings

import re2
import regex

from converge.template import bounds


class TooSlow(Exception):
    """The fallback's match ran past [DEFAULT] pattern_time_limit."""

    def __init__(self, seconds):
        super().__init__('matching took more than %g s, with the other '
                         'patterns of the template (limit [DEFAULT] '
                         'pattern_time_limit)' % seconds)


# re's \s: str.isspace() characters
_SPACE = (r'\t\n\x0b\x0c\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}'
          r'\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}')
_WORD = r'\p{L}\p{N}_'
# escape -> (outside a class, inside one); None: RE2 cannot say it there
_CLASSES = {
    'd': (r'\p{Nd}', r'\p{Nd}'),
    'D': (r'\P{Nd}', r'\P{Nd}'),
    'w': ('[%s]' % _WORD, _WORD),
    'W': ('[^%s]' % _WORD, None),
    's': ('[%s]' % _SPACE, _SPACE),
    'S': ('[^%s]' % _SPACE, None),
    'Z': (r'\z', None),
    'b': (None, r'\x08'),
    'B': (None, None),
}

_OPTIONS = re2.Options()
# a pattern RE2 cannot read goes to the fallback: not an error to log
_OPTIONS.log_errors = False


def _tokens(pattern):
    """(token, in a class) for each escape or character of `pattern`, as
    re reads them: a class runs from '[' to the first ']' that is not
    its first member ('[]a]', '[^]a]'); a '[' inside one is a member."""
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == '\\' and i + 1 < n:
            yield pattern[i:i + 2], in_class
            i += 2
            continue
        yield c, in_class
        i += 1
        if in_class:
            in_class = c != ']'
        elif c == '[':
            in_class = True
            for first in '^]':
                if pattern.startswith(first, i):
                    yield first, True
                    i += 1


def _for_re2(pattern):
    """`pattern` written so RE2 matches what re matches, or None."""
    out = []
    tokens = list(_tokens(pattern))
    for k, (tok, in_class) in enumerate(tokens):
        after = tokens[k + 1][0] if k + 1 < len(tokens) else ''
        if len(tok) == 2 and tok[1] in _CLASSES:
            tok = _CLASSES[tok[1]][1 if in_class else 0]
            if tok is None:
                return None
        elif in_class and tok == '[' and after in (':', '.', '='):
            return None
        elif not in_class and tok == '{' and after == ',':
            return None
        elif not in_class and tok == '$' and after not in ('', ')', '|'):
            # re's $ also matches before a last newline, which only a
            # pattern going on after it can tell from RE2's
            return None
        out.append(tok)
    return ''.join(out)


def _for_regex(pattern):
    """`pattern` for the regex package, which reads '[:alpha:]' inside a
    class as a POSIX class where re reads the characters."""
    return ''.join('\\[' if tok == '[' and in_class else tok
                   for tok, in_class in _tokens(pattern))


class Pattern:
    """A compiled pattern; ``fullmatch(text)`` says whether all of
    `text` matches."""

    def __init__(self, pattern):
        self.pattern = pattern
        with warnings.catch_warnings():
            # re's FutureWarning about '[[' is for the template's author,
            # not for the service's log
            warnings.simplefilter('ignore')
            try:
                re.compile(pattern)  # re.error: refused as Heat refuses it
            except OverflowError as e:
                # a repeat past re's largest ('a{99999999999}')
                raise re.error(str(e))
            except RecursionError:
                raise re.error('groups nested too deeply for re to read')
        said = _for_re2(pattern)
        self._re2 = None
        if said is not None:
            try:
                self._re2 = re2.compile(said, _OPTIONS)
            except re2.error:
                pass   # look-arounds, back-references, long repeats
        if self._re2 is None:
            self._slow = regex.compile(_for_regex(pattern), regex.VERSION0)

    @property
    def linear(self):
        """Whether RE2 runs it (else the fallback, with its limit)."""
        return self._re2 is not None

    def fullmatch(self, text):
        """Whether all of `text` matches; the fallback stops at the
        current budget's end (see `budget`), raising TooSlow."""
        if self._re2 is not None:
            return self._re2.fullmatch(text) is not None
        seconds = bounds.limit('pattern_time_limit')
        deadline = getattr(_LOCAL, 'deadline', None)
        if deadline is None:
            deadline = time.monotonic() + seconds
        left = deadline - time.monotonic()
        if left <= 0:
            raise TooSlow(seconds)
        try:
            return self._slow.fullmatch(text, timeout=left) is not None
        except TimeoutError:
            raise TooSlow(seconds)


_LOCAL = threading.local()


@contextlib.contextmanager
def budget():
    """One pattern_time_limit for every fallback match made inside (in
    this thread): a template's parameters, a list's items. Without it a
    thousand parameters would take a thousand limits. Inside another
    budget, that one holds."""
    if getattr(_LOCAL, 'deadline', None) is not None:
        yield
        return
    _LOCAL.deadline = time.monotonic() + bounds.limit('pattern_time_limit')
    try:
        yield
    finally:
        _LOCAL.deadline = None


@functools.lru_cache(maxsize=256)
def compile(pattern):  # noqa: A001 - as re.compile
    """The Pattern of `pattern` (re.error when re refuses it)."""
    return Pattern(pattern)

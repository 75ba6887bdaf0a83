"""What never leaves the engine: hidden parameters' values (and whatever
carries them), and, to those who may not have them, agents' and
signals' credentials.

A `Mask` knows the secret values of one stack tree and replaces them by
``******`` wherever they occur in data on its way out (an answer of the
service layer, an error, an event's reason): a value that is a secret is
masked whole, a text that contains one has it masked in place. Masking
by value rather than by the path a value took catches every way a
hidden value travels (a property, a deployment's input, an output, an
attribute that echoes it, an error quoting it) without each view having
to know where it came from. A secret shorter than `MIN_PART` characters
is masked only where it is a whole value: masked as a part of every
text it occurs in, a one-letter secret would blank half of every answer.

The engine itself never goes through a Mask: plug-ins, agents and the
stored rows get the real values.
"""

import collections
import json
import logging
import threading
import traceback

from converge import userdata

#: what a masked value reads as (Heat's)
MASK = '******'
#: a secret at least this long is masked inside longer texts too
MIN_PART = 4


def leaves(value):
    """The scalar values in `value` (a parameter's value may be a list or
    a JSON map), each as found."""
    if isinstance(value, dict):
        for v in value.values():
            yield from leaves(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from leaves(v)
    elif isinstance(value, (str, int, float)) and \
            not isinstance(value, bool):
        yield value


class Mask:
    """The secrets of one stack tree, and how to hide them."""

    def __init__(self, secrets=(), credentials=False):
        #: whole values (any length, any scalar type) that are secret
        self._whole = set()
        #: texts masked wherever they occur, longest first
        self._parts = []
        #: whether agents' credentials in user_data are masked too
        self.credentials = credentials
        self.add(secrets)

    def add(self, value):
        """Take the scalar leaves of `value` as secrets too."""
        parts = set(self._parts)
        for leaf in leaves(value):
            text = leaf if isinstance(leaf, str) else json.dumps(leaf)
            if not text:
                continue
            self._whole.add(text)
            if len(text) >= MIN_PART:
                parts.add(text)
        self._parts = sorted(parts, key=len, reverse=True)
        return self

    def secrets(self):
        """The secret texts (to add to another Mask)."""
        return sorted(self._whole)

    def __bool__(self):
        return bool(self._whole) or self.credentials

    def text(self, text):
        """`text` with every secret in it masked."""
        if not isinstance(text, str) or not self:
            return text
        if text in self._whole:
            return MASK
        if 'multipart/' in text and 'MIME-Version' in text:
            # a server's user_data as the cloud shows it: its parts are
            # base64, where no secret is found by its text
            text = userdata.rewrite(text, self._part)
        for part in self._parts:
            if part in text:
                text = text.replace(part, MASK)
        return text

    def _part(self, content_type, text):
        if content_type == userdata.CONTENT_TYPE:
            return userdata.without_token(text, MASK) if self.credentials \
                else text
        return self.text(text)

    def __call__(self, data):
        """A copy of `data` (dicts, lists, records' dicts) with every
        secret masked; `data` itself is left as it is (it may be a
        cached row the engine still uses)."""
        if not self:
            return data
        return self._walk(data)

    def _walk(self, value):
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self._walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._walk(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self._walk(v) for v in value)
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, (int, float)) and \
                json.dumps(value) in self._whole:
            return MASK
        return value

    def error(self, exc):
        """Mask the message of a converge error in place (its text is
        what the API and the CLI show); returns it."""
        if not self:
            return exc
        if isinstance(getattr(exc, 'reason', None), str):
            exc.reason = self.text(exc.reason)   # what locate() renders
        message = getattr(exc, 'message', None)
        if isinstance(message, str):
            masked = self.text(message)
            if masked != message:
                exc.message = masked
                exc.args = (masked,) + tuple(exc.args[1:])
        elif exc.args and isinstance(exc.args[0], str):
            exc.args = (self.text(exc.args[0]),) + tuple(exc.args[1:])
        return exc


# -- log lines ----------------------------------------------------------------
# A log line is written where no stack is at hand (a plug-in's debug
# line, a traceback): the secrets this process has met (the hidden values
# of every template version it parsed or masked for) are masked in every
# line its log handlers write.

#: most secrets remembered (the oldest forgotten first)
REMEMBERED = 4096
_REMEMBERED = collections.OrderedDict()
_REMEMBERED_LOCK = threading.Lock()
_LOG_MASK = [Mask()]


def remember(values):
    """Mask `values` (their scalar leaves) in this process's log lines."""
    texts = [v if isinstance(v, str) else json.dumps(v)
             for v in leaves(values)]
    texts = [t for t in texts if len(t) >= MIN_PART]
    if not texts:
        return
    with _REMEMBERED_LOCK:
        fresh = False
        for t in texts:
            if t not in _REMEMBERED:
                fresh = True
            _REMEMBERED[t] = True
            _REMEMBERED.move_to_end(t)
        while len(_REMEMBERED) > REMEMBERED:
            _REMEMBERED.popitem(last=False)
            fresh = True
        if fresh:
            _LOG_MASK[0] = Mask(list(_REMEMBERED))


class LogFilter(logging.Filter):
    """Masks remembered secrets in a record's message and traceback."""

    def filter(self, record):
        mask = _LOG_MASK[0]
        if not mask:
            return True
        try:
            text = record.getMessage()
        except Exception:   # a broken record: let logging say so
            return True
        if record.exc_info and record.exc_info[0] is not None:
            text += '\n' + ''.join(traceback.format_exception(
                *record.exc_info)).rstrip('\n')
            record.exc_info = None
            record.exc_text = None
        masked = mask.text(text)
        if masked != text or record.args:
            record.msg, record.args = masked, ()
        return True


def mask_logs(logger=None):
    """Put a LogFilter on every handler of `logger` (the root)."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, LogFilter) for f in handler.filters):
            handler.addFilter(LogFilter())

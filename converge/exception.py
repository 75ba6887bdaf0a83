"""Errors users see. Each says what went wrong and where.

`where` is a dotted path inside a template (``resources.web.properties.image``);
the template loader turns it into ``file:line`` when it can.
"""


class ConvergeError(Exception):
    """Base for every error converge reports to a user."""

    exit_code = 1

    def __init__(self, message, **kwargs):
        super().__init__(message)
        self.message = message
        for k, v in kwargs.items():
            setattr(self, k, v)

    def __str__(self):
        return self.message


def from_answer(type_name, message, default=None):
    """The error another process answered with (converge-api, a home's
    read server), by its class's name: the same class where converge has
    it, so a command exits with the same code either way, else `default`
    (ConvergeError). The message is final as it comes: the classes' own
    constructors would compose it again (StackNotFound adds "Stack not
    found: ")."""
    cls = globals().get(str(type_name))
    if not (isinstance(cls, type) and issubclass(cls, ConvergeError)):
        cls = default or ConvergeError
    exc = cls.__new__(cls)
    ConvergeError.__init__(exc, message)
    return exc


class InvalidTemplate(ConvergeError):
    """A template, environment or parameter value is not acceptable.

    :param message: what is wrong, in plain words
    :param path: list of keys from the document root to the bad item
    :param filename: the file it came from, when known
    :param line: the 1-based line number, when known
    """

    exit_code = 2

    def __init__(self, message, path=None, filename=None, line=None):
        self.reason = message
        self.path = list(path or [])
        self.filename = filename
        self.line = line
        super().__init__(self._render())

    def _render(self):
        place = self.place()
        if place:
            return '%s: %s' % (place, self.reason)
        return self.reason

    def place(self):
        """Where the error is: ``file:line: dotted.path``, each part
        when known."""
        where = ''
        if self.filename:
            where = self.filename
            if self.line:
                where += ':%d' % self.line
        loc = '.'.join(str(p) for p in self.path)
        return ': '.join(p for p in (where, loc) if p)

    def locate(self, filename=None, line=None):
        """Fill in file and line if not known yet; returns self."""
        if filename and not self.filename:
            self.filename = filename
        if line and not self.line:
            self.line = line
        self.message = self._render()
        self.args = (self.message,)
        return self

    def prefixed(self, *prefix):
        """Return the same error with path segments prepended."""
        self.path = list(prefix) + self.path
        self.message = self._render()
        self.args = (self.message,)
        return self


class ResourceInvalid(InvalidTemplate):
    """What a resource type's own check of its properties finds (a
    plug-in's validate_more), where Heat's resource validate() raises its
    text alone, with no property path (`Cannot establish connection to
    Heat endpoint at region ...`): Heat's text first, as clients match
    it from the start, then where it is, as every other error names it:
    ``TEXT (at t.yaml:9: resources.R.properties.P)``."""

    def _render(self):
        place = self.place()
        if place:
            return '%s (at %s)' % (self.reason, place)
        return self.reason


class HeatWorded(InvalidTemplate):
    """An error in Heat's words, after the file and line it is at.

    :param where: the dotted path, as Heat names it
    """

    #: Heat's form: '%(where)s' and '%(reason)s'
    form = '%(where)s: %(reason)s'

    def __init__(self, message, path=None, filename=None, line=None,
                 where=''):
        self.where = where
        super().__init__(message, path, filename, line)

    def _render(self):
        text = self.form % {'where': self.where, 'reason': self.reason}
        if not self.filename:
            return text
        place = self.filename + (':%d' % self.line if self.line else '')
        return '%s: %s' % (place, text)


class PropertyError(HeatWorded):
    """A resource's property value that cannot be worked out (a
    function in it fails): ``Property error: :
    resources.R.properties.P: : why``."""

    form = 'Property error: : %(where)s: : %(reason)s'


class NestedError(HeatWorded):
    """An error inside a nested stack, reached as Heat names the way
    down: ``resources.group<nested_stack>.resources.0<provider.yaml>.
    resources.R: : why``."""

    form = '%(where)s: : %(reason)s'


class OutputError(InvalidTemplate):
    """An attribute read from a nested stack's output that could not be
    resolved, in Heat's words (``Error in RESOURCE output NAME: why``):
    where it went wrong is the nested stack's, so no place in this
    template is added."""

    def _render(self):
        return self.reason


class InvalidInput(ConvergeError):
    """A request the engine refuses as given (stack name, timeout, ...)."""

    exit_code = 2


class RequestLimitExceeded(InvalidInput):
    """More than a size limit allows (Heat's error of the name, 400)."""

    def __init__(self, message, **kwargs):
        super().__init__('Request limit exceeded: %s' % message, **kwargs)


class ImmutableParameterModified(InvalidInput):
    """An update changes a parameter its schema makes `immutable`
    (Heat's error of the name, 400)."""

    def __init__(self, names):
        super().__init__('The following parameters are immutable and may '
                         'not be updated: %s' % ', '.join(names))


class SchemaMismatch(ConvergeError):
    """The database's schema is not the one this converge was made for."""

    exit_code = 2


class NotFound(ConvergeError):
    exit_code = 3


class StackNotFound(NotFound):
    def __init__(self, name):
        super().__init__('Stack not found: %s' % name, stack=name)


class ResourceNotFound(NotFound):
    def __init__(self, stack, name):
        super().__init__('Resource %s not found in stack %s' % (name, stack))


class Conflict(ConvergeError):
    exit_code = 4
    http_status = 409


class Unauthorized(ConvergeError):
    """No credential, or one that is unknown, expired or revoked."""

    exit_code = 5
    http_status = 401


class TooMany(ConvergeError):
    """A limit on requests per time: try again after `retry_after` s."""

    exit_code = 4
    http_status = 429


class Forbidden(ConvergeError):
    """The caller is known but the policy does not allow the operation."""

    exit_code = 5
    http_status = 403


class ResourceFailure(ConvergeError):
    """A resource action failed; the message becomes the status reason,
    in Heat's form (reasons.py).

    :param heat_error: the exception class Heat names for this failure
        (``ValueError``, ``ResourceInError`` ...); Heat's plain ``Error``
        when not given, none when ``''``
    :param below: a nested stack's: the path of its resource that failed
    """


class UpdateReplace(Exception):
    """Raised by a plug-in's update step: this change needs a new resource."""


class CloudError(ConvergeError):
    """The (simulated) cloud refused or failed an API call."""

    def __init__(self, message, code=500):
        super().__init__(message, code=code)


class CloudNotFound(CloudError):
    def __init__(self, message):
        super().__init__(message, code=404)


class CloudTransient(CloudError):
    """The cloud could not serve the call now (5xx, 429, a dropped
    connection) but may later: the engine retries the step with backoff
    instead of failing the resource. ``retry_after`` (seconds) is the
    cloud's hint, if it gave one."""

    def __init__(self, message, code=503, retry_after=None):
        super().__init__(message, code)
        self.retry_after = retry_after


class CloudThrottled(CloudTransient):
    """A limit of the deployment's own (or the cloud's 429): not a fault,
    so waiting for it never uses up the transient-error retries."""

    def __init__(self, message, retry_after=1.0):
        super().__init__(message, 429, retry_after)


def http_status(exc):
    """The HTTP status a ConvergeError is answered with: the one it says
    (``http_status``), 404 for a NotFound, else 400 (input refused)."""
    return getattr(exc, 'http_status',
                   404 if isinstance(exc, NotFound) else 400)

"""A resource's failure reason as Heat words it.

Heat's reason (its ResourceFailure) is the class of the exception the
resource's step raised, the path of the resource, and the message:

    ValueError: resources.victim: Test Resource failed oops

and the stack's is ``Resource CREATE failed: `` and that. A nested
stack's failure is its owner's with the path carried down, so a client
reads, at the top, which resource failed and how:

    ValueError: resources.victim.resources.oops: Test Resource failed oops

Scripts and Heat's own functional tests compare these texts, so the
class named is the one Heat would name for the same failure (its own
exception, or its cloud client's), not converge's.
"""

import re

from converge import exception

#: the class Heat's cloud clients raise for an HTTP status (nova's,
#: neutron's, cinder's share these names)
_CLOUD_ERRORS = {400: 'BadRequest', 401: 'Unauthorized', 403: 'Forbidden',
                 404: 'NotFound', 409: 'Conflict', 413: 'OverLimit',
                 500: 'InternalServerError'}

#: what a nested stack's own reason begins with when one of its
#: resources failed (traversal.fail's text)
_RESOURCE_FAILED = re.compile(r'Resource [A-Z_]+ failed: ')


def error_class(exc):
    """The name of the exception Heat would raise for `exc`: one a
    plug-in names (``heat_error``: ValueError for a TestResource, Heat's
    ResourceInError, WaitConditionTimeout ...), a cloud's error by its
    HTTP status, a template error Heat's StackValidationFailed, another
    of converge's errors Heat's plain Error; a Python error its own."""
    named = getattr(exc, 'heat_error', None)
    if named is not None:
        return named
    if isinstance(exc, exception.CloudError):
        return _CLOUD_ERRORS.get(exc.code, 'ClientException')
    if isinstance(exc, exception.InvalidTemplate):
        return 'StackValidationFailed'
    if isinstance(exc, exception.ConvergeError):
        return 'Error'
    return type(exc).__name__


def message_of(exc):
    """The message alone (no class): what the exception says."""
    return str(exc) or type(exc).__name__


def failure(name, exc):
    """Resource `name`'s failure reason for the exception its step
    raised; a nested stack's failure (``below``: the path inside it)
    keeps the class and message its resource's had."""
    return render(error_class(exc), ['resources', name] +
                  list(getattr(exc, 'below', None) or []), message_of(exc))


def render(error, path, message):
    """``ERROR: PATH: MESSAGE``, each part left out when empty; a path's
    number is an index (``resources.group.resources[0]``), as Heat's."""
    where = ''
    for item in path:
        item = str(item)
        if item.isdigit():
            where += '[%s]' % item
        elif where:
            where += '.' + item
        else:
            where = item
    return ''.join(('%s: ' % error if error else '',
                    '%s: ' % where if where else '', message))


def nested_failure(reason):
    """The ResourceFailure of a resource whose nested stack failed for
    `reason` (the nested stack's own status reason). When a resource in
    it failed (``Resource CREATE failed: ValueError: resources.oops:
    msg``) its class, path and message are taken up, as Heat parses
    them (split at each colon); else the reason is the message, with no
    class."""
    if _RESOURCE_FAILED.match(reason or ''):
        parsed = [part.strip() for part in reason.split(':')]
        if len(parsed) >= 4:
            return exception.ResourceFailure(
                ': '.join(parsed[3:]), heat_error=parsed[1],
                below=parsed[2].split('.'))
    return exception.ResourceFailure(reason or 'nested stack failed',
                                     heat_error='')

"""What a stack stores, held to [DEFAULT] max_stack_size.

Each intrinsic function's result is bounded (max_function_result_size),
but a small template can call many: thirty resources of a 15 KB template
stored 320 MB. The stack's total is checked where the engine first knows
each part: its template, files, environment and parameters at create and
update, before anything is stored; a resource's resolved properties when
they are resolved (before the cloud is touched), and its attributes when
they are recorded. What the cloud says of a resource (its observed state,
which the template does not shape) is not counted: a 1,000-node TripleO
overcloud stores 14 MB of template, 8 MB of properties and attributes,
and 17 MB of observed state.

Cheaply: a resource's values are serialised once to be measured (json's C
encoder: microseconds for the usual few hundred bytes). Only a resource
larger than its fair share of what the template leaves ((limit - template)
/ resources) needs the stack's total; while each stays within its share
the stack cannot exceed the limit. The total is summed from the rows
when what this process recorded since its last sum reaches half of what
that sum left below the limit, or after REFRESH seconds. Other
processes' records meanwhile are seen at the next sum: each may add up
to half of what was left, so with several engine processes the limit
may be overshot by that much each, and by one resource per worker
thread recording at the same moment (the units of one batch count each
other).
"""

import json
import threading
import time
import weakref

import sqlalchemy as sa

from converge import conf as conf_mod
from converge import exception
from converge.db import models


def json_size(value):
    """Bytes `value` takes as JSON (as the database stores it)."""
    if value is None:
        return 0
    return len(json.dumps(value, default=str))


def bundle_size(bundle, params):
    """Bytes a template version stores: the template (kept parsed and as
    its text), its files, environment and parameters. The text stands
    for the parsed template where there is one (no serialisation of the
    whole template to measure it)."""
    text = bundle.source_text
    size = 2 * len(text) if text else json_size(bundle.template)
    for key, value in bundle.files.items():
        size += len(key) + (len(value) if isinstance(value, str)
                            else json_size(value))
    return size + json_size(bundle.environment) + json_size(params)


def check_bundle(bundle, params):
    """Refuse a create or update whose template version alone is beyond
    the limit (before anything is stored)."""
    limit = conf_mod.CONF.max_stack_size
    size = bundle_size(bundle, params)
    if size > limit:
        raise exception.RequestLimitExceeded(
            'the template, files, environment and parameters take %d '
            'bytes, more than a stack may store (%d bytes, [DEFAULT] '
            'max_stack_size)' % (size, limit))


_template_sizes = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _template_size(defn):
    with _lock:
        size = _template_sizes.get(defn)
    if size is None:
        size = bundle_size(defn.bundle, defn.parameters)
        with _lock:
            _template_sizes[defn] = size
    return size


def _stored(col):
    return sa.func.coalesce(sa.func.length(sa.cast(col, sa.Text)), 0)


#: seconds a process trusts the stack's total it last summed (adding what
#: it recorded since) at most before it sums the rows again
REFRESH = 30.0

#: stack id -> [bytes of its resources when summed, bytes this process
#: added since, when summed]
_totals = {}


def check_resource(engine, defn, stack_id, row_id, name, size, what,
                   pending=0):
    """Refuse `size` more bytes for resource `name` (row `row_id`, whose
    own stored values it replaces) if the stack would then store more
    than the limit. `what`: what the bytes are, for the message;
    `pending`: bytes of the stack's records about to be committed with
    it (a batch's)."""
    limit = conf_mod.CONF.max_stack_size
    template = _template_size(defn)
    if size <= (limit - template) // max(1, len(defn.resources)):
        return
    now = time.monotonic()
    with _lock:
        known = _totals.get(stack_id)
        if known is not None and now - known[2] < REFRESH and \
                2 * (known[1] + pending + size) <= \
                limit - template - known[0]:
            # within half of what the last sum left: most resources of a
            # large stack are over their share (22,000 of a TripleO
            # overcloud have 850 bytes each), and a sum per resource read
            # the whole stack each time (every 2 s still cost a quarter
            # more of the engine's time on that create)
            known[1] += size
            return
    others = _summed(engine, stack_id, row_id)
    total = template + others + pending + size
    with _lock:
        if len(_totals) > 1000:
            _totals.clear()
        _totals[stack_id] = [others, 0 if total > limit else size, now]
    if total > limit:
        raise exception.RequestLimitExceeded(
            'resource %s: its %s (%d bytes) would take the stack to %d '
            'bytes stored, more than a stack may store (%d bytes, '
            '[DEFAULT] max_stack_size); nothing of them was stored'
            % (name, what, size, total, limit))


def _summed(engine, stack_id, row_id):
    """Bytes the stack's resources store now, but row `row_id`'s."""
    R = models.Resource
    query = sa.select(sa.func.sum(
        _stored(R.properties) + _stored(R.attributes))).where(
            R.stack_id == stack_id)
    if row_id is not None:
        query = query.where(R.id != row_id)
    with engine.db.connect() as conn:
        return conn.execute(query).scalar() or 0

"""Which of the registered resource types the request's cloud can serve
(Heat's `is_service_available`): a type whose plug-in names a
`required_service` (a catalog type, a Neutron extension) that the cloud
lacks is left out of the resource type list, as Heat leaves it out; its
template is refused at validate (engine/stacks.py, ResourceTypeUnavailable).

Heat's functional tests decide to skip by that list ("OS::Neutron::Trunk
resource type not available, skipping test"), so a list naming a type
the cloud refuses fails them instead.

A listing asks the cloud once per service (and extension) it needs to
know about, not once per type, and keeps the answers per cloud and
project for [cloud] availability_cache_time seconds: the list is asked
for often (every `openstack orchestration resource type list`, every
functional test's setUp), the catalog rarely changes.
"""

import threading
import time

from oslo_log import log as logging

from converge import conf as conf_mod
from converge.drivers import trusts

LOG = logging.getLogger(__name__)

#: (cloud key, service type, extension) -> (when asked, (ok, why))
_ANSWERS = {}
_LOCK = threading.Lock()


def forget():
    """Drop every kept answer (the next listing asks again)."""
    with _LOCK:
        _ANSWERS.clear()


def checker(engine, ctx):
    """A function of a plug-in class: False when the request's cloud
    lacks what it needs. The cloud's driver is made only when an answer
    is not kept, once per listing at most, and each need asked once."""
    key, make = _cloud_of(engine, ctx)
    made = []

    def cloud():
        if not made:
            made.append(make())
        return made[0]

    answers = {}   # this listing's: each need asked once however many

    def usable(cls):
        needs = getattr(cls, 'required_service', None)
        if not needs:
            return True
        _client, service_type, extension = needs
        if (service_type, extension) not in answers:
            answers[service_type, extension] = _available(
                key, cloud, service_type, extension)
        return answers[service_type, extension]
    return usable


def _available(key, cloud, service_type, extension):
    now = time.monotonic()
    cache_key = (key, service_type, extension)
    ttl = conf_mod.CONF.cloud.availability_cache_time
    with _LOCK:
        kept = _ANSWERS.get(cache_key)
    if kept is not None and now - kept[0] < ttl:
        return kept[1][0]
    try:
        answer = cloud().available(service_type, extension)
    except Exception as e:
        # an unreachable cloud lists the type (validate tells, naming
        # the cause), and the answer is not kept
        LOG.warning('Cannot tell whether cloud %s has %s%s: %s', key[0],
                    service_type, ' (%s)' % extension if extension else '',
                    e)
        return True
    with _LOCK:
        _ANSWERS[cache_key] = (now, answer)
    return answer[0]


def _cloud_of(engine, ctx):
    """(a key for the request's cloud as its project sees it, a function
    making its driver)."""
    from converge.engine import request
    project = request.project_of(ctx)
    if trusts.wanted(ctx):
        # a stack this request created would get a trust of its user's;
        # a listing makes none: the user's own token shows the same
        # catalog (that project's)
        return ('keystone', project), lambda: _user_cloud(ctx)
    name = getattr(ctx, 'cloud', None) or conf_mod.CONF.cloud.name
    return ((name or 'sim', project),
            lambda: engine.clients.for_stack(name, project).cloud)


def _user_cloud(ctx):
    from keystoneauth1.identity import v3
    from keystoneauth1 import session as ks_session
    from openstack import connection

    from converge.drivers import openstack
    conf = conf_mod.CONF
    sess = ks_session.Session(auth=v3.Token(
        auth_url=conf.trustee.auth_url, token=ctx.auth_token,
        project_id=ctx.project_id))
    return openstack.OpenStackCloud(
        connection.Connection(session=sess,
                              region_name=conf.cloud.region_name),
        'keystone:%s' % ctx.project_id)

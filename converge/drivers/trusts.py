"""Keystone trusts: the engine acts in a user's cloud with the user's
authority long after the user's token has expired (Heat's deferred auth).

When a stack is created through a Keystone-authenticated API and
``[cloud] use_trusts`` is set, the requesting user (the trustor) trusts
converge's service user (``[trustee]``) with the request's roles on the
request's project, impersonation on. The stack then lives in the cloud
``trust:<trust id>`` (models.Stack.cloud): every worker and observer
that acts for it asks Keystone for a token scoped to that trust (the
service user's password and the trust id) and reaches the services
through the catalog that token carries. The trust is deleted with the
stack (`forget`).
"""

import logging

from converge import conf as conf_mod
from converge import exception

LOG = logging.getLogger(__name__)

PREFIX = 'trust:'


def cloud_of(trust_id):
    return PREFIX + trust_id


def trust_of(cloud):
    """The trust id of a stack's cloud, or None for a clouds.yaml one."""
    if cloud and cloud.startswith(PREFIX):
        return cloud[len(PREFIX):]
    return None


def wanted(ctx):
    """Whether a stack `ctx` creates gets a trust: a Keystone request
    (its token at hand) where trusts are configured."""
    conf = conf_mod.CONF
    return (conf.cloud.use_trusts and conf.api.auth_strategy == 'keystone'
            and getattr(ctx, 'cloud', None) is None
            and bool(getattr(ctx, 'auth_token', None)))


def _trustee_auth(trust_id=None):
    from keystoneauth1.identity import v3
    t = conf_mod.CONF.trustee
    if not (t.auth_url and t.username and t.password):
        raise exception.ConvergeError(
            '[cloud] use_trusts needs [trustee] auth_url, username and '
            'password (the service user converge acts as)')
    kwargs = {'trust_id': trust_id} if trust_id else {}
    return v3.Password(auth_url=t.auth_url, username=t.username,
                       password=t.password,
                       user_domain_name=t.user_domain_name, **kwargs)


def session(trust_id=None):
    """A keystoneauth session as the trustee (scoped to `trust_id`)."""
    from keystoneauth1 import session as ks_session
    return ks_session.Session(auth=_trustee_auth(trust_id))


def create(ctx):
    """A trust from the user of `ctx` to the trustee, on the request's
    project with its roles: the trust's id."""
    from keystoneauth1 import exceptions as ks_exc
    from keystoneauth1.identity import v3
    from keystoneauth1 import session as ks_session
    t = conf_mod.CONF.trustee
    trustee = session()
    roles = conf_mod.CONF.cloud.trusts_delegated_roles or ctx.roles
    try:
        trustee_id = trustee.get_user_id()
        user = ks_session.Session(auth=v3.Token(
            auth_url=t.auth_url, token=ctx.auth_token,
            project_id=ctx.project_id))
        resp = user.post('/OS-TRUST/trusts', endpoint_filter={
            'service_type': 'identity', 'interface': 'public'}, json={
            'trust': {'trustor_user_id': ctx.user_id,
                      'trustee_user_id': trustee_id,
                      'project_id': ctx.project_id,
                      'impersonation': True,
                      'roles': [{'name': r} for r in roles]}})
    except ks_exc.HttpError as e:
        raise exception.CloudError(
            'Keystone refused the trust the stack acts by: %s' % e,
            getattr(e, 'http_status', 500) or 500)
    return resp.json()['trust']['id']


def forget(trust_id):
    """Delete the trust (gone already is success). Keystone lets the
    trustor delete a trust: a token of the trust itself impersonates
    the trustor; where Keystone refuses that, the trustee's own token
    (a service user with the admin role may)."""
    from keystoneauth1 import exceptions as ks_exc
    where = {'service_type': 'identity', 'interface': 'public'}
    for scoped in (trust_id, None):
        try:
            session(scoped).delete('/OS-TRUST/trusts/%s' % trust_id,
                                   endpoint_filter=where)
            return
        except (ks_exc.NotFound, ks_exc.Unauthorized) as e:
            if isinstance(e, ks_exc.NotFound):
                return
            if scoped is None:   # the trust is gone: its token is refused
                raise
        except ks_exc.Forbidden:
            if scoped is None:
                raise

"""Who is asking: the request context every service call takes first.

oslo.context's RequestContext, as the rest of OpenStack uses it: the CLI
fills it from --os-project-id / --os-user-id (or OS_PROJECT_ID /
OS_USER_ID), a REST API will fill it from Keystone's token. The service
layer reads `project_id` (every stack read and write is scoped to it),
`user_id`, `roles` and `request_id` (generated when not given).
"""

from oslo_context import context as oslo_context

from converge import exception


class RequestContext(oslo_context.RequestContext):
    """A request on behalf of one project. ``cloud``: the cloud (a
    clouds.yaml name) a stack this request creates lives in; None for the
    simulated cloud."""

    def __init__(self, *args, cloud=None, credentials=True, **kwargs):
        super().__init__(*args, **kwargs)
        self.cloud = cloud
        #: whether the caller sees the credentials a stack hands out
        #: (agent and signal tokens): the API sets it from its policy;
        #: the embedded CLI is the home's owner and sees them
        self.credentials = credentials
        #: type name -> whether the caller may use that resource type (the
        #: API sets it from its policy, engine/exposure.py); None: every
        #: type (the embedded CLI)
        self.may_use_type = None


def make(project_id=None, user_id=None, roles=(), request_id=None,
         cloud=None, auth_token=None, credentials=True):
    """A context for `project_id`, else the configured default project
    (`[DEFAULT] project_id`)."""
    if not project_id:
        from converge import conf
        project_id = conf.CONF.project_id
    # overwrite=False: the context is passed explicitly, never looked up
    # from the thread it was made in
    return RequestContext(project_id=project_id, user_id=user_id,
                          roles=list(roles), request_id=request_id,
                          overwrite=False, cloud=cloud,
                          auth_token=auth_token, credentials=credentials)


def project_of(ctx):
    """The project a request is scoped to; a request without one is
    refused rather than allowed to see every project."""
    project = getattr(ctx, 'project_id', None)
    if not project:
        raise exception.ConvergeError('The request names no project')
    return project

"""OS::Keystone::Domain, Project, User and UserRoleAssignment, as
Heat's (heat/engine/resources/openstack/keystone/), made through
``clients.cloud``. They are an admin's: Heat's policy
(``resource_types:OS::Keystone::*``) keeps them from everyone else
(api/policy.py), and Keystone's refuses them too.

A domain is found again by its name, a project or user by its domain
and name. A user's or project's domain is a name or id; a user names
the default domain's, or ``NAME{DOMAIN}`` another's. A role assignment
grants each of its roles on a project or a domain; a change of its roles
revokes those no longer asked for and grants the new ones.
"""

from converge import exception
from converge.drivers import cloud as cloud_mod
from converge.resources import base
from converge.resources import cloud_object as co
from converge.resources import none
from converge.resources import properties as p


class Domain(co.CloudObject):
    """OS::Keystone::Domain. Keystone deletes only a disabled domain: the
    driver disables it first."""

    kind = 'domain'
    title = 'Domain'
    natural_identity = True
    update_fields = ('name', 'description', 'enabled')
    drift_fields = ('enabled',)

    properties_schema = {
        'name': p.Schema(p.STRING, 'The name of the domain.',
                         update_allowed=True),
        'description': p.Schema(p.STRING, 'Description of keystone '
                                'domain.', update_allowed=True),
        'enabled': p.Schema(p.BOOLEAN, 'This domain is enabled or '
                            'disabled.', default=True, update_allowed=True),
    }
    attributes_schema = {}

    def make_body(self):
        props = self.properties
        return {'name': self.physical_name(),
                'description': props.get('description') or '',
                'enabled': props.get('enabled', True)}

    def attributes(self, obj):
        return {}


class _InDomain(co.CloudObject):
    """A project or user: named in a Keystone domain."""

    natural_identity = True

    def domain_body(self):
        """What a project's and a user's bodies share."""
        props = self.properties
        return {'name': self.physical_name(),
                'domain_id': self.resolve('domain', props.get('domain') or
                                          'default', 'domain'),
                'description': props.get('description') or '',
                'enabled': props.get('enabled', True)}


class Project(_InDomain):
    """OS::Keystone::Project."""

    kind = 'project'
    title = 'Project'
    update_fields = ('name', 'description', 'enabled', 'tags')
    drift_fields = ('enabled',)

    properties_schema = {
        'name': p.Schema(p.STRING, 'Name of keystone project.',
                         update_allowed=True),
        'domain': p.Schema(p.STRING, 'Name or id of keystone domain.',
                           default='default', constraint='keystone.domain'),
        'description': p.Schema(p.STRING, 'Description of keystone '
                                'project.', default='', update_allowed=True),
        'enabled': p.Schema(p.BOOLEAN, 'This project is enabled or '
                            'disabled.', default=True, update_allowed=True),
        'parent': p.Schema(p.STRING, 'The name or ID of parent of this '
                           'keystone project in hierarchy.',
                           constraint='keystone.project'),
        'tags': p.Schema(p.LIST, 'A list of tags for labeling and sorting '
                         'projects.', default=[], update_allowed=True,
                         schema=p.Schema(p.STRING)),
    }
    attributes_schema = {
        'name': 'Project name.',
        'parent_id': 'Parent project id.',
        'domain_id': 'Domain id for project.',
        'enabled': 'Flag of enable project.',
        'is_domain': 'Indicates whether the project also acts as a domain.',
    }

    def make_body(self):
        props = self.properties
        body = dict(self.domain_body(), tags=list(props.get('tags') or []))
        if props.get('parent'):
            body['parent_id'] = self.resolve('project', props['parent'],
                                             'parent')
        return body


class User(_InDomain):
    """OS::Keystone::User (its groups are not supported)."""

    kind = 'user'
    title = 'User'
    update_fields = ('name', 'description', 'enabled', 'email', 'password',
                     'default_project_id')
    drift_fields = ('enabled',)

    properties_schema = {
        'name': p.Schema(p.STRING, 'Name of keystone user.',
                         update_allowed=True),
        'domain': p.Schema(p.STRING, 'Name or ID of keystone domain.',
                           default='default', constraint='keystone.domain'),
        'description': p.Schema(p.STRING, 'Description of keystone user.',
                                default='', update_allowed=True),
        'enabled': p.Schema(p.BOOLEAN, 'Keystone user is enabled or '
                            'disabled.', default=True, update_allowed=True),
        'email': p.Schema(p.STRING, 'Email address of keystone user.',
                          update_allowed=True),
        'password': p.Schema(p.STRING, 'Password of keystone user.',
                             update_allowed=True),
        'default_project': p.Schema(
            p.STRING, 'Name or ID of default project of keystone user.',
            update_allowed=True, constraint='keystone.project'),
    }
    attributes_schema = {
        'name': 'User name.',
        'default_project_id': 'Default project id for user.',
        'domain_id': 'Domain id for user.',
        'enabled': 'Flag of enable user.',
        'password_expires_at': 'Show user password expiration time.',
    }

    def make_body(self):
        props = self.properties
        body = self.domain_body()
        if props.get('email'):
            body['email'] = props['email']
        if props.get('password'):
            body['password'] = props['password']
        if props.get('default_project'):
            body['default_project_id'] = self.resolve(
                'project', props['default_project'], 'default_project')
        return body


ASSIGNMENTS = 'assignments'


class UserRoleAssignment(base.Resource):
    """OS::Keystone::UserRoleAssignment: roles of a user on projects or
    domains. The grants are its own: each is made with the cloud's
    role_assignment kind, recorded in the resource's data, and revoked
    when the template no longer asks for it or the resource goes."""

    properties_schema = {
        'user': p.Schema(p.STRING, 'Name or id of keystone user.',
                         required=True, update_allowed=True,
                         constraint='keystone.user'),
        'roles': p.Schema(
            p.LIST, 'List of role assignments.', update_allowed=True,
            schema=p.Schema(p.MAP, 'Map between role with either project '
                            'or domain.', schema={
                                'role': p.Schema(
                                    p.STRING, 'Keystone role.',
                                    required=True,
                                    constraint='keystone.role'),
                                'project': p.Schema(
                                    p.STRING, 'Keystone project.',
                                    constraint='keystone.project'),
                                'domain': p.Schema(
                                    p.STRING, 'Keystone domain.',
                                    constraint='keystone.domain')})),
    }
    attributes_schema = {}

    @classmethod
    def validate_more(cls, values, path):
        for i, grant in enumerate(values.get('roles') or []):
            if not isinstance(grant, dict):
                continue
            if bool(grant.get('project')) == bool(grant.get('domain')):
                raise exception.InvalidTemplate(
                    'Either project or domain must be specified for role '
                    '%s' % grant.get('role'),
                    path=list(path) + ['roles', i])
        return values

    @property
    def cloud(self):
        return self.clients.cloud

    def _resolve(self, kind, value):
        try:
            return self.cloud.resolve(kind, value)
        except exception.CloudTransient:
            raise
        except exception.CloudError as exc:
            raise exception.ResourceFailure('%s: %s' % (self.name, exc))

    def _wanted(self):
        user = self._resolve('user', self.properties['user'])
        out = {}
        for grant in self.properties.get('roles') or []:
            body = {'user_id': user,
                    'role_id': self._resolve('role', grant['role'])}
            if grant.get('project'):
                body['project_id'] = self._resolve('project',
                                                   grant['project'])
            else:
                body['domain_id'] = self._resolve('domain', grant['domain'])
            out[cloud_mod.role_assignment_id(body)] = body
        return out

    def _apply(self):
        wanted = self._wanted()
        held = list(self.data.get(ASSIGNMENTS) or [])
        for gone in [a for a in held if a not in wanted]:
            try:
                self.cloud.delete('role_assignment', gone)
            except exception.CloudNotFound:
                pass
            held.remove(gone)
            self.data[ASSIGNMENTS] = held
        for aid, body in sorted(wanted.items()):
            if aid not in held:
                self.cloud.create('role_assignment', body,
                                  key='%s:%s' % (self.idempotency_key, aid))
                held.append(aid)
                self.data[ASSIGNMENTS] = held
        self.data[ASSIGNMENTS] = held

    def create(self):
        self._apply()
        self.physical_id = self.physical_id or \
            none.physical_resource_name(self)

    def update(self, prior, observed):
        self._apply()

    def delete(self):
        for aid in list(self.data.get(ASSIGNMENTS) or []):
            try:
                self.cloud.delete('role_assignment', aid)
            except exception.CloudNotFound:
                pass
        self.data[ASSIGNMENTS] = []

    def get_attributes(self, observed):
        return {'show': {'assignments': list(
            self.data.get(ASSIGNMENTS) or [])}}


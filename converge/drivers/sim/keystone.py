"""Keystone's domains, projects, users, roles and role assignments on
the sim (an admin's, as Heat's OS::Keystone::* types are).

They are the cloud's, not a project's: every caller sees them (the
policy keeps the types to admins). A domain is found by its name, a
project or user by its domain and name, as Keystone keeps them unique;
a role assignment by its user, role and project (or domain), its id
made of the three. Roles are Keystone's own: any name resolves (the sim
has every role), as images and flavors do. As Keystone refuses, an
enabled domain is not deleted (403), nor one that still holds projects
or users.
"""

from converge.drivers import cloud
from converge.drivers.sim import rows
from converge.drivers.sim.rows import bad, conflict, forbidden, missing

DEFAULT_DOMAIN = 'default'


def _name(body, what):
    name = body.get('name')
    if not isinstance(name, str) or not 1 <= len(name.strip()) <= 255:
        raise bad("Invalid input for field '%s/name': %r is not a string "
                  "of 1 to 255 characters" % (what, name))
    return name


class _Identity(rows.Kind):
    """What the identity kinds share: they are every project's to see."""

    updatable = ()

    def new(self, ctx, body, key, **columns):
        columns.setdefault('shared', True)
        return super().new(ctx, body, key, **columns)

    def show(self, ctx, obj):
        return self.show_with_id(ctx, obj)

    def update(self, ctx, obj, body, latency):
        self.refuse_read_only(body)
        if 'name' in body and body['name'] != obj.body['name']:
            ident = self.identity(ctx, dict(obj.body, **body))
            if ctx.held('live_ident', ident) is not None:
                raise conflict('Conflict occurred attempting to store %s - '
                               'Duplicate entry.' % self.name)
            obj.live_ident, obj.name = ident, body['name']
        obj.body.update(body)
        return ctx.save(obj)

    def same(self, obj, body):
        raise conflict('Conflict occurred attempting to store %s - '
                       'Duplicate entry found with name %s.'
                       % (self.name, body.get('name')))


class Domain(_Identity):
    name = 'domain'
    title = 'Domain'
    fields = ('name', 'description', 'enabled')
    updatable = fields

    def identity(self, ctx, body):
        return 'domain:%s' % body['name'] if body.get('name') else None

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        stored = {'name': _name(body, 'domain'),
                  'description': body.get('description') or '',
                  'enabled': bool(body.get('enabled', True))}
        return ctx.insert(self.new(ctx, stored, key,
                                   ident=self.identity(ctx, body)))

    def delete(self, ctx, obj, latency):
        if obj.body.get('enabled', True):
            raise forbidden('Cannot delete a domain that is enabled, '
                            'please disable it first.')
        for kind in ('project', 'user'):
            if ctx.all(kind, parent=obj.id):
                raise forbidden('Cannot delete domain %s: it still holds '
                                '%ss.' % (obj.id, kind))
        ctx.remove(obj)


def _domain_id(ctx, body):
    domain = body.get('domain_id') or DEFAULT_DOMAIN
    if domain != DEFAULT_DOMAIN and ctx.visible('domain', domain) is None:
        raise missing('Could not find domain: %s.' % domain)
    return domain


class Project(_Identity):
    name = 'project'
    title = 'Project'
    fields = ('name', 'domain_id', 'description', 'enabled', 'parent_id',
              'tags', 'is_domain')
    updatable = ('name', 'description', 'enabled', 'tags')

    def identity(self, ctx, body):
        if not body.get('name'):
            return None
        return 'project:%s:%s' % (body.get('domain_id') or DEFAULT_DOMAIN,
                                  body['name'])

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        domain = _domain_id(ctx, body)
        parent = body.get('parent_id')
        if parent and ctx.visible('project', parent) is None:
            raise missing('Could not find project: %s.' % parent)
        stored = {'name': _name(body, 'project'), 'domain_id': domain,
                  'description': body.get('description') or '',
                  'enabled': bool(body.get('enabled', True)),
                  'parent_id': parent or domain, 'is_domain': False,
                  'tags': list(body.get('tags') or [])}
        return ctx.insert(self.new(
            ctx, stored, key, parent=domain,
            ident=self.identity(ctx, dict(body, domain_id=domain))))


class User(_Identity):
    name = 'user'
    title = 'User'
    fields = ('name', 'domain_id', 'description', 'enabled', 'email',
              'password', 'default_project_id')
    updatable = ('name', 'description', 'enabled', 'email', 'password',
                 'default_project_id')

    identity = Project.identity

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        domain = _domain_id(ctx, body)
        stored = {'name': _name(body, 'user'), 'domain_id': domain,
                  'description': body.get('description') or '',
                  'enabled': bool(body.get('enabled', True)),
                  'email': body.get('email'),
                  'default_project_id': body.get('default_project_id'),
                  'password_expires_at': None,
                  # Keystone keeps a hash, never shows it
                  '_password': bool(body.get('password'))}
        return ctx.insert(self.new(
            ctx, stored, key, parent=domain,
            ident='user:%s:%s' % (domain, stored['name'])))

    def update(self, ctx, obj, body, latency):
        body = dict(body)
        if 'password' in body:   # kept as Keystone keeps it: not shown
            obj.body['_password'] = bool(body.pop('password'))
        return super().update(ctx, obj, body, latency)

    def delete(self, ctx, obj, latency):
        for grant in ctx.all('role_assignment', parent=obj.id):
            ctx.remove(grant)   # Keystone drops a user's assignments
        ctx.remove(obj)


class Role(_Identity):
    name = 'role'
    title = 'Role'
    fields = ('name', 'description', 'domain_id')

    def identity(self, ctx, body):
        return 'role:%s' % body['name'] if body.get('name') else None

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        stored = {'name': _name(body, 'role'),
                  'description': body.get('description') or '',
                  'domain_id': body.get('domain_id')}
        return ctx.insert(self.new(ctx, stored, key,
                                   ident=self.identity(ctx, body)))


class RoleAssignment(_Identity):
    name = 'role_assignment'
    title = 'Role assignment'
    fields = ('user_id', 'role_id', 'project_id', 'domain_id')

    def identity(self, ctx, body):
        return 'role_assignment:%s' % cloud.role_assignment_id(body)

    def same(self, obj, body):
        return True   # granting a role twice grants it once

    def create(self, ctx, body, key, latency):
        self.check_fields(body, self.fields)
        if ctx.visible('user', body.get('user_id')) is None:
            raise missing('Could not find user: %s.' % body.get('user_id'))
        if bool(body.get('project_id')) == bool(body.get('domain_id')):
            raise bad('Specify a project or a domain, not both')
        if body.get('project_id') and \
                ctx.visible('project', body['project_id']) is None:
            raise missing('Could not find project: %s.' % body['project_id'])
        stored = {k: body.get(k) for k in self.fields}
        return ctx.insert(self.new(
            ctx, stored, key, id=cloud.role_assignment_id(body),
            name=cloud.role_assignment_id(body), parent=body['user_id'],
            ident=self.identity(ctx, body)))


KINDS = {k.name: k for k in (Domain(), Project(), User(), Role(),
                             RoleAssignment())}

"""OS::Keystone::Domain, Project, User and UserRoleAssignment on the
simulated cloud through the service layer, with heat_integrationtests
test_keystone_user_with_domain's templates: a domain, a project and a
user in that domain; a second stack grants the user (named
``user{domain}``) a role on the project; the domain disabled by an
update; both stacks deleted, leaving nothing.
"""

import copy

from converge.engine import request
from converge.engine import service
from tests import enginetools as et

PARAMS = {'user_name': {'type': 'string'},
          'project_name': {'type': 'string'},
          'domain_name': {'type': 'string'}}

CREATE_USER = {
    'heat_template_version': '2014-10-16', 'parameters': PARAMS,
    'resources': {
        'Domain': {'type': 'OS::Keystone::Domain', 'properties': {
            'description': 'Test Domain', 'enabled': True,
            'name': {'get_param': 'domain_name'}}},
        'Project': {'type': 'OS::Keystone::Project', 'properties': {
            'description': 'Test Project', 'enabled': True,
            'name': {'get_param': 'project_name'}}},
        'User': {'type': 'OS::Keystone::User', 'properties': {
            'name': {'get_param': 'user_name'},
            'domain': {'get_resource': 'Domain'},
            'description': 'Test user', 'enabled': True,
            'email': 'xyz@abc.com', 'password': 'passWORD'}}},
    'outputs': {
        'project_name': {'value': {'get_attr': ['Project', 'name']}},
        'user_name': {'value': {'get_attr': ['User', 'name']}}}}

ASSIGN = {
    'heat_template_version': '2014-10-16', 'parameters': PARAMS,
    'resources': {'UserRoleAssignemnt': {
        'type': 'OS::Keystone::UserRoleAssignment', 'properties': {
            'roles': [{'role': 'admin',
                       'project': {'get_param': 'project_name'}}],
            'user': {'list_join': ['', [
                {'get_param': 'user_name'}, '{',
                {'get_param': 'domain_name'}, '}']]}}}}}

VALUES = {'user_name': 'u1', 'project_name': 'p1', 'domain_name': 'd1'}


def _run(engine, started, expected):
    stack = et.wait(engine, started['id'], started['traversal_id']).stack
    assert et.status(stack) == expected, stack.status_reason


def test_a_user_in_a_domain_gets_a_role(engine, tmp_path):
    svc, ctx = service.Service(engine), request.make()
    cloud = engine.clients.cloud
    _run(engine, svc.stack_create(ctx, 'users', et.bundle(
        tmp_path, CREATE_USER, 'u.yaml'), VALUES), 'CREATE_COMPLETE')
    out = {k: v['value'] for k, v in svc.output_list(ctx, 'users').items()}
    assert out == {'project_name': 'p1', 'user_name': 'u1'}
    [domain] = cloud.list('domain')
    [user] = cloud.list('user')
    [project] = cloud.list('project')
    assert (user['name'], user['domain_id'], project['domain_id']) == (
        'u1', domain['id'], 'default')

    _run(engine, svc.stack_create(ctx, 'grant', et.bundle(
        tmp_path, ASSIGN, 'a.yaml'), VALUES), 'CREATE_COMPLETE')
    [grant] = cloud.list('role_assignment')
    assert (grant['user_id'], grant['project_id']) == (user['id'],
                                                       project['id'])
    assert grant['role_id'] == cloud.resolve('role', 'admin')

    off = copy.deepcopy(CREATE_USER)
    off['resources']['Domain']['properties']['enabled'] = False
    _run(engine, svc.stack_update(ctx, 'users', et.bundle(
        tmp_path, off, 'u.yaml'), VALUES), 'UPDATE_COMPLETE')
    assert cloud.get('domain', domain['id'])['enabled'] is False
    for name in ('grant', 'users'):
        _run(engine, svc.stack_delete(ctx, name), 'DELETE_COMPLETE')
    for kind in ('role_assignment', 'user', 'project', 'domain'):
        assert cloud.list(kind) == [], kind

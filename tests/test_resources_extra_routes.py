"""OS::Neutron::ExtraRouteSet on the simulated cloud through the service
layer, with heat-tempest-plugin test_extra_route_set's template: its
routes are added to the router's (after the router's interface, which
the template does not make it depend on: Heat's implied dependency),
changed to another set in place, and taken out when it goes, leaving a
route set by hand on the same router.
"""

import copy

from converge.engine import request
from converge.engine import service
from tests import enginetools as et

TEMPLATE = {
    'heat_template_version': 'pike',
    'resources': {
        'net0': {'type': 'OS::Neutron::Net'},
        'subnet0': {'type': 'OS::Neutron::Subnet', 'properties': {
            'network': {'get_resource': 'net0'}, 'cidr': '10.0.0.0/24'}},
        'router0': {'type': 'OS::Neutron::Router'},
        'routerinterface0': {'type': 'OS::Neutron::RouterInterface',
                             'properties': {
                                 'router': {'get_resource': 'router0'},
                                 'subnet': {'get_resource': 'subnet0'}}},
        'extrarouteset0': {'type': 'OS::Neutron::ExtraRouteSet',
                           'properties': {
                               'router': {'get_resource': 'router0'},
                               'routes': [
                                   {'destination': '10.0.10.0/24',
                                    'nexthop': '10.0.0.10'},
                                   {'destination': '10.0.11.0/24',
                                    'nexthop': '10.0.0.11'}]}}}}

BY_HAND = {'destination': '10.0.99.0/24', 'nexthop': '10.0.0.99'}


def _wait(engine, started, expected):
    stack = et.wait(engine, started['id'], started['traversal_id']).stack
    assert et.status(stack) == expected, stack.status_reason


def test_an_extra_route_set_adds_changes_and_removes_its_routes(
        engine, tmp_path):
    svc, ctx = service.Service(engine), request.make()
    cloud = engine.clients.cloud
    bundle = et.bundle(tmp_path, TEMPLATE)
    defn_deps = svc.stack_preview(ctx, 'r', bundle, {})['resource_list']
    [routes] = [r for r in defn_deps if r['resource_name'] ==
                'extrarouteset0']
    assert 'routerinterface0' in routes['requires']
    _wait(engine, svc.stack_create(ctx, 'r', bundle, {}), 'CREATE_COMPLETE')
    ids = {r['resource_name']: r['physical_resource_id']
           for r in svc.resource_list(ctx, 'r')}
    router = ids['router0']
    assert ids['extrarouteset0'] == router   # Heat's physical id
    assert cloud.get('router', router)['routes'] == TEMPLATE['resources'][
        'extrarouteset0']['properties']['routes']
    cloud.add_routes(router, [BY_HAND])

    changed = copy.deepcopy(TEMPLATE)
    changed['resources']['extrarouteset0']['properties']['routes'] = [
        {'destination': '10.0.11.0/24', 'nexthop': '10.0.0.11'},
        {'destination': '10.0.12.0/24', 'nexthop': '10.0.0.12'}]
    _wait(engine, svc.stack_update(ctx, 'r', et.bundle(tmp_path, changed),
                                   {}), 'UPDATE_COMPLETE')
    have = cloud.get('router', router)['routes']
    assert sorted(r['destination'] for r in have) == [
        '10.0.11.0/24', '10.0.12.0/24', '10.0.99.0/24']

    del changed['resources']['extrarouteset0']
    _wait(engine, svc.stack_update(ctx, 'r', et.bundle(tmp_path, changed),
                                   {}), 'UPDATE_COMPLETE')
    assert cloud.get('router', router)['routes'] == [BY_HAND]

"""Rolling updates' batch arithmetic: Heat's tables
(heat/tests/openstack/heat/test_resource_group.py::TestGetBatches and the
notes' worked examples), and the in-place plan converge groups follow."""

import pytest

from converge.resources import rolling


# (target, current, batch size, min in service) -> ResourceGroup batches
# as (capacity after the batch, members on the new definition)
HEAT_RESOURCE_GROUP = [
    ((4, 4, 1, 0), [(4, 1)] * 4),
    ((4, 4, 1, 4), [(5, 1)] * 5 + [(4, 0)]),
    ((4, 4, 2, 4), [(6, 2)] * 3 + [(4, 0)]),
    ((5, 5, 2, 0), [(5, 2), (5, 2), (5, 1)]),
    ((4, 4, 4, 1), [(5, 4), (4, 1)]),
    ((4, 4, 4, 4), [(8, 4), (8, 4), (4, 0)]),
    ((4, 7, 2, 4), [(6, 2), (6, 2), (4, 0)]),
    ((6, 4, 2, 0), [(6, 2)] * 3),
    ((6, 4, 5, 6), [(9, 5), (10, 4), (7, 1), (6, 0)]),
    ((10, 10, 3, 8), [(11, 3)] * 3 + [(10, 2)]),
    ((10, 10, 4, 8), [(12, 4)] * 3 + [(10, 0)]),
]


@pytest.mark.parametrize('args,batches', HEAT_RESOURCE_GROUP)
def test_heat_resource_group_batches(args, batches):
    assert rolling.heat_batches(*args, group='resource') == batches


def test_an_instance_group_counts_surge_members_as_updated():
    # the same change, one batch shorter at the end than ResourceGroup's
    assert rolling.heat_batches(10, 10, 3, 8, group='instance') == \
        [(11, 3)] * 3 + [(10, 1)]


@pytest.mark.parametrize('target,current,updated,expected', [
    (4, 4, 4, False), (4, 4, 3, True), (4, 5, 4, True), (5, 4, 4, True),
    (0, 0, 0, False),
])
def test_needs_update(target, current, updated, expected):
    assert rolling.needs_update(target, current, updated) is expected


def test_in_place_batches_keep_the_minimum_in_service_without_surge():
    names = rolling.update_order([str(i) for i in range(10)])
    assert names[:3] == ['9', '8', '7']
    # 10 members, at least 8 in service: two at a time, never more
    assert rolling.in_place_batches(names, 10, 5, 8) == [
        ['9', '8'], ['7', '6'], ['5', '4'], ['3', '2'], ['1', '0']]
    # the batch size binds first
    assert [len(b) for b in rolling.in_place_batches(names, 10, 3, 0)] == \
        [3, 3, 3, 1]
    # a minimum of the whole group still moves: one at a time
    assert [len(b) for b in rolling.in_place_batches(names, 10, 4, 10)] == \
        [1] * 10
    assert rolling.in_place_batches([], 10, 2, 0) == []


def test_a_canary_batch_goes_first_then_full_batches():
    names = rolling.update_order([str(i) for i in range(7)])
    assert rolling.in_place_batches(names, 7, 3, 0, canary=1) == [
        ['6'], ['5', '4', '3'], ['2', '1', '0']]
    # never larger than the room a batch has
    assert rolling.in_place_batches(names, 7, 3, 5, canary=4)[0] == \
        ['6', '5']


def test_failure_domains_never_share_a_batch():
    zone = {'0': 'a', '1': 'a', '2': 'b', '3': 'b', '4': 'c', '5': None}
    names = rolling.update_order(list(zone), 'lowest_index')
    # in order, skipping a member whose zone the batch holds already; a
    # member with no zone goes anywhere
    assert rolling.in_place_batches(names, 6, 3, 0, domain=zone.get) == [
        ['0', '2', '4'], ['1', '3', '5']]


@pytest.mark.parametrize('order,key,expected', [
    ('highest_index', None, ['10', '9', '2', '1']),
    ('lowest_index', None, ['1', '2', '9', '10']),
    # oldest first: by creation time, ties by index
    ('oldest', {'1': 30.0, '2': 10.0, '9': 20.0, '10': 10.0}.get,
     ['2', '10', '9', '1']),
    # by a member property, lowest first; members without it last
    ('property', {'1': 'rack-b', '2': 'rack-a', '10': 'rack-a'}.get,
     ['2', '10', '1', '9']),
])
def test_update_orders(order, key, expected):
    assert rolling.update_order(['1', '2', '9', '10'], order, key) == \
        expected


@pytest.mark.parametrize('value,total,allowed', [
    ('0', 10, 0), (3, 10, 3), ('3', 10, 3), ('20%', 10, 2),
    ('20%', 6, 1), ('12.5%', 16, 2), ('100%', 7, 7)])
def test_failure_budget(value, total, allowed):
    assert rolling.budget(value, total) == allowed


def test_a_surge_follows_heats_batches_with_named_extra_members():
    names = rolling.update_order([str(i) for i in range(4)])
    spare = ['4', '5', '6', '7']
    # Heat's (4, 4, 1, 4): one extra member first, then one at a time
    assert rolling.surge_batches(names, 4, 1, 4, spare) == [
        (['4'], 5), (['3'], 5), (['2'], 5), (['1'], 5), (['0'], 5)]
    # no minimum: in place, no extra member
    assert rolling.surge_batches(names, 4, 2, 0, spare) == [
        (['3', '2'], 4), (['1', '0'], 4)]


@pytest.mark.parametrize('size', [1, 4, 5, 10])
@pytest.mark.parametrize('batch', [1, 2, 4, 20])
@pytest.mark.parametrize('least', [0, 1, 4, 8, 20])
def test_an_instance_surge_grows_as_heats_batches_do(size, batch, least):
    names = [str(i) for i in range(size)]
    extra, gone, batches = rolling.instance_surge(names, batch, least)
    # as many new members as Heat's peak capacity is above the size; as
    # many of the first (oldest) go
    peak = max(c for c, _ in rolling.heat_batches(size, size, batch, least,
                                                  group='instance'))
    assert extra == peak - size
    assert gone == names[:extra]
    # every other member once, no batch over the batch size (the first
    # holds the new members too), the minimum always in service
    assert [n for b in batches for n in b] == names[extra:]
    sizes = [len(batches[0]) + extra] + [len(b) for b in batches[1:]]
    assert max(sizes) <= batch
    assert all(size + extra - len(b) >= min(least, size)
               for b in batches)

"""The openstack driver's ServerWatch: what a server's look answers
after lists, GETs and our own calls meet (drivers/openstack.py), against
a Nova stand-in whose answers each test sets."""

from converge.drivers import openstack


class Nova:
    """GET /servers/detail answers the servers set in `listed`; GET
    /servers/<id> answers `shown[id]`; every call is recorded."""

    def __init__(self):
        self.listed = []
        self.shown = {}
        self.calls = []

    def get(self, url, **kw):
        self.calls.append(('GET', url))
        if url.startswith('/servers/detail'):
            return {'servers': [dict(s) for s in self.listed]}
        return {'server': dict(self.shown[url.rsplit('/', 1)[1]])}

    def post(self, url, body=None, **kw):
        self.calls.append(('POST', url))
        return {'server': {'id': 'new'}}

    def call(self, method, url, **kw):
        self.calls.append((method, url))


def server(status, updated, task=None, id='s1'):
    return {'id': id, 'status': status, 'updated': updated,
            'OS-EXT-STS:task_state': task}


def test_a_get_answered_before_a_list_does_not_undo_it():
    """A server read by a GET (BUILD) while a list already showed it
    ACTIVE stays ACTIVE: no later list shows a server that changes no
    more, so the older GET would have kept it BUILD for ever."""
    nova = Nova()
    watch = openstack.ServerWatch(nova, interval=0)
    nova.listed = [server('ACTIVE', '2026-11-28T09:38:02Z')]
    assert watch.look('s1')['status'] == 'ACTIVE'
    watch.remember(server('BUILD', '2026-11-28T09:38:01Z', 'spawning'))
    nova.listed = []     # nothing changed since
    assert watch.look('s1')['status'] == 'ACTIVE'


def test_a_newer_get_is_kept():
    nova = Nova()
    watch = openstack.ServerWatch(nova, interval=3600)
    watch.remember(server('BUILD', '2026-11-28T09:38:01Z', 'spawning'))
    watch.remember(server('ACTIVE', '2026-11-28T09:38:05Z'))
    assert watch.look('s1')['status'] == 'ACTIVE'


def test_a_made_server_is_building_until_a_list_shows_it_without_a_get():
    """The create answers the new server as BUILD from its own call (Nova
    answers a create with its id only): no GET after the POST; the next
    list tells the rest."""
    nova = Nova()
    compute = openstack.OpenStackCompute.__new__(openstack.OpenStackCompute)
    compute._nova = nova
    compute.watch = openstack.ServerWatch(nova, interval=3600)
    compute._cloud = type('Cloud', (), {
        'resolve': staticmethod(lambda kind, ref: ref)})()
    made = compute.create_server('web', 'img', '1', networks='none',
                                 idempotency_key='k', fresh=True)
    assert made['status'] == 'BUILD' and made['id'] == 'new'
    assert nova.calls == [('POST', '/servers')]
    compute.watch.interval = 0
    nova.listed = [server('ACTIVE', '2026-11-28T09:38:05Z', id='new')]
    assert compute.get_server('new')['status'] == 'ACTIVE'
    assert ('GET', '/servers/new') not in nova.calls


def test_a_list_older_than_our_own_call_does_not_undo_it():
    """A resize asked by us (read back RESIZE) is not undone by a list
    that shows the server as it was before the call."""
    nova = Nova()
    compute = openstack.OpenStackCompute.__new__(openstack.OpenStackCompute)
    compute._nova = nova
    compute.watch = openstack.ServerWatch(nova, interval=3600)
    nova.shown['s1'] = server('RESIZE', '2026-11-28T09:40:00Z', 'resize_prep')
    compute._action('s1', {'resize': {'flavorRef': '2'}})
    compute.watch.interval = 0
    nova.listed = [server('ACTIVE', '2026-11-28T09:39:00Z')]
    assert compute.get_server('s1')['status'] == 'RESIZE'
    nova.listed = [server('VERIFY_RESIZE', '2026-11-28T09:40:09Z')]
    assert compute.get_server('s1')['status'] == 'VERIFY_RESIZE'


def test_a_server_never_listed_after_our_call_is_read_once():
    """What our own call assumed is trusted for three intervals; a
    server no list has shown by then is read with a GET."""
    nova = Nova()
    watch = openstack.ServerWatch(nova, interval=0)
    watch.assume({'id': 's1', 'status': 'BUILD'})
    watch._assumed['s1'] -= 1    # assumed a second ago: > 3 * 0
    assert watch.look('s1') is None


def test_a_slow_list_does_not_make_our_calls_read_again():
    """Three intervals are counted from when a list began, not from now:
    a list that took seconds on a loaded cloud, begun soon after our
    call, says nothing of it yet, and each deleted server was read with
    a GET of its own."""
    import time
    nova = Nova()
    watch = openstack.ServerWatch(nova, interval=10)
    watch.assume({'id': 's1', 'status': 'ACTIVE',
                  'OS-EXT-STS:task_state': 'deleting'})
    now = time.monotonic()
    watch._assumed['s1'] = now - 35     # our DELETE, 35 s ago
    watch._local_at = now - 8           # the last list began 27 s after
    assert watch.look('s1')['OS-EXT-STS:task_state'] == 'deleting'
    assert nova.calls == []


def test_looks_answer_while_a_list_is_under_way():
    """One looker lists; the others answer at once from what is known
    (each look is a poll: the next sees the list). Looks queued behind a
    slow list had held every worker thread: on a loaded cloud 10 server
    deletes on 8 threads waited 9 s for a thread."""
    import threading
    nova = Nova()
    watch = openstack.ServerWatch(nova, interval=0)
    nova.listed = [server('ACTIVE', '2026-11-28T09:38:02Z')]
    assert watch.look('s1')['status'] == 'ACTIVE'
    listing, release = threading.Event(), threading.Event()
    plain = nova.get

    def slow_get(url, **kw):
        if url.startswith('/servers/detail'):
            listing.set()
            assert release.wait(30)
        return plain(url, **kw)
    nova.get = slow_get
    nova.listed = [server('SHUTOFF', '2026-11-28T09:38:09Z')]
    lister = threading.Thread(target=watch.look, args=('s1',))
    lister.start()
    try:
        assert listing.wait(30)
        # while the list runs: what the last list showed, no list of its own
        assert watch.look('s1')['status'] == 'ACTIVE'
        assert sum(1 for c in nova.calls
                   if c[1].startswith('/servers/detail')) == 1
    finally:
        release.set()
        lister.join(30)
    nova.get = plain
    nova.listed = []
    assert watch.look('s1')['status'] == 'SHUTOFF'


def test_a_failed_list_lets_the_next_look_list_again():
    nova = Nova()
    watch = openstack.ServerWatch(nova, interval=0)
    plain = nova.get

    def broken(url, **kw):
        raise RuntimeError('nova away')
    nova.get = broken
    try:
        watch.look('s1')
    except RuntimeError:
        pass
    else:
        raise AssertionError('the list error was not raised')
    nova.get = plain
    nova.listed = [server('ACTIVE', '2026-11-28T09:38:02Z')]
    assert watch.look('s1')['status'] == 'ACTIVE'

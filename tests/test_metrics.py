"""Prometheus metrics (converge/metrics.py): converge-api serves its own
under /metrics, each converge-worker process on a port of its own; what
they count moves as a stack is created, read with prometheus_client's
own parser (as Prometheus reads them)."""

import os
import urllib.error
import urllib.request

import pytest
from prometheus_client import parser

from converge.bench import fleet
from tests.distributed import wait_for
from tests.test_heat_api import API, _settled, _start_api

TEMPLATE = {
    'heat_template_version': '2018-08-31',
    'resources': dict(
        {'v%d' % i: {'type': 'OS::Heat::Value',
                     'properties': {'value': 'x%d' % i}} for i in range(6)},
        box={'type': 'OS::Nova::Server',
             'properties': {'image': 'cirros', 'flavor': 'm1.small'}}),
}


def scrape(url):
    """{(sample name, ((label, value), ...)): value} of a /metrics page,
    parsed by prometheus_client's parser."""
    with urllib.request.urlopen(url, timeout=30) as resp:
        assert resp.headers['Content-Type'].startswith('text/plain')
        text = resp.read().decode()
    out = {}
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            out[sample.name, tuple(sorted(sample.labels.items()))] = \
                sample.value
    return out


def moved(before, after, name, **labels):
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


def _reachable(url):
    try:
        return scrape(url)
    except OSError:
        return None


@pytest.mark.distributed
@pytest.mark.long
def test_api_and_worker_metrics_move_during_a_create(dist, tmp_path):
    port = fleet.free_port()
    with open(dist.conf, 'a') as f:
        f.write('[metrics]\nworker_port = %d\n' % port)
    dist.start_worker()
    log = str(tmp_path / 'api.log')
    proc, url = _start_api(dist.conf, log)
    dist.apis.append((proc, log))
    worker_url = 'http://127.0.0.1:%d/metrics' % port
    api_url = url + '/metrics'
    worker0 = wait_for(lambda: _reachable(worker_url), timeout=60)
    api0 = scrape(api_url)

    api = API(dist.conf, url)
    hc = api.client('m', api.token('m')['token'])
    hc.stacks.create(stack_name='counted', template=TEMPLATE,
                     disable_rollback=True)
    # during the create: the worker's counters move before it ends
    during = wait_for(lambda: (lambda m: m if moved(
        worker0, m, 'converge_units_started_total') > 0 else None)(
        scrape(worker_url)))
    assert moved(worker0, during, 'converge_messages_received_total',
                 method='check_resources') + moved(
        worker0, during, 'converge_messages_received_total',
        method='check_resource') > 0
    st = _settled(hc, 'counted')
    assert st.stack_status == 'CREATE_COMPLETE', st.stack_status_reason
    worker1, api1 = scrape(worker_url), scrape(api_url)

    # the worker: every resource's unit ended done (the server also
    # waited for its build), each timed; messages taken; statements
    assert moved(worker0, worker1, 'converge_units_ended_total',
                 outcome='done') >= 7
    assert moved(worker0, worker1, 'converge_units_ended_total',
                 outcome='failed') == 0
    assert moved(worker0, worker1,
                 'converge_unit_duration_seconds_count') >= 7
    assert moved(worker0, worker1, 'converge_units_started_total') >= 7
    assert moved(worker0, worker1, 'converge_db_statements_total') > 0
    assert worker1['converge_traversals_in_flight', ()] == 0
    # the API: its requests by route and status, and the root nodes it
    # cast; its own statements
    assert moved(api0, api1, 'converge_api_requests_total', method='POST',
                 route='/v1/{project_id}/stacks', status='201') == 1
    assert moved(api0, api1, 'converge_api_requests_total', method='GET',
                 route='/v1/{project_id}/stacks/{stack_name}',
                 status='302') + moved(
        api0, api1, 'converge_api_requests_total', method='GET',
        route='/v1/{project_id}/stacks/{stack_name}/{stack_id}',
        status='200') >= 1
    assert moved(api0, api1, 'converge_api_request_duration_seconds_count',
                 method='POST', route='/v1/{project_id}/stacks') == 1
    assert moved(api0, api1, 'converge_messages_sent_total',
                 method='check_resources') + moved(
        api0, api1, 'converge_messages_sent_total',
        method='check_resource') >= 1
    assert moved(api0, api1, 'converge_db_statements_total') > 0
    # the API serves /metrics to GET only, and counts no scrape of it
    assert not any(dict(labels).get('route') == '/metrics'
                   for _, labels in api1)
    req = urllib.request.Request(api_url, data=b'', method='POST')
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=30)
    assert err.value.code == 405
    assert os.path.exists(log)


@pytest.mark.long
def test_embedded_api_serves_its_engines_metrics(tmp_path):
    """An embedded converge-api is its home's engine: its /metrics has
    the units it ran, the requests it answered by route, its statements;
    with [metrics] enabled = false there is no /metrics (a 404) and the
    API works the same."""
    home = tmp_path / 'home'
    conf = tmp_path / 'converge.conf'
    conf.write_text('[DEFAULT]\nhome = %s\n' % home)
    proc, url = _start_api(str(conf), str(tmp_path / 'api.log'))
    try:
        before = scrape(url + '/metrics')
        api = API(str(conf), url)
        hc = api.client('e', api.token('e')['token'])
        template = {'heat_template_version': '2018-08-31', 'resources': {
            'v%d' % i: {'type': 'OS::Heat::Value',
                        'properties': {'value': i}} for i in range(3)}}
        hc.stacks.create(stack_name='here', template=template)
        assert _settled(hc, 'here').stack_status == 'CREATE_COMPLETE'
        after = scrape(url + '/metrics')
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert moved(before, after, 'converge_units_ended_total',
                 outcome='done') >= 3
    assert moved(before, after, 'converge_api_requests_total',
                 method='POST', route='/v1/{project_id}/stacks',
                 status='201') == 1
    assert moved(before, after, 'converge_db_statements_total') > 0

    off = tmp_path / 'off.conf'
    off.write_text('[DEFAULT]\nhome = %s\n[metrics]\nenabled = false\n'
                   % home)
    proc, url = _start_api(str(off), str(tmp_path / 'api2.log'))
    try:
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(url + '/metrics', timeout=30)
        assert err.value.code == 404
        hc = API(str(off), url).client('e', api.token('e')['token'])
        assert hc.stacks.get('here').stack_status == 'CREATE_COMPLETE'
    finally:
        proc.terminate()
        proc.wait(timeout=30)

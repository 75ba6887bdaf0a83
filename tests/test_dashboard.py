"""The dashboard (docs/dashboard.md): converge-api serving its pages at
/dashboard/ and the routes they read, over real HTTP; and the pages in
a real browser (headless Chromium through Selenium) following a stack
live while it is created, rolled out in batches, drifts and is
repaired, as a user would watch it."""

import json
import os
import subprocess
import time

import pytest
import requests

from tests.conftest import CLI
from tests import test_heat_api

#: a converge-api on loopback over an embedded home, this module's own
api = test_heat_api.api

TEMPLATE = '''\
heat_template_version: 2018-08-31
parameters:
  stamp: {type: string, default: one}
  password: {type: string, hidden: true, default: s3cret-Dashboard-42}
resources:
  net:
    type: OS::Heat::Value
    properties: {value: net0}
  web:
    type: OS::Nova::Server
    properties:
      image: cirros
      flavor: m1.small
      name: {get_attr: [net, value]}
  vault:
    type: OS::Heat::Value
    properties: {value: {get_param: password}}
  group:
    type: OS::Heat::ResourceGroup
    depends_on: net
    update_policy:
      rolling_update: {max_batch_size: 2, max_failures: 1}
    properties:
      count: 4
      resource_def:
        type: OS::Heat::TestResource
        properties:
          value: {get_param: stamp}
          action_wait_secs: {create: 0, update: WAIT}
'''
SECRET = 's3cret-Dashboard-42'


def _until(what, check, timeout=60):
    """`check()`'s first true value, asked until `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, 'never: %s' % what
        time.sleep(0.1)


class Client:
    """The orchestration API under one project's token."""

    def __init__(self, api, project, token):
        self.base = '%s/v1/%s' % (api.url, project)
        self.token = token
        self.headers = {'X-Auth-Token': token}

    def get(self, path, headers=None):
        return requests.get(self.base + path, timeout=30,
                            headers=dict(self.headers, **(headers or {})))

    def send(self, method, path, body):
        return requests.request(method, self.base + path, json=body,
                                headers=self.headers, timeout=30)


@pytest.fixture(scope='module')
def tokens(api):
    """Tokens of project dash-a (a member's, a reader's) and of dash-b,
    made at once (converge-manage takes seconds to start)."""
    wanted = {'member': ('dash-a',), 'reader': ('dash-a', '--role', 'reader'),
              'other': ('dash-b',)}
    procs = {k: subprocess.Popen(
        [os.path.join(test_heat_api.BIN, 'converge-manage'), '--config-file',
         api.conf, 'token', 'create', '--project', v[0], '-f', 'json']
        + list(v[1:]), stdout=subprocess.PIPE, text=True)
        for k, v in wanted.items()}
    made = {}
    for k, proc in procs.items():
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        made[k] = Client(api, wanted[k][0], json.loads(out)['token'])
    return made


def _stack(tokens, name, wait=0):
    """A stack of dash-a made through the API and completed (each member
    of its group taking `wait` seconds to update): its path,
    /stacks/name/id."""
    made = tokens['member'].send('POST', '/stacks', {
        'stack_name': name, 'template': TEMPLATE.replace('WAIT', str(wait))})
    assert made.status_code == 201, made.text
    path = '/stacks/%s/%s' % (name, made.json()['stack']['id'])
    _settled(tokens['member'], path, 'CREATE_COMPLETE')
    return path


def _settled(client, path, status):
    def done():
        now = client.get(path).json()['stack']['stack_status']
        return None if now.endswith('IN_PROGRESS') else now
    assert _until('%s %s' % (path, status), done) == status


class Stream:
    """A stack's event stream read as a client reads it."""

    def __init__(self, client, path, last_id=None):
        headers = dict(client.headers)
        if last_id is not None:
            headers['Last-Event-ID'] = str(last_id)
        self.resp = requests.get(client.base + path + '/event_stream',
                                 headers=headers, stream=True, timeout=30)
        assert self.resp.status_code == 200, self.resp.text
        assert self.resp.headers['Content-Type'].startswith(
            'text/event-stream')
        self.lines = self.resp.iter_lines(decode_unicode=True)

    def read(self, until):
        """The events [(kind, id, data)] read until `until(kind, data)`
        is true of one (included)."""
        got, block = [], {}
        for line in self.lines:
            if line:
                field, _, value = line.partition(': ')
                block[field] = value
                continue
            if 'data' in block:
                data = json.loads(block['data'])
                got.append((block.get('event'), block.get('id'), data))
                if until(block.get('event'), data):
                    return got
            block = {}
        raise AssertionError('the stream ended: %s' % got)

    def close(self):
        self.resp.close()


def test_the_pages_are_served_to_anyone_with_their_policy(api):
    page = requests.get(api.url + '/dashboard/', timeout=10)
    assert page.status_code == 200
    assert page.headers['Content-Type'].startswith('text/html')
    # no script, style or connection from elsewhere; no inline script
    assert "script-src 'self'" in page.headers['Content-Security-Policy']
    assert "frame-ancestors 'none'" in \
        page.headers['Content-Security-Policy']
    for name in ('app.js', 'graph.js', 'style.css'):
        assert name in page.text
        assert requests.get(api.url + '/dashboard/' + name,
                            timeout=10).status_code == 200
    assert requests.get(api.url + '/dashboard/nothing.js',
                        timeout=10).status_code == 404
    moved = requests.get(api.url + '/dashboard', allow_redirects=False,
                         timeout=10)
    assert moved.status_code == 301
    assert moved.headers['Location'].endswith('/dashboard/')


def test_a_reader_sees_the_tree_and_another_project_nothing(tokens):
    member, reader = tokens['member'], tokens['reader']
    path = _stack(tokens, 'tree')
    ov = reader.get(path + '/overview').json()['overview']
    [top, group_stack] = ov['stacks']
    assert top['stack_status'] == 'CREATE_COMPLETE'
    assert group_stack['parent'] == top['id']
    assert group_stack['parent_resource'] == 'group'
    rows = {(r['stack_id'], r['resource_name']): r for r in ov['resources']}
    assert rows[top['id'], 'group']['nested'] == group_stack['id']
    assert rows[top['id'], 'web']['nested'] is None
    assert sorted(n for s, n in rows if s == group_stack['id']) == [
        '0', '1', '2', '3']
    assert all(r['resource_status'] == 'CREATE_COMPLETE'
               for r in rows.values())
    assert ov['last_event_id'] == max(e['id'] for e in ov['events'])
    # the hidden value is nowhere (an event's reason, a row's)
    assert SECRET not in json.dumps(ov)
    layout = reader.get(path + '/layout').json()['layout']
    assert {n['name'] for n in layout['nodes']} == {
        'net', 'web', 'vault', 'group'}
    assert sorted(map(tuple, layout['edges'])) == [
        ('group', 'net'), ('web', 'net')]
    at = {n['name']: n for n in layout['nodes']}
    # what needs nothing is drawn above what needs it
    assert at['net']['y'] < at['web']['y'] == at['group']['y']
    assert reader.get(path + '/rollouts').json() == {'rollouts': []}
    # without a token, with a token of another project
    assert requests.get(member.base + path + '/overview',
                        timeout=10).status_code == 401
    other = tokens['other']
    for route in ('/overview', '/layout', '/rollouts', '/event_stream'):
        assert other.get(path + route).status_code == 404
    # a resumed stream's id that is no id: refused before anything
    bad = reader.get(path + '/event_stream', {'Last-Event-ID': 'x'})
    assert bad.status_code == 400
    assert 'Last-Event-ID must be an integer' in bad.json()['explanation']


def test_the_event_stream_resumes_and_follows_an_update(tokens):
    member, reader = tokens['member'], tokens['reader']
    path = _stack(tokens, 'streamed')
    ov = reader.get(path + '/overview').json()['overview']
    ids = [e['id'] for e in ov['events']]
    # resumed after the third event: every later one, in order, then
    # the stack's status
    stream = Stream(reader, path, last_id=ids[2])
    got = stream.read(lambda kind, data: kind == 'stack')
    stream.close()
    assert [int(i) for kind, i, _ in got if kind == 'resource'] == ids[3:]
    assert got[-1][2]['stack_status'] == 'CREATE_COMPLETE'
    # from now on: an update's events as they are written
    stream = Stream(reader, path)
    created = stream.read(lambda kind, data: kind == 'stack')[-1][2]
    assert created['stack_status'] == 'CREATE_COMPLETE'
    patched = member.send('PATCH', path, {'parameters': {'stamp': 'two'}})
    assert patched.status_code == 202, patched.text
    got = stream.read(lambda kind, data: kind == 'stack' and
                      data['stack_status'] == 'UPDATE_COMPLETE')
    stream.close()
    events = [d for kind, _, d in got if kind == 'resource']
    assert all(int(e['id']) > ov['last_event_id'] for e in events)
    members = {e['resource_name'] for e in events
               if e['stack_name'] != 'streamed' and
               e['resource_status'] == 'UPDATE_COMPLETE'}
    assert members == {'0', '1', '2', '3'}
    assert 'rolling update: batch 2 of 2 (1, 0) started; 0 members ' \
        'after it' in [e['resource_status_reason'] for e in events]
    # the stack's row as it is at each look (an update shorter than a
    # look is seen done): its traversal, the update's
    assert got[-1][2]['current_traversal'] == \
        patched.headers['X-Converge-Traversal-Id'] != \
        created['current_traversal']


# -- in a browser ------------------------------------------------------------

CHROMIUM = '/usr/bin/chromium'
CHROMEDRIVER = '/usr/bin/chromedriver'


@pytest.fixture
def browser(tmp_path):
    """Headless Chromium under Selenium; screenshots go to tmp_path."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    if missing:
        message = ('%s not installed (Debian: apt-get install chromium '
                   'chromium-driver)' % ', '.join(missing))
        if os.environ.get('CI') == 'true':
            pytest.fail(message)
        pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ('--headless=new', '--no-sandbox', '--disable-dev-shm-usage',
                '--window-size=1400,1000',
                '--user-data-dir=%s' % (tmp_path / 'chromium')):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.shots = tmp_path / 'screenshots'
    driver.shots.mkdir()
    yield driver
    driver.quit()


def _shot(driver, name):
    path = str(driver.shots / ('%s.png' % name))
    driver.save_screenshot(path)
    print('screenshot: %s' % path)


def _node(driver, name):
    """(status, drift) of the resource's box in the graph, or None (not
    drawn, or drawn anew as it was read)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    try:
        found = driver.find_elements(
            By.CSS_SELECTOR, 'g.node[data-resource="%s"]' % name)
        if not found:
            return None
        return found[0].get_attribute('data-status'), \
            found[0].get_attribute('data-drift') == 'true'
    except StaleElementReferenceException:
        return None


def _click(driver, name=None, link=None):
    """Click the resource's box, or a link (again if it was drawn anew
    meanwhile)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    where = (By.LINK_TEXT, link) if link else (
        By.CSS_SELECTOR, 'g.node[data-resource="%s"]' % name)

    def clicked():
        try:
            driver.find_element(*where).click()
            return True
        except StaleElementReferenceException:
            return False
    _until('%s clicked' % (name or link), clicked)


def _column(driver, n):
    """The texts of the event log's n-th column (None: drawn anew as it
    was read)."""
    found = _texts(driver, '#event-rows td:nth-child(%d)' % n)
    return None if found is None else set(found)


def _texts(driver, css):
    """The texts of the elements `css` selects (None: drawn anew as
    they were read)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    try:
        return [e.text for e in driver.find_elements(By.CSS_SELECTOR, css)]
    except StaleElementReferenceException:
        return None


def _text(driver, element_id):
    from selenium.webdriver.common.by import By
    return driver.find_element(By.ID, element_id).text


@pytest.mark.long   # about 15 s: a browser, a stack, an update, a repair
def test_a_user_watches_a_stack_roll_out_drift_and_heal(api, tokens,
                                                        browser):
    from selenium.webdriver.common.by import By
    driver = browser
    member, reader = tokens['member'], tokens['reader']
    path = _stack(tokens, 'watched', wait=2)
    stack_id = path.rsplit('/', 1)[1]
    # a reader signs in: the dashboard only reads
    driver.get(api.url + '/dashboard/')
    driver.find_element(By.ID, 'project').send_keys('dash-a')
    driver.find_element(By.ID, 'token').send_keys(reader.token)
    driver.find_element(By.CSS_SELECTOR, '#login-form button').click()
    _until('the stack listed', lambda: driver.find_elements(
        By.CSS_SELECTOR, '#stack-rows tr[data-stack="watched"]'))
    _click(driver, link='watched')
    _until('the graph drawn', lambda: _node(driver, 'web') == (
        'CREATE_COMPLETE', False))
    assert _until('live', lambda: _text(driver, 'live') == 'live')
    # what a reload would forget: it must still be there at the end
    driver.execute_script('window.sameLoad = true')
    _shot(driver, '1-created')

    # a rolling update, two members at a time: the group in progress,
    # its batches shown as they go, then done
    assert member.send('PATCH', path, {'parameters': {
        'stamp': 'two'}}).status_code == 202

    def rolling():
        # the page at one moment: the stack and its group in progress,
        # the rollout's batches and failure budget shown
        shown = (_text(driver, 'stack-status'), _node(driver, 'group'),
                 _text(driver, 'rollouts'))
        return shown[2] if shown[:2] == (
            'UPDATE_IN_PROGRESS', ('UPDATE_IN_PROGRESS', False)) and \
            'rolling update, batch' in shown[2] else None
    rollout = _until('the rollout shown as it goes', rolling)
    assert 'failure budget: 0 of 1 used' in rollout
    _shot(driver, '2-rolling')
    _until('the update done', lambda: _text(
        driver, 'stack-status') == 'UPDATE_COMPLETE')
    _until('the group done', lambda: _node(driver, 'group') == (
        'UPDATE_COMPLETE', False))
    events = _text(driver, 'event-rows')
    assert 'rolling update: batch 2 of 2 (1, 0) started' in events
    # the log filtered by a resource's name
    driver.find_element(By.ID, 'f-name').send_keys('web')
    _until('the log filtered', lambda: _column(driver, 3) == {'web'})
    driver.find_element(By.ID, 'f-name').clear()
    driver.execute_script(
        "document.getElementById('f-name').dispatchEvent("
        "new Event('input'))")
    _shot(driver, '3-rolled')

    # the server deleted behind the stack's back: seen as drift, then
    # repaired by a converge
    server = member.get(path + '/resources/web').json()['resource'][
        'physical_resource_id']
    home = os.path.join(os.path.dirname(api.conf), 'home')
    CLI(home).run('sim', 'server', 'delete', server)
    drift = member.get(path + '/drift').json()['drift']
    assert [d['resource_name'] for d in drift] == ['web']
    _until('the drift shown', lambda: _node(driver, 'web') == (
        'CREATE_COMPLETE', True))
    _shot(driver, '4-drifted')
    assert member.send('POST', path + '/actions',
                       {'converge': None}).status_code == 202
    _until('the server back', lambda: _node(driver, 'web') == (
        'CREATE_COMPLETE', False) and _text(
            driver, 'stack-status') == 'UPDATE_COMPLETE')
    _shot(driver, '5-repaired')

    # the group opens on a click: its members, one each
    _click(driver, 'group')
    _until('the members drawn', lambda: _node(driver, '3') == (
        'UPDATE_COMPLETE', False))
    _until('the crumbs', lambda: _texts(driver, '#crumbs a') == [
        'watched', 'group'])
    _click(driver, '3')
    _until('a member shown', lambda: '"value": "two"' in _text(
        driver, 'detail'))
    # back up, and a resource holding a hidden value: masked
    _click(driver, link='watched')
    _until('the stack again', lambda: _node(driver, 'vault'))
    _click(driver, 'vault')
    _until('the vault shown', lambda: _text(driver, 'detail').startswith(
        'vault\n') and 'Properties' in _text(driver, 'detail'))
    detail = _text(driver, 'detail')
    assert '"value": "******"' in detail and SECRET not in detail
    _shot(driver, '6-masked')
    # all of it without a reload, and nothing went wrong in the page
    assert driver.execute_script('return window.sameLoad') is True
    assert stack_id in driver.current_url
    assert [e for e in driver.get_log('browser')
            if e['level'] == 'SEVERE'] == []

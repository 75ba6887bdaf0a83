"""Heat's transports for servers with Heat's guest tooling (issue 40,
point 1 and its exactly-once part): a SOFTWARE_CONFIG server's resource
metadata carries `deployments` as Heat writes them, and the
`os-collect-config` section of its transport; the signed signal URL each
run gets takes heat-config-notify's and cfn-signal's requests once; a
POLL_TEMP_URL server's metadata URL serves os-collect-config's real
`request` collector. Through converge-api on loopback, with
python-heatclient, requests, os-collect-config and heat-agents'
heat-config-notify as a server runs them. The servers' own agents are
not booted ([sim] boot_agents = false): here the test is the server."""

import email
import json
import os
import subprocess
import sys
import time

import pytest
import requests

from tests.conftest import stop_agents
from tests.test_heat_api import API, _settled, _start_api

BIN = os.path.dirname(sys.executable)

SERVER = '''
heat_template_version: "2013-05-23"
parameters:
  transport: {type: string, default: ''}
resources:
  server:
    type: OS::Nova::Server
    properties:
      image: cirros
      flavor: m1.small
      user_data_format: SOFTWARE_CONFIG
%s
outputs:
  server:
    value: {get_resource: server}
'''

DEPLOYMENTS = '''
heat_template_version: "2013-05-23"
parameters:
  server: {type: string}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      config: "#!/bin/sh\\necho hello"
      outputs: [{name: result}]
  dep_a:
    type: OS::Heat::SoftwareDeployments
    properties:
      config: {get_resource: config}
      servers: {'0': {get_param: server}}
  dep_b:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config}
      server: {get_param: server}
      signal_transport: %s
outputs:
  result: {value: {get_attr: [dep_b, result]}}
'''


@pytest.fixture(scope='module')
def api(tmp_path_factory):
    d = tmp_path_factory.mktemp('transports')
    home = str(d / 'home')
    conf = str(d / 'converge.conf')
    with open(conf, 'w') as f:
        f.write('[DEFAULT]\nhome = %s\n[sim]\nboot_agents = false\n' % home)
    proc, url = _start_api(conf, str(d / 'api.log'))
    yield API(conf, url)
    proc.terminate()
    proc.wait(timeout=30)
    stop_agents(home)


def _client(api, project):
    return api.client(project, api.token(project)['token'])


def _server_stack(hc, name, transport=None):
    props = ('      software_config_transport: %s' % transport
             if transport else '')
    hc.stacks.create(stack_name=name, parameters={},
                     template=SERVER % props)
    st = _settled(hc, name)
    assert st.stack_status == 'CREATE_COMPLETE', st.stack_status_reason
    return st.outputs[0]['output_value']


def _deployments(hc, stack, count, timeout=60):
    """The server's metadata once it lists `count` deployments (written
    as the deployment stack's units run: polled, as Heat's test does)."""
    deadline = time.monotonic() + timeout
    while True:
        meta = hc.resources.metadata(stack, 'server')
        if len(meta.get('deployments') or []) == count:
            return meta
        assert time.monotonic() < deadline, meta
        time.sleep(0.1)


def _inputs(dep):
    return {i['name']: i['value'] for i in dep['inputs']}


def test_default_server_metadata_lists_deployments_with_signal_urls(api):
    """Heat's ParallelDeploymentsTest, in short: a server of the default
    transport (converge's own agent) lists its deployments in its
    resource metadata as Heat does; POSTing `{}` to each one's
    deploy_signal_id, with no credential, completes it; a second POST
    changes nothing."""
    hc = _client(api, 'meta')
    server = _server_stack(hc, 'host')
    assert hc.resources.get('host', 'server').attributes[
        'os_collect_config'] == {}
    hc.stacks.create(stack_name='deps', parameters={'server': server},
                     template=DEPLOYMENTS % 'CFN_SIGNAL')
    meta = _deployments(hc, 'host', 2)
    assert 'os-collect-config' not in meta
    for dep in meta['deployments']:
        assert set(dep) >= {'id', 'name', 'group', 'config', 'inputs',
                            'outputs', 'options'}
        assert dep['group'] == 'script'
        assert dep['config'] == '#!/bin/sh\necho hello'
        assert dep['outputs'][0]['name'] == 'result'
        iv = _inputs(dep)
        assert iv['deploy_server_id'] == server
        assert iv['deploy_action'] == 'CREATE'
        assert iv['deploy_signal_transport'] == 'CFN_SIGNAL'
        assert iv['deploy_signal_verb'] == 'POST'
        assert iv['deploy_stack_id'].startswith('deps/')
        assert iv['deploy_signal_id'].startswith(api.url)
    names = sorted(_inputs(d)['deploy_resource_name']
                   for d in meta['deployments'])
    assert names == ['0', 'dep_b']
    # a reader of the project sees the signatures masked, as an agent
    # token (converge:show_credentials)
    reader = api.client('meta', api.token('meta', '--role', 'reader')[
        'token'])
    shown = reader.resources.metadata('host', 'server')
    for dep in shown['deployments']:
        url = _inputs(dep)['deploy_signal_id']
        assert 'signature=******' in url, url
    # a URL without its signature, or for another run, is refused
    url = _inputs(meta['deployments'][0])['deploy_signal_id']
    assert requests.post(url.split('?')[0], data='{}').status_code == 403
    assert requests.post(url.replace('run=', 'run=0'), data='{}'
                         ).status_code == 403
    for dep in meta['deployments']:
        iv = _inputs(dep)
        answer = requests.post(iv['deploy_signal_id'], data=json.dumps(
            {'result': 'r-%s' % iv['deploy_resource_name']}),
            headers={'content-type': 'application/json'})
        assert answer.status_code == 200, answer.text
        assert answer.json()['accepted'] is True
    st = _settled(hc, 'deps')
    assert st.stack_status == 'CREATE_COMPLETE', st.stack_status_reason
    assert st.outputs[0]['output_value'] == 'r-dep_b'
    # again: nothing changes (exactly once)
    dep_b = [d for d in meta['deployments']
             if _inputs(d)['deploy_resource_name'] == 'dep_b'][0]
    again = requests.post(_inputs(dep_b)['deploy_signal_id'],
                          data=json.dumps({'result': 'other'}))
    assert again.json() == {'accepted': False,
                            'reason': 'signalled already'}
    assert hc.stacks.get('deps').outputs[0]['output_value'] == 'r-dep_b'


def test_failed_signal_fails_the_deployment(api):
    """A non-zero deploy_status_code sent to the URL fails the run, as
    Heat reads it, and so does cfn-signal's FAILURE (its request: curl
    PUT, an empty Content-Type, {Status, Reason, UniqueId, Data}); the
    deployments list says FAILED."""
    hc = _client(api, 'fail')
    server = _server_stack(hc, 'host')
    hc.stacks.create(stack_name='deps', parameters={'server': server},
                     template=DEPLOYMENTS % 'CFN_SIGNAL',
                     disable_rollback=True)
    meta = _deployments(hc, 'host', 2)
    by_name = {_inputs(d)['deploy_resource_name']: _inputs(d)[
        'deploy_signal_id'] for d in meta['deployments']}
    requests.post(by_name['0'], data=json.dumps(
        {'deploy_status_code': 3, 'deploy_stderr': 'broken'}))
    out = subprocess.run(
        ['curl', '-sS', '-X', 'PUT', '-H', 'Content-Type:',
         '--data-binary', json.dumps({
             'Status': 'FAILURE', 'Reason': 'no disk', 'UniqueId': 'i-1',
             'Data': 'Application has completed configuration.'}),
         by_name['dep_b']], capture_output=True, text=True, timeout=60)
    assert json.loads(out.stdout)['accepted'] is True, out
    st = _settled(hc, 'deps')
    assert st.stack_status == 'CREATE_FAILED'
    reasons = sorted(d.status_reason for d in
                     hc.software_deployments.list(server_id=server))
    assert reasons == [
        'Deployment exited with non-zero status code: 1: no disk',
        'Deployment exited with non-zero status code: 3: broken']
    assert {d.status for d in hc.software_deployments.list(
        server_id=server)} == {'FAILED'}


def _collect_request(tmp_path, url):
    """os-collect-config's `request` collector, once, as a server runs
    it: what it collected, by collector."""
    conf = tmp_path / 'occ.conf'
    conf.write_text('[DEFAULT]\ncachedir = %s\n[request]\nmetadata_url = '
                    '%s\n' % (tmp_path / 'cache', url))
    out = subprocess.run(
        [os.path.join(BIN, 'os-collect-config'), '--one-time',
         '--print', '--config-file', str(conf), 'request'],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


# ~25 s: os-collect-config and heat-config-notify start slowly
@pytest.mark.long
def test_poll_temp_url_server(api, tmp_path):
    """POLL_TEMP_URL: Heat's boot config in the user data (cloud-config,
    boothook, part-handler, the server's parts, cfn-init-data with the
    os-collect-config section); the os_collect_config attribute and the
    metadata give the request collector's signed URL, which the real
    os-collect-config reads the deployments from; a TEMP_URL_SIGNAL
    deployment's signal URL takes heat-config-notify's PUT."""
    hc = _client(api, 'tempurl')
    server = _server_stack(hc, 'host', 'POLL_TEMP_URL')
    occ = hc.resources.get('host', 'server').attributes['os_collect_config']
    assert occ['collectors'] == ['ec2', 'request', 'local']
    url = occ['request']['metadata_url']
    assert url.startswith(api.url) and 'signature=' in url

    # the user data the server booted with
    show = hc.resources.get('host', 'server').attributes['show']
    ud = _user_data(api, 'tempurl', server, show)
    doc = email.message_from_string(ud)
    kinds = [(p.get_content_type(), p.get_filename())
             for p in doc.get_payload()]
    assert kinds[:3] == [('text/cloud-config', 'cloud-config'),
                         ('text/cloud-boothook', 'boothook.sh'),
                         ('text/part-handler', 'part-handler.py')]
    assert ('text/x-converge-agent', 'converge-agent.json') in kinds
    assert kinds[-1] == ('text/x-cfninitdata', 'cfn-init-data')
    boot = json.loads(doc.get_payload()[-1].get_payload(decode=True))
    assert boot == {'deployments': [], 'os-collect-config': occ}

    # nothing to run yet
    got = _collect_request(tmp_path, url)
    assert got['request']['deployments'] == []
    hc.stacks.create(stack_name='deps', parameters={'server': server},
                     template=DEPLOYMENTS % 'TEMP_URL_SIGNAL')
    meta = _deployments(hc, 'host', 2)
    assert meta['os-collect-config'] == occ
    got = _collect_request(tmp_path, url)
    assert got['request']['deployments'] == meta['deployments']
    assert got['request']['os-collect-config'] == occ
    by_name = {_inputs(d)['deploy_resource_name']: d
               for d in got['request']['deployments']}
    assert _inputs(by_name['dep_b'])['deploy_signal_verb'] == 'PUT'

    # heat-config-notify, as heat-config runs it: the deployment's JSON
    # as its argument, the hook's result on stdin
    notify = heat_config_notify(tmp_path)
    for name, dep in by_name.items():
        path = tmp_path / ('%s.json' % name)
        path.write_text(json.dumps(dep))
        out = subprocess.run(
            [sys.executable, notify, str(path)],
            input=json.dumps({'deploy_stdout': 'ok', 'result': name,
                              'deploy_status_code': 0}),
            capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
    st = _settled(hc, 'deps')
    assert st.stack_status == 'CREATE_COMPLETE', st.stack_status_reason
    assert st.outputs[0]['output_value'] == 'dep_b'

    # the server deleted: its metadata URL serves nothing more
    hc.stacks.delete('deps')
    _gone(hc, 'deps')
    hc.stacks.delete('host')
    _gone(hc, 'host')
    assert requests.get(url).status_code == 404


def _gone(hc, name, timeout=120):
    from heatclient import exc
    deadline = time.monotonic() + timeout
    while True:
        try:
            st = hc.stacks.get(name)
        except exc.HTTPNotFound:
            return
        if st.stack_status == 'DELETE_COMPLETE':
            return
        assert time.monotonic() < deadline, st.stack_status
        time.sleep(0.1)


def _user_data(api, project, server, show):
    """The user data the cloud booted `server` with (the simulated
    cloud's record of it)."""
    out = subprocess.run(
        [os.path.join(BIN, 'converge'), '--config-file', api.conf, 'sim',
         'server', 'show', server, '-f', 'json'],
        capture_output=True, text=True, check=True)
    found = json.loads(out.stdout)
    ud = found.get('user_data')
    import base64
    try:
        return base64.b64decode(ud).decode()
    except Exception:
        return ud


def heat_config_notify(tmp_path):
    """heat-agents' heat-config-notify (its sdist from the package index,
    once per virtualenv: the wheel leaves the scripts out)."""
    cache = os.path.join(sys.prefix, 'heat-agents')
    script = os.path.join(cache, 'heat-config-notify')
    if not os.path.exists(script):
        os.makedirs(cache, exist_ok=True)
        subprocess.run([sys.executable, '-m', 'pip', 'download', '-q',
                        '--no-deps', '--no-binary', ':all:', '-d', cache,
                        'heat-agents==13.0.0'], check=True, timeout=300)
        import tarfile
        with tarfile.open(os.path.join(
                cache, 'heat_agents-13.0.0.tar.gz')) as tar:
            member = tar.getmember(
                'heat_agents-13.0.0/heat-config/bin/heat-config-notify')
            with open(script + '.part', 'wb') as f:
                f.write(tar.extractfile(member).read())
        os.rename(script + '.part', script)
    return script


def test_zaqar_refused_at_validate(api, tmp_path):
    """ZAQAR_MESSAGE and ZAQAR_SIGNAL need a Zaqar, which converge does
    not have: refused at validate, naming the file, the resource and the
    property."""
    tpl = tmp_path / 'zaqar.yaml'

    def refused(text):
        tpl.write_text(text)
        out = subprocess.run(
            [os.path.join(BIN, 'converge'), '--config-file', api.conf,
             'template', 'validate', '-t', str(tpl)],
            capture_output=True, text=True)
        assert out.returncode != 0
        assert 'zaqar.yaml' in out.stderr and 'needs Zaqar' in out.stderr
        return out.stderr

    assert 'resources.server.properties.software_config_transport' in \
        refused(SERVER % '      software_config_transport: ZAQAR_MESSAGE')
    assert 'resources.dep_b.properties.signal_transport' in \
        refused(DEPLOYMENTS % 'ZAQAR_SIGNAL')


def _collect_cfn(tmp_path, section):
    conf = tmp_path / 'occ-cfn.conf'
    conf.write_text(
        '[DEFAULT]\ncachedir = %s\n[cfn]\nmetadata_url = %s\nstack_name = '
        '%s\naccess_key_id = %s\nsecret_access_key = %s\npath = %s\n' % (
            tmp_path / 'cache-cfn', section['metadata_url'],
            section['stack_name'], section['access_key_id'],
            section['secret_access_key'], section['path']))
    return subprocess.run(
        [os.path.join(BIN, 'os-collect-config'), '--one-time', '--print',
         '--config-file', str(conf), 'cfn'],
        capture_output=True, text=True, timeout=120)


# ~25 s: os-collect-config and heat-config-notify start slowly
@pytest.mark.long
def test_poll_server_cfn_server(api, tmp_path):
    """POLL_SERVER_CFN: the os-collect-config section names converge-api's
    CFN metadata URL and a key pair derived for the server (no Keystone
    user); the real `cfn` collector, signing DescribeStackResource with
    it, reads the server's deployments; a key pair reads its own server
    only, and a wrong secret nothing; CFN_SIGNAL's URL takes
    heat-config-notify's POST once."""
    hc = _client(api, 'cfn')
    server = _server_stack(hc, 'host', 'POLL_SERVER_CFN')
    other = _server_stack(hc, 'other', 'POLL_SERVER_CFN')
    occ = hc.resources.get('host', 'server').attributes['os_collect_config']
    assert occ['collectors'] == ['ec2', 'cfn', 'local']
    reader = api.client('cfn', api.token('cfn', '--role', 'reader')[
        'token'])
    assert reader.resources.get('host', 'server').attributes[
        'os_collect_config']['cfn']['secret_access_key'] == '******'

    cfn = occ['cfn']
    assert cfn['metadata_url'] == api.url + '/v1/cfn/'
    assert cfn['stack_name'] == 'host' and cfn['path'] == 'server.Metadata'
    hc.stacks.create(stack_name='deps', parameters={'server': server},
                     template=DEPLOYMENTS % 'CFN_SIGNAL')
    meta = _deployments(hc, 'host', 2)
    out = _collect_cfn(tmp_path, cfn)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)['cfn']
    assert got['deployments'] == meta['deployments']
    assert got['os-collect-config'] == occ

    # another server's resource with this key pair, or a wrong secret
    theirs = hc.resources.get('other', 'server').attributes[
        'os_collect_config']['cfn']
    for wrong in (dict(cfn, stack_name='other'),
                  dict(cfn, secret_access_key=theirs['secret_access_key'])):
        out = _collect_cfn(tmp_path, wrong)
        assert '403' in out.stderr and 'Source [cfn] Unavailable' in \
            out.stderr
        assert 'cfn' not in json.loads(out.stdout or '{}')
    assert other != server

    notify = heat_config_notify(tmp_path)
    for dep in got['deployments']:
        name = _inputs(dep)['deploy_resource_name']
        path = tmp_path / ('%s.json' % name)
        path.write_text(json.dumps(dep))
        for _ in range(2):   # a second notify changes nothing
            out = subprocess.run(
                [sys.executable, notify, str(path)],
                input=json.dumps({'result': 'cfn-%s' % name}),
                capture_output=True, text=True, timeout=120)
            assert out.returncode == 0, out.stderr
    st = _settled(hc, 'deps')
    assert st.stack_status == 'CREATE_COMPLETE', st.stack_status_reason
    assert st.outputs[0]['output_value'] == 'cfn-dep_b'


def test_deployment_cut_off_by_a_failed_stack_shows_failed(api):
    """Heat's test_deployments_timeout_failed, without its minute: a
    deployment still waiting for its signal when its stack's operation
    fails is listed FAILED (Heat cancels it), its reason the stack's."""
    hc = _client(api, 'cut')
    server = _server_stack(hc, 'host')
    tpl = DEPLOYMENTS % 'CFN_SIGNAL'
    tpl = tpl.replace('outputs:\n  result: {value: {get_attr: [dep_b, '
                      'result]}}\n', '') + '''  boom:
    type: OS::Heat::TestResource
    properties: {fail: true, wait_secs: 1}
'''
    hc.stacks.create(stack_name='deps', parameters={'server': server},
                     template=tpl, disable_rollback=True)
    _deployments(hc, 'host', 2)
    st = _settled(hc, 'deps')
    assert st.stack_status == 'CREATE_FAILED'
    shown = hc.software_deployments.list(server_id=server)
    assert [d.status for d in shown] == ['FAILED', 'FAILED']
    assert all(d.status_reason.startswith('Stopped waiting')
               for d in shown)
    assert hc.software_deployments.get(shown[0].id).status == 'FAILED'

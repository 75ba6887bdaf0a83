"""CloudFormation-format templates (HeatTemplateFormatVersion 2012-12-12,
AWSTemplateFormatVersion 2010-09-09), as a user sees them through the CLI:
functions and pseudo parameters, errors naming file, line, resource and
property, nesting with HOT both ways, a wait condition signalled by curl
to its pre-signed URL, and the corpus's templates."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.distributed import wait_for as _until
from tests.test_heat_api import api  # noqa: F401 (a fixture)

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'cfn')
sys.path.insert(0, os.path.join(REPO, 'tools'))
import cfn_corpus  # noqa: E402

CORPUS = cfn_corpus.DEFAULT_CORPUS
TEMPLATES = list(cfn_corpus.templates(CORPUS)) \
    if os.path.isdir(CORPUS) else []
needs_corpus = pytest.mark.skipif(not TEMPLATES,
                                  reason='corpus not found at %s' % CORPUS)


def test_functions_conditions_and_pseudo_parameters(cli):
    cli.run('stack', 'create', 'cf', '-t',
            os.path.join(HERE, 'functions.template'), '--wait')
    shown = cli.json('stack', 'show', 'cf')
    assert shown['stack_status'] == 'CREATE_COMPLETE'
    out = cli.json('stack', 'output', 'show', 'cf', '--all')
    assert out['joined'] == 'cf-m1.large-2'   # StackName, FindInMap, Ref
    assert out['ref'].startswith('cf-Joined-')   # Ref of a resource
    assert out['select'] == 'b'
    assert out['split'] == ['x', 'y', 'z']
    assert out['replace'] == 'hello world in RegionOne'
    assert out['base64'] == 'plain text'
    assert out['azs'] == ['nova']
    assert out['members'] == {'colour': 'blue', 'size': '9'}
    assert out['stack_id'] == 'arn:openstack:heat::%s:stacks/cf/%s' % (
        out['account'], shown['id'])
    assert (out['both'], out['either']) == ('on-both', 'on-either')
    # a false condition leaves out the resource; the output is listed
    # with no value, as Heat lists it
    assert out['dev_only'] is None
    names = {r['resource_name'] for r in cli.json(
        'stack', 'resource', 'list', 'cf')}
    assert names == {'Joined', 'Chosen', 'Trimmed'}
    # AWS::NoValue drops the property
    trimmed = cli.json('stack', 'resource', 'show', 'cf', 'Trimmed')
    assert 'type' not in trimmed['properties']
    # NoEcho: the value is hidden where the stack is shown
    assert shown['parameters']['Secret'] == '******'
    assert out['secret'] == '******'


def test_parameter_values_are_checked_with_their_description(cli):
    proc = cli.run('template', 'validate', '-t',
                   os.path.join(HERE, 'functions.template'),
                   '--parameter', 'Env=test', check=False)
    assert proc.returncode == 2
    assert "Parameter 'Env' is invalid: prod or dev" in proc.stderr
    proc = cli.run('template', 'validate', '-t',
                   os.path.join(HERE, 'functions.template'),
                   '--parameter', 'Count=9', check=False)
    assert proc.returncode == 2
    assert '9 is out of range (min: 1, max: 5)' in proc.stderr


BAD = [
    # (what is wrong, template text, what the error says)
    ('property', """
AWSTemplateFormatVersion: '2010-09-09'
Resources:
  Web:
    Type: AWS::EC2::Instance
    Properties:
      ImageId: cirros
      InstanceType: m1.small
      Colour: red
""", ':9: Resources.Web.Properties.Colour: Unknown property Colour'),
    ('Fn::If in the Heat format', """
HeatTemplateFormatVersion: '2012-12-12'
Resources:
  V:
    Type: OS::Heat::Value
    Properties:
      value: {'Fn::If': [c, 1, 2]}
""", ':7: Resources.V.Properties.value.Fn::If: "Fn::If" is not supported in '
     'this version of HeatTemplateFormatVersion 2012-12-12'),
    ('Conditions in the Heat format', """
HeatTemplateFormatVersion: '2012-12-12'
Conditions: {}
Resources: {}
""", ':3: Conditions: "Conditions" is not a valid template section'),
    ('a Ref to nothing', """
AWSTemplateFormatVersion: '2010-09-09'
Resources:
  V:
    Type: OS::Heat::Value
    Properties:
      value: {Ref: Nowhere}
""", ':7: Resources.V.Properties.value.Ref: The specified reference '
     '"Nowhere" is incorrect'),
    ('a missing mapping key', """
AWSTemplateFormatVersion: '2010-09-09'
Mappings:
  M: {a: {b: c}}
Resources:
  V:
    Type: OS::Heat::Value
    Properties:
      value: {'Fn::FindInMap': [M, x, b]}
""", ':9: Resources.V.Properties.value.Fn::FindInMap: Fn::FindInMap: the '
     'key "x" is not in the mapping'),
    ('a bad parameter key', """
AWSTemplateFormatVersion: '2010-09-09'
Parameters:
  P: {Type: String, Hidden: true}
""", ':4: Parameters.P.Hidden: Invalid key "Hidden" for parameter (P)'),
    ('a bad version', """
AWSTemplateFormatVersion: '2011-01-01'
Resources: {}
""", ':2: AWSTemplateFormatVersion: The template version is invalid'),
    ('two versions', """
HeatTemplateFormatVersion: '2012-12-12'
AWSTemplateFormatVersion: '2010-09-09'
Resources: {}
""", ':3: AWSTemplateFormatVersion: Ambiguous versions '
     '(HeatTemplateFormatVersion, AWSTemplateFormatVersion)'),
    ('a launch configuration that is not one', """
AWSTemplateFormatVersion: '2010-09-09'
Resources:
  Group:
    Type: AWS::AutoScaling::AutoScalingGroup
    Properties:
      AvailabilityZones: []
      LaunchConfigurationName: some-name
      MinSize: 1
      MaxSize: 2
""", ':8: Resources.Group.Properties.LaunchConfigurationName: '
     'LaunchConfigurationName must be a reference (Ref)'),
]


@pytest.mark.parametrize('what,text,expected', BAD,
                         ids=[b[0] for b in BAD])
def test_errors_name_file_line_resource_and_property(write, cli, what,
                                                     text, expected):
    from converge import exception
    from converge import template
    from converge.engine import stacks
    path = write('bad.template', text)
    with pytest.raises(exception.InvalidTemplate) as e:
        stacks.validate(template.load_bundle(path), {})
    assert str(e.value).startswith(path + expected), str(e.value)


def test_the_cli_refuses_a_bad_template_with_exit_2(write, cli):
    what, text, expected = BAD[0]
    path = write('bad.template', text)
    proc = cli.run('template', 'validate', '-t', path, check=False)
    assert proc.returncode == 2
    assert path + expected in proc.stderr
    assert 'Traceback' not in proc.stderr


def test_cloudformation_and_hot_nest_both_ways(cli):
    """HOT -> a CloudFormation provider template -> a HOT provider
    template, and -> a nested AWS::CloudFormation::Stack by TemplateURL
    (a local file the CLI sends)."""
    cli.run('stack', 'create', 'mixed', '-t',
            os.path.join(HERE, 'parent.yaml'), '--wait')
    assert cli.json('stack', 'show', 'mixed')['stack_status'] == \
        'CREATE_COMPLETE'
    out = cli.json('stack', 'output', 'show', 'mixed', '--all')
    assert out['from_cfn'] == 'HI / BY URL'


def test_a_wait_condition_is_signalled_by_curl_to_its_url(tmp_path):
    """The handle's Ref is a pre-signed URL: curl (as cfn-signal would)
    PUTs CloudFormation's body to it, no credentials of its own."""
    from tests import test_heat_api
    conf = str(tmp_path / 'converge.conf')
    with open(conf, 'w') as f:
        f.write('[DEFAULT]\nhome = %s\n' % (tmp_path / 'home'))
    proc, url = test_heat_api._start_api(conf, str(tmp_path / 'api.log'))
    try:
        token = json.loads(subprocess.run(
            [os.path.join(test_heat_api.BIN, 'converge-manage'),
             '--config-file', conf, 'token', 'create', '--project', 'demo',
             '-f', 'json'], capture_output=True, text=True,
            check=True).stdout)['token']

        def converge(*args):
            env = {k: v for k, v in os.environ.items()
                   if k != 'CONVERGE_HOME'}
            done = subprocess.run(
                [sys.executable, '-m', 'converge.cmd.cli', '--os-url',
                 url + '/v1/demo', '--os-token', token] + list(args) +
                ['-f', 'json'], capture_output=True, text=True, env=env,
                timeout=120)
            assert done.returncode == 0, done.stderr
            return json.loads(done.stdout)

        converge('stack', 'create', 'wc', '-t',
                 os.path.join(HERE, 'wait.template'))
        signal_url = _until(lambda: converge(
            'stack', 'output', 'show', 'wc', 'url')['output_value'])
        assert signal_url.startswith(url + '/v1/agent/waitconditions/')
        assert '?token=' in signal_url
        # the instance's boot script has the URL (its user data)
        server = converge('stack', 'resource', 'show', 'wc', 'Server')
        assert server['resource_status'] == 'CREATE_COMPLETE'
        status = converge('stack', 'show', 'wc')['stack_status']
        assert status == 'CREATE_IN_PROGRESS'   # it waits for the signal
        sent = subprocess.run(
            ['curl', '-sf', '-X', 'PUT', '-H', 'Content-Type:',
             '--data-binary', json.dumps({
                 'Status': 'SUCCESS', 'Reason': 'configured',
                 'UniqueId': 'web', 'Data': 'port 80'}), signal_url],
            capture_output=True, text=True, timeout=60)
        assert sent.returncode == 0, sent.stderr
        assert json.loads(sent.stdout)['status'] == 'SUCCESS'
        _until(lambda: converge('stack', 'show', 'wc')['stack_status'] !=
               'CREATE_IN_PROGRESS')
        assert converge('stack', 'show', 'wc')['stack_status'] == \
            'CREATE_COMPLETE'
        assert json.loads(converge('stack', 'output', 'show', 'wc', 'data')
                          ['output_value']) == {'web': 'port 80'}
        # a wrong token is refused
        bad = subprocess.run(
            ['curl', '-s', '-o', '/dev/null', '-w', '%{http_code}', '-X',
             'PUT', '--data-binary', '{}',
             signal_url.split('?')[0] + '?token=wrong'],
            capture_output=True, text=True, timeout=60)
        assert bad.stdout == '403'
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# -- the corpus ---------------------------------------------------------------

@needs_corpus
def test_the_corpus_validates_or_names_what_stops_it():
    from converge import conf
    conf.setup([], log=False)
    verdicts = {rel: cfn_corpus.check(CORPUS, rel) for rel in TEMPLATES}
    bad = {r: v for r, v in verdicts.items() if v[0] == 'INVALID'}
    assert not bad
    for rel, (verdict, detail) in verdicts.items():
        if cfn_corpus.expected_invalid(rel):
            # refused, naming the file, its line and the resource
            assert verdict == 'refused'
            assert detail.startswith(rel + ':')
            assert 'Resources.' in detail or 'Outputs.' in detail
            said = cfn_corpus.BROKEN.get(os.path.relpath(rel,
                                                         cfn_corpus.TOP))
            assert said is None or said in detail
        elif verdict == 'unsupported':
            assert detail.startswith('uses AWS::') or \
                detail.startswith('uses OS::')
    valid = [r for r, v in verdicts.items() if v[0] == 'valid']
    assert len(valid) >= 30


@needs_corpus
@pytest.mark.long
@pytest.mark.parametrize('rel', TEMPLATES)
def test_corpus_template_through_the_cli(rel, cli, tmp_path):
    """`converge template validate` of each; `stack create --wait` of
    each valid one on the simulator (its servers' cfn-signal played)."""
    from converge import conf
    conf.setup([], log=False)
    verdict, _ = cfn_corpus.check(CORPUS, rel)
    args = ['template', 'validate', '-t', os.path.join(CORPUS, rel)]
    for k, v in cfn_corpus.parameters(CORPUS, rel).items():
        args += ['--parameter', '%s=%s' % (k, v)]
    proc = cli.run(*args, check=False)
    if verdict != 'valid':
        assert proc.returncode == 2 and 'Traceback' not in proc.stderr
        return
    if cfn_corpus.mirrored(CORPUS, cfn_corpus._doc(CORPUS, rel)):
        # its TemplateURL is a web address: converge fetches none
        assert proc.returncode == 2
        assert 'Could not fetch the nested template https://' in \
            proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr
    status, reason = cfn_corpus.create(CORPUS, rel, cli.home)
    assert status == 'CREATE_COMPLETE', reason


def test_a_group_of_instances_from_a_launch_configuration_scales(cli):
    """AWS::AutoScaling's group boots AWS::EC2::Instances of its launch
    configuration (its properties and Metadata); its policy scales it."""
    cli.run('stack', 'create', 'asg', '-t',
            os.path.join(HERE, 'asg.template'), '--wait')
    out = cli.json('stack', 'output', 'show', 'asg', '--all')
    assert len(out['instances'].split(',')) == 1
    assert len(out['fixed'].split(',')) == 2
    assert '/resources/Up/signal?token=' in out['alarm_url']
    servers = cli.json('sim', 'server', 'list')
    assert len(servers) == 3
    assert {s['Image'] for s in servers} == {'cirros'}
    assert {s['Flavor'] for s in servers} == {'m1.tiny'}
    done = cli.run('stack', 'resource', 'signal', 'asg', 'Up')
    assert 'scaling group Group from 1 to 2' in done.stdout
    out = cli.json('stack', 'output', 'show', 'asg', '--all')
    assert len(out['instances'].split(',')) == 2


def test_python_heatclient_creates_a_cloudformation_stack(api, tmp_path):
    """What python-heatclient sends for a CloudFormation template file
    is taken as Heat takes it."""
    from tests import test_heat_api
    hc = api.client('cfn', api.token('cfn')['token'])
    with open(os.path.join(HERE, 'functions.template')) as f:
        fields = test_heat_api._sent(tmp_path, f.read())
    hc.stacks.create(stack_name='viaclient', parameters={'Env': 'dev'},
                     disable_rollback=True, **fields)
    st = test_heat_api._settled(hc, 'viaclient')
    assert st.stack_status == 'CREATE_COMPLETE', st.stack_status_reason
    outs = {o['output_key']: o['output_value'] for o in st.outputs}
    assert outs['joined'] == 'other'   # Env=dev: IsProd is false
    assert outs['dev_only'] == 'never'
    assert st.parameters['Secret'] == '******'
    names = {r.resource_name for r in hc.resources.list(st.id)}
    assert names == {'Joined', 'Chosen', 'Trimmed', 'DevOnly'}

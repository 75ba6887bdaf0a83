"""The AWS resource types of the CloudFormation corpus, as a user sees
them through the CLI on the simulator: AWS::IAM::User and AccessKey
(converge's own credential, no keystone user), AWS::EC2::EIP and
EIPAssociation (a floating IP given to an instance's port),
AWS::CloudWatch::Alarm (a stored alarm), AWS::RDS::DBInstance and
AWS::ElasticLoadBalancing::LoadBalancer (a nested stack whose server
signals when it is ready)."""

import json
import os
import sys

import pytest

from tests.conftest import REPO

sys.path.insert(0, os.path.join(REPO, 'tools'))
import cfn_corpus  # noqa: E402


def _outputs(cli, stack):
    return cli.json('stack', 'output', 'show', stack, '--all')


def _status(cli, stack):
    return cli.json('stack', 'show', stack)['stack_status']


IAM = """
AWSTemplateFormatVersion: '2010-09-09'
Resources:
  CfnUser:
    Type: AWS::IAM::User
    Properties:
      Policies: [Anything]
  Keys:
    Type: AWS::IAM::AccessKey
    Properties:
      UserName: {Ref: CfnUser}
  Other:
    Type: AWS::IAM::AccessKey
    Properties:
      UserName: {Ref: CfnUser}
  Credentials:
    Type: OS::Heat::Value
    Properties:
      value:
        Fn::Join: ['', ['AWSAccessKeyId=', {Ref: Keys}, "\\n",
                        'AWSSecretKey=',
                        {'Fn::GetAtt': [Keys, SecretAccessKey]}, "\\n"]]
Outputs:
  user: {Value: {Ref: CfnUser}}
  key: {Value: {Ref: Keys}}
  other: {Value: {Ref: Other}}
  secret: {Value: {'Fn::GetAtt': [Keys, SecretAccessKey]}}
  other_secret: {Value: {'Fn::GetAtt': [Other, SecretAccessKey]}}
  owner: {Value: {'Fn::GetAtt': [Keys, UserName]}}
  credentials: {Value: {'Fn::GetAtt': [Credentials, value]}}
"""


def test_iam_user_and_access_key_are_converge_credentials(cli, write):
    path = write('iam.yaml', IAM)
    cli.run('template', 'validate', '-t', path)
    cli.run('stack', 'create', 'iam', '-t', path, '--wait')
    assert _status(cli, 'iam') == 'CREATE_COMPLETE'
    out = _outputs(cli, 'iam')
    assert out['user'].startswith('iam-CfnUser-')
    assert out['owner'] == out['user']
    assert len(out['key']) == 20 and out['key'].isalnum()
    assert len(out['secret']) == 64
    int(out['secret'], 16)
    # each key its own pair
    assert out['other'] != out['key']
    assert out['other_secret'] != out['secret']
    assert out['credentials'] == 'AWSAccessKeyId=%s\nAWSSecretKey=%s\n' % (
        out['key'], out['secret'])
    # the same pair after an update (derived, not made again)
    cli.run('stack', 'update', 'iam', '-t', path, '--wait')
    again = _outputs(cli, 'iam')
    assert (again['key'], again['secret']) == (out['key'], out['secret'])
    cli.run('stack', 'delete', 'iam', '--wait', '-y')
    assert cli.json('stack', 'list') == []


def test_an_access_key_needs_its_user_name(cli, write):
    path = write('bad.yaml', """
AWSTemplateFormatVersion: '2010-09-09'
Resources:
  Keys: {Type: AWS::IAM::AccessKey}
""")
    proc = cli.run('template', 'validate', '-t', path, check=False)
    assert proc.returncode == 2
    assert 'Resources.Keys.Properties.UserName' in proc.stderr


#: the router between the simulator's private and public networks an
#: address of the public one needs
ROUTER = """
  Router:
    Type: OS::Neutron::Router
    Properties:
      external_gateway_info: {network: public}
  Inside:
    Type: OS::Neutron::RouterInterface
    Properties:
      router: {Ref: Router}
      subnet: private-subnet
"""

EIP = """
AWSTemplateFormatVersion: '2010-09-09'
Resources:
""" + ROUTER + """  Web:
    Type: AWS::EC2::Instance
    DependsOn: Inside
    Properties:
      ImageId: cirros
      InstanceType: m1.small
      SubnetId: private-subnet
  Db:
    Type: AWS::EC2::Instance
    DependsOn: Inside
    Properties:
      ImageId: cirros
      InstanceType: m1.small
      SubnetId: private-subnet
  WebAddress:
    Type: AWS::EC2::EIP
  WebAssoc:
    Type: AWS::EC2::EIPAssociation
    Properties:
      InstanceId: {Ref: Web}
      EIP: {Ref: WebAddress}
  DbAddress:
    Type: AWS::EC2::EIP
    Properties:
      InstanceId: {Ref: Db}
Outputs:
  web_ip: {Value: {Ref: WebAddress}}
  web_allocation: {Value: {'Fn::GetAtt': [WebAddress, AllocationId]}}
  db_ip: {Value: {Ref: DbAddress}}
  db_allocation: {Value: {'Fn::GetAtt': [DbAddress, AllocationId]}}
  web: {Value: {Ref: Web}}
  db: {Value: {Ref: Db}}
"""


def _port_of(cli, server):
    ports = [p for p in cli.json('sim', 'object', 'list', 'port')
             if cli.json('sim', 'object', 'show', 'port', p['ID'])
             ['device_id'] == server]
    assert len(ports) == 1
    return ports[0]['ID']


@pytest.mark.long  # 15-25 s: a whole stack made and deleted
def test_elastic_ips_are_floating_ips_given_to_instances(cli, write):
    path = write('eip.yaml', EIP)
    cli.run('template', 'validate', '-t', path)
    cli.run('stack', 'create', 'eip', '-t', path, '--wait')
    assert _status(cli, 'eip') == 'CREATE_COMPLETE'
    out = _outputs(cli, 'eip')
    for who in ('web', 'db'):
        # Ref: the address; AllocationId: the floating IP
        fip = cli.json('sim', 'object', 'show', 'floating_ip',
                       out[who + '_allocation'])
        assert fip['floating_ip_address'] == out[who + '_ip']
        assert out[who + '_ip'].startswith('172.24.4.')
        assert fip['port_id'] == _port_of(cli, out[who])
    # the association goes first: the address stays, free
    template = EIP.replace("""  WebAssoc:
    Type: AWS::EC2::EIPAssociation
    Properties:
      InstanceId: {Ref: Web}
      EIP: {Ref: WebAddress}
""", '')
    cli.run('stack', 'update', 'eip', '-t', write('eip2.yaml', template),
            '--wait')
    assert _status(cli, 'eip') == 'UPDATE_COMPLETE'
    fip = cli.json('sim', 'object', 'show', 'floating_ip',
                   out['web_allocation'])
    assert fip['port_id'] is None
    cli.run('stack', 'delete', 'eip', '--wait', '-y')
    assert cli.json('sim', 'object', 'list', 'floating_ip') == []


def test_an_association_names_one_address_and_a_target(cli, write):
    path = write('bad.yaml', """
AWSTemplateFormatVersion: '2010-09-09'
Resources:
  Assoc:
    Type: AWS::EC2::EIPAssociation
    Properties:
      EIP: 172.24.4.10
      AllocationId: abc
""")
    proc = cli.run('template', 'validate', '-t', path, check=False)
    assert proc.returncode == 2
    assert "Either 'EIP' or 'AllocationId' must be provided." in proc.stderr


@pytest.mark.long  # 15-25 s: a whole stack made and deleted
def test_an_instance_on_the_default_network_gets_its_port_for_an_eip(
        cli, write):
    """A server that names no network has no port on the simulator
    until its interfaces are asked for (as Nova lists them): then it has
    the one Nova would have made, holding its address, gone with it."""
    path = write('plain.yaml', EIP_PLAIN)
    cli.run('stack', 'create', 'plain', '-t', path, '--wait')
    assert _status(cli, 'plain') == 'CREATE_COMPLETE'
    out = _outputs(cli, 'plain')
    fip = cli.json('sim', 'object', 'show', 'floating_ip',
                   out['allocation'])
    assert fip['port_id'] == _port_of(cli, out['web'])
    assert fip['fixed_ip_address'] == out['private_ip']
    server = cli.json('sim', 'server', 'show', out['web'])
    assert out['private_ip'] in json.dumps(server['addresses'])
    cli.run('stack', 'delete', 'plain', '--wait', '-y')
    assert cli.json('sim', 'object', 'list', 'port') == []
    assert cli.json('sim', 'object', 'list', 'floating_ip') == []


EIP_PLAIN = """
AWSTemplateFormatVersion: '2010-09-09'
Resources:
""" + ROUTER + """  Web:
    Type: AWS::EC2::Instance
    Properties: {ImageId: cirros, InstanceType: m1.small}
  Address:
    Type: AWS::EC2::EIP
    DependsOn: Inside
  Assoc:
    Type: AWS::EC2::EIPAssociation
    Properties:
      InstanceId: {Ref: Web}
      EIP: {Ref: Address}
Outputs:
  allocation: {Value: {'Fn::GetAtt': [Address, AllocationId]}}
  web: {Value: {Ref: Web}}
  private_ip: {Value: {'Fn::GetAtt': [Web, PrivateIp]}}
"""


ALARM = """
AWSTemplateFormatVersion: '2010-09-09'
Resources:
  HttpFailureAlarm:
    Type: AWS::CloudWatch::Alarm
    Properties:
      AlarmDescription: Restart the server if httpd fails > 3 times
      MetricName: ServiceFailure
      Namespace: system/linux
      Statistic: SampleCount
      Period: '300'
      EvaluationPeriods: '1'
      Threshold: '2'
      AlarmActions: []
      ComparisonOperator: %s
Outputs:
  alarm: {Value: {Ref: HttpFailureAlarm}}
"""


def test_a_cloudwatch_alarm_is_stored_with_its_checked_properties(cli,
                                                                 write):
    bad = cli.run('template', 'validate', '-t',
                  write('bad.yaml', ALARM % 'Bigger'), check=False)
    assert bad.returncode == 2
    assert 'ComparisonOperator' in bad.stderr
    path = write('alarm.yaml', ALARM % 'GreaterThanThreshold')
    cli.run('stack', 'create', 'cw', '-t', path, '--wait')
    assert _status(cli, 'cw') == 'CREATE_COMPLETE'
    assert _outputs(cli, 'cw')['alarm'].startswith('cw-HttpFailureAlarm-')
    shown = cli.json('stack', 'resource', 'show', 'cw', 'HttpFailureAlarm')
    assert shown['properties']['Threshold'] == '2'
    cli.run('stack', 'delete', 'cw', '--wait', '-y')
    assert cli.json('stack', 'list') == []


SCALED = """
AWSTemplateFormatVersion: '2010-09-09'
Resources:
  Config:
    Type: AWS::AutoScaling::LaunchConfiguration
    Properties: {ImageId: cirros, InstanceType: m1.tiny}
  Group:
    Type: AWS::AutoScaling::AutoScalingGroup
    Properties:
      AvailabilityZones: {'Fn::GetAZs': ''}
      LaunchConfigurationName: {Ref: Config}
      MinSize: '1'
      MaxSize: '3'
  Up:
    Type: AWS::AutoScaling::ScalingPolicy
    Properties:
      AutoScalingGroupName: {Ref: Group}
      AdjustmentType: ChangeInCapacity
      ScalingAdjustment: '1'
  Busy:
    Type: AWS::CloudWatch::Alarm
    Properties:
      MetricName: CPUUtilization
      Namespace: system/linux
      Statistic: Average
      Period: '60'
      EvaluationPeriods: '1'
      Threshold: '50'
      ComparisonOperator: GreaterThanThreshold
      AlarmActions: [{Ref: Up}]
Outputs:
  instances: {Value: {'Fn::GetAtt': [Group, InstanceList]}}
"""


@pytest.mark.long  # 15-25 s: a whole stack made and deleted
def test_an_alarm_set_to_alarm_by_a_signal_signals_its_actions(cli, write):
    cli.run('stack', 'create', 'cw', '-t', write('cw.yaml', SCALED),
            '--wait')
    assert len(_outputs(cli, 'cw')['instances'].split(',')) == 1
    bad = cli.run('stack', 'resource', 'signal', 'cw', 'Busy', '--data',
                  '{"state": "ON_FIRE"}', check=False)
    assert bad.returncode != 0 and 'sets its state' in bad.stderr
    # OK has no actions: nothing scales
    done = cli.run('stack', 'resource', 'signal', 'cw', 'Busy', '--data',
                   '{"state": "OK"}')
    assert 'ok: Alarm state set to OK' in done.stdout
    assert len(_outputs(cli, 'cw')['instances'].split(',')) == 1
    done = cli.run('stack', 'resource', 'signal', 'cw', 'Busy', '--data',
                   '{"state": "ALARM"}')
    assert 'Alarm state set to ALARM; signalled Up' in done.stdout
    assert len(_outputs(cli, 'cw')['instances'].split(',')) == 2
    events = [e for e in cli.json('stack', 'event', 'list', 'cw')
              if e['resource_name'] == 'Busy' and
              e['resource_status'] == 'SIGNAL_COMPLETE']
    assert [e['resource_status_reason'] for e in events] == [
        'Alarm state set to OK', 'Alarm state set to ALARM; signalled Up']


RDS = """
AWSTemplateFormatVersion: '2010-09-09'
Parameters:
  KeyName: {Type: String}
Resources:
  Database:
    Type: AWS::RDS::DBInstance
    Properties:
      DBName: wiki
      Engine: MySQL
      MasterUsername: admin
      DBInstanceClass: db.m1.small
      DBSecurityGroups: []
      AllocatedStorage: '5'
      MasterUserPassword: secret12
Outputs:
  address: {Value: {'Fn::GetAtt': [Database, Endpoint.Address]}}
  port: {Value: {'Fn::GetAtt': [Database, Endpoint.Port]}}
"""


def _nested_servers(cli):
    return [cli.json('sim', 'server', 'show', s['ID'])
            for s in cli.json('sim', 'server', 'list')]


def _create_booting(cli, name, path, *params):
    """`stack create --wait`, the nested servers' boot scripts played
    (their cfn-signal to the wait condition handle's URL)."""
    prelude = cfn_corpus.prelude(cli.home, [])
    assert prelude.returncode == 0, prelude.stderr
    args = ['stack', 'create', name, '-t', path, '--wait']
    for p in params:
        args += ['--parameter', p]
    done = cfn_corpus._booting(cli.home, args)
    assert done.returncode == 0, done.stderr


@pytest.mark.long  # 15-25 s: a whole stack made and deleted
def test_a_db_instance_is_a_nested_stack_whose_server_runs_mysql(cli,
                                                                 write):
    path = write('rds.yaml', RDS)
    cli.run('template', 'validate', '-t', path, '--parameter',
            'KeyName=%s' % cfn_corpus.KEY)
    _create_booting(cli, 'rds', path, 'KeyName=%s' % cfn_corpus.KEY)
    assert _status(cli, 'rds') == 'CREATE_COMPLETE'
    members = {r['resource_name']: r for r in cli.json(
        'stack', 'resource', 'list', 'rds', '--nested-depth', '1')}
    assert members['DatabaseInstance']['resource_type'] == \
        'AWS::EC2::Instance'
    assert members['Ready']['resource_status'] == 'CREATE_COMPLETE'
    server = [s for s in _nested_servers(cli)
              if s['id'] == members['DatabaseInstance']
              ['physical_resource_id']][0]
    # m1.small for db.m1.small; the parent's key pair
    assert server['flavor'] == 'm1.small'
    assert server['key_name'] == cfn_corpus.KEY
    out = _outputs(cli, 'rds')
    assert out['port'] == '3306'
    assert out['address'] and out['address'] in json.dumps(
        server['addresses'])
    # the password is the child's NoEcho parameter: not shown
    child = cli.json('stack', 'show',
                     members['Ready']['stack_name'])
    assert child['parameters']['MasterUserPassword'] == '******'
    cli.run('stack', 'delete', 'rds', '--wait', '-y')
    assert [s['Stack Name'] for s in cli.json('stack', 'list')] == \
        ['prelude']
    assert [s['name'] for s in _nested_servers(cli)] == []


LB = """
AWSTemplateFormatVersion: '2010-09-09'
Parameters:
  LbImageId: {Type: String, Default: fedora}
Resources:
  Web:
    Type: AWS::EC2::Instance
    Properties: {ImageId: cirros, InstanceType: m1.small}
  LoadBalancer:
    Type: AWS::ElasticLoadBalancing::LoadBalancer
    Properties:
      AvailabilityZones: {'Fn::GetAZs': ''}
      Instances: [{Ref: Web}]
      Listeners:
      - {LoadBalancerPort: '80', InstancePort: '8080', Protocol: HTTP}
      HealthCheck: {Target: 'HTTP:80/', HealthyThreshold: '3',
                    UnhealthyThreshold: '5', Interval: '30', Timeout: '5'}
Outputs:
  dns: {Value: {'Fn::GetAtt': [LoadBalancer, DNSName]}}
  zone: {Value: {'Fn::GetAtt': [LoadBalancer, CanonicalHostedZoneName]}}
  ref: {Value: {Ref: LoadBalancer}}
  web: {Value: {'Fn::GetAtt': [Web, PrivateIp]}}
"""


@pytest.mark.long  # 15-25 s: a whole stack made and deleted
def test_a_load_balancer_is_a_nested_stack_whose_server_runs_haproxy(
        cli, write):
    path = write('lb.yaml', LB)
    cli.run('template', 'validate', '-t', path)
    _create_booting(cli, 'lb', path)
    assert _status(cli, 'lb') == 'CREATE_COMPLETE'
    out = _outputs(cli, 'lb')
    assert out['ref'] == 'LoadBalancer'
    assert out['zone'] == ''
    members = {r['resource_name']: r for r in cli.json(
        'stack', 'resource', 'list', 'lb', '--nested-depth', '1')}
    for name, kind in (('LB_instance', 'AWS::EC2::Instance'),
                       ('CfnLBAccessKey', 'AWS::IAM::AccessKey'),
                       ('latency_watcher', 'AWS::CloudWatch::Alarm'),
                       ('WaitCondition', 'AWS::CloudFormation::WaitCondition')):
        assert members[name]['resource_type'] == kind
        assert members[name]['resource_status'] == 'CREATE_COMPLETE'
    lb = [s for s in _nested_servers(cli) if s['id'] == members[
        'LB_instance']['physical_resource_id']][0]
    # the parent's LbImageId; no key pair (the parent declares none)
    assert lb['image'] == 'fedora' and not lb['key_name']
    assert out['dns'] and out['dns'] in json.dumps(lb['addresses'])
    # HAProxy's configuration: the instance on its port, checked
    # (the child's template, as its stack keeps it)
    child = cli.json('stack', 'template', 'show',
                     members['LB_instance']['stack_name'])
    meta = child['Resources']['LB_instance']['Metadata']
    cfg = meta['AWS::CloudFormation::Init']['config']['files'][
        '/etc/haproxy/haproxy.cfg']['content']
    assert '    bind *:80\n' in cfg
    assert '    server server1 %s:8080 check inter 30s fall 5 rise 3\n' % (
        out['web']) in cfg
    cli.run('stack', 'delete', 'lb', '--wait', '-y')
    assert [s['name'] for s in _nested_servers(cli)] == []


def test_a_load_balancer_health_check_interval_outlasts_its_timeout(
        cli, write):
    path = write('bad.yaml', LB.replace("Interval: '30', Timeout: '5'",
                                        "Interval: '5', Timeout: '30'"))
    proc = cli.run('template', 'validate', '-t', path, check=False)
    assert proc.returncode == 2
    assert 'Interval must be larger than Timeout' in proc.stderr


S3 = """
AWSTemplateFormatVersion: '2010-09-09'
Resources:
  Site:
    Type: AWS::S3::Bucket
    DeletionPolicy: Delete
    Properties:
      AccessControl: PublicRead
      WebsiteConfiguration: {IndexDocument: index.html,
                             ErrorDocument: error.html}
      Tags: [{Key: team, Value: web}]
  Private:
    Type: AWS::S3::Bucket
    Properties: {AccessControl: Private}
Outputs:
  site: {Value: {Ref: Site}}
  url: {Value: {'Fn::GetAtt': [Site, WebsiteURL]}}
  domain: {Value: {'Fn::GetAtt': [Private, DomainName]}}
  private: {Value: {Ref: Private}}
"""


def test_an_s3_bucket_is_a_swift_container(cli, write):
    path = write('s3.yaml', S3)
    cli.run('template', 'validate', '-t', path)
    cli.run('stack', 'create', 's3', '-t', path, '--wait')
    assert _status(cli, 's3') == 'CREATE_COMPLETE'
    out = _outputs(cli, 's3')
    assert out['site'].startswith('s3-Site-')
    site = cli.json('sim', 'object', 'show', 'container', out['site'])
    headers = site['headers']
    assert headers['x-container-read'] == '.r:*'
    assert {k: v for k, v in headers.items()
            if k.startswith('x-container-meta-')} == {
        'x-container-meta-s3-tag-team': 'web',
        'x-container-meta-web-index': 'index.html',
        'x-container-meta-web-error': 'error.html'}
    assert out['url'] == site['url'] and out['url'].endswith(
        '/' + out['site'])
    private = cli.json('sim', 'object', 'show', 'container', out['private'])
    assert private['headers']['x-container-read'] == \
        private['headers']['x-container-write'] != '.r:*'
    assert out['domain'] == 'swift.sim.converge'
    cli.run('stack', 'delete', 's3', '--wait', '-y')
    assert cli.json('sim', 'object', 'list', 'container') == []

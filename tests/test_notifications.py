"""Notifications on RabbitMQ, as an external listener receives them: a
distributed deployment with `[oslo_messaging_notifications] driver =
messagingv2` publishes the stack's and its resources' state changes, a
drift and its repair; a listener of its own (oslo.messaging's
notification listener, in this process) subscribes to the topic."""

import threading
import uuid

import pytest

from tests.distributed import Deployment, require, wait_for

SERVER = '''heat_template_version: 2018-08-31
resources:
  srv:
    type: OS::Nova::Server
    properties: {name: watched, image: cirros, flavor: m1.tiny}
'''


class _Heard:
    """The listener's endpoint: every notification, in order."""

    def __init__(self):
        self.lock = threading.Lock()
        self.items = []

    def _add(self, priority, event_type, payload):
        with self.lock:
            self.items.append((priority, event_type, payload))

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        self._add('INFO', event_type, payload)

    def error(self, ctxt, publisher_id, event_type, payload, metadata):
        self._add('ERROR', event_type, payload)

    def types(self):
        with self.lock:
            return [t for _p, t, _pl in self.items]

    def of(self, event_type):
        with self.lock:
            return [pl for _p, t, pl in self.items if t == event_type]


@pytest.fixture
def deployment(tmp_path):
    require('postgresql', 'rabbitmq', 'redis')
    topic = 'notify_%s' % uuid.uuid4().hex[:8]
    d = Deployment(tmp_path, options={
        'oslo_messaging_notifications': {'driver': 'messagingv2',
                                         'topics': topic},
        'observer': {'tick': 0.2}})
    d.topic = topic
    yield d
    d.close()


class _Listener:
    """oslo.messaging's notification listener on one topic of the
    deployment's exchange."""

    def __init__(self, deployment, topic):
        import oslo_messaging
        from oslo_config import cfg
        conf = cfg.ConfigOpts()
        conf([], project='notify-test')
        self.transport = oslo_messaging.get_notification_transport(
            conf, url='rabbit://guest:guest@127.0.0.1:5672/')
        self.heard = _Heard()
        self.listener = oslo_messaging.get_notification_listener(
            self.transport, [oslo_messaging.Target(
                topic=topic, exchange=deployment.name)],
            [self.heard], executor='threading')
        self.listener.start()

    def close(self):
        self.listener.stop()
        self.listener.wait()
        self.transport.cleanup()


@pytest.fixture
def listen(deployment):
    made = []

    def _listen(topic):
        made.append(_Listener(deployment, topic))
        return made[-1].heard
    yield _listen
    for listener in made:
        listener.close()


@pytest.fixture
def heard(deployment, listen):
    return listen(deployment.topic)


def test_a_listener_hears_a_create_a_drift_and_its_repair(deployment, heard,
                                                          tmp_path):
    d = deployment
    d.start_worker()
    tmpl = tmp_path / 'server.yaml'
    tmpl.write_text(SERVER)
    d.cli('stack', 'create', 'watched', '-t', str(tmpl),
          '--converge-policy', 'repair:1', '--wait')
    stack_id = d.json('stack', 'show', 'watched')['id']

    wait_for(lambda: 'orchestration.stack.create.end' in heard.types())
    types = heard.types()
    for wanted in ('orchestration.stack.create.start',
                   'orchestration.resource.create.start',
                   'orchestration.resource.create.end'):
        assert wanted in types, types
    [end] = heard.of('orchestration.stack.create.end')
    assert (end['stack_identity'], end['stack_name'], end['state']) == \
        (stack_id, 'watched', 'CREATE_COMPLETE')
    [created] = heard.of('orchestration.resource.create.end')
    assert (created['resource_name'], created['resource_status']) == \
        ('srv', 'COMPLETE')
    server_id = created['physical_resource_id']

    # stopped behind the engine's back: the worker's observer sees it and
    # repairs it; every step is heard
    d.cli('sim', 'server', 'stop', 'watched')
    wait_for(lambda: 'orchestration.stack.update.end' in heard.types(),
             timeout=120)
    [drift] = heard.of('orchestration.resource.drift')
    assert (drift['resource_name'], drift['physical_resource_id'],
            drift['resource_status_reason']) == (
        'srv', server_id, 'changed: status SHUTOFF, not ACTIVE')
    [repair] = heard.of('orchestration.stack.repair.start')
    assert repair['resource_status_reason'] == \
        'repairing 1 drifted resources: srv (changed)'
    assert heard.of('orchestration.resource.update.end')
    types = heard.types()
    assert types.index('orchestration.resource.drift') < \
        types.index('orchestration.stack.repair.start') < \
        types.index('orchestration.stack.update.start')
    assert d.json('sim', 'server', 'show', 'watched')['status'] == 'ACTIVE'
    # each published once (at least once: here the one relay never died)
    ids = [pl['event_id'] for _p, _t, pl in heard.items
           if 'event_id' in pl]
    assert len(ids) == len(set(ids))


def test_event_sinks_send_a_stacks_events_to_its_topic_too(
        deployment, listen, tmp_path):
    """Heat's event_sinks: a zaqar-queue sink's target is read as a
    notification topic; only that stack's notifications go there."""
    d = deployment
    d.start_worker()
    sink = 'sink_%s' % uuid.uuid4().hex[:8]
    on_sink = listen(sink)
    tmpl = tmp_path / 'server.yaml'
    tmpl.write_text(SERVER)
    env = tmp_path / 'env.yaml'
    env.write_text('event_sinks:\n  - type: zaqar-queue\n'
                   '    target: %s\n' % sink)
    d.cli('stack', 'create', 'sunk', '-t', str(tmpl), '-e', str(env),
          '--wait')
    other = tmp_path / 'other.yaml'
    other.write_text(SERVER.replace('watched', 'unsunk'))
    d.cli('stack', 'create', 'plain', '-t', str(other), '--wait')
    wait_for(lambda: 'orchestration.stack.create.end' in on_sink.types())
    assert {pl['stack_name'] for _p, _t, pl in on_sink.items} == {'sunk'}
    assert on_sink.of('orchestration.resource.create.end')


ASG = '''heat_template_version: 2018-08-31
resources:
  asg:
    type: OS::Heat::AutoScalingGroup
    properties:
      resource: {type: OS::Heat::RandomString}
      min_size: 1
      desired_capacity: 2
      max_size: 3
  up:
    type: OS::Heat::ScalingPolicy
    properties:
      adjustment_type: change_in_capacity
      auto_scaling_group_id: {get_resource: asg}
      cooldown: 0
      scaling_adjustment: 1
'''


def test_a_scaling_signal_is_heard_as_heats_autoscaling(deployment, heard,
                                                        tmp_path):
    """Heat's test_notifications.test_asg_notifications: a policy's
    signal is heard as orchestration.autoscaling.start and .end (not a
    stack update), saying the group, the adjustment and the capacity."""
    d = deployment
    d.start_worker()
    tmpl = tmp_path / 'asg.yaml'
    tmpl.write_text(ASG)
    d.cli('stack', 'create', 'scaled', '-t', str(tmpl), '--wait')
    wait_for(lambda: 'orchestration.stack.create.end' in heard.types())
    d.cli('stack', 'resource', 'signal', 'scaled', 'up')
    wait_for(lambda: 'orchestration.autoscaling.end' in heard.types())
    [start] = heard.of('orchestration.autoscaling.start')
    [end] = heard.of('orchestration.autoscaling.end')
    for payload in (start, end):
        assert (payload['stack_name'], payload['groupname'],
                payload['adjustment'], payload['adjustment_type'],
                payload['capacity']) == (
            'scaled', 'asg', 1, 'change_in_capacity', 3)
    assert end['state'] == 'UPDATE_COMPLETE'
    # the group's own nested stack updates; the stack itself does not
    assert not [pl for pl in heard.of('orchestration.stack.update.start')
                if pl['stack_name'] == 'scaled']

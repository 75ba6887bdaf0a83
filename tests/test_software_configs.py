"""The software config types beside SoftwareConfig: StructuredConfig,
CloudConfig, MultipartMime and SoftwareComponent, through the in-process
engine; and the two functions the deployment side calls, `substitute`
(StructuredDeployment's inputs) and `config_for` (a component's entry for
an action)."""

import email
import email.policy
import json

import pytest
import yaml

from converge import exception
from converge.engine import request, service, stacks
from converge.resources import component
from converge.resources import structured
from tests import enginetools as et

SCRIPT = '#!/bin/sh\necho hello > /tmp/hello\n'


def _outputs(engine, stack_id, *keys):
    svc = service.Service(engine)
    return {k: svc.output_show(request.make(), stack_id, k)['output_value']
            for k in keys}


def _configs_doc(cloud_users=('default',), extra_parts=()):
    parts = [{'config': {'get_resource': 'cloud'}},
             {'config': {'get_resource': 'script'},
              'filename': 'boot.sh', 'subtype': 'x-shellscript'},
             {'config': 'inline text, café'}]
    parts.extend(extra_parts)
    return et.hot({
        'script': {'type': 'OS::Heat::SoftwareConfig',
                   'properties': {'group': 'script', 'config': SCRIPT}},
        'structured': {'type': 'OS::Heat::StructuredConfig', 'properties': {
            'group': 'os-apply-config',
            'config': {'port': {'get_input': 'port'},
                       'hosts': [{'get_input': 'host'}, 'fixed']},
            'inputs': [{'name': 'port', 'type': 'Number'},
                       {'name': 'host'}]}},
        'cloud': {'type': 'OS::Heat::CloudConfig', 'properties': {
            'cloud_config': {'users': list(cloud_users),
                             'runcmd': [['touch', '/tmp/booted']]}}},
        'mime': {'type': 'OS::Heat::MultipartMime',
                 'properties': {'parts': parts}},
        'outer': {'type': 'OS::Heat::MultipartMime', 'properties': {
            'parts': [{'config': {'get_resource': 'mime'},
                       'type': 'multipart'},
                      {'config': 'last', 'filename': 'notes.txt'}]}},
        'comp': {'type': 'OS::Heat::SoftwareComponent', 'properties': {
            'configs': [
                {'actions': ['CREATE'], 'config': 'create.sh',
                 'tool': 'script'},
                {'actions': ['UPDATE', 'CHECK'], 'config': 'update.sh',
                 'tool': 'script'},
                {'actions': ['backup', 'add_user'], 'config': 'site.yml',
                 'tool': 'ansible'}],
            'inputs': [{'name': 'user'}],
            'outputs': [{'name': 'last_action'}]}},
        'server': {'type': 'OS::Nova::Server', 'properties': {
            'image': 'cirros', 'flavor': 'm1.tiny',
            'user_data_format': 'RAW',
            'user_data': {'get_resource': 'mime'}}},
    }, outputs={
        'structured': {'value': {'get_attr': ['structured', 'config']}},
        'cloud': {'value': {'get_attr': ['cloud', 'config']}},
        'mime': {'value': {'get_attr': ['mime', 'config']}},
        'outer': {'value': {'get_attr': ['outer', 'config']}},
        'comp_configs': {'value': {'get_attr': ['comp', 'configs']}},
        'comp_config': {'value': {'get_attr': ['comp', 'config']}},
        'cloud_id': {'value': {'get_resource': 'cloud'}},
    })


def _parts(text):
    msg = email.message_from_string(text, policy=email.policy.compat32)
    assert msg.is_multipart()
    return [(p.get_content_type(), p.get_filename(),
             p.get_payload(decode=True).decode(
                 p.get_content_charset() or 'us-ascii'))
            for p in msg.get_payload()]


def test_each_config_type_stores_and_reads_back(engine, tmp_path):
    b = et.bundle(tmp_path, _configs_doc())
    stack = et.run(engine, stacks.create, 'configs', b, {})
    assert et.status(stack) == 'CREATE_COMPLETE', stack.status_reason
    out = _outputs(engine, stack.id, 'structured', 'cloud', 'mime', 'outer',
                   'comp_configs', 'comp_config', 'cloud_id')

    # StructuredConfig: the map itself, get_input left for the deployment
    assert out['structured'] == {'port': {'get_input': 'port'},
                                 'hosts': [{'get_input': 'host'}, 'fixed']}

    # CloudConfig: "#cloud-config" and the map as YAML
    assert out['cloud'].startswith('#cloud-config\n')
    assert yaml.safe_load(out['cloud']) == {
        'users': ['default'], 'runcmd': [['touch', '/tmp/booted']]}

    # MultipartMime: the referenced configs' bodies, in order
    parts = _parts(out['mime'])
    assert parts == [
        ('text/plain', None, out['cloud']),
        ('text/x-shellscript', 'boot.sh', SCRIPT),
        ('text/plain', None, 'inline text, café')]
    # a multipart part is split into its parts; a filename without a
    # subtype gives the subtype (Heat's rule: the name without extension)
    assert _parts(out['outer']) == parts + [('text/notes', 'notes.txt',
                                             'last')]

    # SoftwareComponent: its configs, stored with group "component"
    assert [c['actions'] for c in out['comp_configs']] == [
        ['CREATE'], ['UPDATE', 'CHECK'], ['backup', 'add_user']]
    assert out['comp_config'] == {'configs': out['comp_configs']}
    rows = et.resources(engine, stack)
    stored = engine.clients.configs.get(rows['comp'].physical_id)
    assert stored['group'] == 'component'
    assert stored['inputs'][0]['name'] == 'user'
    assert stored['outputs'][0]['name'] == 'last_action'
    assert engine.clients.configs.get(
        rows['structured'].physical_id)['group'] == 'os-apply-config'
    assert engine.clients.configs.get(
        rows['cloud'].physical_id)['group'] == 'Heat::Ungrouped'
    assert out['cloud_id'] == rows['cloud'].physical_id

    # a server booted from the MultipartMime gets the message itself
    server = engine.clients.compute.get_server(rows['server'].physical_id)
    assert server['user_data'] == out['mime']


def test_a_change_replaces_the_config_and_what_embeds_it(engine, tmp_path):
    b = et.bundle(tmp_path, _configs_doc())
    stack = et.run(engine, stacks.create, 'configs', b, {})
    before = {n: r.physical_id for n, r in
              et.resources(engine, stack).items()}
    b2 = et.bundle(tmp_path, _configs_doc(cloud_users=('default', 'ops')),
                   name='t2.yaml')
    stack = et.run(engine, stacks.update, stack.id, b2, {})
    assert et.status(stack) == 'UPDATE_COMPLETE', stack.status_reason
    after = {n: r.physical_id for n, r in
             et.resources(engine, stack).items()}
    # the cloud config changed: a new one; the messages embedding it too
    # (their part now names another id), and the server booted from one
    for name in ('cloud', 'mime', 'outer', 'server'):
        assert after[name] != before[name], name
    for name in ('script', 'structured', 'comp'):
        assert after[name] == before[name], name
    configs = engine.clients.configs
    assert configs.get(before['cloud']) is None  # the old one cleaned up
    assert configs.get(before['mime']) is None
    assert 'ops' in configs.get(after['cloud'])['config']
    out = _outputs(engine, stack.id, 'mime')
    assert 'ops' in _parts(out['mime'])[0][2]

    stack = et.run(engine, stacks.delete, stack.id)
    assert et.status(stack) == 'DELETE_COMPLETE'
    assert all(configs.get(i) is None for i in after.values()
               if i is not None)


@pytest.mark.parametrize('name,props,path,words', [
    ('comp', {'configs': [{'actions': ['CREATE'], 'tool': 'script'},
                          {'actions': ['UPDATE', 'CREATE'],
                           'tool': 'script'}]},
     'configs.1.actions.1', 'CREATE is in configs 0 and 1'),
    ('comp', {'configs': [{'actions': ['backup'], 'tool': 'a'},
                          {'actions': ['backup'], 'tool': 'b'}]},
     'configs.1.actions.0', 'backup is in configs 0 and 1'),
    ('comp', {'configs': [{'actions': ['create'], 'tool': 'script'}]},
     'configs.0.actions.0', 'upper case (CREATE)'),
    ('comp', {'configs': [{'actions': ['Add-User'], 'tool': 'script'}]},
     'configs.0.actions.0', 'lower-case identifier'),
    ('comp', {'configs': [{'actions': [], 'tool': 'script'}]},
     'configs.0.actions', 'length 0'),
    ('comp', {'configs': [{'actions': ['CREATE']}]},
     'configs.0.tool', 'not assigned'),
    ('comp', {'configs': []}, 'configs', 'length 0'),
    ('comp', {}, 'configs', 'not assigned'),
    ('mime', {'parts': [{'config': 'x', 'type': 'binary'}]},
     'parts.0.type', 'not an allowed value'),
    ('mime', {'parts': [{'filename': 'x'}]}, 'parts.0.config',
     'not assigned'),
    ('structured', {'config': 'a string'}, 'config', 'must be a map'),
    ('cloud', {'cloud_config': ['a', 'list']}, 'cloud_config',
     'must be a map'),
])
def test_validation_errors_name_the_resource_and_property(
        tmp_path, name, props, path, words):
    types = {'comp': 'OS::Heat::SoftwareComponent',
             'mime': 'OS::Heat::MultipartMime',
             'structured': 'OS::Heat::StructuredConfig',
             'cloud': 'OS::Heat::CloudConfig'}
    b = et.bundle(tmp_path, et.hot({name: {'type': types[name],
                                           'properties': props}}))
    with pytest.raises(exception.InvalidTemplate) as e:
        stacks.validate(b, {})
    assert 'resources.%s.properties.%s' % (name, path) in str(e.value)
    assert words in str(e.value)


def test_component_actions_converge_adds():
    """Heat's five lifecycle actions, CHECK, and day-2 names."""
    out = component.SoftwareComponent.validate_properties({'configs': [
        {'actions': ['CREATE', 'UPDATE'], 'config': 'a', 'tool': 'script'},
        {'actions': ['CHECK', 'SUSPEND', 'RESUME', 'DELETE'],
         'tool': 'script'},
        {'actions': ['backup', 'patch', 'add_user', 'v2_migrate'],
         'config': 'b', 'tool': 'ansible'}]})
    assert [c['actions'] for c in out['configs']] == [
        ['CREATE', 'UPDATE'], ['CHECK', 'SUSPEND', 'RESUME', 'DELETE'],
        ['backup', 'patch', 'add_user', 'v2_migrate']]
    # an entry without actions serves Heat's default, CREATE and UPDATE
    out = component.SoftwareComponent.validate_properties(
        {'configs': [{'tool': 'puppet'}]})
    assert out['configs'][0]['actions'] == ['CREATE', 'UPDATE']


def test_default_actions_count_against_other_entries():
    with pytest.raises(exception.InvalidTemplate) as e:
        component.SoftwareComponent.validate_properties({'configs': [
            {'actions': ['CREATE'], 'tool': 'script'},
            {'tool': 'puppet'}]})
    assert e.value.path == ['configs', 1, 'actions', 0]


def test_config_for_picks_the_entry_serving_an_action():
    body = {'configs': [
        {'actions': ['CREATE', 'UPDATE'], 'config': 'c', 'tool': 'script'},
        {'actions': ['DELETE'], 'config': 'd', 'tool': 'script'},
        {'actions': ['backup'], 'config': 'site.yml', 'tool': 'ansible'}]}
    assert component.config_for(body, 'UPDATE')['config'] == 'c'
    assert component.config_for(body, 'DELETE')['config'] == 'd'
    entry = component.config_for(body, 'backup')
    assert (entry['tool'], entry['config']) == ('ansible', 'site.yml')
    assert component.config_for(body, 'SUSPEND') is None
    assert component.config_for(body, 'BACKUP') is None  # exact names
    assert component.config_for(body['configs'], 'DELETE')['config'] == 'd'
    assert component.config_for({}, 'CREATE') is None


def test_config_for_reads_a_stored_component(engine, tmp_path):
    b = et.bundle(tmp_path, _configs_doc())
    stack = et.run(engine, stacks.create, 'configs', b, {})
    comp_id = et.resources(engine, stack)['comp'].physical_id
    body = engine.clients.configs.get(comp_id)['config']
    assert component.config_for(body, 'CHECK')['config'] == 'update.sh'
    assert component.config_for(body, 'add_user')['tool'] == 'ansible'
    assert component.config_for(body, 'DELETE') is None


def test_substitute_fills_inputs_anywhere():
    config = {'a': {'get_input': 'x'},
              'b': [1, {'get_input': 'y'}, {'c': {'get_input': 'x'}}],
              'get_input': 'not a reference: a map of several keys',
              'd': {'get_input': ['not', 'a', 'name']},
              'e': 'plain'}
    original = json.loads(json.dumps(config))
    out = structured.substitute(config, {'x': [1, 2], 'y': {'k': 'v'}})
    assert out == {'a': [1, 2], 'b': [1, {'k': 'v'}, {'c': [1, 2]}],
                   'get_input': 'not a reference: a map of several keys',
                   'd': {'get_input': ['not', 'a', 'name']},
                   'e': 'plain'}
    assert config == original  # not changed in place
    # a whole config may be one reference; scalars pass through
    assert structured.substitute({'get_input': 'x'}, {'x': 3}) == 3
    assert structured.substitute('text', {}) == 'text'


def test_substitute_lax_and_strict():
    config = {'a': {'get_input': 'known'}, 'b': [{'get_input': 'missing'}]}
    assert structured.substitute(config, {'known': 1}) == {
        'a': 1, 'b': [None]}
    with pytest.raises(structured.MissingInput) as e:
        structured.substitute(config, {'known': 1}, validate='STRICT')
    assert e.value.name == 'missing'
    assert e.value.path == ['b', 0]
    assert '"missing"' in str(e.value) and "['b'][0]" in str(e.value)
    assert isinstance(e.value, exception.InvalidInput)
    # an input with the value None is provided
    assert structured.substitute(config, {'known': 1, 'missing': None},
                                 validate='STRICT') == {'a': 1, 'b': [None]}
    with pytest.raises(ValueError):
        structured.substitute(config, {}, validate='lax')


def test_substitute_with_another_input_key():
    config = {'a': {'get_input': 'x'}, 'b': {'my_input': 'x'}}
    assert structured.substitute(config, {'x': 'v'},
                                 input_key='my_input') == {
        'a': {'get_input': 'x'}, 'b': 'v'}


def test_multipart_literal_uuid_and_structured_parts(engine, tmp_path):
    """A part naming a config id that is not stored is that text (Heat);
    a structured config's body goes in as JSON."""
    missing = '0b6f6a4e-1d0e-4a8e-9a5d-6b8cbb1d3c3e'
    b = et.bundle(tmp_path, et.hot({
        's': {'type': 'OS::Heat::StructuredConfig',
              'properties': {'config': {'k': [1, 2]}}},
        'm': {'type': 'OS::Heat::MultipartMime', 'properties': {
            'parts': [{'config': missing},
                      {'config': {'get_resource': 's'},
                       'subtype': 'json'}]}}},
        outputs={'m': {'value': {'get_attr': ['m', 'config']}}}))
    stack = et.run(engine, stacks.create, 'lit', b, {})
    assert et.status(stack) == 'CREATE_COMPLETE', stack.status_reason
    parts = _parts(_outputs(engine, stack.id, 'm')['m'])
    assert parts[0] == ('text/plain', None, missing)
    assert parts[1][0] == 'text/json'
    assert json.loads(parts[1][2]) == {'k': [1, 2]}

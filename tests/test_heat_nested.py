"""Heat's contracts on nested stacks as its functional tests check them
(heat_integrationtests test_template_resource, test_simultaneous_update,
test_default_parameters; heat-tempest-plugin test_stack_outputs,
test_template_validate), in-process through the service layer with the
bodies a REST client sends: a template, its files map and an
environment."""

import io

import pytest

from converge import exception
from converge import template
from converge.engine import request
from converge.engine import service
from tests import enginetools as et


def _bundle(tmpl, files=None, env=None):
    return template.bundle_from_request(tmpl, files, env)


def _run(engine, started):
    return et.follow(engine, started['id'], started['traversal_id'],
                     out=io.StringIO(), tty=False).stack


def create(engine, tmpl, files=None, env=None, params=None, name='s'):
    """(service, the stack row once its create ended)."""
    svc = service.Service(engine)
    started = svc.stack_create(request.make(), name,
                               _bundle(tmpl, files, env), params or {})
    return svc, _run(engine, started)


def update(engine, svc, stack, tmpl, files=None, env=None, params=None,
           **kw):
    started = svc.stack_update(request.make(), stack.id,
                               _bundle(tmpl, files, env), params or {},
                               **kw)
    return _run(engine, started)


def outputs(svc, stack):
    return {k: v.get('value')
            for k, v in svc.output_list(request.make(), stack.id).items()}


# -- resource.NAME of a provider (NestedAttributesTest) -----------------------

SECRET_TOP = '''heat_template_version: 2014-10-16
resources:
  secret2:
    type: My::NestedSecret
outputs:
  old_way:
    value: { get_attr: [secret2, nested_str]}
  test_attr1:
    value: { get_attr: [secret2, resource.secret1, value]}
  test_attr2:
    value: { get_attr: [secret2, resource.secret1.value]}
  test_ref:
    value: { get_resource: secret2 }
'''
SECRET_ENV = {'resource_registry': {'My::NestedSecret': 'nested.yaml'}}
SECRET = '''heat_template_version: 2014-10-16
resources:
  secret1:
    type: OS::Heat::RandomString
outputs:
%s  nested_str:
    value: {get_attr: [secret1, value]}
'''
STACK_ID_OUTPUT = '''  OS::stack_id:
    value: {get_resource: secret1}
'''


def test_a_providers_attribute_resource_name_reads_its_nested_resource(
        engine):
    svc, st = create(engine, SECRET_TOP, {'nested.yaml': SECRET % ''},
                     SECRET_ENV)
    assert et.status(st) == 'CREATE_COMPLETE', st.status_reason
    out = outputs(svc, st)
    assert out['old_way'] and len(out['old_way']) == 32
    # [res, resource.NAME, X] and [res, resource.NAME.X]: NAME's X
    assert out['test_attr1'] == out['old_way']
    assert out['test_attr2'] == out['old_way']
    # a provider's reference is its nested stack's ARN
    child = et.resources(engine, st)['secret2'].physical_id
    assert out['test_ref'].startswith('arn:openstack:heat::')
    assert out['test_ref'].endswith('/%s' % child)


def test_a_providers_reference_is_its_os_stack_id_output(engine):
    svc, st = create(engine, SECRET_TOP,
                     {'nested.yaml': SECRET % STACK_ID_OUTPUT}, SECRET_ENV)
    assert et.status(st) == 'CREATE_COMPLETE', st.status_reason
    out = outputs(svc, st)
    assert out['test_ref'] == out['old_way']


def test_an_update_newly_reading_resource_name_gets_its_value(engine):
    first = SECRET_TOP.split('  test_attr1:')[0]
    svc, st = create(engine, first, {'nested.yaml': SECRET % ''},
                     SECRET_ENV)
    assert et.status(st) == 'CREATE_COMPLETE', st.status_reason
    st = update(engine, svc, st, SECRET_TOP, {'nested.yaml': SECRET % ''},
                SECRET_ENV)
    assert et.status(st) == 'UPDATE_COMPLETE', st.status_reason
    out = outputs(svc, st)
    assert out['test_attr1'] == out['test_attr2'] == out['old_way']


# -- PATCH dropping parameters (TemplateResourceRemovedParamTest) -------------

REMOVED_TOP = '''heat_template_version: 2013-05-23
parameters:
  value1:
    type: string
    default: foo
resources:
  my_resource:
    type: resource.yaml
    properties:
       value1: {get_param: value1}
'''
REMOVED_NESTED = '''heat_template_version: 2013-05-23
parameters:
  value1:
    type: string
    default: foo
resources:
  test:
    type: OS::Heat::TestResource
    properties:
      value: {get_param: value1}
outputs:
  value: {value: {get_attr: [test, output]}}
'''
REMOVED_TOP_UPDATE = '''heat_template_version: 2013-05-23
resources:
  my_resource:
    type: resource.yaml
outputs:
  value: {value: {get_attr: [my_resource, value]}}
'''
REMOVED_NESTED_UPDATE = '''heat_template_version: 2013-05-23
parameters:
  value1:
    type: string
    default: foo
  value2:
    type: string
    default: bar
resources:
  test:
    type: OS::Heat::TestResource
    properties:
      value:
        str_replace:
          template: VAL1-VAL2
          params:
            VAL1: {get_param: value1}
            VAL2: {get_param: value2}
outputs:
  value: {value: {get_attr: [test, output]}}
'''


def test_a_patch_update_drops_the_parameters_its_template_no_longer_has(
        engine):
    svc, st = create(engine, REMOVED_TOP, {'resource.yaml': REMOVED_NESTED},
                     {'parameters': {'value1': 'spam'}})
    assert et.status(st) == 'CREATE_COMPLETE', st.status_reason
    st = update(engine, svc, st, REMOVED_TOP_UPDATE,
                {'resource.yaml': REMOVED_NESTED_UPDATE},
                {'parameter_defaults': {'value2': 'egg'}}, existing=True)
    assert et.status(st) == 'UPDATE_COMPLETE', st.status_reason
    assert outputs(svc, st) == {'value': 'foo-egg'}


# -- a provider standing for another type (ValidateFacadeTest) ---------------

FACADE_TOP = '''heat_template_version: 2015-10-15
resources:
  thisone:
    type: OS::Thingy
    properties:
      one: pre
      two: post
outputs:
  one:
    value: {get_attr: [thisone, here-it-is]}
'''
FACADE = '''heat_template_version: 2015-04-30
parameters:
  one:
    type: string
  two:
    type: string
outputs:
  here-it-is:
    value: noop
'''
FACADE_ENV = '''resource_registry:
  OS::Thingy: facade.yaml
  resources:
    thisone:
      OS::Thingy: concrete.yaml
'''
CONCRETE = '''heat_template_version: 2015-04-30
parameters:
%s
resources:
  str:
    type: OS::Heat::RandomString
outputs:
%s
'''
ONE = '  one:\n    type: string'
TWO = '  two:\n    type: string'
HERE = '  here-it-is:\n    value: not-important'


@pytest.mark.parametrize('concrete, top, reason', [
    (CONCRETE % (ONE, HERE), FACADE_TOP.replace('      two: post\n', ''),
     'Required property two for facade OS::Thingy missing in provider'),
    (CONCRETE % (ONE + '\n' + TWO, '  {}'), FACADE_TOP,
     'Attribute here-it-is for facade OS::Thingy missing in provider'),
    (CONCRETE % (ONE + '\n' + TWO + '\n  three:\n    type: string', HERE),
     FACADE_TOP.replace('two: post', 'two: post\n      three: x'),
     'Provider requires property three unknown in facade OS::Thingy'),
    (CONCRETE % (ONE + '\n  two:\n    type: number', HERE),
     FACADE_TOP.replace('two: post', 'two: 5'),
     'Property two type mismatch between facade OS::Thingy (String) and '
     'provider (Number)'),
])
def test_a_provider_must_fit_the_type_it_stands_for(engine, concrete, top,
                                                    reason):
    svc, st = create(engine, top,
                     {'facade.yaml': FACADE, 'concrete.yaml': concrete},
                     FACADE_ENV)
    assert et.status(st) == 'CREATE_FAILED'
    assert reason in st.status_reason


# -- a nested stack's resources name their owner (TemplateResourceTest) ------

def test_a_nested_stacks_resource_names_the_resource_owning_it(engine):
    top = '''heat_template_version: 2013-05-23
resources:
  secret1:
    type: My::NestedSecret
outputs:
  secret-out:
    value: { get_attr: [secret1, value] }
'''
    nested = '''heat_template_version: 2013-05-23
resources:
  secret2:
    type: My::Secret
outputs:
  value:
    value: { get_attr: [secret2, value] }
'''
    env = {'resource_registry': {'My::Secret': 'OS::Heat::RandomString',
                                 'My::NestedSecret': 'nested.yaml'}}
    svc, st = create(engine, top, {'nested.yaml': nested}, env)
    assert et.status(st) == 'CREATE_COMPLETE', st.status_reason
    child = et.resources(engine, st)['secret1'].physical_id
    ctx = request.make()
    assert svc.resource_show(ctx, child, 'secret2')['parent_resource'] == \
        'secret1'
    assert [r['parent_resource'] for r in svc.resource_list(ctx, child)] \
        == ['secret1']
    assert 'parent_resource' not in svc.resource_show(ctx, st.id, 'secret1')


# -- parameter_defaults for a provider's parameter with no default -----------

def test_parameter_defaults_give_a_providers_parameter_without_default(
        engine):
    top = '''heat_template_version: 2013-05-23
resources:
  random1:
    type: nested_random.yaml
outputs:
  random1:
    value: {get_attr: [random1, random1_value]}
'''
    nested = '''heat_template_version: 2013-05-23
parameters:
  length:
    type: string
resources:
  random1:
    type: OS::Heat::RandomString
    properties:
      length: {get_param: length}
outputs:
  random1_value:
    value: {get_resource: random1}
'''
    svc, st = create(engine, top, {'nested_random.yaml': nested},
                     {'parameter_defaults': {'length': 12}})
    assert et.status(st) == 'CREATE_COMPLETE', st.status_reason
    assert len(outputs(svc, st)['random1']) == 12


# -- a nested output's error (test_stack_outputs test_output_error_nested) ---

OUTPUT_ERROR_TOP = '''heat_template_version: 2015-10-15
resources:
  parent:
    type: 1.yaml
outputs:
  resource_output_a:
    value: { get_attr: [parent, resource_output_a] }
    description: 'parent a'
  resource_output_b:
    value: { get_attr: [parent, resource_output_b] }
    description: 'parent b'
'''
OUTPUT_ERROR_NESTED = '''heat_template_version: 2015-10-15
resources:
  test_resource_a:
    type: OS::Heat::TestResource
    properties:
      value: 'a'
outputs:
  resource_output_a:
    description: 'Output of resource a'
    value: { get_attr: [test_resource_a, output] }
  resource_output_b:
    description: 'Output of resource b'
    value: { get_param: foo }
'''


def test_a_nested_outputs_error_is_its_readers_output_error(engine):
    files = {'1.yaml': OUTPUT_ERROR_NESTED}
    svc, st = create(engine, OUTPUT_ERROR_TOP, files)
    assert et.status(st) == 'CREATE_COMPLETE', st.status_reason
    st = update(engine, svc, st, OUTPUT_ERROR_TOP, files)
    assert et.status(st) == 'UPDATE_COMPLETE', st.status_reason
    shown = svc.stack_show(request.make(), st.id)['outputs']
    assert sorted(shown, key=lambda o: o['output_key']) == [
        {'output_key': 'resource_output_a', 'output_value': 'a',
         'description': 'parent a'},
        {'output_key': 'resource_output_b', 'output_value': None,
         'output_error': 'Error in parent output resource_output_b: The '
                         'Parameter (foo) was not provided.',
         'description': 'parent b'}]
    # the nested stack's own output says where
    child = et.resources(engine, st)['parent'].physical_id
    assert svc.output_show(request.make(), child, 'resource_output_b')[
        'output_error'] == ('1.yaml:13: outputs.resource_output_b.value.'
                            'get_param: The Parameter (foo) was not '
                            'provided.')


# -- Heat's words for a property that cannot be worked out (test_preview) ----

def test_a_property_reading_a_missing_parameter_is_heats_property_error(
        engine):
    tmpl = '''heat_template_version: 2015-04-30
parameters:
  incomming:
    type: string
resources:
  two:
    type: OS::Heat::TestResource
    properties:
      value: {get_param: missing}
'''
    svc = service.Service(engine)
    for call in (svc.stack_preview, svc.stack_create):
        with pytest.raises(exception.InvalidTemplate) as err:
            call(request.make(), 'p', _bundle(
                tmpl, env={'parameters': {'incomming': 'abc'}}), {})
        # where (file and line), then Heat's words
        assert str(err.value) == (
            'template:9: Property error: : resources.two.properties.value: '
            ': The Parameter (missing) was not provided.')

"""The plug-in contract: validate_properties and its validate_more hook."""

import pytest

from converge import exception
from converge.resources import base
from converge.resources import properties as p


class _Plain(base.Resource):
    properties_schema = {
        'a': p.Schema(p.INTEGER, 'A number.', default=1),
    }


class _Checked(base.Resource):
    properties_schema = {
        'low': p.Schema(p.INTEGER, 'Lower bound.', default=0),
        'high': p.Schema(p.INTEGER, 'Upper bound.', default=10),
    }
    calls = []

    @classmethod
    def validate_more(cls, values, path):
        cls.calls.append((dict(values), path))
        if values['low'] > values['high']:
            raise exception.InvalidTemplate('low > high', path=path + ['low'])
        values['span'] = values['high'] - values['low']
        return values


@pytest.fixture(autouse=True)
def _reset_calls():
    _Checked.calls = []


def test_default_hook_returns_schema_result_unchanged():
    assert _Plain.validate_properties({}) == {'a': 1}
    assert _Plain.validate_properties({'a': '3'}) == {'a': 3}
    assert _Plain.validate_more({'x': 1}, []) == {'x': 1}


def test_hook_gets_coerced_values_with_defaults_and_a_list_path():
    out = _Checked.validate_properties({'high': '5'},
                                       path=('resources', 'r', 'properties'))
    assert out == {'low': 0, 'high': 5, 'span': 5}
    assert _Checked.calls == [({'low': 0, 'high': 5},
                               ['resources', 'r', 'properties'])]


def test_hook_errors_carry_the_path():
    with pytest.raises(exception.InvalidTemplate) as exc:
        _Checked.validate_properties({'low': 3, 'high': 2},
                                     path=['resources', 'r', 'properties'])
    assert 'low > high' in str(exc.value)
    assert exc.value.path == ['resources', 'r', 'properties', 'low']


def test_hook_not_called_when_properties_are_unknown():
    assert _Checked.validate_properties(p.UNKNOWN) is p.UNKNOWN
    assert _Checked.calls == []


def test_hook_not_called_when_schema_checks_fail():
    with pytest.raises(exception.InvalidTemplate):
        _Checked.validate_properties({'low': 'x'})
    assert _Checked.calls == []


@pytest.mark.parametrize('module,cls', [
    ('random_string', 'RandomString'), ('server', 'Server'),
    ('test_resource', 'TestResource'), ('value', 'Value')])
def test_plugins_use_the_hook_not_an_override(module, cls):
    import importlib
    plugin = getattr(importlib.import_module('converge.resources.' + module),
                     cls)
    assert 'validate_properties' not in vars(plugin)
    assert 'validate_more' in vars(plugin)

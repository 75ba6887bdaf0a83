"""converge-bench --rally: the task file, the SLA arithmetic, and tiny runs
of each HeatStacks scenario on one in-process engine. Nothing here asserts
a time."""

import glob
import os
import shutil
import types

import pytest
import yaml

from converge import template
from converge.bench import cli
from converge.bench import harness
from converge.bench import rally
from tests.conftest import REPO

TASK = os.path.join(REPO, 'rally-jobs', 'converge.yaml')
EXTRA = os.path.join(REPO, 'rally-jobs', 'extra')

FAILING = """\
heat_template_version: 2014-10-16
resources:
  ok:
    type: OS::Heat::RandomString
  broken:
    type: OS::Heat::TestResource
    properties:
      fail: true
"""


@pytest.fixture(scope='module')
def bench(tmp_path_factory):
    """One embedded engine for the module's runs (starting and stopping
    one costs about a second): (engine, wait)."""
    home = str(tmp_path_factory.mktemp('rally') / 'home')
    with harness.Embedded(home) as h:
        def wait(engine, stack_id, trav):
            action, status = h.wait(stack_id, trav)
            return types.SimpleNamespace(action=action, status=status)
        yield h.engine, wait


def live_stacks(engine):
    from converge.db import api
    with engine.db.read() as s:
        return [st.name for st in api.stack_list(s)]


def write_task(tmp_path, doc):
    """A task beside a copy of rally-jobs/extra/, as Rally's jobs lay it."""
    extra = tmp_path / 'extra'
    if not extra.exists():
        shutil.copytree(EXTRA, extra)
    path = tmp_path / 'task.yaml'
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def workload(args=None, times=2, concurrency=2, context=None, max_pct=0):
    entry = {'runner': {'type': 'constant', 'times': times,
                        'concurrency': concurrency},
             'sla': {'failure_rate': {'max': max_pct}}}
    if args is not None:
        entry['args'] = args
    if context is not None:
        entry['context'] = context
    return entry


# -- the task file ----------------------------------------------------------

def test_real_task_loads_every_template(bench):
    from converge.engine import stacks
    workloads = rally.load_task(TASK)
    assert {w.scenario for w in workloads} == set(rally.SCENARIOS)
    for w in workloads:
        assert 2 <= w.concurrency <= 4 and 10 <= w.times <= 20
        for key in ('template_path', 'updated_template_path'):
            if key in w.args:
                path = rally.resolve(TASK, w.args[key])
                assert path.startswith(EXTRA + os.sep), path
                assert os.path.isfile(path), path
        wanted = set(rally.SCENARIOS[w.scenario].required) & {
            'template_path', 'updated_template_path'}
        assert len(w.bundles) == len(wanted)
        for kind, bundle in w.bundles.items():
            params = w.updated_params if kind == 'update' else w.params
            stacks.validate(bundle, params)
    # every template in extra/ is a valid one, used or not
    for path in glob.glob(os.path.join(EXTRA, '*.yaml')):
        stacks.validate(template.load_bundle(path), {})


def test_resolve(tmp_path):
    task = str(tmp_path / 'jobs' / 'task.yaml')
    jobs = str(tmp_path / 'jobs')
    assert rally.resolve(task, '~/.rally/extra/a.yaml') == \
        os.path.join(jobs, 'extra', 'a.yaml')
    assert rally.resolve(task, 'sub/b.yaml') == os.path.join(jobs, 'sub',
                                                             'b.yaml')
    assert rally.resolve(task, '/abs/c.yaml') == '/abs/c.yaml'


def test_unknown_scenario_names_it_and_the_file(tmp_path, capsys):
    path = write_task(tmp_path, {'HeatStacks.create_and_explode_stack': [
        workload({'template_path': '~/.rally/extra/default.yaml'})]})
    with pytest.raises(rally.RallyError) as e:
        rally.load_task(path)
    assert 'HeatStacks.create_and_explode_stack' in str(e.value)
    assert path in str(e.value)
    assert cli.main(['--rally', path]) == 2
    assert 'HeatStacks.create_and_explode_stack' in capsys.readouterr().err


@pytest.mark.parametrize('scenario, entry, words', [
    ('HeatStacks.create_and_delete_stack', workload({}),
     ['missing argument template_path']),
    ('HeatStacks.create_and_delete_stack',
     workload({'template_path': '~/.rally/extra/nowhere.yaml'}),
     ['nowhere.yaml']),
    ('HeatStacks.create_update_delete_stack',
     workload({'template_path': '~/.rally/extra/default.yaml'}),
     ['updated_template_path']),
    ('HeatStacks.create_and_delete_stack',
     workload({'template_path': '~/.rally/extra/default.yaml',
               'flavor': 'm1.tiny'}),
     ['flavor']),
    ('HeatStacks.list_stacks_and_resources', workload(),
     ['stacks context']),
    ('HeatStacks.create_and_delete_stack',
     dict(workload({'template_path': '~/.rally/extra/default.yaml'}),
          runner={'type': 'rps', 'times': 2, 'rps': 1}),
     ['rps']),
    ('HeatStacks.create_and_delete_stack',
     dict(workload({'template_path': '~/.rally/extra/default.yaml'}),
          runner={'type': 'constant', 'times': 0}),
     ['times']),
])
def test_bad_workloads_are_refused(tmp_path, scenario, entry, words):
    path = write_task(tmp_path, {scenario: [entry]})
    with pytest.raises(rally.RallyError) as e:
        rally.load_task(path)
    msg = str(e.value)
    assert scenario + '[0]' in msg and path in msg
    for word in words:
        assert word in msg


def test_files_and_inline_environment(tmp_path):
    (tmp_path / 'motd.txt').write_text('hello')
    (tmp_path / 'value.yaml').write_text(
        'heat_template_version: 2014-10-16\n'
        'parameters:\n  p: {type: string}\n'
        'resources:\n  r:\n    type: OS::Heat::TestResource\n'
        '    properties: {value: {get_param: p}}\n')
    path = write_task(tmp_path, {'HeatStacks.create_and_delete_stack': [
        workload({'template_path': 'value.yaml', 'files': ['motd.txt'],
                  'environment': {'parameters': {'p': 'from-env'}}})]})
    [w] = rally.load_task(path)
    bundle = w.bundles['create']
    assert bundle.files == {'motd.txt': 'hello'}
    assert bundle.environment['parameters'] == {'p': 'from-env'}


# -- arithmetic -------------------------------------------------------------

def test_stats_count_only_successes_in_durations():
    st = rally.stats([(1.0, True), (3.0, True), (2.0, True), (10.0, False)])
    assert st['min'] == 1.0 and st['max'] == 3.0
    assert st['median'] == 2.0 and st['avg'] == 2.0
    assert st['p90'] == pytest.approx(2.8)
    assert st['count'] == 4 and st['success_pct'] == 75.0
    none = rally.stats([(0.5, False)])
    assert none['min'] is None and none['success_pct'] == 0.0
    assert rally.stats([])['success_pct'] is None


def _iteration(index, ok, seconds=1.0):
    name = 'rally-%d' % index
    it = rally._Iteration(index, name)
    it.atomic = [('heat.create_stack', seconds, ok)]
    if ok:
        it.atomic.append(('heat.delete_stack', seconds, True))
    it.seconds = seconds
    it.error = None if ok else 'stack %s ended CREATE_FAILED' % name
    return it


@pytest.mark.parametrize('max_pct, passed', [(20, False), (25, True),
                                             (100, True)])
def test_sla_failure_rate(max_pct, passed):
    w = rally.Workload(scenario='HeatStacks.create_and_delete_stack',
                       index=0, args={'template_path': '/t/extra/a.yaml'},
                       times=4, concurrency=2,
                       sla_max_pct=max_pct, sla_min_pct=0)
    its = [_iteration(i, ok=i != 2) for i in range(4)]
    row = rally.summarize(w, its)
    assert row['failures'] == 1 and row['failure_rate_pct'] == 25.0
    assert row['sla_passed'] is passed
    assert row['atomic']['heat.create_stack']['count'] == 4
    assert row['atomic']['heat.create_stack']['success_pct'] == 75.0
    assert row['atomic']['heat.delete_stack']['count'] == 3
    assert row['total']['success_pct'] == 75.0
    assert row['errors'] == [
        'iteration 2: stack rally-2 ended CREATE_FAILED']
    report = rally.format_report([row])
    assert 'failure_rate max %d%%: %s (actual 25.0%%)' % (
        max_pct, 'passed' if passed else 'failed') in report
    assert '| total ' in report and 'Min (sec)' in report
    # which template a workload ran is in its heading
    assert 'HeatStacks.create_and_delete_stack [a.yaml] (times 4, ' \
        'concurrency 2)' in report


# -- tiny runs on the engine ------------------------------------------------

EXTRA_T = '~/.rally/extra/'
TINY = {
    'HeatStacks.create_and_delete_stack': workload(
        {'template_path': EXTRA_T + 'resource_group.yaml',
         'parameters': {'prefix': 'tiny'}}),
    'HeatStacks.create_update_delete_stack': workload(
        {'template_path': EXTRA_T + 'random_strings.yaml',
         'updated_template_path': EXTRA_T + 'updated_random_strings_replace'
                                            '.yaml'}),
    'HeatStacks.create_check_delete_stack': workload(
        {'template_path': EXTRA_T + 'default.yaml'}),
    'HeatStacks.create_and_list_stack': workload(
        {'template_path': EXTRA_T + 'default.yaml'}),
    'HeatStacks.list_stacks_and_resources': workload(
        context={'stacks': {'stacks_per_tenant': 3,
                            'resources_per_stack': 2}}),
}


@pytest.mark.parametrize('scenario', sorted(TINY))
def test_tiny_run(bench, tmp_path, scenario):
    engine, wait = bench
    path = write_task(tmp_path, {scenario: [TINY[scenario]]})
    progress = []
    [row] = rally.run_task(path, engine, wait,
                           on_progress=lambda *a: progress.append(a))
    assert row['errors'] == []
    assert row['failures'] == 0 and row['failure_rate_pct'] == 0
    assert row['sla_passed'] is True
    assert list(row['atomic']) == list(rally.SCENARIOS[scenario].actions)
    for action, st in row['atomic'].items():
        assert st['count'] == 2 and st['success_pct'] == 100.0, action
        assert st['min'] <= st['median'] <= st['max']
    assert row['total']['count'] == 2
    assert sorted(progress) == [(scenario, 1, 2), (scenario, 2, 2)]
    # created, context and listed stacks are all cleaned up
    assert live_stacks(engine) == []


def test_failing_stacks_fail_the_sla_and_are_cleaned_up(bench, tmp_path):
    engine, wait = bench
    (tmp_path / 'failing.yaml').write_text(FAILING)
    path = write_task(tmp_path, {'HeatStacks.create_and_delete_stack': [
        workload({'template_path': 'failing.yaml'}),
        workload({'template_path': 'failing.yaml'}, max_pct=100)]})
    strict, lenient = rally.run_task(path, engine, wait)
    for row in (strict, lenient):
        assert row['failures'] == 2 and row['failure_rate_pct'] == 100.0
        create = row['atomic']['heat.create_stack']
        assert create['count'] == 2 and create['success_pct'] == 0.0
        assert create['min'] is None
        assert row['atomic']['heat.delete_stack']['count'] == 0
        assert row['total']['success_pct'] == 0.0
        assert len(row['errors']) == 2
        assert all('CREATE_FAILED' in e for e in row['errors'])
    assert strict['sla_passed'] is False and lenient['sla_passed'] is True
    report = rally.format_report([strict, lenient])
    assert 'failure_rate max 0%: failed (actual 100.0%)' in report
    assert 'failure_rate max 100%: passed (actual 100.0%)' in report
    assert live_stacks(engine) == []

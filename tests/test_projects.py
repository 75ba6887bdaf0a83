"""Stacks belong to a project, through the CLI as a user runs it: another
project's stack is "not found" to every verb, by name or by id, and names
are unique per project only."""

import pytest

pytestmark = pytest.mark.slow

TEMPLATE = '''
heat_template_version: 2018-08-31
resources:
  a: {type: OS::Heat::None}
  b: {type: OS::Heat::Value, properties: {value: {get_resource: a}}}
outputs:
  o: {value: {get_attr: [b, value]}}
'''
A = ('--os-project-id', 'alpha')
B = ('--os-project-id', 'beta')


def _verbs(ident):
    return [
        ('stack', 'show', ident),
        ('stack', 'update', ident, '--existing'),
        ('stack', 'delete', ident, '--yes'),
        ('stack', 'check', ident),
        ('stack', 'converge', ident),
        ('stack', 'cancel', ident),
        ('stack', 'cancel', ident, '--no-rollback'),
        ('stack', 'event', 'list', ident),
        ('stack', 'resource', 'list', ident),
        ('stack', 'resource', 'show', ident, 'a'),
        ('stack', 'output', 'list', ident),
        ('stack', 'output', 'show', ident, 'o'),
        ('stack', 'output', 'show', ident, '--all'),
        ('stack', 'graph', ident),
        ('stack', 'drift', ident),
    ]


@pytest.mark.long   # 19-37 s: in .ci/run's long group
def test_another_project_cannot_see_or_touch_a_stack(cli, write):
    tmpl = write('p.yaml', TEMPLATE)
    created = cli.json(*A, 'stack', 'create', 'app', '-t', tmpl)
    # a create prints OSC's short summary: the project is in the show
    assert cli.json(*A, 'stack', 'show', 'app')['project'] == 'alpha'
    events_before = cli.json(*A, 'stack', 'event', 'list', 'app')
    # by name and by id, each verb one of the two (one lookup serves
    # both: the id of another project's stack is as unknown as its name)
    for i, verb in enumerate(_verbs('app')):
        ident = ('app', created['id'])[i % 2]
        verb = tuple(ident if w == 'app' else w for w in verb)
        proc = cli.run(*B, *verb, check=False)
        assert proc.returncode == 3, (verb, proc.stderr)
        assert 'Stack not found: %s' % ident in proc.stderr, verb
    assert cli.json(*B, 'stack', 'list') == []
    # and nothing happened to it
    show = cli.json(*A, 'stack', 'show', 'app')
    assert show['stack_status'] == 'CREATE_COMPLETE'
    assert cli.json(*A, 'stack', 'event', 'list', 'app') == events_before
    assert [s['Stack Name'] for s in cli.json(*A, 'stack', 'list')] == ['app']


def test_projects_have_their_own_names_and_the_environment_picks_one(
        cli, write, monkeypatch):
    tmpl = write('p.yaml', TEMPLATE)
    a = cli.json(*A, 'stack', 'create', 'app', '-t', tmpl)
    # OS_PROJECT_ID, as python-openstackclient reads it
    monkeypatch.setenv('OS_PROJECT_ID', 'beta')
    b = cli.json('stack', 'create', 'app', '-t', tmpl)
    assert b['id'] != a['id']
    assert cli.json('stack', 'show', 'app')['project'] == 'beta'
    assert [s['ID'] for s in cli.json('stack', 'list')] == [b['id']]
    proc = cli.run('stack', 'create', 'app', '-t', tmpl, check=False)
    assert proc.returncode == 4 and 'already exists' in proc.stderr
    cli.run('stack', 'delete', 'app', '--yes')
    # the flag wins over the environment
    assert [s['ID'] for s in cli.json(*A, 'stack', 'list')] == [a['id']]
    assert cli.json(*A, 'stack', 'show', 'app')['stack_status'] == \
        'CREATE_COMPLETE'
    monkeypatch.delenv('OS_PROJECT_ID')
    # without either: the configured default project, which has none
    assert cli.json('stack', 'list') == []
    conf = write('c.conf', '[DEFAULT]\nproject_id = alpha\n')
    assert [s['ID'] for s in cli.json('--config-file', conf, 'stack',
                                      'list')] == [a['id']]

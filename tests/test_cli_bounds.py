"""Bad template input through the CLI: each ends soon with a clear error
and the invalid-template status, and `stack create` stores nothing."""

import os
import sqlite3

import pytest

from converge import exception
from tests.test_template_bounds import BOMB_331
from tests.test_template_bounds import BOMB_450
from tests.test_template_bounds import DUP_RESOURCE

REGEX = '''heat_template_version: 2018-08-31
resources:
  r:
    type: OS::Heat::Value
    properties:
      value:
        yaql:
          expression: "regex('^(a|aa)+$').matches($.data)"
          data: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"
'''

LOOP = REGEX.replace("regex('^(a|aa)+$').matches($.data)",
                     "range(1000000000).len()")

CASES = [
    (BOMB_450, 'at the alias *'),
    (BOMB_331, 'max_template_nodes'),
    (REGEX, 'resources.r.properties.value: : yaql: the expression ran '
            'for more than 0.5 s'),
    (LOOP, 'yaql_time_limit'),
    (DUP_RESOURCE, "duplicate key 'server' at line 7 (first at line 3)"),
]

# the backstop if the command hangs, not a speed assertion
BACKSTOP = 120
# that a bound stops the command with a clear error is the point here,
# not how much it lets run first: the defaults (test_template_bounds
# checks them in-process) made these commands burn 2 s of yaql and two
# million alias nodes each
CONF = '[DEFAULT]\nyaql_time_limit = 0.5\nmax_template_nodes = 200000\n'


@pytest.mark.parametrize('text,needle', CASES)
def test_bad_input_ends_with_an_error_and_stores_nothing(cli, write, text,
                                                         needle):
    path = write('bad.yaml', text)
    conf = ('--config-file', write('c.conf', CONF))
    for args in (('template', 'validate', '-t', path),
                 ('stack', 'create', 'bad', '-t', path)):
        proc = cli.run(*conf, *args, check=False, timeout=BACKSTOP)
        assert proc.returncode == exception.InvalidTemplate.exit_code, \
            proc.stderr
        assert needle in proc.stderr and 'bad.yaml' in proc.stderr
        assert 'Traceback' not in proc.stderr
    assert cli.json('stack', 'list') == []
    db = sqlite3.connect(os.path.join(cli.home, 'converge.db'))
    try:
        assert db.execute('SELECT count(*) FROM templates').fetchone() == (0,)
    finally:
        db.close()

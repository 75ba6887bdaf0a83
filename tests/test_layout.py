"""The rooms and which way imports point (docs/design.md): a test, so a
new import against the arrows is seen when it is made."""

import ast
import os

from tests.conftest import REPO

#: package -> packages of converge it must never import
FORBIDDEN = {
    'template': {'graph', 'engine', 'db', 'workers', 'cmd', 'bench'},
    'graph': {'template', 'engine', 'db', 'workers', 'cmd', 'bench'},
    'db': {'engine', 'workers', 'cmd', 'bench'},
    'resources': {'engine', 'db', 'workers', 'cmd', 'bench'},
    'engine': {'workers', 'observers', 'cmd', 'bench'},
    # below the engine: what it uses to reach other processes
    'messaging': {'engine', 'db', 'workers', 'observers', 'cmd', 'bench'},
    'coordination': {'engine', 'db', 'workers', 'observers', 'cmd',
                     'bench'},
    'observers': {'workers', 'cmd', 'bench'},
    # the simulated cloud boots what a server carries (userdata.py), and
    # never imports the software that runs on it
    'drivers': {'engine', 'workers', 'cmd', 'bench', 'agent'},
    'workers': {'cmd', 'bench'},
    'cmd': {'db', 'bench'},
    # it runs on the servers (docs/software.md)
    'agent': {'engine', 'db', 'workers', 'cmd', 'bench', 'resources'},
}


def _imports(path):
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + ['%s.%s' % (node.module, a.name)
                                     for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split('.')
            if parts[0] == 'converge' and len(parts) > 1:
                yield node.lineno, parts[1]


def test_imports_point_one_way():
    wrong = []
    for package, forbidden in sorted(FORBIDDEN.items()):
        top = os.path.join(REPO, 'converge', package)
        for folder, _, files in os.walk(top):
            for name in sorted(files):
                if not name.endswith('.py'):
                    continue
                path = os.path.join(folder, name)
                for line, target in _imports(path):
                    if target in forbidden:
                        wrong.append('%s:%d imports converge.%s' % (
                            os.path.relpath(path, REPO), line, target))
    assert not wrong, '\n'.join(wrong)

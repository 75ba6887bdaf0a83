#!/usr/bin/env python
"""Validate every top-level template of the HOT corpus (../shared/corpus/hot).

A template whose resource types converge supports must pass `template
validate`; the others are listed with the types that stop them. Prints a
markdown table (the one kept in docs/templates.md):

    python tools/corpus.py [CORPUS_DIR]
"""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CORPUS = os.path.join(HERE, '..', '..', 'shared', 'corpus', 'hot')

# Environments that map Heat::InstallConfigAgent, as INDEX.md says.
AGENT_ENVS = {
    'heat-templates': 'heat-templates/hot/software-config/boot-config/'
                      'none_env.yaml',
    'heat-tempest-plugin': 'heat-tempest-plugin/heat_tempest_plugin/tests/'
                           'scenario/templates/boot_config_none_env.yaml',
}

_LINE = re.compile(r'^- `([^`]+)` — (?!ENVIRONMENT)(?!j2 source)(?!get_file)'
                   r'(?!data file)(?!jinja2).* — top —')


def top_level(corpus):
    with open(os.path.join(corpus, 'INDEX.md')) as f:
        for line in f:
            m = _LINE.match(line)
            if m and m.group(1).endswith(('.yaml', '.yml', '.template')):
                yield m.group(1)


def _types(doc):
    res = (doc or {}).get('resources') or {}
    return sorted({r.get('type') for r in res.values()
                   if isinstance(r, dict) and isinstance(r.get('type'), str)})


#: program payloads the corpus left out (its NOTICE lists them): a
#: placeholder stands in for each
PROGRAMS = ('.sh', '.py', '.bash')


def _placeholders(doc, path):
    names = []

    def walk(node):
        if isinstance(node, dict):
            target = node.get('get_file')
            if isinstance(target, str) and len(node) == 1:
                names.append(target)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(doc)
    base = os.path.dirname(os.path.abspath(path))
    return {n: '#!/bin/sh\n# placeholder: %s is not in the corpus\n' % n
            for n in names if n.endswith(PROGRAMS)
            and not os.path.exists(os.path.join(base, n))}


def check(corpus, rel):
    """-> (verdict, detail): 'valid', 'unsupported' or 'INVALID'."""
    import yaml

    from converge import exception
    from converge import template
    from converge.engine import stacks
    from converge.resources import registry

    path = os.path.join(corpus, rel)
    envs = []
    with open(path) as f:
        doc = yaml.load(f, Loader=template.loader.Loader)
    types = _types(doc)
    if 'Heat::InstallConfigAgent' in types:
        env = AGENT_ENVS.get(rel.split('/')[0])
        if env:
            envs.append(os.path.join(corpus, env))
            types.remove('Heat::InstallConfigAgent')
    missing = [t for t in types if registry.get(t) is None and
               not template.is_provider(t)]
    if missing:
        return 'unsupported', 'uses ' + ', '.join(missing)
    try:
        bundle = template.load_bundle(path, envs,
                                      extra_files=_placeholders(doc, path))
        stacks.validate(bundle, {}, validate_values=False)
    except exception.ConvergeError as exc:
        detail = str(exc).replace(corpus + '/', '')
        if 'Unknown resource type' in detail:
            # a nested template (a provider, OS::Heat::Stack's) needs it
            return 'unsupported', 'nested: ' + detail
        return 'INVALID', detail
    return 'valid', ', '.join(types)


def main(argv):
    import converge  # noqa: F401
    from converge import conf
    conf.setup([], log=False)
    corpus = os.path.abspath(argv[1] if len(argv) > 1 else DEFAULT_CORPUS)
    rows = [(rel,) + check(corpus, rel) for rel in top_level(corpus)]
    print('| template | verdict | detail |')
    print('|---|---|---|')
    for rel, verdict, detail in rows:
        print('| `%s` | %s | %s |' % (rel, verdict, detail.replace('|', '\\|')))
    counts = {}
    for _, verdict, _ in rows:
        counts[verdict] = counts.get(verdict, 0) + 1
    print('\n%s' % ', '.join('%d %s' % (v, k) for k, v in sorted(counts.items())))
    return 1 if counts.get('INVALID') else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))

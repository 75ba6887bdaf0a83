#!/usr/bin/env python
"""Validate every top-level template of the HOT corpus (../shared/corpus/hot).

A template whose resource types converge supports must pass `template
validate`; the others are listed with the types that stop them. Prints a
markdown table (the one kept in docs/templates.md):

    python tools/corpus.py [CORPUS_DIR]
"""

import functools
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

#: TripleO's resource registry (rendered), passed with its templates
TRIPLEO = 'tripleo-heat-templates/'
TRIPLEO_REGISTRY = TRIPLEO + 'overcloud-resource-registry-puppet.yaml'
_ENVS = {}
DEPLOYED_SERVER_ENV = {
    'OS::TripleO::DeployedServer::ControlPlanePort': 'OS::Neutron::Port'}


def omitted(corpus):
    """Placeholders for the program files TripleO's templates get_file
    and the corpus left out (its NOTICE lists them), by URL."""
    from converge import template

    base = os.path.join(corpus, TRIPLEO)
    out, listing = {}, False
    with open(os.path.join(base, 'NOTICE')) as f:
        for line in f:
            if line.startswith('Omitted get_file payloads'):
                listing = True
            elif listing and line.startswith('  - '):
                rel = line[4:].split('  (')[0].strip()
                out[template.loader.file_url(os.path.join(base, rel))] = \
                    '#!/bin/sh\n# placeholder: %s is not in the corpus\n' % rel
    return out


def tripleo_environment(corpus):
    """TripleO's registry as far as the corpus can serve it, written to a
    file of its own (its path): an entry whose template the corpus lacks,
    or that reads a file the corpus lacks, maps its type to OS::Heat::None
    (as INDEX.md says stand-alone tests may); paths are made absolute."""
    import tempfile

    import yaml

    from converge import exception
    from converge import template

    if corpus in _ENVS:
        return _ENVS[corpus]
    with open(os.path.join(corpus, TRIPLEO_REGISTRY)) as f:
        env = yaml.safe_load(f)
    base = os.path.join(corpus, TRIPLEO)
    registry = {}
    for key, target in env['resource_registry'].items():
        if isinstance(target, str) and target.endswith('.yaml'):
            path = os.path.join(base, target)
            try:
                template.load_bundle(path, extra_files=omitted(corpus))
                target = path
            except (OSError, exception.ConvergeError):
                target = 'OS::Heat::None'
        registry[key] = target
    # TripleO's environments/deployed-server-environment.yaml, which the
    # corpus lacks: a pre-provisioned node's control plane port is a
    # plain Neutron port (deployed-server/deployed-server.yaml uses it)
    registry.update(DEPLOYED_SERVER_ENV)
    env['resource_registry'] = registry
    fd, out = tempfile.mkstemp(prefix='tripleo-registry-', suffix='.yaml')
    with os.fdopen(fd, 'w') as f:
        yaml.safe_dump(env, f)
    _ENVS[corpus] = out
    return out


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
PROGRAMS = ('.sh', '.py', '.bash', '.pp')


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


@functools.lru_cache(maxsize=None)
def check(corpus, rel):
    """-> (verdict, detail): 'valid', 'unsupported', 'refused' (input
    converge refuses on purpose where Heat guesses: a key given twice
    with two values), 'needs input' (a nested template's parameter that
    has no default and is not passed: TripleO gives it as a
    parameter_default, e.g. a generated password) or 'INVALID'."""
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
    extra = {}
    if rel.startswith(TRIPLEO):
        # with TripleO's registry, its omitted programs as placeholders
        extra = omitted(corpus)
        env = tripleo_environment(corpus)
        with open(env) as f:
            mapped = yaml.safe_load(f)['resource_registry']
        types = [t for t in types if t not in mapped]
        envs.append(env)
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
        bundle = template.load_bundle(
            path, envs, extra_files=dict(extra, **_placeholders(doc, path)))
        stacks.validate(bundle, {}, validate_values=False)
    except exception.ConvergeError as exc:
        detail = str(exc).replace(corpus + '/', '')
        if 'Unknown resource type' in detail or \
                'ResourceTypeUnavailable' in detail:
            # a nested template (a provider, OS::Heat::Stack's) needs a
            # type converge lacks, or one of a service it does not drive
            return 'unsupported', 'nested: ' + detail
        if 'duplicate key' in detail:
            return 'refused', detail
        if rel.startswith(TRIPLEO) and 'not assigned' in detail:
            return 'needs input', detail
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

#!/usr/bin/env python
"""Validate (and create on the simulator) the CloudFormation templates of
the corpus (../shared/corpus/cfn/heat-templates/cfn).

Every template whose resource types converge has must pass `template
validate`; the others are listed with the types that stop them; those
under ``invalid/`` must be refused. Prints the markdown table kept in
docs/compatibility.md ("CloudFormation templates"):

    python tools/cfn_corpus.py [--create] [CORPUS_DIR]

--create also creates each valid one on a simulator of its own (a home
of its own, the CLI in a subprocess) and says whether it converged.
"""

import functools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
#: beside the checkout (../shared), or beside its worktrees' directory
DEFAULT_CORPUS = next(
    (c for c in (os.path.join(HERE, up, 'shared', 'corpus', 'cfn')
                 for up in ('../..', '../../..')) if os.path.isdir(c)),
    os.path.join(HERE, '..', '..', 'shared', 'corpus', 'cfn'))
TOP = os.path.join('heat-templates', 'cfn')

#: the URL two templates name their nested stack's TemplateURL by, and the
#: corpus's copy of what it serves (converge fetches no URL: the copy is
#: sent as the file Heat would fetch)
MIRROR = ('https://raw.github.com/openstack/heat-templates/master/',
          'heat-templates/')

#: the key pair and the values the create passes to parameters that have
#: no default (Neutron_floating's names the simulator's seeded networks)
KEY = 'cfn-key'
VALUES = {'KeyName': KEY, 'DBName': 'wordpress', 'DBUsername': 'admin',
          'DBPassword': 'secret12', 'DBRootPassword': 'secret12',
          'InstanceType': 'm1.small', 'Server1': '10.0.0.10',
          'DBIpaddress': '10.0.0.11', 'Image': 'cirros',
          'external_network': 'public', 'internal_network': 'private',
          'internal_subnet': 'private-subnet'}

#: types whose ImageId names an image the create must find
#: the simulator's own images
SEEDED = ('cirros', 'fedora', 'ubuntu')
#: what gives a port an address of the external network: the router
#: between the simulator's private and public networks comes first
FLOATING = ('OS::Neutron::FloatingIP', 'AWS::EC2::EIP')
#: what waits for a server's boot script to signal (a wait condition, or
#: the nested stack of a type that has one: its server's URL is played)
BOOT_SIGNALLED = ('WaitCondition', 'AWS::RDS::DBInstance',
                  'AWS::ElasticLoadBalancing::LoadBalancer')
IMAGE_TYPES = ('AWS::EC2::Instance', 'AWS::AutoScaling::LaunchConfiguration')


def templates(corpus):
    root = os.path.join(corpus, TOP)
    for d, _, names in sorted(os.walk(root)):
        for n in sorted(names):
            if n.endswith(('.template', '.yaml')):
                yield os.path.relpath(os.path.join(d, n), corpus)


#: templates outside invalid/ that are broken, and what converge says
#: of them (Heat validates these and shows the error where the output is
#: read; converge refuses what can never resolve, as it does for HOT)
BROKEN = {
    'F17/WordPress_Single_Instance_With_Neutron.template':
        'Outputs.InstanceIPAddress.Value.Ref: The specified reference '
        '"IPAddress" is incorrect',
    # its image is looked up by region, and the region is RegionOne
    'F17/Rails_Single_Instance.template':
        'Resources.WebServer.Properties.ImageId.Fn::FindInMap: '
        'Fn::FindInMap: the key "RegionOne" is not in the mapping',
}


def expected_invalid(rel):
    return '/invalid/' in rel or os.path.relpath(rel, TOP) in BROKEN


def mirrored(corpus, doc):
    """The files a template's TemplateURLs name, from the corpus copy."""
    out = {}
    for r in (doc.get('Resources') or {}).values():
        url = ((r or {}).get('Properties') or {}).get('TemplateURL')
        if isinstance(url, str) and url.startswith(MIRROR[0]):
            path = os.path.join(corpus, MIRROR[1] + url[len(MIRROR[0]):])
            if os.path.exists(path):
                with open(path) as f:
                    out[url] = f.read()
    return out


def _doc(corpus, rel):
    from converge import template
    with open(os.path.join(corpus, rel)) as f:
        return template.parse_text(f.read(), rel)


def missing_types(doc):
    from converge.resources import registry
    types = {r.get('Type') for r in (doc.get('Resources') or {}).values()
             if isinstance(r, dict) and isinstance(r.get('Type'), str)}
    return sorted(t for t in types if registry.get(t) is None)


@functools.lru_cache(maxsize=None)
def check(corpus, rel):
    """-> (verdict, detail): 'valid', 'unsupported' (types converge does
    not have), 'refused' (under invalid/: refused, as it must be) or
    'INVALID' (what converge should have taken, or invalid/ taken)."""
    from converge import exception
    from converge import template
    from converge.engine import stacks

    doc = _doc(corpus, rel)
    missing = missing_types(doc)
    try:
        bundle = template.load_bundle(os.path.join(corpus, rel),
                                      extra_files=mirrored(corpus, doc))
        stacks.validate(bundle, {}, validate_values=False)
    except exception.ConvergeError as exc:
        detail = str(exc).replace(corpus + '/', '')
        if expected_invalid(rel):
            return 'refused', detail
        if missing:
            return 'unsupported', 'uses ' + ', '.join(missing)
        return 'INVALID', detail
    if expected_invalid(rel):
        return 'INVALID', 'accepted, but it is a negative case'
    return 'valid', ''


def images(corpus, rel, params):
    """The image names the template's instances boot from, with `params`."""
    from converge import template
    from converge.template import definition
    doc = _doc(corpus, rel)
    bundle = template.load_bundle(os.path.join(corpus, rel),
                                  extra_files=mirrored(corpus, doc))
    defn = definition.StackDefinition(bundle, params, validate_values=False)
    names = set()
    for name, rd in defn.resources.items():
        if rd.type in IMAGE_TYPES:
            image = defn.known_properties(name).get('ImageId')
            if isinstance(image, str) and image not in SEEDED:
                names.add(image)
    return sorted(names)


def parameters(corpus, rel):
    doc = _doc(corpus, rel)
    decl = doc.get('Parameters') or {}
    return {k: v for k, v in VALUES.items()
            if k in decl and 'Default' not in (decl[k] or {})}


def _cli(home, *args, timeout=300):
    return subprocess.run(
        [sys.executable, '-m', 'converge.cmd.cli', '--home', home] +
        list(args), capture_output=True, text=True, timeout=timeout,
        env={k: v for k, v in os.environ.items() if k != 'CONVERGE_HOME'})


def prelude(home, image_names, router=False):
    """The key pair and the images the templates boot from (and, for one
    that gives a port a floating IP, the router between the simulator's
    private and public networks that it assumes), made in a stack of
    their own on the home's simulator."""
    res = {'key': {'type': 'OS::Nova::KeyPair', 'properties': {
        'name': KEY}}}
    if router:
        res['router'] = {'type': 'OS::Neutron::Router', 'properties': {
            'external_gateway_info': {'network': 'public'}}}
        res['inside'] = {'type': 'OS::Neutron::RouterInterface',
                         'properties': {'router': {'get_resource': 'router'},
                                        'subnet': 'private-subnet'}}
    for i, name in enumerate(image_names):
        res['image%d' % i] = {'type': 'OS::Glance::WebImage', 'properties': {
            'name': name, 'disk_format': 'qcow2', 'container_format': 'bare',
            'location': 'http://example.com/%s.qcow2' % name}}
    path = os.path.join(home, 'prelude.yaml')
    with open(path, 'w') as f:
        json.dump({'heat_template_version': '2018-08-31', 'resources': res},
                  f)
    return _cli(home, 'stack', 'create', 'prelude', '-t', path, '--wait')


def create(corpus, rel, home):
    """(status, reason) of `stack create --wait` of the template on the
    simulator of `home` (its prelude made first)."""
    params = parameters(corpus, rel)
    text = json.dumps(_doc(corpus, rel))
    made = prelude(home, images(corpus, rel, params),
                   router=any(t in text for t in FLOATING))
    if made.returncode:
        return 'PRELUDE FAILED', made.stderr.strip()
    args = ['stack', 'create', 'corpus', '-t', os.path.join(corpus, rel),
            '--wait']
    for k, v in params.items():
        args += ['--parameter', '%s=%s' % (k, v)]
    doc = _doc(corpus, rel)
    extra = mirrored(corpus, doc)
    if extra:
        # the nested template sent as the file its URL names: a copy
        # next to it, the template rewritten to name the copy
        for url, text in extra.items():
            copy = os.path.join(home, os.path.basename(url))
            with open(copy, 'w') as f:
                f.write(text)
            for r in doc['Resources'].values():
                if (r.get('Properties') or {}).get('TemplateURL') == url:
                    r['Properties']['TemplateURL'] = copy
        path = os.path.join(home, os.path.basename(rel))
        with open(path, 'w') as f:
            json.dump(doc, f)
        args[4] = path
    if any(t in json.dumps(doc) + ''.join(extra.values())
           for t in BOOT_SIGNALLED):
        proc = _booting(home, args)
    else:
        proc = _cli(home, *args, timeout=600)
    shown = _cli(home, 'stack', 'show', 'corpus', '-f', 'json')
    if shown.returncode:
        return 'NOT CREATED', (proc.stderr or proc.stdout).strip()[-300:]
    st = json.loads(shown.stdout)
    return st['stack_status'], st['stack_status_reason']


_SIGNAL_URL = re.compile(r'https?://[^\s"\']*/v1/agent/waitconditions/'
                         r'[^\s"\']*')


def _booting(home, args, deadline=300):
    """Run the create while playing the servers' boot scripts: the
    home's converge-api serves the wait condition handles, and each
    server's user data is read for a handle URL its cfn-signal would
    post to (once)."""
    env = {k: v for k, v in os.environ.items() if k != 'CONVERGE_HOME'}
    cmd = [sys.executable, '-m', 'converge.cmd.cli', '--home', home]
    create = subprocess.Popen(cmd + list(args), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
    api = None
    signalled = set()
    end = time.monotonic() + deadline
    try:
        while create.poll() is None and time.monotonic() < end:
            url_file = os.path.join(home, 'api.url')
            if api is None and os.path.exists(url_file):
                with open(url_file) as f:
                    address = urllib.parse.urlsplit(f.read().strip()).netloc
                api = subprocess.Popen(
                    [sys.executable, '-m', 'converge.cmd.api', '--bind',
                     address], env=dict(env, CONVERGE_HOME=home),
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for url in _boot_signals(home) - signalled:
                done = subprocess.run(
                    ['curl', '-sf', '-X', 'PUT', '-H', 'Content-Type:',
                     '--data-binary', json.dumps({
                         'Status': 'SUCCESS', 'Reason': 'booted',
                         'UniqueId': '1', 'Data': 'ok'}), url],
                    capture_output=True)
                if done.returncode == 0:
                    signalled.add(url)
            time.sleep(0.5)
        if create.poll() is None:
            create.kill()
        out, err = create.communicate()
    finally:
        if api is not None:
            api.terminate()
            api.wait(timeout=30)
    return subprocess.CompletedProcess(args, create.returncode, out, err)


def _boot_signals(home):
    listed = _cli(home, 'sim', 'server', 'list', '-f', 'json')
    urls = set()
    for server in json.loads(listed.stdout or '[]'):
        shown = _cli(home, 'sim', 'server', 'show', server['ID'], '-f',
                     'json')
        if shown.returncode == 0:
            data = json.loads(shown.stdout).get('user_data') or ''
            urls.update(_SIGNAL_URL.findall(data))
    return urls


def main(argv):
    from converge import conf
    args = [a for a in argv[1:] if not a.startswith('--')]
    creating = '--create' in argv
    corpus = os.path.abspath(args[0] if args else DEFAULT_CORPUS)
    conf.setup([], log=False)
    print('| template | verdict | detail |%s' % (
        ' create |' if creating else ''))
    print('|---|---|---|%s' % ('---|' if creating else ''))
    counts = {}
    for rel in templates(corpus):
        verdict, detail = check(corpus, rel)
        counts[verdict] = counts.get(verdict, 0) + 1
        row = '| `%s` | %s | %s |' % (os.path.relpath(rel, TOP), verdict,
                                      detail.replace('|', '\\|'))
        if creating and verdict == 'valid':
            with tempfile.TemporaryDirectory() as home:
                status, reason = create(corpus, rel, home)
            counts[status] = counts.get(status, 0) + 1
            row += ' %s |' % (status if status == 'CREATE_COMPLETE' else
                              '%s: %s' % (status, reason))
        elif creating:
            row += ' |'
        print(row)
    print('\n%s' % ', '.join('%d %s' % (v, k)
                             for k, v in sorted(counts.items())))
    return 1 if counts.get('INVALID') else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))

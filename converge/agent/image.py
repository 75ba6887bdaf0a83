"""Image ``heat-agents`` of the simulated cloud: Heat's own guest tooling,
as a real image built with Heat's image elements carries it.

A real server booted from such an image runs cloud-init on the user data
Heat built (the multipart of its boot config), then the service
``os-collect-config``, which polls the server's metadata, runs
``os-refresh-config`` on a change, whose scripts run ``os-apply-config``
(writing ``/etc/os-collect-config.conf`` and
``/var/run/heat-config/heat-config`` from the metadata) and heat-agents'
``55-heat-config`` (a hook per deployment, once: its
``/var/lib/heat-config/deployed`` dir, then ``heat-config-notify`` with
the hook's result). A simulated server of this image runs exactly that
software, unchanged, in its own root (`rootfs`).

The image is a tree built once per machine and recipe (`build`), in a
cache directory (``[sim] images_dir``; default
``$XDG_CACHE_HOME/converge/images``), and reused by every server:

- ``usr/local``: a virtualenv of os-collect-config, os-refresh-config,
  os-apply-config, heat-cfntools and ansible-core (the ``ansible`` hook's
  ansible-playbook), installed from PyPI (its scripts'
  ``#!`` lines name ``/usr/local/bin/python3``, where the server sees
  it), plus heat-agents' ``heat-config-notify``;
- ``usr/libexec/os-refresh-config/configure.d``: heat-agents' heat-config
  element's ``20-os-apply-config`` and ``55-heat-config``;
- ``usr/libexec/os-apply-config/templates``: its templates of
  ``/etc/os-collect-config.conf`` and ``/var/run/heat-config/heat-config``;
- ``var/lib/heat-config/hooks``: every hook of heat-agents' elements
  (script, apply-config, ansible, puppet, salt...; a hook whose tool the
  server lacks says so);
- ``etc/os-collect-config.conf``: the first configuration
  (``command = os-refresh-config``), as the images' elements write it.

heat-agents is on PyPI as a source distribution (its wheel holds no
element): the build downloads it with pip and takes the elements from it.
The tree's files are the server's root's (`[sim] server_uid`): the server
sees them as a real image's, root's, through a read-only layer; what it
changes goes to its disk (`layers`).
"""

import fcntl
import hashlib
import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import time

from converge import userdata

LOG = logging.getLogger(__name__)

NAME = userdata.HEAT_AGENTS_IMAGE
#: what is installed from PyPI (pinned: the cache is keyed by the recipe)
PACKAGES = ('os-collect-config==14.1.0', 'os-refresh-config==14.1.0',
            'os-apply-config==14.1.0', 'heat-cfntools==2.0.0',
            # heat-config's ansible hook runs ansible-playbook (an image
            # built with Heat's heat-config-ansible element has it)
            'ansible-core==2.19.14')
HEAT_AGENTS = 'heat-agents==13.0.0'
#: the recipe's own version: change it when what `build` does changes
RECIPE = 2
READY = 'READY.json'
#: the directories of the image a server sees; those with a writable
#: layer (on its disk) and those only read
WRITABLE = ('etc', 'var')
READ_ONLY = ('usr',)
#: the first configuration of os-collect-config, as Heat's image
#: elements install it (then os-apply-config rewrites it from metadata)
FIRST_CONF = '[DEFAULT]\ncommand = os-refresh-config\n'
#: where a service of the image finds its programs (as systemd's PATH)
PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'


def default_dir():
    base = os.environ.get('XDG_CACHE_HOME') or os.path.join(
        os.path.expanduser('~'), '.cache')
    return os.path.join(base, 'converge', 'images')


def key(uid):
    """What the built tree depends on: the recipe, the packages, the
    interpreter its virtualenv is made from, the server uid its files
    belong to."""
    base = os.path.realpath(getattr(sys, '_base_executable', None) or
                            sys.executable)
    text = json.dumps([RECIPE, PACKAGES, HEAT_AGENTS, base,
                       sys.version, int(uid)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def path(images_dir, uid):
    """The directory of the image built for server uid `uid`."""
    return os.path.join(os.path.abspath(images_dir or default_dir()),
                        '%s-%s' % (NAME, key(uid)))


def ready(directory):
    """The build record of a built image, or None."""
    try:
        with open(os.path.join(directory, READY)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def ensure(images_dir=None, uid=0, log=None):
    """The tree of the image (built now unless it was: once per machine,
    however many processes ask at once); RuntimeError when it cannot be
    built (no PyPI, a package that does not install)."""
    directory = path(images_dir, uid)
    if ready(directory) is None:
        os.makedirs(os.path.dirname(directory), exist_ok=True)
        with open(directory + '.lock', 'a') as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if ready(directory) is None:
                build(directory, uid, log)
    return os.path.join(directory, 'tree')


def _run(argv, log, **kw):
    done = subprocess.run(argv, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          **kw)
    if log is not None:
        log.write(done.stdout)
        log.flush()
    if done.returncode:
        raise RuntimeError('building image %s: %s failed (exit %d): %s' % (
            NAME, ' '.join(argv[:4]), done.returncode,
            done.stdout.decode('utf-8', 'replace')[-2000:]))
    return done


def build(directory, uid, log=None):
    """Build the image's tree in `directory` (replacing a partial one);
    its record (packages and their versions, seconds) is written last."""
    started = time.monotonic()
    shutil.rmtree(directory, ignore_errors=True)
    tree = os.path.join(directory, 'tree')
    local = os.path.join(tree, 'usr', 'local')
    os.makedirs(os.path.dirname(local))
    own_log = log is None
    if own_log:
        log = open(directory + '.build.log', 'wb')
    try:
        LOG.info('building image %s in %s', NAME, directory)
        _run([sys.executable, '-m', 'venv', local], log)
        python = os.path.join(local, 'bin', 'python3')
        _run([python, '-m', 'pip', 'install', '--disable-pip-version-check',
              '--no-input'] + list(PACKAGES), log)
        src = os.path.join(directory, 'src')
        _run([python, '-m', 'pip', 'download', '--disable-pip-version-check',
              '--no-input', '--no-deps', '--no-binary', ':all:', '-d', src,
              HEAT_AGENTS], log)
        _install_elements(src, tree)
        _relocate(local)
        _install_locale(tree, log)
        os.makedirs(os.path.join(tree, 'etc'))
        with open(os.path.join(tree, 'etc', 'os-collect-config.conf'),
                  'w') as f:
            f.write(FIRST_CONF)
        os.chmod(os.path.join(tree, 'etc', 'os-collect-config.conf'), 0o600)
        # distributions' /var/run: the server's /run, new at each boot
        os.symlink('../run', os.path.join(tree, 'var', 'run'))
        frozen = _run([python, '-m', 'pip', 'freeze', '--all'], None)
        _chown_tree(tree, uid)
        shutil.rmtree(src, ignore_errors=True)
        record = {'name': NAME, 'packages': frozen.stdout.decode().split(),
                  'heat_agents': HEAT_AGENTS, 'uid': uid,
                  'python': os.path.realpath(getattr(
                      sys, '_base_executable', sys.executable)),
                  'seconds': round(time.monotonic() - started, 1)}
        with open(os.path.join(directory, READY + '.tmp'), 'w') as f:
            json.dump(record, f, indent=1)
        os.replace(os.path.join(directory, READY + '.tmp'),
                   os.path.join(directory, READY))
        LOG.info('image %s built in %.1f s', NAME, record['seconds'])
        return record
    finally:
        if own_log:
            log.close()


def _install(source, target, mode):
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copyfile(source, target)
    os.chmod(target, mode)


def _install_elements(src, tree):
    """heat-agents' elements, where Heat's image elements install them."""
    archives = [n for n in os.listdir(src) if n.endswith('.tar.gz')]
    if len(archives) != 1:
        raise RuntimeError('building image %s: no heat-agents source '
                           'archive in %s' % (NAME, src))
    with tarfile.open(os.path.join(src, archives[0])) as tar:
        tar.extractall(src, filter='data')
    top = os.path.join(src, archives[0][:-len('.tar.gz')])
    element = os.path.join(top, 'heat-config')
    libexec = os.path.join(tree, 'usr', 'libexec')
    orc = os.path.join(element, 'os-refresh-config', 'configure.d')
    for name in sorted(os.listdir(orc)):
        _install(os.path.join(orc, name), os.path.join(
            libexec, 'os-refresh-config', 'configure.d', name), 0o755)
    oac = os.path.join(element, 'os-apply-config')
    for folder, _dirs, files in os.walk(oac):
        for name in files:
            rel = os.path.relpath(os.path.join(folder, name), oac)
            _install(os.path.join(folder, name), os.path.join(
                libexec, 'os-apply-config', 'templates', rel), 0o644)
    for name in sorted(os.listdir(os.path.join(element, 'bin'))):
        _install(os.path.join(element, 'bin', name),
                 os.path.join(tree, 'usr', 'local', 'bin', name), 0o755)
    hooks = os.path.join(tree, 'var', 'lib', 'heat-config', 'hooks')
    os.makedirs(hooks, exist_ok=True)
    for entry in sorted(os.listdir(top)):
        install_d = os.path.join(top, entry, 'install.d')
        if not entry.startswith('heat-config-') or \
                not os.path.isdir(install_d):
            continue
        for name in os.listdir(install_d):
            if name.startswith('hook-') and name.endswith('.py'):
                _install(os.path.join(install_d, name), os.path.join(
                    hooks, name[len('hook-'):-len('.py')]), 0o755)


#: the locale of the image's services (Fedora's images' default, in
#: /etc/locale.conf): ansible-playbook refuses any but UTF-8, and
#: os-collect-config sets back the locale Python names (en_US.UTF-8 for
#: C.UTF-8 too), which must exist
LOCALE = 'en_US.UTF-8'


def _install_locale(tree, log):
    """`LOCALE`, compiled into the image's /usr/lib/locale (the server
    sees the host's /usr under the image's, and hosts often have none
    but C.UTF-8); the host's C.utf8 copied under that name where
    localedef cannot make it."""
    target = os.path.join(tree, 'usr', 'lib', 'locale', LOCALE)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    done = subprocess.run(['localedef', '-i', 'en_US', '-f', 'UTF-8',
                           target], stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT) \
        if shutil.which('localedef') else None
    if done is not None and log is not None:
        log.write(done.stdout)
    if done is None or done.returncode not in (0, 1) or \
            not os.path.isdir(target):
        # (exit 1: made, with warnings)
        shutil.rmtree(target, ignore_errors=True)
        if os.path.isdir('/usr/lib/locale/C.utf8'):
            shutil.copytree('/usr/lib/locale/C.utf8', target)


def _relocate(local):
    """The virtualenv's scripts name the interpreter where the server
    sees it (/usr/local/bin/python3), not where it was built."""
    bindir = os.path.join(local, 'bin')
    built = os.path.join(bindir, 'python')
    for name in os.listdir(bindir):
        target = os.path.join(bindir, name)
        if os.path.islink(target) or not os.path.isfile(target):
            continue
        with open(target, 'rb') as f:
            data = f.read()
        first, nl, rest = data.partition(b'\n')
        if first.startswith(b'#!' + built.encode()):
            with open(target, 'wb') as f:
                f.write(b'#!/usr/local/bin/python3' + nl + rest)
        elif name.startswith('activate'):
            with open(target, 'wb') as f:
                f.write(data.replace(local.encode(), b'/usr/local'))


def _chown_tree(tree, uid):
    """The tree's files are the server's root's (a real image's are
    root's): `uid` on this machine."""
    for folder, dirs, files in os.walk(tree):
        for name in [folder] + [os.path.join(folder, n)
                                for n in dirs + files]:
            os.chown(name, uid, uid, follow_symlinks=False)


def layers(tree, disk):
    """The overlay layers of a server of this image at `disk`:
    (target, [lower dirs], upper or None, work or None) — the image's
    `READ_ONLY` directories over the host's, its `WRITABLE` ones with
    what the server changed kept on its disk (``<disk>/rootfs/<dir>``:
    as a real server's disk holds its changes over its image)."""
    found = []
    for name in READ_ONLY:
        found.append(('/' + name, [os.path.join(tree, name), '/' + name],
                      None, None))
    for name in WRITABLE:
        upper, work = upper_of(disk, name)
        found.append(('/' + name, [os.path.join(tree, name), None],
                      upper, work))
    return found


def upper_of(disk, name):
    """(upper, work) dirs of directory `name` of the server at `disk`."""
    return (os.path.join(disk, 'rootfs', name),
            os.path.join(disk, 'rootfs-work', name))


def prepare(disk, uid):
    """Make the server's writable layers on its disk: ``rootfs`` and
    ``rootfs-work`` the host root's (the server cannot rename them), each
    layer the server's root's (it writes there through its /etc, /var),
    each work dir the host's. A link or file found in their place (the
    server's) is removed."""
    _real_dir(os.path.join(disk, 'rootfs'), 0, 0, 0o755)
    _real_dir(os.path.join(disk, 'rootfs-work'), 0, 0, 0o700)
    for name in WRITABLE:
        upper, work = upper_of(disk, name)
        _real_dir(upper, uid, uid, 0o755)
        _real_dir(work, 0, 0, 0o700)


def _real_dir(target, uid, gid, mode):
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISDIR(st.st_mode):
        os.unlink(target)
        st = None
    if st is None:
        os.mkdir(target, mode)
        st = os.lstat(target)
    if (st.st_uid, st.st_gid) != (uid, gid):
        os.chown(target, uid, gid, follow_symlinks=False)
    if stat.S_IMODE(st.st_mode) != mode:
        os.chmod(target, mode)


def main(argv=None):
    """``python -m converge.agent.image [--images-dir DIR] [--uid UID]``:
    build the image now (a CI warms its cache so), print its record."""
    import argparse
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument('--images-dir')
    parser.add_argument('--uid', type=int, default=2000000000)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    with tempfile.TemporaryFile() as log:
        try:
            tree = ensure(args.images_dir, args.uid, log)
        except RuntimeError as e:
            print(e, file=sys.stderr)
            return 1
    print(json.dumps(dict(ready(os.path.dirname(tree)), tree=tree),
                     indent=1))
    return 0


if __name__ == '__main__':
    sys.exit(main())

"""Time making simulated servers' roots (converge/agent/rootfs.py).

    sudo python tools/measure_roots.py [--count 20] [--rounds 3]
        [--endpoint URL] [--compare OTHER_ROOTFS.py]

Makes `count` roots one after another (as the agent host makes them as
servers boot), runs ``true`` in each, and closes them; prints, per root,
the wall clock of making one, of a program run in it and of closing it,
and the CPU of this process and of its children. `--compare` loads
another rootfs.py (``git show REV:converge/agent/rootfs.py > old.py``)
and measures it in alternate rounds, so both see the same load.
"""

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time


def _load(path):
    spec = importlib.util.spec_from_file_location('rootfs_measured', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _round(rootfs, count, endpoints):
    if endpoints and 'endpoints' in rootfs._STATE:   # forwarded into each
        rootfs.enable(endpoints=endpoints)
    else:
        rootfs.enable()
    disks = tempfile.mkdtemp(prefix='measure-roots-')
    made = run = closed = 0.0
    t0 = os.times()
    roots = []
    for i in range(count):
        disk = os.path.join(disks, str(i))
        os.makedirs(disk)
        start = time.perf_counter()
        root = rootfs.Root(disk, rootfs.binds(disk))
        made += time.perf_counter() - start
        roots.append(root)
        start = time.perf_counter()
        subprocess.run(root.argv('/') + ['true'], check=True)
        run += time.perf_counter() - start
    for root in roots:
        start = time.perf_counter()
        root.close()
        closed += time.perf_counter() - start
    t1 = os.times()
    subprocess.run(['rm', '-rf', disks], check=True)
    return {'make_ms': made * 1000 / count, 'run_ms': run * 1000 / count,
            'close_ms': closed * 1000 / count,
            'cpu_self_ms': (t1.user - t0.user + t1.system - t0.system) *
            1000 / count,
            'cpu_children_ms': (t1.children_user - t0.children_user +
                                t1.children_system - t0.children_system) *
            1000 / count}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--count', type=int, default=20)
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--endpoint', action='append', default=[],
                        help='converge-api URL forwarded into each root')
    parser.add_argument('--compare', metavar='ROOTFS_PY')
    args = parser.parse_args()
    from converge.agent import rootfs
    tried = [('this tree', rootfs)]
    if args.compare:
        tried.append((args.compare, _load(args.compare)))
    for name, module in tried:
        if not module.available():
            sys.exit('%s: no roots here: %s' % (name, module._STATE['reason']))
    for n in range(args.rounds):
        for name, module in tried:
            found = _round(module, args.count, args.endpoint)
            print('round %d %-24s %s' % (n + 1, name, '  '.join(
                '%s %.1f' % (k, v) for k, v in found.items())))
            sys.stdout.flush()


if __name__ == '__main__':
    main()

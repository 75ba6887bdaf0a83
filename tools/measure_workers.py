#!/usr/bin/env python
"""Resources per second for the distributed tests' 500-resource stack with
1 and 3 workers on this machine's PostgreSQL, RabbitMQ and Redis.

    python tools/measure_workers.py [--wait 0.2] [--workers 1,3]
"""

import argparse
import os
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

from tests.distributed import Deployment  # noqa: E402
from tests.test_distributed import big_template  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--wait', type=float, default=0.2)
    parser.add_argument('--workers', default='1,3')
    args = parser.parse_args()
    for n in [int(x) for x in args.workers.split(',')]:
        tmp = pathlib.Path(tempfile.mkdtemp())
        d = Deployment(tmp)
        try:
            for _ in range(n):
                d.start_worker()
            for i in range(n):
                d.engine_id(i)
            tmpl = big_template(tmp / 'big.yaml', wait=args.wait)
            t0 = time.time()
            d.cli('stack', 'create', 'big', '-t', tmpl, '--wait')
            wall = time.time() - t0
            status = d.json('stack', 'show', 'big')['stack_status']
            print('workers=%d wait=%.2fs wall=%.2fs %.1f resources/s %s'
                  % (n, args.wait, wall, 500 / wall, status), flush=True)
        finally:
            d.close()


if __name__ == '__main__':
    main()

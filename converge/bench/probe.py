"""The benchmark's probe inside a worker process.

`converge-bench --mode distributed` starts its workers with ``[DEFAULT]
listeners = bench`` and ``CONVERGE_BENCH_DIR`` set. Such a worker's engine
loads ``listener()`` (entry point ``bench`` of ``converge.listeners``): a
``measure.Recorder`` counting every statement of the process, which
answers the bench through files, which work whatever the launcher does with
signals: the bench writes a number to ``<dir>/request``; the worker, once
none of its units is running, writes its counts with that number to
``<dir>/<pid>.json``.
"""

import json
import os
import threading

from converge import exception
from converge.bench import measure

ENV = 'CONVERGE_BENCH_DIR'
#: the listener's name in setup.cfg's converge.listeners
LISTENER = 'bench'
REQUEST = 'request'
#: how often an idle worker looks for a request (a stat() call)
POLL = 0.02


def listener(engine):
    """The engine's listener factory: a started probe's recorder."""
    directory = os.environ.get(ENV)
    if not directory:
        raise exception.ConvergeError(
            'the %r listener answers converge-bench through files: it needs '
            '$%s set to their directory' % (LISTENER, ENV))
    return Probe(engine, directory).start().recorder


def read_request(directory):
    try:
        with open(os.path.join(directory, REQUEST)) as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return None


def write_json(path, data):
    """Write whole or not at all: readers never see half a file."""
    tmp = '%s.%d.tmp' % (path, os.getpid())
    with open(tmp, 'w') as f:
        json.dump(data, f)
    os.replace(tmp, path)


class Probe:
    def __init__(self, engine, directory):
        self.engine = engine
        self.directory = directory
        self.recorder = measure.Recorder(engine, own_statements='all')
        self._stop = threading.Event()

    def start(self):
        self.recorder.start()
        # answering 0 says "counting" (the bench also waits for the worker
        # to say it is serving)
        self._answer(0)
        thread = threading.Thread(target=self._loop,
                                  name=measure.OWN_THREADS + 'probe',
                                  daemon=True)
        thread.start()
        return self

    def stop(self):
        self._stop.set()

    def _loop(self):
        seen = 0
        while not self._stop.wait(POLL):
            seq = read_request(self.directory)
            if seq is None or seq == seen:
                continue
            # a unit still running has not recorded its duration yet
            self.engine.idle.wait()
            self._answer(seq)
            seen = seq

    def _answer(self, seq):
        snap = self.recorder.snapshot()
        snap.update(seq=seq, pid=os.getpid())
        write_json(os.path.join(self.directory, '%d.json' % os.getpid()),
                   snap)

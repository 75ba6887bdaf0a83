"""`converge-observer`: continuous convergence as a service of its own.

Every converge-worker runs the passes too (its pool's observer clock); an
operator who wants them apart from the units of work runs this instead or
besides: it observes the stacks whose policy is due (observers/loop.py)
and starts their repairs, which the workers run. It consumes no
check_resource messages. Any number may run: one engine takes each pass.
"""

import threading

from oslo_log import log as logging
from oslo_service import service

from converge import conf as conf_mod
from converge.db import session as db_session

LOG = logging.getLogger(__name__)


class ObserverService(service.Service):
    def __init__(self):
        super().__init__()
        self.engine = None
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        super().start()
        from converge.engine import context
        db_session.forget()  # connections made before fork are not ours
        self.engine = context.Engine(auto_migrate=False)
        from converge import metrics
        metrics.watch(self.engine)
        metrics.serve('observer')
        from converge import tracing
        tracing.setup('observer')
        self._thread = threading.Thread(target=self._run, name='observer',
                                        daemon=True)
        self._thread.start()
        LOG.info('observer %s started', self.engine.engine_id)

    def _run(self):
        from converge.observers import loop
        tick = conf_mod.CONF.observer.tick
        while not self._stop.wait(tick):
            try:
                loop.run_due(self.engine)
            except Exception:
                LOG.exception('observing failed; trying again next tick')

    def stop(self, graceful=True):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(conf_mod.CONF.graceful_shutdown_timeout)
        if self.engine is not None:
            self.engine.close()
        from converge import tracing
        tracing.shutdown()   # as converge-worker's
        super().stop(graceful)

"""`converge-worker`: a pool of processes consuming check_resource work.

Each process joins the tooz group (heartbeats keep it a member), serves
check_resource from the message bus, and sweeps now and then for work
held by workers that left the group or lost in transit (sweeper.py). On
SIGTERM it stops taking messages and lets in-flight units finish for
``graceful_shutdown_timeout``; whatever is still running after that is
handed back: the process leaves the group, so the sweeper re-dispatches
it elsewhere.
"""

import gc

from oslo_log import log as logging
from oslo_service import service

from converge import conf as conf_mod
from converge.db import session as db_session

LOG = logging.getLogger(__name__)


class WorkerService(service.Service):
    def __init__(self):
        super().__init__()
        self.engine = None

    def start(self):
        super().start()
        from converge.engine import context
        db_session.forget()  # connections made before fork are not ours
        self.engine = context.Engine(auto_migrate=False)
        from converge.workers import pool
        pool.start(self.engine)
        from converge import metrics
        metrics.serve('worker')   # in each process, after the fork
        from converge import tracing
        tracing.setup('worker')   # likewise: its exporter's thread
        # what start-up made lives as long as the process: out of the
        # cyclic collector's way, whose full collections otherwise walk it
        # all (80-120 ms each, in the middle of a traversal's busiest
        # second; reference counting still frees what dies)
        gc.freeze()
        LOG.info('worker %s started (%d threads)', self.engine.engine_id,
                 self.engine.threads)

    def stop(self, graceful=True):
        if self.engine is not None:
            CONF = conf_mod.CONF
            self.engine.workers.stop_consuming()
            if not self.engine.idle.wait(CONF.graceful_shutdown_timeout):
                LOG.warning('handing back %d units of work still running',
                            self.engine.inflight)
            self.engine.close()
        # the spans not sent yet: a worker process leaves by os._exit,
        # without running atexit
        from converge import tracing
        tracing.shutdown()
        super().stop(graceful)

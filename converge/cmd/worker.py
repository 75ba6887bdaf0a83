"""`converge-worker --config-file converge.conf`: run the worker pool."""

import sys

import converge  # noqa: F401  (threading backend before oslo_messaging)

from oslo_log import log as logging
from oslo_service import service

from converge import conf as conf_mod


def main(argv=None):
    conf_mod.setup(sys.argv[1:] if argv is None else argv)
    if conf_mod.is_embedded():
        sys.stderr.write('converge-worker needs a message bus: set '
                         '[DEFAULT] transport_url (e.g. rabbit://...)\n')
        return 2
    from converge.engine import context
    problem = context.schema_refusal(conf_mod.database_url())
    if problem:
        sys.stderr.write('converge-worker: %s\n' % problem)
        return 2
    from converge.workers.service import WorkerService
    launcher = service.launch(conf_mod.CONF, WorkerService(),
                              workers=conf_mod.CONF.worker.workers,
                              restart_method='mutate')
    logging.getLogger(__name__).info('converge-worker: %d process(es)',
                                     conf_mod.CONF.worker.workers)
    return launcher.wait()


if __name__ == '__main__':
    sys.exit(main())

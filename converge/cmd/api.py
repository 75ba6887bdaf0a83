"""`converge-api --bind HOST:PORT [--config-file converge.conf]`: serve
converge's HTTP API (Heat's orchestration API v1 and the agents' routes)
until stopped. On an embedded home (no message bus) it is the engine too:
it runs the traversals it starts."""

import argparse
import signal
import sys
import threading

import converge  # noqa: F401  (threading backend before oslo_messaging)

from oslo_log import log as logging

from converge import conf as conf_mod


def main(argv=None):
    parser = argparse.ArgumentParser(prog='converge-api',
                                     description=__doc__.split('\n')[0])
    parser.add_argument('--bind', metavar='HOST:PORT',
                        help='address to listen on (default: [api] '
                             'bind_host and bind_port)')
    args, rest = parser.parse_known_args(sys.argv[1:] if argv is None
                                         else argv)
    conf_mod.setup(rest)
    CONF = conf_mod.CONF
    host, port = CONF.api.bind_host, CONF.api.bind_port
    if args.bind:
        host, _, port_text = args.bind.rpartition(':')
        try:
            port = int(port_text)
        except ValueError:
            parser.error('--bind takes HOST:PORT, e.g. 0.0.0.0:8004')
        host = host or '0.0.0.0'
    from converge import memory
    memory.return_large_blocks()
    from converge import tracing
    tracing.setup('api')
    from converge.api import server
    from converge import exception
    from converge.engine import context
    try:
        engine = context.Engine()
    except exception.SchemaMismatch as e:
        sys.stderr.write('converge-api: %s\n' % e)
        return 2
    served = server.Served(engine, host, port)
    if conf_mod.is_embedded():
        # no message bus, so no workers elsewhere: this process is the
        # engine of the home, and the address its servers' agents reach
        from converge.workers import pool
        pool.start(engine)
        server.keep_url(served)
    log = logging.getLogger(__name__)
    log.info('converge-api: serving on %s', served.url)
    sys.stdout.write('converge-api: serving on %s\n' % served.url)
    sys.stdout.flush()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(1.0):
        pass
    served.stop()
    engine.close()
    tracing.shutdown()   # the spans not sent yet
    return 0


if __name__ == '__main__':
    sys.exit(main())

"""`converge-agent`: run software deployments on a server (or many).

Standalone, on one server::

    converge-agent --endpoint URL --agent-id ID --token T --disk DIR
    converge-agent --user-data FILE --disk DIR

Sim host, for every server of a simulated cloud (started by the sim
itself when a server with a bootstrap part is created)::

    converge-agent --sim-connection URL --disks DIR

The sim's URL may also come from $CONVERGE_SIM_CONNECTION (kept off the
command line, where a password would show).
"""

import argparse
import logging
import os
import signal
import sys
import time

from converge import userdata
from converge.agent import rootfs

LOG = logging.getLogger('converge.agent')
SIM_URL_ENV = 'CONVERGE_SIM_CONNECTION'


def _parser():
    parser = argparse.ArgumentParser(
        prog='converge-agent',
        description='Run the software deployments of a server '
                    '(docs/software.md).')
    one = parser.add_argument_group('standalone (one server)')
    one.add_argument('--endpoint', metavar='URL',
                     help='converge-api endpoint')
    one.add_argument('--agent-id', metavar='ID')
    one.add_argument('--token', metavar='TOKEN')
    one.add_argument('--user-data', metavar='FILE',
                     help='Read endpoint, agent id and token from this '
                          'user_data (its bootstrap part)')
    one.add_argument('--disk', metavar='DIR',
                     help='The server\'s directory (journal, scripts)')
    sim = parser.add_argument_group('sim host (every server of a '
                                    'simulated cloud)')
    sim.add_argument('--sim-connection', metavar='URL',
                     help='The sim\'s database URL (or $%s)' % SIM_URL_ENV)
    sim.add_argument('--disks', metavar='DIR',
                     help='Directory of the servers\' disks '
                          '(<DIR>/<server id>)')
    sim.add_argument('--server-uid', metavar='UID', type=int,
                     default=rootfs.DEFAULT_UID,
                     help='First host uid of a confined server\'s 65536 '
                          '(its root is this one)')
    sim.add_argument('--api-endpoint', metavar='URL', action='append',
                     default=[],
                     help='converge-api as the servers are told it: what '
                          'a confined server\'s software may reach of '
                          'the network, forwarded into its own (may be '
                          'repeated)')
    sim.add_argument('--reach', metavar='URL', action='append', default=[],
                     help='Another service a confined server\'s software '
                          'may reach, forwarded as converge-api is: the '
                          'Keystone of [trustee], where a POLL_SERVER_HEAT '
                          'server\'s collector and HEAT_SIGNAL log in '
                          '(may be repeated)')
    sim.add_argument('--api-url-file', metavar='PATH',
                     help='A file holding one more such URL, read as '
                          'servers\' roots are made (an embedded home\'s '
                          'api.url)')
    sim.add_argument('--images-dir', metavar='DIR',
                     help='Where images the servers boot from (heat-agents) '
                          'are built and kept (default '
                          '$XDG_CACHE_HOME/converge/images)')
    sim.add_argument('--unconfined', action='store_true',
                     help='Run the servers\' software unconfined, as this '
                          'process\'s user on this machine (trusted '
                          'templates only)')
    parser.add_argument('--log-file', metavar='PATH',
                        help='Default: agent.log in the disk, '
                             'agent-host.log in the disks directory; '
                             '"-": standard error (journald under '
                             'systemd)')
    parser.add_argument('--poll-wait', metavar='SECONDS', type=int,
                        default=30,
                        help='How long converge-api may hold a poll')
    parser.add_argument('--max-backoff', metavar='SECONDS', type=float,
                        default=3.0,
                        help='Longest pause between tries while the '
                             'endpoint is unavailable')
    parser.add_argument('--debug', action='store_true')
    return parser


def _logging(path, debug):
    if path == '-':
        # journald stamps each line with the time and the process itself
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(
            '%(levelname)s %(name)s %(message)s'))
    else:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        handler = logging.FileHandler(path)
        handler.setFormatter(logging.Formatter(
            '%(asctime)s %(process)d %(levelname)s %(name)s %(message)s'))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else logging.INFO)


def main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    sim_url = args.sim_connection or (
        os.environ.get(SIM_URL_ENV) if args.disks else None)
    if sim_url or args.disks:
        if not (sim_url and args.disks):
            parser.error('sim host mode needs --sim-connection (or $%s) '
                         'and --disks' % SIM_URL_ENV)
        return _sim_host(args, sim_url)
    return _standalone(parser, args)


def _sim_host(args, url):
    from converge.agent import simhost
    _logging(args.log_file or os.path.join(args.disks, simhost.LOG_FILE),
             args.debug)
    # a second host for the same disks exits at once: that is success
    simhost.serve(url, args.disks, wait=args.poll_wait,
                  backoff_max=args.max_backoff,
                  confine=not args.unconfined, uid=args.server_uid,
                  endpoints=args.api_endpoint, reach=args.reach,
                  endpoint_file=args.api_url_file,
                  images_dir=args.images_dir)
    return 0


def _standalone(parser, args):
    if not args.disk:
        parser.error('--disk is required')
    if args.user_data:
        try:
            with open(args.user_data) as f:
                creds = userdata.decode(f.read())
        except OSError as e:
            parser.error('cannot read --user-data %s: %s'
                         % (args.user_data, e))
        if creds is None:
            parser.error('--user-data %s has no %s part (was the server '
                         'booted with user_data_format SOFTWARE_CONFIG?)'
                         % (args.user_data, userdata.CONTENT_TYPE))
    else:
        missing = [o for o, v in (('--endpoint', args.endpoint),
                                  ('--agent-id', args.agent_id),
                                  ('--token', args.token)) if not v]
        if missing:
            parser.error('give --user-data, or all of --endpoint, '
                         '--agent-id and --token (missing: %s)'
                         % ', '.join(missing))
        creds = {'endpoint': args.endpoint, 'agent_id': args.agent_id,
                 'token': args.token}
    from converge.agent import runner
    os.makedirs(args.disk, exist_ok=True)
    _logging(args.log_file or os.path.join(args.disk, 'agent.log'),
             args.debug)
    host = runner.Host(batch=False, wait=args.poll_wait,
                       backoff_max=args.max_backoff)
    # a plain flag: an Event set from a signal handler can deadlock on
    # the lock the interrupted main thread holds in Event.wait
    done = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_a: done.append(True))
    try:
        agent = host.start(creds, os.path.abspath(args.disk))
    except ValueError as e:
        parser.error(str(e))
    LOG.info('agent %s started: endpoint %s, disk %s', agent.agent_id,
             agent.endpoint_url, agent.disk)
    while not done:
        time.sleep(0.2)
        if agent.stopped:
            LOG.error('agent %s stopped: %s', agent.agent_id,
                      agent.stop_reason)
            host.stop()
            return 2
    host.stop()
    LOG.info('agent %s stopped', agent.agent_id)
    return 0


if __name__ == '__main__':
    sys.exit(main())

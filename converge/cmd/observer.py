"""`converge-observer --config-file converge.conf`: continuous convergence
as a service of its own (observers/service.py)."""

import sys

import converge  # noqa: F401  (threading backend before oslo_messaging)

from oslo_service import service

from converge import conf as conf_mod


def main(argv=None):
    conf_mod.setup(sys.argv[1:] if argv is None else argv)
    if conf_mod.is_embedded():
        sys.stderr.write('converge-observer starts repairs the workers run: '
                         'set [DEFAULT] transport_url (e.g. rabbit://...); '
                         'on an embedded home, run `converge observe '
                         '--forever`\n')
        return 2
    from converge.engine import context
    problem = context.schema_refusal(conf_mod.database_url())
    if problem:
        sys.stderr.write('converge-observer: %s\n' % problem)
        return 2
    from converge.observers.service import ObserverService
    launcher = service.launch(conf_mod.CONF, ObserverService(), workers=1,
                              restart_method='mutate')
    return launcher.wait()


if __name__ == '__main__':
    sys.exit(main())

"""`converge-manage db sync|version`."""

import argparse
import sys

import converge  # noqa: F401

from converge import conf as conf_mod


def main(argv=None):
    parser = argparse.ArgumentParser(prog='converge-manage')
    parser.add_argument('--config-file', action='append', default=[])
    parser.add_argument('--home')
    sub = parser.add_subparsers(dest='group', required=True)
    db = sub.add_parser('db', help='database schema')
    dbsub = db.add_subparsers(dest='command', required=True)
    sync = dbsub.add_parser('sync', help='upgrade the schema to the latest')
    sync.add_argument('revision', nargs='?', default='head')
    dbsub.add_parser('version', help='print the schema revision')
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    conf_mod.setup([], home=args.home, default_config_files=args.config_file,
                   log=False)
    from converge.engine import schema
    if args.command == 'sync':
        print('database at revision %s' % schema.sync(args.revision))
    else:
        print(schema.version() or 'none')
    return 0


if __name__ == '__main__':
    sys.exit(main())

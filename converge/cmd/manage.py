"""`converge-manage db sync|version|encrypt`, `converge-manage token
create|list|revoke` (converge's own REST API tokens) and Heat's
`heat-manage` spellings of what converge does too: `purge_deleted`,
`db_sync`, `db_version` (docs/operating.md maps one to the other)."""

import argparse
import json
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
    dbsub.add_parser('encrypt', help='encrypt what is still in clear '
                     '([DEFAULT] auth_encryption_key): rows written before '
                     'a key was set')
    _token_parsers(sub)
    _heat_parsers(sub)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    conf_mod.setup([], home=args.home, default_config_files=args.config_file,
                   log=False)
    from converge.engine import schema
    if args.group == 'token':
        return _token(args, schema)
    if args.group == 'purge_deleted':
        return _purge(args, schema)
    if args.group == 'db_sync':
        args.command, args.revision = 'sync', args.version or 'head'
    elif args.group == 'db_version':
        args.command = 'version'
    if args.command == 'sync':
        print('database at revision %s' % schema.sync(args.revision))
    elif args.command == 'encrypt':
        from converge import exception
        try:
            print('%d values encrypted' % schema.encrypt())
        except exception.ConvergeError as e:
            print('converge-manage: %s' % e, file=sys.stderr)
            return 1
    else:
        print(schema.version() or 'none')
    return 0


def _token_parsers(sub):
    token = sub.add_parser('token', help="converge's own API tokens (where "
                                         'no keystone is configured)')
    tsub = token.add_subparsers(dest='command', required=True)
    create = tsub.add_parser('create', help='make a token (printed once)')
    create.add_argument('--project', required=True,
                        help='the project the token speaks for')
    create.add_argument('--user', help='the user it names (events, logs)')
    create.add_argument('--role', action='append', default=[],
                        help='a role (repeatable; default member; admin '
                             'implies member and reader)')
    create.add_argument('--expires', default='never',
                        help='lifetime: seconds, or 90m, 12h, 30d; '
                             'default never')
    create.add_argument('--description', default='')
    create.add_argument('-f', '--format', choices=('value', 'json'),
                        default='value')
    lst = tsub.add_parser('list', help='the tokens (never their values)')
    lst.add_argument('--project')
    lst.add_argument('-f', '--format', choices=('table', 'json'),
                     default='table')
    revoke = tsub.add_parser('revoke', help='refuse a token from now on')
    revoke.add_argument('token_id')


def _heat_parsers(sub):
    """heat-manage's commands converge has, with heat-manage's arguments."""
    purge = sub.add_parser(
        'purge_deleted', help='remove the stacks deleted longer ago than '
        'AGE for good (heat-manage purge_deleted)')
    purge.add_argument('age', nargs='?', default='90',
                       help='how long to keep deleted stacks (default 90)')
    purge.add_argument('-g', '--granularity', default='days',
                       choices=('days', 'hours', 'minutes', 'seconds'),
                       help='the unit of AGE (default days)')
    purge.add_argument('-p', '--project-id',
                       help='only the stacks of this project')
    purge.add_argument('-b', '--batch_size', default='20',
                       help='top-level stacks removed per transaction '
                            '(default 20)')
    sync = sub.add_parser('db_sync', help='as `db sync` (heat-manage)')
    sync.add_argument('version', nargs='?')
    sub.add_parser('db_version', help='as `db version` (heat-manage)')


def _purge(args, schema):
    from converge import exception
    from converge.engine import purge
    schema.sync()
    try:
        count = purge.purge_deleted(
            schema._database(), args.age, args.granularity,
            args.project_id, args.batch_size)
    except exception.ConvergeError as e:
        sys.stderr.write('ERROR: %s\n' % e)
        return e.exit_code
    print('%d deleted stacks purged' % count)
    return 0


def _token(args, schema):
    from converge import exception
    from converge.engine import api_tokens
    schema.sync()
    db = schema._database()
    try:
        if args.command == 'create':
            token_id, token = api_tokens.create(
                db, args.project, args.user, args.role,
                api_tokens.parse_expiry(args.expires), args.description)
            if args.format == 'json':
                print(json.dumps({'id': token_id, 'token': token,
                                  'project_id': args.project}))
            else:
                print(token)
        elif args.command == 'list':
            rows = api_tokens.listing(db, args.project)
            if args.format == 'json':
                print(json.dumps(rows, indent=2))
            else:
                for r in rows:
                    print('%s  %-8s %-20s %s' % (r['id'], r['state'],
                                                 r['project_id'],
                                                 ','.join(r['roles'])))
        else:
            api_tokens.revoke(db, args.token_id)
            print('revoked %s' % args.token_id)
    except exception.ConvergeError as e:
        sys.stderr.write('ERROR: %s\n' % e)
        return e.exit_code
    return 0


if __name__ == '__main__':
    sys.exit(main())

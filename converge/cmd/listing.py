"""`stack list`'s options, as `openstack stack list` reads them: filters,
tags and their mode, sort keys with their directions, a page."""

from converge import exception

#: a column of `stack list` -> its row's key
KEYS = {'ID': 'id', 'Stack Name': 'stack_name', 'Project': 'project',
        'Stack Owner': 'stack_owner', 'Stack Status': 'stack_status',
        'Creation Time': 'creation_time', 'Updated Time': 'updated_time',
        'Parent': 'parent', 'Deletion Time': 'deletion_time'}
#: --tag-mode -> the service's (Heat's) tag argument
TAG_MODES = {None: 'tags', 'any': 'tags_any', 'not': 'not_tags',
             'not-any': 'not_tags_any'}
#: sort keys a user may give (Heat's names and the database's) -> the
#: row's key, which the service sorts on too
SORT_KEYS = {'stack_name': 'stack_name', 'name': 'stack_name',
             'stack_status': 'stack_status', 'status': 'stack_status',
             'creation_time': 'creation_time', 'created_at': 'creation_time',
             'updated_time': 'updated_time', 'updated_at': 'updated_time'}


#: the filter keys of Heat's stack index (converge-api reads these only:
#: a key it does not know would filter nothing remotely)
FILTER_KEYS = ('id', 'name', 'status', 'action')


def filters(pairs):
    """{key: value, or [values] when a key is repeated} of KEY=VALUE
    options (each may hold several, "k1=v1;k2=v2")."""
    found = {}
    for item in pairs or ():
        for pair in item.split(';'):
            if not pair:
                continue
            key, sep, value = pair.partition('=')
            if not sep or not key:
                raise exception.InvalidInput(
                    'Malformed filter (%s): use the format key=value'
                    % pair)
            if key not in FILTER_KEYS:
                raise exception.InvalidInput(
                    'Unknown filter "%s"; known: %s'
                    % (key, ', '.join(FILTER_KEYS)))
            if key in found:
                old = found[key]
                found[key] = (old if isinstance(old, list) else [old]) + [
                    value]
            else:
                found[key] = value
    return found


def sorts(text):
    """[(row key, descending)] of a --sort value, "k1[:dir],k2[:dir]"."""
    out = []
    for item in (text or '').split(','):
        if not item:
            continue
        key, _, direction = item.partition(':')
        if key not in SORT_KEYS:
            raise exception.InvalidInput(
                'Sort key "%s" not allowed; allowed: %s'
                % (key, ', '.join(sorted(SORT_KEYS))))
        direction = (direction or 'asc').lower()
        if direction not in ('asc', 'desc'):
            raise exception.InvalidInput(
                'Sort direction "%s" is neither asc nor desc' % direction)
        out.append((SORT_KEYS[key], direction == 'desc'))
    return out


def query(args):
    """The service's stack_list arguments for these options. The first
    sort key's direction goes to the service, so that --limit and
    --marker cut the page in that order (as OSC's, other keys sort the
    page)."""
    if args.tag_mode not in TAG_MODES:
        raise exception.InvalidInput(
            'tag mode must be one of "any", "not", "not-any"')
    q = {'filters': filters(args.filters) or None,
         'limit': args.limit, 'marker': args.marker}
    if args.tags:
        q[TAG_MODES[args.tag_mode]] = args.tags
    order = sorts(args.sort)
    if order:
        q['sort_keys'] = [k for k, _ in order]
        q['sort_dir'] = 'desc' if order[0][1] else 'asc'
    return {k: v for k, v in q.items() if v is not None}


def sort_rows(rows, text):
    """The rows sorted by each key in its own direction (stable sorts,
    last key first); a row without the value sorts last."""
    rows = list(rows)
    for key, desc in reversed(sorts(text)):
        present = [r for r in rows if r.get(key) is not None]
        missing = [r for r in rows if r.get(key) is None]
        rows = sorted(present, key=lambda r: r[key], reverse=desc) + missing
    return rows

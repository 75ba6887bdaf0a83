"""Heat's list queries over rows already read: filters, tags, sort, and
pages by marker. One piece serves stacks and events.

A page is "the `limit` rows after the row whose id is `marker`" in the
sorted order, as Heat pages; a marker that is not among the rows is
refused (Heat: 400), so a client never loops on a page that moved.
"""

from converge import exception

#: a filter's key -> the row key it matches (Heat's names and ours)
_STACK_KEYS = {'name': 'stack_name', 'status': 'stack_status',
               'id': 'id', 'stack_name': 'stack_name',
               'stack_status': 'stack_status', 'action': None,
               'tenant': 'project', 'project': 'project'}


def _values(v):
    return [str(x) for x in (v if isinstance(v, (list, tuple)) else [v])]


def matches(row, filters, keys=None):
    """Whether `row` has, for every filter, one of its values. A status
    filter matches the status half (COMPLETE) or the whole
    (CREATE_COMPLETE), as Heat's does; `action` the action half."""
    for key, want in (filters or {}).items():
        want = _values(want)
        if key in ('status', 'resource_status', 'stack_status'):
            whole = str(row.get('stack_status', row.get('resource_status')))
            if whole not in want and whole.partition('_')[2] not in want:
                return False
            continue
        if key in ('action', 'resource_action'):
            whole = str(row.get('stack_status', row.get('resource_status')))
            if whole.partition('_')[0] not in want:
                return False
            continue
        field = (keys or {}).get(key, key)
        if str(row.get(field)) not in want:
            return False
    return True


def _tagged(row, tags, tags_any, not_tags, not_tags_any):
    have = set(row.get('tags') or ())
    if tags and not set(tags) <= have:
        return False
    if tags_any and not set(tags_any) & have:
        return False
    if not_tags and set(not_tags) <= have:
        return False
    if not_tags_any and set(not_tags_any) & have:
        return False
    return True


def _tag_list(v):
    if not v:
        return []
    if isinstance(v, str):
        return [t for t in v.split(',') if t]
    return [t for item in v for t in str(item).split(',') if t]


def page(rows, sort_keys=None, sort_dir=None, limit=None, marker=None,
         allowed_sort=None, default_sort=None, id_key='id'):
    """Sort `rows` and cut the page after `marker`."""
    keys = _tag_list(sort_keys) or list(default_sort or ())
    for k in keys:
        if allowed_sort is not None and k not in allowed_sort:
            raise exception.InvalidInput(
                'Sort key "%s" not allowed; allowed: %s'
                % (k, ', '.join(sorted(allowed_sort))))
    direction = (sort_dir or 'asc').lower()
    if direction not in ('asc', 'desc'):
        raise exception.InvalidInput('Sort direction "%s" is neither asc '
                                     'nor desc' % sort_dir)
    if keys:
        rows = sorted(rows, key=lambda r: tuple(
            (r.get(k) is None, r.get(k) or '') for k in keys),
            reverse=direction == 'desc')
    elif direction == 'desc':
        rows = list(reversed(rows))
    if marker:
        ids = [str(r.get(id_key)) for r in rows]
        if str(marker) not in ids:
            raise exception.InvalidInput('Marker %s is not among the '
                                         'results' % marker)
        rows = rows[ids.index(str(marker)) + 1:]
    if limit not in (None, ''):
        try:
            limit = int(limit)
        except (TypeError, ValueError):
            raise exception.InvalidInput('limit must be an integer, not %r'
                                         % (limit,))
        if limit < 0:
            raise exception.InvalidInput('limit must not be negative')
        rows = rows[:limit]
    return rows


def select_stacks(rows, filters=None, tags=None, tags_any=None,
                  not_tags=None, not_tags_any=None, sort_keys=None,
                  sort_dir=None, limit=None, marker=None):
    """Heat's stack index over stack rows (dicts as stack_list makes
    them)."""
    for key in filters or {}:
        if key not in _STACK_KEYS:
            raise exception.InvalidInput(
                'Unknown filter "%s"; known: %s'
                % (key, ', '.join(sorted(_STACK_KEYS))))
    tag_args = [_tag_list(t) for t in (tags, tags_any, not_tags,
                                       not_tags_any)]
    kept = [r for r in rows if matches(r, filters, _STACK_KEYS)
            and _tagged(r, *tag_args)]
    keys = [_STACK_SORT.get(k, k) for k in _tag_list(sort_keys)]
    return page(kept, keys, sort_dir, limit, marker,
                allowed_sort=set(_STACK_SORT.values()))


#: Heat's stack sort keys (and their database names) -> the row's key
_STACK_SORT = {'stack_name': 'stack_name', 'name': 'stack_name',
               'stack_status': 'stack_status', 'status': 'stack_status',
               'creation_time': 'creation_time',
               'created_at': 'creation_time',
               'updated_time': 'updated_time', 'updated_at': 'updated_time'}


#: Heat's event sort keys -> the event's key
_EVENT_SORT = {'event_time': 'timestamp', 'created_at': 'timestamp',
               'resource_name': 'resource_name',
               'resource_type': 'resource_type',
               'resource_status': 'resource_status',
               'resource_action': 'action'}
_EVENT_FILTERS = {'resource_name', 'resource_type', 'resource_status',
                  'resource_action', 'physical_resource_id', 'id'}


def select_events(rows, filters=None, sort_keys=None, sort_dir=None,
                  limit=None, marker=None):
    """Heat's event index over event dicts (oldest first): the marker
    and `id` are the events' uuids."""
    for key in filters or {}:
        if key not in _EVENT_FILTERS:
            raise exception.InvalidInput(
                'Unknown filter "%s"; known: %s'
                % (key, ', '.join(sorted(_EVENT_FILTERS))))
    kept = [r for r in rows if matches(r, filters, {'id': 'uuid'})]
    keys = [_EVENT_SORT.get(k, k) for k in _tag_list(sort_keys)]
    for k in _tag_list(sort_keys):
        if k not in _EVENT_SORT:
            raise exception.InvalidInput(
                'Sort key "%s" not allowed; allowed: %s'
                % (k, ', '.join(sorted(_EVENT_SORT))))
    return page(kept, keys + (['id'] if keys else []), sort_dir, limit,
                marker, id_key='uuid')

"""What an environment's ``resource_registry`` ``resources`` entries say
of a resource, as data: Heat's hooks (breakpoints: which are valid, which
a resource matches, and the events that tell of them, what `stack hook
poll` reads) and its ``restricted_actions`` (an update or a replacement
the operator forbids). No database: the CLI's remote client reads them
too. What a hook does to a traversal is engine/hooks.py's; a restricted
action is refused by the reconcile loop (workers/reconcile.py)."""

import fnmatch

HOOK_TYPES = ('pre-create', 'pre-update', 'pre-delete', 'post-create',
              'post-update', 'post-delete')

#: the hook a stack action pauses its resources at
HOOK_OF_ACTION = {'CREATE': 'pre-create', 'UPDATE': 'pre-update',
                  'DELETE': 'pre-delete'}
#: and once it has done it (post-delete: see engine/hooks.py)
POST_HOOK_OF_ACTION = {'CREATE': 'post-create', 'UPDATE': 'post-update'}


#: the actions ``restricted_actions`` may name
RESTRICTED_ACTIONS = ('update', 'replace')

#: what each entry key may hold, and how a bad value is told (Heat's words)
_KNOWN = {
    'hooks': (HOOK_TYPES, 'Invalid hook type "%s" for resource breakpoint, '
              'acceptable hook types are: %s'),
    'restricted_actions': (RESTRICTED_ACTIONS, 'Invalid restricted_action '
                           'type "%s" for resource, acceptable '
                           'restricted_action types are: %s'),
}


def invalid(value, known=HOOK_TYPES):
    """The values of a ``hooks`` (or ``restricted_actions``) entry, a
    string or a list of them, that Heat does not know."""
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list):
        return [value]
    return [v for v in values if v not in known]


def bad_entries(resources, path=()):
    """(path, message) of every ``hooks`` or ``restricted_actions`` in a
    registry's ``resources`` (nested paths too) naming what Heat does not
    know."""
    for name, entry in (resources or {}).items():
        if not isinstance(entry, dict):
            continue
        for key, value in entry.items():
            if key in _KNOWN:
                known, message = _KNOWN[key]
                bad = invalid(value, known)
                if bad:
                    yield list(path) + [name, key], message % (
                        bad[0], ', '.join(known))
            elif isinstance(value, dict):
                yield from bad_entries({key: value}, list(path) + [name])


def matches(env, name, hook):
    """Whether the environment sets `hook` on the resource `name` (its
    ``resources`` entries, names or globs, as Heat's matches_hook)."""
    registry = (env or {}).get('resource_registry') or {}
    for pattern, entry in (registry.get('resources') or {}).items():
        if not isinstance(entry, dict) or 'hooks' not in entry:
            continue
        if not fnmatch.fnmatchcase(name, pattern):
            continue
        hooks = entry['hooks']
        if hook == hooks or (isinstance(hooks, list) and hook in hooks):
            return True
    return False


def restricted(env, name):
    """The actions (``update``, ``replace``) the environment forbids on
    the resource `name`: those of every ``resources`` entry whose name or
    glob matches it, as Heat's get_rsrc_restricted_actions."""
    registry = (env or {}).get('resource_registry') or {}
    found = set()
    for pattern, entry in (registry.get('resources') or {}).items():
        if not isinstance(entry, dict) or \
                'restricted_actions' not in entry or \
                not fnmatch.fnmatchcase(name, pattern):
            continue
        actions = entry['restricted_actions']
        found.update([actions] if isinstance(actions, str) else actions)
    return found


def restricted_reason(action):
    """Heat's reason for a refused ``update`` or ``replace``."""
    return '%s is restricted for resource.' % action


def paused_reason(hook):
    return '%s paused until Hook %s is cleared' % (
        hook.split('-', 1)[1].upper(), hook)


def cleared_reason(hook):
    return 'Hook %s is cleared' % hook


def paused_events(events, *hooks):
    """Of the events since the stack's action started (oldest first),
    those of a resource reaching one of `hooks` (None: left out) not
    followed by its clearing: what `stack hook poll` lists, read as
    heatclient reads them."""
    paused = {}
    for hook in hooks:
        if hook is None:
            continue
        for i, ev in enumerate(events):
            key = (ev.get('stack_name'), ev['resource_name'], hook)
            if ev['resource_status_reason'] == paused_reason(hook):
                paused[key] = i
            elif ev['resource_status_reason'] == cleared_reason(hook):
                paused.pop(key, None)
    return [events[i] for i in sorted(paused.values())]

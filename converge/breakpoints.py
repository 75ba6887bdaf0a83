"""Heat's hooks (breakpoints) as data: those of an environment's
``resource_registry`` ``resources`` entries (which are valid, which a
resource matches) and the events that tell of them (what `stack hook
poll` reads). No database: the CLI's remote client reads them too. What
a hook does to a traversal is engine/hooks.py's."""

import fnmatch

HOOK_TYPES = ('pre-create', 'pre-update', 'pre-delete', 'post-create',
              'post-update', 'post-delete')

#: the hook a stack action pauses its resources at
HOOK_OF_ACTION = {'CREATE': 'pre-create', 'UPDATE': 'pre-update',
                  'DELETE': 'pre-delete'}
#: and once it has done it (post-delete: see engine/hooks.py)
POST_HOOK_OF_ACTION = {'CREATE': 'post-create', 'UPDATE': 'post-update'}


def invalid(value):
    """The hook types of a ``hooks`` value (a string or a list of them)
    that Heat does not know."""
    hooks = [value] if isinstance(value, str) else value
    if not isinstance(hooks, list):
        return [value]
    return [h for h in hooks if h not in HOOK_TYPES]


def bad_entries(resources, path=()):
    """(path, bad value) of every ``hooks`` in a registry's ``resources``
    (nested paths too) naming a hook type Heat does not know."""
    for name, entry in (resources or {}).items():
        if not isinstance(entry, dict):
            continue
        for key, value in entry.items():
            if key == 'hooks':
                if invalid(value):
                    yield list(path) + [name, key], value
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

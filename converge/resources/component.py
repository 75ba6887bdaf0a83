"""OS::Heat::SoftwareComponent: one config per lifecycle action.

Stored as a software config of group ``component`` whose body is
``{"configs": [{"actions": [...], "config": "...", "tool": "..."}, ...]}``;
a deployment of it runs, for each action, the entry that lists the action,
with that entry's tool (`config_for`). Immutable: any change replaces it.

Actions, as in Heat, are the lifecycle actions CREATE, UPDATE, DELETE,
SUSPEND and RESUME; converge adds CHECK and day-2 actions: any lower-case
identifier (``backup``, ``patch``, ``add_user``), run when an operator asks
for that action on the deployment. An action may be served by one entry
only (otherwise which one runs would be undefined).
"""

import re

from converge import exception
from converge.resources import properties as p
from converge.resources import software_config as sc

GROUP = 'component'
LIFECYCLE_ACTIONS = ('CREATE', 'UPDATE', 'DELETE', 'SUSPEND', 'RESUME',
                     'CHECK')
DAY2_PATTERN = r'[a-z][a-z0-9_]*'

CONFIG_ENTRY_SCHEMA = {
    'actions': p.Schema(
        p.LIST, 'Lifecycle actions to which the configuration applies: '
        'CREATE, DELETE, UPDATE, SUSPEND, RESUME, CHECK, or a day-2 '
        'action named by a lower-case identifier (e.g. backup).',
        default=['CREATE', 'UPDATE'], min_length=1,
        schema=p.Schema(p.STRING)),
    'config': sc.SoftwareConfig.properties_schema['config'],
    'tool': p.Schema(
        p.STRING, 'The configuration tool used to actually apply the '
        'configuration on a server (the hook, e.g. script).',
        required=True),
}


def check_action(name):
    """None when `name` is an action a component entry may list, else
    what is wrong with it."""
    if not isinstance(name, str):
        return 'an action must be a string, not %s' % type(name).__name__
    if name in LIFECYCLE_ACTIONS:
        return None
    if name.upper() in LIFECYCLE_ACTIONS:
        return ('"%s" is not an action: lifecycle actions are upper case '
                '(%s)' % (name, name.upper()))
    if re.fullmatch(DAY2_PATTERN, name):
        return None
    return ('"%s" is not an action: use one of %s, or a day-2 action '
            'named by a lower-case identifier (letters, digits, _)'
            % (name, ', '.join(LIFECYCLE_ACTIONS)))


def config_for(body, action):
    """The entry of a stored component that serves `action`, or None.

    The interface the deployment side calls to pick what the agent runs:

    :param body: the component's stored config, ``{"configs": [...]}`` (as
        ``clients.configs.get(id)['config']`` returns it); the list itself
        is accepted too
    :param action: the deployment action (``CREATE``, ``UPDATE``,
        ``DELETE``, ``SUSPEND``, ``RESUME``, ``CHECK``, or a day-2 name
        such as ``backup``), compared exactly
    :returns: the entry, a dict with ``tool`` (the hook to run: the derived
        config's group), ``config`` (the body it runs) and ``actions``; None
        when no entry lists `action` (the deployment then has nothing to
        run for it). Validation guarantees at most one entry lists it.
    """
    configs = body.get('configs') if isinstance(body, dict) else body
    for entry in configs or []:
        if isinstance(entry, dict) and action in (entry.get('actions')
                                                  or []):
            return entry
    return None


class SoftwareComponent(sc.SoftwareConfig):
    properties_schema = {
        'configs': p.Schema(
            p.LIST, 'The list of configurations for the different '
            'lifecycle actions of the represented software component.',
            required=True, min_length=1, schema=CONFIG_ENTRY_SCHEMA),
        'inputs': sc.SoftwareConfig.properties_schema['inputs'],
        'outputs': sc.SoftwareConfig.properties_schema['outputs'],
        'options': sc.SoftwareConfig.properties_schema['options'],
    }

    attributes_schema = {
        'configs': 'The list of configurations for the different lifecycle '
                   'actions of the represented software component.',
        'config': 'The config value of the software config: '
                  '{"configs": [...]}.',
    }

    @classmethod
    def validate_more(cls, values, path):
        configs = values.get('configs')
        if not isinstance(configs, list):
            return values  # not known yet
        served = {}
        for i, entry in enumerate(configs):
            actions = entry.get('actions') if isinstance(entry, dict) \
                else None
            if not isinstance(actions, list):
                continue
            for j, action in enumerate(actions):
                if action is p.UNKNOWN:
                    continue
                where = path + ['configs', i, 'actions', j]
                problem = check_action(action)
                if problem:
                    raise exception.InvalidTemplate(problem, path=where)
                first = served.setdefault(action, i)
                if first != i:
                    raise exception.InvalidTemplate(
                        'Defining more than one configuration for the '
                        'same action is not allowed: %s is in configs %d '
                        'and %d' % (action, first, i), path=where)
        return values

    def _body(self):
        return dict(super()._body(), group=GROUP,
                    config={'configs': self.properties.get('configs')
                            or []})

    def get_attributes(self, observed):
        body = None
        if isinstance(observed, dict) and 'config' in observed:
            body = observed.get('config')
        elif self.physical_id:
            body = self._body()['config']
        configs = body.get('configs') if isinstance(body, dict) else None
        return {'config': body, 'configs': configs}

"""OS::Heat::SoftwareConfig: an immutable, stored software configuration.

The config is kept in the engine's config store (``clients.configs``) under
an id derived from this resource's uuid, so a create repeated after a crash
finds the same row. Configs are immutable: any property change replaces
the resource (a new config is stored, the old one deleted afterwards).
"""

from converge import exception
from converge.resources import base
from converge.resources import none
from converge.resources import properties as p

IO_TYPES = ('String', 'Number', 'CommaDelimitedList', 'Json', 'Boolean')

INPUT_SCHEMA = {
    'name': p.Schema(p.STRING, 'Name of the input.', required=True),
    'description': p.Schema(p.STRING, 'Description of the input.'),
    'type': p.Schema(p.STRING, 'Type of the value of the input.',
                     default='String', allowed_values=IO_TYPES),
    'default': p.Schema(p.ANY, 'Default value for the input if none is '
                        'specified.'),
    'replace_on_change': p.Schema(
        p.BOOLEAN, 'Replace the deployment instead of updating it when '
        'the input value changes.', default=False),
}

OUTPUT_SCHEMA = {
    'name': p.Schema(p.STRING, 'Name of the output.', required=True),
    'description': p.Schema(p.STRING, 'Description of the output.'),
    'type': p.Schema(p.STRING, 'Type of the value of the output.',
                     default='String', allowed_values=IO_TYPES),
    'error_output': p.Schema(
        p.BOOLEAN, 'Denotes that the deployment is in an error state if '
        'this output has a value.', default=False),
}


class SoftwareConfig(base.Resource):
    logical = True

    properties_schema = {
        'group': p.Schema(
            p.STRING, 'Namespace to group this software config by when '
            'delivered to a server. This may imply what configuration tool '
            'is going to perform the configuration.',
            default='Heat::Ungrouped'),
        'config': p.Schema(
            p.STRING, 'Configuration script or manifest which specifies '
            'what actual configuration is performed.'),
        'options': p.Schema(
            p.MAP, 'Map containing options specific to the configuration '
            'management tool used by this resource.'),
        'inputs': p.Schema(
            p.LIST, 'Schema representing the inputs that this software '
            'config is expecting.', schema=INPUT_SCHEMA),
        'outputs': p.Schema(
            p.LIST, 'Schema representing the outputs that this software '
            'config will produce.', schema=OUTPUT_SCHEMA),
    }

    attributes_schema = {
        'config': 'The config value of the software config.',
    }

    @property
    def config_id(self):
        return none.derived_uuid(self.uuid, 'software-config')

    def _store(self):
        return getattr(self.clients, 'configs', None)

    def _body(self):
        props = self.properties
        return dict(
            name=none.physical_resource_name(self),
            group=props.get('group') or 'Heat::Ungrouped',
            config=props.get('config') or '',
            options=props.get('options') or {},
            inputs=props.get('inputs') or [],
            outputs=props.get('outputs') or [])

    # -- steps ------------------------------------------------------------
    def owned(self, shared=False):
        store = self._store()
        project = store.project_of(self.physical_id) if store else None
        return project in (None, self.stack.project_id)

    def observe(self):
        if not self.physical_id:
            return None
        store = self._store()
        if store is None:
            return {}
        return store.get(self.physical_id)

    def create(self):
        store = self._store()
        if store is None:
            raise exception.ResourceFailure(
                'No software config store available for %s' % self.name)
        config_id = self.config_id
        # same id again: a no-op
        store.create(config_id, project_id=self.stack.project_id,
                     **self._body())
        self.physical_id = config_id

    def update(self, prior, observed):
        # configs are immutable: a property change is a replacement
        if self.needs_replace(prior):
            raise exception.UpdateReplace(self.name)
        if observed is None or not self.physical_id:
            # the stored row went missing: store it again under its id
            self.create()

    def delete(self):
        store = self._store()
        if store is None:
            return
        config_id = self.physical_id or self.config_id
        store.delete(config_id)

    def needs_replace(self, prior):
        return any(prior.get(k) != self.properties.get(k)
                   for k in self.properties_schema)

    def drift(self, observed):
        # the stored row is immutable; only its absence is a difference
        return set()

    def get_attributes(self, observed):
        config = None
        if isinstance(observed, dict) and 'config' in observed:
            config = observed.get('config')
        elif self.physical_id:
            config = self.properties.get('config')
        return {'config': config}

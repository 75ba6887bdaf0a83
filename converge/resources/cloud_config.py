"""OS::Heat::CloudConfig: cloud-init cloud-config, stored as a config.

The ``cloud_config`` map is written out as YAML under a ``#cloud-config``
line and stored like any software config (group ``Heat::Ungrouped``), so a
server's ``user_data`` or a MultipartMime part can name it by id. Boot-time
only, hence immutable: any change replaces it (and so, as in Heat, every
server booted from it).
"""

import yaml

from converge.resources import properties as p
from converge.resources import software_config as sc

HEADER = '#cloud-config\n'


def render(cloud_config):
    """The config text of a cloud_config map."""
    return HEADER + yaml.safe_dump(cloud_config or {},
                                   default_flow_style=False)


class CloudConfig(sc.SoftwareConfig):
    properties_schema = {
        'cloud_config': p.Schema(
            p.MAP, 'Map representing the cloud-config data structure '
            'which will be formatted as YAML.'),
    }

    def _body(self):
        return dict(super()._body(), group='Heat::Ungrouped',
                    config=render(self.properties.get('cloud_config')))

    def get_attributes(self, observed):
        if isinstance(observed, dict) and 'config' in observed:
            return {'config': observed.get('config')}
        return {'config': self._body()['config'] if self.physical_id
                else None}

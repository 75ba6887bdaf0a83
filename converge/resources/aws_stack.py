"""AWS::CloudFormation::Stack: a nested stack whose template is named by
URL (TemplateURL), the child of OS::Heat::Stack's kind (nested.py).

converge fetches no URL: the client sends the template (the CLI reads a
local TemplateURL, relative to the template naming it, as it reads a
provider template), and the engine finds it in the files map.
"""

from converge.resources import nested
from converge.resources import properties as p

OUTPUTS = 'Outputs.'


class Stack(nested.Nested):
    properties_schema = {
        'TemplateURL': p.Schema(
            p.STRING, 'The URL of the nested stack\'s template (a local '
            'file, sent by the client).', required=True,
            update_allowed=True),
        'TimeoutInMinutes': p.Schema(
            p.INTEGER, 'The nested stack\'s timeout in minutes.',
            update_allowed=True, min=1),
        'Parameters': p.Schema(p.MAP, 'The nested stack\'s parameters.',
                               default={}, update_allowed=True),
    }
    attributes_schema = {}

    def child(self):
        return self._child(self.properties)

    @staticmethod
    def _child(values):
        params = values.get('Parameters')
        return {'template': None, 'path': values['TemplateURL'],
                'params': dict(params) if isinstance(params, dict) else {},
                'timeout': values.get('TimeoutInMinutes')}

    @classmethod
    def child_to_validate(cls, values):
        if not isinstance(values.get('TemplateURL'), str):
            return None
        return cls._child(values)

    @classmethod
    def has_attribute(cls, name):
        # Outputs.<name>: the child's output (its template is not read
        # here: the child's validation names a wrong one)
        return name.startswith(OUTPUTS) and len(name) > len(OUTPUTS)

    def attributes_from(self, outputs, observed):
        return {OUTPUTS + k: v for k, v in outputs.items()}

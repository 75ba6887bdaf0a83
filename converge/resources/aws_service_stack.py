"""What AWS::RDS::DBInstance and AWS::ElasticLoadBalancing::LoadBalancer
share: each is, as in Heat, a nested stack of its own built from a
template shipped with converge (converge/resources/templates/), whose
server does the service's work; its outputs are the resource's
attributes.

Like Heat's LoadBalancer, the child takes a few of the parent stack's
parameters by name (the key pair, the image, the flavor, the time to wait
for the server's signal): a template that declares ``KeyName`` gets its
key pair on the service's server too; one that does not, no key pair.
"""

import copy
import functools

from converge import template
from converge.resources import nested
from converge.resources import templates


@functools.lru_cache(maxsize=None)
def _parsed(name):
    return template.parse_text(templates.text(name), name)


class ServiceStack(nested.Nested):
    #: the shipped template's file name
    template_name = None
    #: the server resource of the template
    server = None
    #: the parent's parameters passed on by name
    passed = ()

    def template(self):
        """The child's template, as a map this call may change."""
        return copy.deepcopy(_parsed(self.template_name))

    def params(self):
        """The child's parameter values from the resource's properties."""
        return {}

    def _parent_params(self):
        return self.clients.stacks.parameters(self.stack)

    def child(self):
        tmpl = self.template()
        params = self.params()
        given = self._parent_params()
        for name in self.passed:
            if name in given and name in tmpl['Parameters']:
                params[name] = given[name]
        key = given.get('KeyName')
        if key:
            tmpl['Parameters']['KeyName'] = {'Type': 'String'}
            params['KeyName'] = key
            tmpl['Resources'][self.server]['Properties']['KeyName'] = {
                'Ref': 'KeyName'}
        return {'template': tmpl, 'path': None, 'params': params,
                'timeout': None}

    def attributes_from(self, outputs, observed):
        return {k: outputs.get(k) for k in self.attributes_schema}

"""Small resource types and resolution data for the template tests, so they
do not depend on the real plug-ins."""

from converge.resources import base
from converge.resources import properties as P


class Value(base.Resource):
    properties_schema = {'value': P.Schema(P.ANY)}
    attributes_schema = {'value': '', 'list': ''}


class Server(base.Resource):
    properties_schema = {
        'image': P.Schema(P.STRING, required=True),
        'count': P.Schema(P.INTEGER, default=1),
        'meta': P.Schema(P.MAP)}
    attributes_schema = {'ip': '', 'name': ''}


class Anything(base.Resource):
    allow_unknown_properties = True


class Registry:
    types = {'Test::Value': Value, 'Test::Server': Server,
             'OS::Heat::None': Anything}

    @classmethod
    def get(cls, name):
        return cls.types.get(name)


class Data:
    """What get_resource/get_attr read: fixed reference ids and attributes."""

    def __init__(self, attrs=None):
        self.attrs = attrs or {}

    def reference_id(self, name):
        return 'id-' + name

    def attributes(self, name):
        return self.attrs.get(name)

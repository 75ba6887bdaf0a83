"""A CloudFormation resource type run by the plug-in of the OpenStack
type it means: its properties (CloudFormation's names, checked against
its own schema) become that plug-in's, which does the work.

A subclass names the plug-in (``target``) and says how its properties
translate (``translate``); its ``properties_schema`` and
``attributes_schema`` are CloudFormation's (what the template and the
resource type catalogue see). Once made, the resource's properties are
the target's (the definition validates them through this class), and
so is the schema its steps compare them with.
"""

from converge.resources import properties as p


class Translated:
    #: the plug-in class that does the work
    target = None

    @classmethod
    def translate(cls, values, path):
        """The target's properties from validated CloudFormation ones
        (items may be UNKNOWN). `path`: the properties' path, for
        errors."""
        raise NotImplementedError

    #: keep the CloudFormation properties that are not update_allowed
    #: beside the target's (under their own names): a change of one
    #: replaces the resource, as in Heat, though the target never sees
    #: it (an AutoScalingGroup's AvailabilityZones)
    keeps_fixed = False

    @classmethod
    def _fixed(cls):
        return [k for k, s in sorted(cls.properties_schema.items())
                if not s.update_allowed] if cls.keeps_fixed else []

    @classmethod
    def validate_properties(cls, values, path=()):
        path = list(path)
        out = p.validate(cls.properties_schema, values, path=path,
                         allow_unknown=cls.allow_unknown_properties)
        if not isinstance(out, dict):
            return out
        target = cls.target.validate_properties(cls.translate(out, path),
                                                path)
        if isinstance(target, dict):
            # every one, None too: a row without the key is older than
            # this, not a value added since
            target.update((k, out.get(k)) for k in cls._fixed())
        return target

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        # the steps compare (needs_replace, drift) the target's properties
        self.properties_schema = self.target.properties_schema

    def needs_replace(self, prior):
        for key in self._fixed():
            if key in prior and prior[key] != self.properties.get(key):
                return True
        return super().needs_replace(prior)


def known(value):
    return value is not None and value is not p.UNKNOWN


def key_values(items):
    """CloudFormation's [{Key: k, Value: v}, ...] as a map."""
    if not isinstance(items, list):
        return items
    return {i['Key']: i.get('Value') for i in items
            if isinstance(i, dict) and known(i.get('Key'))}


KEY_VALUE = p.Schema(p.LIST, 'Key/value pairs.', schema={
    'Key': p.Schema(p.STRING, 'The key.', required=True),
    'Value': p.Schema(p.ANY, 'The value.', required=True)})

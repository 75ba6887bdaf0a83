"""OS::Heat::None: a stand-in that accepts anything and does nothing.

Handy to stub a resource out through the environment's resource_registry:
it takes any properties, every attribute reads as None, and a change of
its properties is no update at all (as Heat's: no events, its status
kept; never a replacement).

This module also holds two small naming helpers shared by the plug-ins in
this package (Heat's ``physical_resource_name`` and ``short_id``).
"""

import base64
import functools
import uuid as uuid_mod

from converge.resources import base


def short_id(source):
    """A 12-character, lower-case, base32 id derived from a UUID.

    Built from the 60 bits of the UUID's ``time`` field (random in a v4
    UUID), like the ids Heat puts at the end of physical names.
    """
    try:
        u = source if isinstance(source, uuid_mod.UUID) else \
            uuid_mod.UUID(str(source))
        bits = u.time
    except (ValueError, TypeError, AttributeError):
        bits = uuid_mod.uuid5(uuid_mod.NAMESPACE_OID, str(source)).time
    raw = (bits << 4).to_bytes(8, 'big')
    return base64.b32encode(raw)[:12].decode('ascii').lower()


def physical_resource_name(resource, limit=None):
    """``<stack name>-<resource name>-<short id>``, cut down to `limit`.

    When too long, the first two characters and the tail are kept (so the
    short id, which makes it unique, always survives).
    """
    stack_name = getattr(resource.stack, 'name', None) or 'stack'
    name = '%s-%s-%s' % (stack_name, resource.name, short_id(resource.uuid))
    if limit and len(name) > limit:
        if limit < 4:
            raise ValueError('limit cannot be less than 4')
        name = '%s-%s' % (name[:2], name[-(limit - 3):])
    return name


# pure, and asked for again and again (a deployment's id on every step
# of every unit): uuid5's hashing was 5% of a deployment unit
@functools.lru_cache(maxsize=65536)
def derived_uuid(source, salt=''):
    """A stable UUID derived from `source` (a resource's uuid)."""
    return str(uuid_mod.uuid5(uuid_mod.NAMESPACE_URL,
                              'converge:%s:%s' % (salt, source)))


class NoneResource(base.Resource):
    """Accepts any properties; every attribute is None; never replaced."""

    allow_unknown_properties = True
    #: every attribute name is acceptable in get_attr (reads as None)
    allow_unknown_attributes = True
    logical = True

    properties_schema = {}
    attributes_schema = {}

    def create(self):
        self.physical_id = derived_uuid(self.uuid, 'none')

    def update(self, prior, observed):
        # always in place, and nothing to do
        if not self.physical_id:
            self.physical_id = derived_uuid(self.uuid, 'none')

    def delete(self):
        pass

    def needs_update(self, prior):
        return False

    def needs_replace(self, prior):
        return False

    def get_attributes(self, observed):
        return {}

    def get_attribute(self, name, *path):
        return None


class HARestarter(NoneResource):
    """OS::Heat::HARestarter: Heat removed it (10.0.0) and keeps it as a
    placeholder that does nothing, so that the stacks that have it still
    run; hidden from the type list."""

    support_status = 'HIDDEN'   # engine/catalog.py


class Named(base.Resource):
    """A logical resource whose physical id is its physical name (Heat's
    ``<stack>-<resource>-<short id>``) and that has nothing real to make,
    change or delete (OS::Heat::Value, OS::Converge::FactStore)."""

    logical = True

    def create(self):
        self.physical_id = physical_resource_name(self)

    def update(self, prior, observed):
        # nothing real to change; what is new is simply recorded
        if not self.physical_id:
            self.physical_id = physical_resource_name(self)

    def delete(self):
        pass

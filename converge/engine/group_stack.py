"""A deployment group's nested stack, as Heat's API shows it (read-only).

In Heat an OS::Heat::SoftwareDeploymentGroup owns a nested stack whose
resources are its members, and the group's physical id is that stack's
id: clients show it (`stack show <id>`), list its resources, show and
signal a member through it. converge keeps no stack row for it: the
members are the group's own deployments (its plug-in's ``members()``),
their events are kept under the group's physical id. This is the view
the service layer answers with when an id names no stack of the caller's
project but the group of one of its live stacks: found by one indexed
read (resources.physical_id, within the project), its state the group
row's (CREATE_IN_PROGRESS while the group creates, ...), its parent the
group's stack. Once the group's stack is deleted, or the group itself,
the view is gone (Heat: the nested stack is not found).
"""

import dataclasses

import sqlalchemy as sa

from converge import exception
from converge.db import models
from converge.engine import software
from converge.engine import views

_R, _S = models.Resource, models.Stack


@dataclasses.dataclass
class GroupStack:
    """The nested stack of the group `row` of the stack `parent`."""

    id: str
    name: str
    parent: object       # the group's stack (a Stack row)
    row: object          # the group's resource row
    members: list        # as the plug-in's members() lists them

    def show(self, with_outputs=True):
        """Heat's stack show fields; it has no parameters nor outputs of
        its own that a user gave."""
        data = {
            'id': self.id, 'stack_name': self.name, 'description': '',
            'creation_time': views.iso(self.row.created_at),
            'updated_time': views.iso(self.row.updated_at),
            'deletion_time': None,
            'stack_status': '%s_%s' % (self.row.action, self.row.status),
            'stack_status_reason': self.row.status_reason,
            'disable_rollback': True,
            'timeout_mins': self.parent.timeout_mins,
            'tags': None, 'project': self.parent.project_id,
            'parent': self.parent.id, 'parameters': {}}
        if with_outputs:
            data['outputs'] = []
        return data

    def resource_rows(self, parent_resource=None):
        """The members as the service's resource_list rows."""
        return member_rows(self.id, self.name, self.members,
                           parent_resource)

    def member(self, name):
        for m in self.members:
            if m['resource_name'] == name:
                return m
        raise exception.ResourceNotFound(self.name, name)

    def resource_detail(self, name):
        """Heat's resource show of one member."""
        m = self.member(name)
        return {
            'resource_name': name, 'logical_resource_id': name,
            'physical_resource_id': m['physical_resource_id'],
            'resource_type': m['resource_type'],
            'resource_status': '%s_%s' % (m['action'], m['status']),
            'resource_status_reason': m['status_reason'],
            'creation_time': views.iso_ts(m['updated_at']),
            'updated_time': views.iso_ts(m['updated_at']),
            'required_by': [], 'requires': [],
            'attributes': m['attributes'],
            'properties': m.get('properties') or {},
            'description': ''}

    def resource_details(self):
        """What a listing with detail adds to each member."""
        return {m['resource_name']: {
            'attributes': m['attributes'],
            'properties': m.get('properties') or {},
            'description': '', 'required_by': []} for m in self.members}

    def signal(self, engine, name, details=None):
        """Heat's signal to a member: its deployment's run in progress
        completes with `details` as its server's signal would (none:
        success), once; a member not running (done already, its batch
        not come) is left as it is. resource_signal's record."""
        m = self.member(name)
        if m['physical_resource_id'] and m['status'] == 'IN_PROGRESS':
            answer = software.complete(engine, m['physical_resource_id'],
                                       details)
        else:
            answer = {'accepted': False, 'reason': (
                'member %s is %s_%s' % (name, m['action'], m['status']))}
        return {'status': 'SIGNALLED' if answer['accepted'] else 'IGNORED',
                'reason': answer['reason'], 'capacity': None,
                'stack_id': self.id, 'traversal_id': None}


def member_rows(stack_id, stack_name, members, parent_resource):
    """A group's members as the service's resource_list rows."""
    return [{'resource_name': m['resource_name'],
             'physical_resource_id': m['physical_resource_id'],
             'resource_type': m['resource_type'],
             'resource_status': '%s_%s' % (m['action'], m['status']),
             'resource_action': m['action'],
             'resource_status_reason': m['status_reason'],
             'drift': None, 'observed_time': None,
             'updated_time': views.iso_ts(m['updated_at']),
             'creation_time': views.iso_ts(m['updated_at']),
             'stack_name': stack_name, 'stack_id': stack_id,
             'parent_resource': parent_resource}
            for m in members]


_FIND = sa.select(_R, _S).join(_S, _S.id == _R.stack_id).where(
    _R.physical_id == sa.bindparam('b_id'),
    _S.project_id == sa.bindparam('b_project'),
    _S.deleted_at.is_(None)).order_by(_R.id.desc()).limit(1)


def find(engine, project_id, ident):
    """The nested stack `ident` (an id) of a deployment group in one of
    the project's live stacks, or None."""
    if not views.is_uuid(ident):
        return None
    with engine.db.read() as s:
        found = s.execute(_FIND, {'b_id': str(ident).lower(),
                                  'b_project': project_id}).first()
    if found is None:
        return None
    row, parent = found
    if row.action == 'DELETE' and row.status == 'COMPLETE':
        return None
    nested = views.nested(engine, parent, row)
    if nested is None or nested[0] != row.physical_id:
        return None
    return GroupStack(nested[0], nested[1], parent, row, nested[2])

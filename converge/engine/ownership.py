"""Physical ids that enter from outside: `stack adopt`'s file (its
``resource_id`` and ``resource_data``) and a template's ``external_id``.

Such an id is taken over only when the requesting project owns what it
names, asked with that project's own credentials (each plug-in's
``owned()``): on a real cloud a GET with the project's token, which 404s
for another project's object; on the simulated cloud the same answer
from the project it records per object and per server; for what the
engine itself keeps (software configs and deployments, wait condition
handles, nested stacks) the project the engine recorded. Otherwise the
request is refused, naming the resource and the id, before anything is
stored: adopting another project's server would let the adopter read its
user data (its agent's credential), run deployments on it and delete it
while its own stack still shows it.

Heat checks neither: its handle_adopt sets the resource id the file
gives and nothing more, and two stacks may then hold one object (the
first delete removes it from under the other). converge refuses that
too (`check_unheld`): an id a live stack's resource of the same type
holds is not adopted a second time; the stack named is the one to
abandon first. An external_id is exempt (its resource is Retain: never
deleted, changed or run on), as in Heat.
"""

import sqlalchemy as sa

from converge import exception
from converge.db import api
from converge.db import models
from converge.resources import base


def check(engine, stack_id, stack_name, project_id, cloud, entries,
          key='resource_id', source=None, line_of=None):
    """Refuse the first of `entries` ({resource name: (plug-in class,
    type, physical id, data)}) whose physical id the project does not
    own: exception.InvalidTemplate at resources.NAME.`key` (of
    `source`, at the line `line_of(path)` gives). An external_id (`key`)
    may name what the project only sees (a shared network): it is only
    read. A cloud that cannot answer now raises its CloudTransient."""
    if not entries:
        return
    info = base.StackInfo(stack_id, stack_name, project_id)
    info.cloud = cloud
    clients = engine.clients.for_stack(cloud, project_id)
    for name, (cls, rtype, physical_id, data) in sorted(entries.items()):
        if cls is None:
            continue
        plugin = cls(name, {}, stack=info, uuid=api.new_id(),
                     physical_id=physical_id, data=data, clients=clients)
        try:
            owned = plugin.owned(shared=key == 'external_id')
        except exception.CloudTransient:
            raise
        except exception.CloudError:
            owned = False   # refused to this project: not its own
        if not owned:
            path = ['resources', name, key]
            raise exception.InvalidTemplate(
                '%s %s could not be found in project %s: only what the '
                'project itself owns can be taken over' % (
                    rtype, physical_id, project_id),
                path=path, filename=source,
                line=line_of(path) if line_of else None)


def check_unheld(session, entries, project_id, source=None):
    """Refuse (exception.Conflict) the first of `entries` whose physical
    id a resource of the same type of a live stack holds already."""
    wanted = {(rtype, physical_id): name for name, (_, rtype, physical_id,
                                                    _) in entries.items()}
    if not wanted:
        return
    R, S = models.Resource, models.Stack
    found = session.execute(
        sa.select(R.name, R.type, R.physical_id, S.id, S.name,
                  S.project_id)
        .join(S, S.id == R.stack_id)
        .where(R.physical_id.in_(sorted({p for _, p in wanted})),
               S.deleted_at.is_(None))).all()
    for rname, rtype, physical_id, sid, sname, sproject in sorted(found):
        name = wanted.get((rtype, physical_id))
        if name is None:
            continue
        holder = '%s of stack %s' % (rname, sname) \
            if sproject == project_id else 'another stack\'s resource'
        raise exception.Conflict(
            '%s: %s %s is held by %s already: two stacks must not manage '
            'one object (abandon that stack first)' % (
                '%s: resources.%s.resource_id' % (source, name) if source
                else 'resources.%s' % name, rtype, physical_id, holder))

"""Resources that own a nested stack: a provider template's (a template
file used as a resource type) and OS::Heat::Stack.

The plug-in never walks the child itself: it asks the engine
(``self.clients.stacks``, engine/nested.py) to create, update or delete
the child stack, whose resources then converge on the same workers as
the parent's, and waits for the child's traversal to end without holding
a thread (a `Wait` on the child's event, sent when the child's traversal
ends, with a slow poll behind it). The child's outputs are the
resource's attributes.

What the child is built from (its template, parameters, the resource's
metadata and policies for ``resource_facade``) is digested: the resource
is updated when that digest differs from the one it last applied, so a
change inside a provider file or the environment reaches the child even
when no property changed.
"""

from converge import exception
from converge import reasons
from converge.resources import base
from converge.resources import properties as p
from converge.template import formats

#: seconds between looks at a child whose end was not announced (a lost
#: wake); the wake itself comes at once
RECHECK = 5.0
#: the plug-in data key of the digest last applied to the child
APPLIED = 'applied'
#: the plug-in data key of the child traversal this resource waits for
TRAVERSAL = 'traversal'
#: the plug-in data key of the last `stack converge` passed to the child
CONVERGED = 'converged'
#: the plug-in data key of the last check, suspend or resume asked of
#: the child (action:traversal)
ASKED = 'asked'
#: the plug-in data key where `stack adopt` leaves what its file records
#: of the child's own resources (engine/abandon.py): the child is made
#: by adopting them, once
ADOPTING = 'adopting'
#: the plug-in data key of the child's outputs that had an error: name
#: -> why (an attribute read from one is that error, Heat's)
OUTPUT_ERRORS = 'output_errors'


def attribute_error(row, attribute):
    """Why the resource of `row` (a stored row) has no value for
    `attribute`: its nested stack's output of that name had an error;
    else None."""
    data = getattr(row, 'data', None)
    if not isinstance(data, dict):
        return None
    return (data.get(OUTPUT_ERRORS) or {}).get(attribute)


class Nested(base.Resource):
    """What a resource owning a child stack does; subclasses say what the
    child is built from (`child`)."""

    #: the engine passes the resource's resolved metadata and deletion
    #: policy (``resource_facade`` in the child reads them)
    wants_facade = True
    deletion_policy = 'Delete'
    built_from_files = True

    def child(self):
        """{'template': dict or text, 'params': {...}, 'timeout': mins or
        None}: what the child stack is made of."""
        raise NotImplementedError

    @classmethod
    def child_to_validate(cls, values):
        """The child (as `child` gives it) made of the property values
        known before anything is created, for validation; None when its
        template is not known yet."""
        return None

    def _desired(self):
        child = dict(self.child())
        child['facade'] = self._facade()
        return child

    def _digest(self, child):
        return self.clients.stacks.digest(self.stack, self.name, child)

    def _facade(self):
        return {'metadata': self.metadata or {},
                'update_policy': self.update_policy or {},
                'deletion_policy': self.deletion_policy}

    # -- steps ----------------------------------------------------------
    def owned(self, shared=False):
        found = self.clients.stacks.status(self.physical_id)
        return found is not None and not found['deleted'] and \
            found['project_id'] == self.stack.project_id

    def observe(self):
        if not self.physical_id:
            return None
        found = self.clients.stacks.status(self.physical_id)
        if found is None or found['deleted']:
            return None
        return found

    def create(self):
        if not self.physical_id:
            child = self._desired()
            self.physical_id, trav = self.clients.stacks.create(
                self.stack, self.name, self.uuid, child,
                adopt=self.data.pop(ADOPTING, None))
            self.data[APPLIED] = self._digest(child)
            self.data[TRAVERSAL] = trav
        return self._until_done('CREATE')

    def update(self, prior, observed):
        return self._apply(self._desired(), observed)

    def _apply(self, child, observed=None):
        """Converge the child to `child` (asked once per change: a unit
        coming back from its own wait finds it asked), then wait for
        it."""
        wanted = self._digest(child)
        if self.data.get(APPLIED) != wanted or (
                observed and observed['status'] == 'FAILED' and
                self.data.get(TRAVERSAL) == observed['traversal']):
            self._push(child)
            self.data[APPLIED] = wanted
        elif self._converge_pending() and not (
                observed and observed['status'] == 'IN_PROGRESS' and
                self.data.get(TRAVERSAL) == observed['traversal']):
            # `stack converge` reaches the child: walked again against
            # reality (a running child is sent on in _until_done)
            self.data[CONVERGED] = self.stack.converging
            self.data[TRAVERSAL] = self.clients.stacks.converge(
                self.physical_id)
        return self._until_done('UPDATE')

    def _converge_pending(self):
        """This unit walks a `stack converge` not yet passed down."""
        return bool(self.stack.converging) and \
            self.data.get(CONVERGED) != self.stack.converging

    def _push(self, child, only=None, converge=False):
        """Start the child's update to `child` (walking only the
        resources named in `only`, if given; else a whole walk of it: a
        `stack converge` under way needs nothing more); with `converge`,
        against reality (a nested stack it walks is walked again)."""
        self.data[TRAVERSAL] = self.clients.stacks.update(
            self.physical_id, self.stack, self.name, child, only=only,
            converge=converge)
        if self.stack.converging and only is None:
            self.data[CONVERGED] = self.stack.converging

    def delete(self):
        if not self.physical_id:
            return None
        found = self.clients.stacks.status(self.physical_id)
        if found is None or found['deleted']:
            return None
        if found['action'] != 'DELETE' or found['status'] == 'FAILED':
            self.data[TRAVERSAL] = self.clients.stacks.delete(
                self.physical_id)
        return self._until_done('DELETE')

    def suspend(self, observed):
        """Heat's order: the child is suspended with its owner (its own
        resources dependents first)."""
        return self._again('SUSPEND')

    def resume(self, observed):
        return self._again('RESUME')

    def _again(self, action):
        found = self.clients.stacks.status(self.physical_id)
        if found is None or found['deleted']:
            raise exception.ResourceFailure(
                'nested stack %s is gone' % self.physical_id)
        asked = '%s:%s' % (action, self.stack.traversal_id)
        if found['action'] != action or \
                found['traversal'] != self.data.get(TRAVERSAL) or \
                (action == 'CHECK' and self.data.get(ASKED) != asked):
            # (a check is one per walk of this stack: a second `stack
            # check` checks again)
            self.data[TRAVERSAL] = self.clients.stacks.again(
                self.physical_id, action)
            self.data[ASKED] = asked
        return self._until_done(action)

    def check(self, observed):
        """Heat's stack check reaches nested stacks: the child's
        resources are checked in turn (a deployment runs its CHECK
        config, if it has one)."""
        super().check(observed)
        return self._again('CHECK')

    def _until_done(self, action):
        """None once the child's traversal for `action` completed; a Wait
        while it runs; the child's failure as this resource's."""
        found = self._child_end(action)
        if isinstance(found, base.Wait) or found is None:
            return found
        if found['status'] == 'FAILED':
            # Heat's: the failed resource's class and message, its path
            # carried down (resources.NAME.resources.INNER)
            raise reasons.nested_failure(found['reason'])
        return None

    def _child_end(self, action, settled=False):
        """The child's state once the traversal this resource started
        ended (COMPLETE or FAILED); None once a deleted child is gone; a
        Wait while it runs. `settled`: a child FAILED while its own
        nested stacks in flight run on is waited for until they end too
        (a rollout counts its members' outcomes)."""
        found = self.clients.stacks.status(self.physical_id)
        if action == 'DELETE' and (found is None or found['deleted']):
            return None
        if found is None:
            raise exception.ResourceFailure(
                'nested stack %s is gone' % self.physical_id)
        ours = found['traversal'] == self.data.get(TRAVERSAL)
        child = self.physical_id
        if ours and settled and found.get('draining'):
            trav = found['traversal']
            return base.Wait(
                after=RECHECK, event=self.clients.stacks.event(child),
                reason='waiting for nested stack %s: its members in '
                'flight run on' % found['name'],
                still=lambda conn: self.clients.stacks.draining(
                    conn, child, trav))
        if ours and found['status'] in ('COMPLETE', 'FAILED'):
            self.seen = found
            return found
        if self._converge_pending():
            # `stack converge` of the parent after a worker died: what
            # it left of the child is sent again now, not after the
            # sweeper's stall timeout
            self.data[CONVERGED] = self.stack.converging
            self.clients.stacks.resend(child)
        trav = self.data.get(TRAVERSAL)
        return base.Wait(
            after=RECHECK, event=self.clients.stacks.event(child),
            reason='waiting for nested stack %s' % found['name'],
            still=lambda conn: self.clients.stacks.running(conn, child,
                                                           trav))

    def changed(self):
        """What the child was last built from is not what it should be
        now: a provider file, a file it reads, the environment or the
        owner's metadata changed; or a `stack converge` is to reach the
        child."""
        return self._converge_pending() or \
            self.data.get(APPLIED) != self._digest(self._desired())

    observed_drift = False

    def drift(self, observed):
        """The child's last traversal failed."""
        if observed and observed['status'] == 'FAILED':
            return {'status'}
        return set()

    # -- what the parent sees -------------------------------------------
    def get_attributes(self, observed):
        return self.attributes_from(self._child_outputs(), observed)

    def _child_outputs(self):
        """The child's outputs; those that had an error are kept in
        the plug-in data (attribute_error)."""
        errors = {}
        outputs = self.clients.stacks.outputs(self.physical_id,
                                              errors=errors) \
            if self.physical_id else {}
        if errors:
            self.data[OUTPUT_ERRORS] = errors
        else:
            self.data.pop(OUTPUT_ERRORS, None)
        return outputs

    def attributes_from(self, outputs, observed):
        raise NotImplementedError

    def nested_stack_id(self):
        return self.physical_id

    def nested_stack_name(self):
        found = self.physical_id and self.clients.stacks.status(
            self.physical_id)
        return found['name'] if found else None

    def members(self):
        if not self.physical_id:
            return None
        return self.clients.stacks.members(self.physical_id)

    def reference_id(self):
        return self.physical_id or self.name


class StackResource(Nested):
    """OS::Heat::Stack: a stack described inline (its template as text or
    a map) with its parameters. Heat's can reach another region; here the
    child lives in this engine: a ``context`` region_name other than
    [cloud] region_name is refused."""

    properties_schema = {
        'template': p.Schema(p.ANY, 'The nested stack\'s template: HOT as '
                             'text, or a map.', required=True,
                             update_allowed=True),
        'parameters': p.Schema(p.MAP, 'Its parameters.', default={},
                               update_allowed=True),
        'timeout': p.Schema(p.INTEGER, 'Its timeout in minutes.',
                            update_allowed=True, min=1),
        'context': p.Schema(p.MAP, 'Where it lives (region_name); only '
                            'this engine is supported.', default={}),
    }
    attributes_schema = {
        'stack_name': 'The nested stack\'s name.',
        'outputs': 'The nested stack\'s outputs, by name.',
    }

    @classmethod
    def validate_more(cls, values, path):
        # the child is made here: a region other than the one this
        # converge serves would be a promise it cannot keep (Heat's words
        # for a region its catalog lacks)
        from converge import conf
        context = values.get('context')
        region = context.get('region_name') if isinstance(context, dict) \
            else None
        own = conf.CONF.cloud.region_name
        if isinstance(region, str) and region and own and region != own:
            raise exception.ResourceInvalid(
                'Cannot establish connection to Heat endpoint at region '
                '"%s" due to "public endpoint for orchestration service in '
                '%s region not found" (this converge makes nested stacks '
                'in region %s only)' % (region, region, own),
                path=list(path) + ['context', 'region_name'])
        return values

    def child(self):
        return {'template': self.properties['template'],
                'params': dict(self.properties.get('parameters') or {}),
                'timeout': self.properties.get('timeout')}

    @classmethod
    def child_to_validate(cls, values):
        tmpl, params = values.get('template'), values.get('parameters')
        if not isinstance(tmpl, (str, dict)):
            return None
        return {'template': tmpl,
                'params': params if isinstance(params, dict) else {}}

    def attributes_from(self, outputs, observed):
        return {'stack_name': (observed or {}).get('name') or
                self.nested_stack_name(),
                'outputs': outputs}


class TemplateResource(Nested):
    """A provider template used as a resource type (``type: x.yaml`` or a
    resource_registry entry): its properties are the file's parameters,
    its attributes the file's outputs (plus ``OS::stack_id``). The
    definition makes a subclass per file with that schema
    (template/providers.py); this class alone serves the steps that need
    no schema (delete, show)."""

    allow_unknown_properties = True
    #: the provider file (its files-map key) and its parsed template
    provider = None
    provider_template = None

    #: why this provider cannot stand for the type it overrides (Heat's
    #: facade check, template/providers.py), or None
    facade_error = None

    def create(self):
        self._check_facade()
        return super().create()

    def update(self, prior, observed):
        self._check_facade()
        return super().update(prior, observed)

    def _check_facade(self):
        if self.facade_error:
            raise exception.ResourceFailure(self.facade_error)

    def child(self):
        params = {k: v for k, v in self.properties.items() if v is not None}
        return {'template': self.provider_template, 'path': self.provider,
                'params': params, 'timeout': None}

    @classmethod
    def child_to_validate(cls, values):
        if cls.provider_template is None:
            return None
        return {'template': cls.provider_template, 'path': cls.provider,
                'params': dict(values)}

    #: the attributes ``resource.NAME[.X]`` the parent's template reads
    #: of this resource (the engine sets them: definition's
    #: referenced_attributes): only those nested resources' attributes
    #: are copied into this resource's own
    member_reads = ()
    #: the child's outputs as get_attributes last read them
    _outputs = None

    @classmethod
    def has_attribute(cls, name):
        """Any name, as Heat's validation takes it (an attribute of a
        type whose attributes are computed): an output the provider's
        template no longer has (an update replacing the file) reads
        None, as does a resource.NAME of no nested resource NAME."""
        return True

    @classmethod
    def attribute_names(cls):
        outputs = formats.section(cls.provider_template, 'outputs') or {}
        return set(outputs) | {'OS::stack_id', 'show'}

    def get_attributes(self, observed):
        self._outputs = self._child_outputs()
        return self.attributes_from(self._outputs, observed)

    def attributes_from(self, outputs, observed):
        values = {k: v for k, v in outputs.items()}
        # the child's id unless its template says otherwise (Heat has
        # only the output)
        values.setdefault('OS::stack_id', self.physical_id)
        values.update(self._member_attributes())
        return values

    def _member_attributes(self):
        """Heat's ``resource.NAME`` (the nested resource NAME's
        reference id) and ``resource.NAME.X`` (its attribute X), for the
        NAMEs the parent's template reads."""
        wanted = {member_of(a) for a in self.member_reads} - {None}
        if not wanted:
            return {}
        values = {}
        for m in self.members() or ():
            if m['resource_name'] not in wanted:
                continue
            key = 'resource.%s' % m['resource_name']
            values[key] = m['reference_id']
            for x, v in (m['attributes'] or {}).items():
                values['%s.%s' % (key, x)] = v
        return values

    def reference_id(self):
        """Heat's: the child's ``OS::stack_id`` output when its
        template has one, else the child's ARN."""
        if not self.physical_id:
            return self.name
        outputs = self._outputs
        declared = formats.section(self.provider_template or {},
                                   'outputs') or {}
        if 'OS::stack_id' in declared:
            if outputs is None:
                outputs = self.clients.stacks.outputs(self.physical_id)
            if outputs.get('OS::stack_id') is not None:
                return outputs['OS::stack_id']
        name = (self.seen or {}).get('name') or self.nested_stack_name()
        return 'arn:openstack:heat::%s:stacks/%s/%s' % (
            self.stack.project_id, name, self.physical_id)


def member_of(attribute):
    """The nested resource NAME of an attribute ``resource.NAME`` or
    ``resource.NAME.X`` (Heat's split), else None."""
    if not isinstance(attribute, str) or \
            not attribute.startswith('resource.'):
        return None
    return attribute.split('.', 2)[1] or None

"""The secrets of a stack, gathered for masking what leaves the engine
(converge/masking.py): its hidden parameters' values, and, for a caller
who may not act as its agents or signal it, the credentials it handed
out.

A stack's secrets are those of its whole tree (its root and every stack
nested in it): a hidden value of the parent flows into a nested stack's
parameters, and a nested stack's outputs flow up. Every template version
the tree has stored counts, not only the current one: an older value is
still in older events and rows.
"""

import json
import threading

import sqlalchemy as sa

from converge import lazy
from converge import masking
from converge.db import models
from converge.drivers import tokens
from converge.resources import base
from converge.resources import registry

# imported at first use (converge/lazy.py): a read-only CLI command,
# a process of its own, builds an engine and uses none of these (issue 41)
transport_credentials = lazy.module('converge.transports.credentials')
formats = lazy.module('converge.template.formats')

_TRUE = ('true', 'yes', 'on', '1', 't', 'y')

#: template id -> its hidden values (template rows never change)
_CACHE = {}
_CACHE_MAX = 2048
_LOCK = threading.Lock()


def hidden_values(template, environment=None, params=None):
    """The values (as given, defaults too) of the parameters `template`
    declares hidden, from `params` and the environment's parameters and
    parameter_defaults: raw documents, so this works where no definition
    could be made (the error that says why may quote the value)."""
    env = environment if isinstance(environment, dict) else {}
    sources = [params or {}, env.get('parameters') or {},
               env.get('parameter_defaults') or {}]
    found = []
    for name, ptype, default in _hidden(template):
        given = [s[name] for s in sources
                 if isinstance(s, dict) and name in s]
        if default is not _NONE:
            given.append(default)
        for value in given:
            found.append(value)
            if isinstance(value, str) and ptype in (
                    'comma_delimited_list', 'CommaDelimitedList'):
                found.extend(v.strip() for v in value.split(','))
            elif isinstance(value, str) and ptype in ('json', 'Json'):
                try:
                    found.append(json.loads(value))
                except ValueError:
                    pass
    return found


_NONE = object()


def _hidden(template):
    """(name, type, default or _NONE) of each parameter `template` (a raw
    document, either format) hides: HOT's ``hidden``, CloudFormation's
    ``NoEcho``."""
    fmt = formats.of(template)
    decl = formats.section(template, 'parameters')
    keys = ('NoEcho', 'Type', 'Default') if fmt.is_cfn else \
        ('hidden', 'type', 'default')
    for name, schema in (decl.items() if isinstance(decl, dict) else ()):
        if not isinstance(schema, dict):
            continue
        hidden = schema.get(keys[0])
        if isinstance(hidden, str):
            hidden = hidden.strip().lower() in _TRUE
        if hidden is True:
            yield name, schema.get(keys[1]), schema.get(keys[2], _NONE)


def bundle_values(bundle, params=None):
    """hidden_values of a bundle (converge.template's, or its stored
    dict) and the parameters given with it."""
    if bundle is None:
        return []
    if isinstance(bundle, dict):
        return hidden_values(bundle.get('template'),
                             bundle.get('environment'), params)
    return hidden_values(getattr(bundle, 'template', None),
                         getattr(bundle, 'environment', None), params)


def _root(session, stack_id):
    seen = set()
    while stack_id not in seen:
        seen.add(stack_id)
        parent = session.scalar(sa.select(models.Stack.parent_id).where(
            models.Stack.id == stack_id))
        if not parent:
            return stack_id
        stack_id = parent
    return stack_id


def _tree(session, stack_id):
    """Every stack of `stack_id`'s tree, deleted ones too (their events
    are still shown)."""
    found, level = [stack_id], [stack_id]
    while level:
        level = [i for i in session.scalars(sa.select(models.Stack.id).where(
            models.Stack.parent_id.in_(level))) if i not in found]
        found += level
    return found


def _template_values(session, ids):
    values = []
    missing = []
    with _LOCK:
        for i in ids:
            if i in _CACHE:
                values.extend(_CACHE[i])
            else:
                missing.append(i)
    if missing:
        T = models.Template
        rows = session.execute(sa.select(T.id, T.bundle, T.parameters).where(
            T.id.in_(missing))).all()
        with _LOCK:
            if len(_CACHE) > _CACHE_MAX:
                _CACHE.clear()
            for tid, bundle, params in rows:
                found = bundle_values(bundle or {}, params or {})
                _CACHE[tid] = found
                values.extend(found)
    return values


def _derived_values(engine, session, tree):
    """What the tree's resources made of its hidden values (a property a
    yaql expression upper-cased), as their rows keep them: a plug-in's
    attribute may echo it, and masking by value then masks it too. Only
    texts of MIN_PART characters or more: a short derived value (a
    flavor chosen by comparing a secret) is no secret in itself."""
    found = []
    S, R = models.Stack, models.Resource
    for stack_id, template_id in session.execute(
            sa.select(S.id, S.template_id).where(S.id.in_(tree))):
        if template_id is None:
            continue
        keys = derived(engine, template_id, session)[0]
        if not keys:
            continue
        for name, props in session.execute(
                sa.select(R.name, R.properties).where(
                    R.stack_id == stack_id, R.name.in_(list(keys)))):
            for key in keys.get(name, ()):
                found.extend(v for v in masking.leaves((props or {}).get(
                    key)) if isinstance(v, str) and
                    len(v) >= masking.MIN_PART)
    return found


def _credentials(engine, session, tree):
    """The credentials the tree's resources handed out: its servers'
    agent tokens, and what its plug-ins name as credentials among their
    attributes (a wait condition handle's token, a scaling policy's
    alarm URL)."""
    agents = session.execute(sa.select(
        models.AgentCredential.agent_id, models.AgentCredential.server_id,
        models.AgentCredential.created_at).where(
        models.AgentCredential.stack_id.in_(tree))).all()
    found = [tokens.token_for(engine.db, a.agent_id) for a in agents]
    # and what Heat's transports hand out for them (transports/)
    found.extend(transport_credentials.of_servers(engine.db, session,
                                                  agents))
    R = models.Resource
    types = _credential_types()
    if not types:
        return found
    for type_name, attrs in session.execute(
            sa.select(R.type, R.attributes).where(
                R.stack_id.in_(tree), R.type.in_(types))):
        cls = registry.get(type_name)
        if cls is not None and attrs:
            found.extend(cls.credentials(attrs))
    return found


def _credential_types():
    """The resource types whose attributes hold credentials (only their
    rows are read)."""
    return sorted(
        name for name in registry.names()
        if (registry.get(name).credential_attributes or
            registry.get(name).credentials.__func__ is not
            base.Resource.credentials.__func__))


def stack_mask(engine, stack_id, credentials=False, session=None):
    """The Mask of `stack_id`'s tree; `credentials`: its handed-out
    credentials masked too (for a caller who may not have them)."""
    if session is None:
        with engine.db.read() as s:
            return stack_mask(engine, stack_id, credentials, s)
    tree = _tree(session, _root(session, stack_id))
    ids = list(session.scalars(sa.select(models.Template.id).where(
        models.Template.stack_id.in_(tree))))
    values = _template_values(session, ids)
    mask = masking.Mask(values, credentials=credentials)
    # a derived text that shows a secret is masked where it shows it; one
    # that shows none is masked whole
    made = [v for v in _derived_values(engine, session, tree)
            if mask.text(v) == v]
    mask.add(made)
    masking.remember(values + made)
    if credentials:
        mask.add(_credentials(engine, session, tree))
    return mask


def deployment_stacks(engine, deployment_ids):
    """deployment id -> the stack it belongs to (None: of no stack)."""
    if not deployment_ids:
        return {}
    D = models.SoftwareDeployment
    with engine.db.read() as s:
        return dict(s.execute(sa.select(D.id, D.stack_id).where(
            D.id.in_(list(deployment_ids)))).all())


def config_stacks(engine, config_ids):
    """software config id -> the stack whose resource made it (absent:
    made through the API, of no stack)."""
    if not config_ids:
        return {}
    R = models.Resource
    with engine.db.read() as s:
        return dict(s.execute(sa.select(R.physical_id, R.stack_id).where(
            R.physical_id.in_(list(config_ids)))).all())


# -- what a template derives from its hidden parameters ------------------------
# Masking by value misses a hidden value the template transformed (a
# yaql expression, a digest of it): Heat's rule masks what is derived
# from a hidden parameter whatever it became. A resource property (top
# level) or an output whose snippet reads a hidden parameter and whose
# value shows no mask once masked by value is masked whole.

_DERIVED = {}


def _hidden_names(template):
    return {name for name, _, _ in _hidden(template)}


def _reads(snippet, names):
    """Whether `snippet` reads one of the parameters `names` (get_param,
    or CloudFormation's Ref)."""
    if isinstance(snippet, dict):
        if len(snippet) == 1 and ('get_param' in snippet or
                                  'Ref' in snippet):
            arg = next(iter(snippet.values()))
            first = arg[0] if isinstance(arg, list) and arg else arg
            if isinstance(first, str) and first in names:
                return True
        return any(_reads(v, names) for v in snippet.values())
    if isinstance(snippet, list):
        return any(_reads(v, names) for v in snippet)
    return False


def derived(engine, template_id, session=None):
    """({resource: {top-level property names}}, {output names}) that the
    template version derives from its hidden parameters."""
    found = _DERIVED.get(template_id)
    if found is not None:
        return found
    if session is None:
        with engine.db.read() as s:
            return derived(engine, template_id, s)
    bundle = session.scalar(sa.select(models.Template.bundle).where(
        models.Template.id == template_id)) or {}
    tmpl = bundle.get('template') or {}
    names = _hidden_names(tmpl)
    resources, outputs = {}, set()
    if names:
        for rname, r in (formats.section(tmpl, 'resources') or {}).items():
            props = formats.field(tmpl, r, 'properties')
            keys = {k for k, v in (props or {}).items()
                    if _reads(v, names)} if isinstance(props, dict) \
                else set()
            if keys:
                resources[rname] = keys
        for oname, o in (formats.section(tmpl, 'outputs') or {}).items():
            if isinstance(o, dict) and _reads(
                    formats.field(tmpl, o, 'value'), names):
                outputs.add(oname)
    found = (resources, outputs)
    with _LOCK:
        if len(_DERIVED) > _CACHE_MAX:
            _DERIVED.clear()
        _DERIVED[template_id] = found
    return found


def masked_whole(value):
    """`value` if masking left a mask in it, else the mask: what is left
    of a value derived from a hidden parameter."""
    if value is None:
        return value
    text = value if isinstance(value, str) else json.dumps(value)
    return value if masking.MASK in text else masking.MASK

"""Parsed template versions, cached per process.

Template rows never change, so a version parsed once serves every unit of
work of its traversals. The cache is bounded by resources rather than by
versions: one 22,000-resource definition weighs what thousands of small
ones do.
"""

import collections
import threading

from converge import lazy
from converge import conf as conf_mod
from converge import masking
from converge.db import api

# imported at first use (converge/lazy.py): a read-only CLI command,
# a process of its own, builds an engine and uses none of these (issue 41)
template = lazy.module('converge.template')


def limits():
    """The template limits every parse is held to."""
    CONF = conf_mod.CONF
    return {'max_resources_per_stack': CONF.max_resources_per_stack,
            'max_nested_stack_depth': CONF.max_nested_stack_depth}


class Cache:
    def __init__(self, db):
        self._db = db
        self._defs = collections.OrderedDict()
        self._building = {}  # key -> lock held by the thread parsing it
        self._lock = threading.Lock()

    def get(self, template_id, stack):
        key = (template_id, stack.id)
        with self._lock:
            defn = self._defs.get(key)
            if defn is not None:
                self._defs.move_to_end(key)
                return defn
            building = self._building.setdefault(key, threading.Lock())
        # one thread parses, the others wait for it: at the start of a
        # traversal every worker thread misses at once, and eight parses of
        # a 22,000-resource template took a worker to 770 MB
        with building:
            with self._lock:
                defn = self._defs.get(key)
            if defn is None:
                defn = self._parse(template_id, stack)
                self.put(template_id, stack, defn)
        with self._lock:
            self._building.pop(key, None)
        return defn

    def _parse(self, template_id, stack):
        with self._db.read() as s:
            row = api.template_get(s, template_id)
            bundle = template.Bundle.from_dict(row.bundle)
            params = row.parameters
        return template.StackDefinition(
            bundle, params, stack_name=stack.name, stack_id=stack.id,
            project_id=stack.project_id, limits=limits(), stored=True)

    def put(self, template_id, stack, defn):
        # its hidden values are masked in this process's log lines
        masking.remember([defn.parameters[n] for n in
                          getattr(defn, 'hidden_parameters', ())])
        budget = conf_mod.CONF.definition_cache_resources
        with self._lock:
            self._defs[(template_id, stack.id)] = defn
            self._defs.move_to_end((template_id, stack.id))
            held = sum(len(d.resources) for d in self._defs.values())
            while len(self._defs) > 1 and held > budget:
                _, old = self._defs.popitem(last=False)
                held -= len(old.resources)

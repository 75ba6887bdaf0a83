"""OS::Converge::FactStore: the facts the servers of a stack publish, for
other servers' configuration to read (a data bag).

A server's deployment script writes ``${converge_facts_path}.KEY``; its
agent sends the facts with the deployment's signal, under its own
credential, and the engine keeps them for the stack at the top of the tree
(drivers/facts.py). Templates read them: ``get_attr: [facts, all]`` (every
fact, {key: value}) or ``[facts, all, KEY]`` (one). When a fact changes,
the stack is updated once it is not in progress (an observer does it), so
the deployments that read the fact run again, and only those: members of
a cluster that need each other's data converge without a dependency
cycle.
"""

from converge.resources import none


class FactStore(none.Named):
    properties_schema = {}
    #: its facts change with no template change: an update reads them
    #: again (and so visits what reads them)
    always_visit = True
    attributes_schema = {
        'all': 'Every fact the stack\'s servers published, as a map of '
               'key to value ({} before the first).',
    }

    def get_attributes(self, observed):
        # read at each visit: the facts change without a template change
        return {'all': self.clients.facts.all(self.stack.id)}

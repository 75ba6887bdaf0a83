from tests.test_rollout import _members, et, stacks, budget, _group_notes
def test_dbg(engine, budget):
    stack = et.run(engine, stacks.create, 'b', budget, {})
    stack = et.run(engine, stacks.update, stack.id, budget,
                   {'stamp': 'two', 'bad': '3', 'max_failures': '1'})
    if et.status(stack) != 'UPDATE_COMPLETE':
        rows, child = _members(engine, stack, 'group')
        for n, r in sorted(rows.items()):
            print('ROW', n, r.action, r.status, r.status_reason)
        for e in et.events(engine, child.id):
            print('EV', e.resource_name, e.action, e.status, (e.reason or '')[:120])
        assert 0

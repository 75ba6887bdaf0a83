"""Observers: what is really there, compared with what was applied.

The reconcile loop observes each resource it works on. `drift.scan` does
the same for a whole stack without acting, so drift is seen before
`converge stack converge` repairs it.
"""

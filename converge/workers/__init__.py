"""Units of work: the reconcile loop, the graph walker, messaging, locks."""

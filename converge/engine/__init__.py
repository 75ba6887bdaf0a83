"""Stack operations and the per-process engine context."""

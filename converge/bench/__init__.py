"""converge-bench: how fast the embedded engine walks generated graphs.

``scenarios`` makes the templates, ``measure`` holds the arithmetic and the
instrumentation, ``cli`` runs them and prints one row per run.
"""

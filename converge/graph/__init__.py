"""Graph building: resource dependencies and traversal plans (networkx).

Nothing here walks a graph or knows what a resource does; the walker
(converge/workers/walker.py) knows nothing of resources.
"""

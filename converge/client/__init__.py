"""A client of converge-api: the service interface of
converge/engine/service.py spoken over HTTP, for the `converge` CLI in
remote mode (--os-url). It imports nothing of the engine but its
exceptions: the CLI's commands call it as they call the local service.
"""

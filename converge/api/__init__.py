"""converge-api: the HTTP service (WSGI). Today the agents' routes; Heat's
REST API joins them on the same service (issue 14)."""

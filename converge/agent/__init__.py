"""The agent that runs software deployments on a server (docs/software.md)."""

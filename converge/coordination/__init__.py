"""Locks and membership across every process of a deployment: tooz on
the configured backend (`locks.py`), with resource locks of its own on
files (`filelocks.py`, embedded) and Redis (`redislocks.py`)."""

"""Resource type plug-ins (see base.py for the contract)."""

"""Command-line entry points (cliff)."""

"""Metrics: one per module, registered by ``key`` (see registry.py)."""

"""trace-scorer."""

"""Scoring samples: a target's plan, the pipeline that runs it, the judge and embedder it uses."""

"""The Python API (docs/python-api.md): `score`/`ascore` over samples, and evaluators for the
Langfuse SDK's experiments. Its names are imported from `trace_scorer` itself."""

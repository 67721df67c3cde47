"""Loopback stand-ins for Langfuse and an OpenAI-compatible LLM endpoint (test and bench code, not shipped).

- :mod:`standins.langfuse_server`: a real HTTP server that speaks both Langfuse API generations (v4 and
  the v3 legacy endpoints), checks every request and answer against the contract (``standins.contract``),
  stores scores with Langfuse's upsert rule and injects faults.
- :mod:`standins.openai_server`: ``/v1/chat/completions`` (structured output) and ``/v1/embeddings``,
  answers derived deterministically from the request, with latency and fault injection.
- :mod:`standins.generate`: a seeded generator of realistic agent traces, dataset items and
  experiments, lazy per trace so a 100,000-trace backlog is never held in memory.
- :mod:`standins.handles`: start either server in a background thread or as a separate process, and
  read what it saw (request counts, violations, 429s, early retries, scores) through its control API.

See ``bench/README.md``.
"""

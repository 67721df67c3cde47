"""What a Langfuse server is and holds, learned at start-up: its capabilities by version,
its evaluators and evaluation rules."""

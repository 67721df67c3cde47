"""Writing to Langfuse: scores (validated, with deterministic ids, batched), score configs,
annotation-queue items."""

"""Text embeddings for similarity metrics: a provider's OpenAI-compatible endpoint or a local model.

Metrics reach them as ``self.resources.embedder`` (an :class:`Embedder`); the CLI and the worker build
it once with :func:`build_embedder` and close it with ``await embedder.aclose()``. Importing this package
imports neither openai nor torch: they load when a model is first used.
"""

from trace_scorer.embeddings.base import BatchResult, Embedder, EmbeddingError, Vector
from trace_scorer.embeddings.batching import BatchingEmbedder
from trace_scorer.embeddings.build import (
    NO_EMBEDDER_MESSAGE,
    EmbeddingModels,
    build_embedder,
    resolve_model,
    select_embedder,
)

__all__ = [
    "NO_EMBEDDER_MESSAGE",
    "BatchResult",
    "BatchingEmbedder",
    "Embedder",
    "EmbeddingError",
    "EmbeddingModels",
    "Vector",
    "build_embedder",
    "resolve_model",
    "select_embedder",
]

"""``[embeddings]``: the embedding model ``answer_similarity`` uses, and how texts are sent to it.

A model is named like a judge model: ``provider/model-id`` for a model listed in a ``[[providers]]``
entry's ``embedding_models`` (its OpenAI-compatible ``/embeddings`` endpoint, key, limits), or
``local/all-MiniLM-L6-v2`` for the sentence-transformers model shipped by the optional extra
``trace-scorer[local-embeddings]`` (``local/PATH`` for another sentence-transformers model directory).
Retries follow the same rules as the judge's, with their own settings here.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from trace_scorer.config.judge import ProviderRetrySettings

#: The provider name that means "a sentence-transformers model on this machine".
LOCAL_PROVIDER = "local"


class EmbeddingSettings(ProviderRetrySettings):
    """``[embeddings]``: which model embeds texts, batch size, cache."""

    #: The default embedding model: ``provider/model-id`` or ``local/all-MiniLM-L6-v2``. Unset: the first
    #: embedding model of the first provider that lists ``embedding_models`` (none: no embedder).
    model: str | None = None
    #: Texts per request to an embeddings endpoint (per forward pass of a local model). Concurrent
    #: samples' texts are gathered into one request up to this size.
    batch_size: int = Field(default=64, ge=1, le=2048)
    #: Embedded texts kept in memory per model, so a text (e.g. an expected answer shared by every attempt
    #: at a question) is embedded once per process; 0 turns the cache off. A vector takes 4 bytes per
    #: dimension (6 KiB for 1536 dimensions).
    cache_size: int = Field(default=10_000, ge=0)
    #: Device of local models ("cpu", "cuda", "mps"…). Unset: sentence-transformers' choice (a GPU if
    #: there is one).
    local_device: str | None = None

    @field_validator("model")
    @classmethod
    def _provider_and_model(cls, value: str | None) -> str | None:
        if value is None:
            return None
        provider, _, model_id = value.partition("/")
        if not provider or not model_id.strip():
            raise ValueError(
                f"{value!r}: name the model as 'provider/model-id' (a provider's embedding_models) or "
                f"'{LOCAL_PROVIDER}/all-MiniLM-L6-v2'"
            )
        return value

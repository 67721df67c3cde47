"""What an embedder is (the protocol metrics use) and what a backend does (one batch, one request)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeAlias, runtime_checkable

from trace_scorer.providers.usage import Usage

if TYPE_CHECKING:  # numpy costs 0.1-0.2 s of start-up: imported by the backends that compute vectors
    import numpy as np
    import numpy.typing as npt

#: One embedding, as backends hand it over (float32: what the models compute; 4 bytes a dimension).
Vector: TypeAlias = "npt.NDArray[np.float32]"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors with one model; ``Resources.embedder`` is one of these.

    ``embed`` returns one vector per text, in order. Texts must be non-empty (``ValueError`` otherwise:
    endpoints reject them, and an empty answer has no meaning to compare). Raises
    :class:`EmbeddingError` when the model cannot answer after the retries.
    """

    @property
    def model_id(self) -> str:
        """The model as configured: ``provider/model-id`` or ``local/NAME``."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...

    async def aclose(self) -> None: ...


class EmbeddingError(Exception):
    """The model could not embed these texts (HTTP error after retries, a model that failed to load…)."""

    def __init__(self, model: str, message: str, *, per_input: bool = False, usage: Usage | None = None) -> None:
        super().__init__(f"{model}: {message}")
        self.model = model
        self.message = message
        #: What the request cost when it was answered but the answer could not be used (counted all the same).
        self.usage = usage
        #: The request was refused for what it contained (400/413/422: a text over the model's input
        #: limit, a request over the endpoint's token limit): smaller batches may succeed.
        self.per_input = per_input


@dataclass(frozen=True, slots=True)
class BatchResult:
    """A backend's answer to one batch: a vector per text, in order, and what the request cost."""

    vectors: list[Vector]
    usage: Usage


class Backend(Protocol):
    """One model behind an endpoint or on this machine: embeds one batch per call, no caching."""

    @property
    def model_id(self) -> str: ...

    async def embed_batch(self, texts: Sequence[str]) -> BatchResult: ...

    async def aclose(self) -> None: ...

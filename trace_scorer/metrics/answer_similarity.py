"""AnswerSimilarity (``answer_similarity``): cosine similarity of the response's and the expected answer's
embeddings (docs/metrics.md "answer_similarity"). The default correctness signal of ``pass_at_k``.

The embedding model is ``[embeddings] model`` or the metric's ``model`` option (``provider/model-id`` or
``local/all-MiniLM-L6-v2``); it is part of the fingerprint, so changing it re-scores.

Decisions (also in docs/metrics.md):
- The value is the cosine **clipped to [0, 1]**. Cosine lies in [−1, 1], every score lies in [0, 1]
  (docs/metrics.md "Values and names"), and the threshold that decides correctness (0.8 by default) is meant on the
  cosine itself, as the seed uses it. A negative cosine (rare with sentence-embedding models, and only
  for unrelated texts) says "unrelated", which is as wrong as 0 for an answer: it is clipped, not
  rescaled — (1 + cos) / 2 would put unrelated answers at 0.5 and move every threshold. The raw cosine
  stays in ``details``.
- ``normalize = true`` prepares both texts before embedding: Unicode NFKC, casefold (so "Straße" and
  "STRASSE", "МОСКВА" and "москва" agree), every run of punctuation (Unicode category P: "¿", "«»",
  "。", "—"…) replaced by a space, whitespace collapsed. Symbols (°, $, €, %) are kept: they carry
  meaning. Surrounding whitespace is always trimmed.
- An empty response (``""``, or nothing left after normalising) scores 0.0 without asking the model;
  an empty expected answer is skipped (nothing to compare with; 0 would blame the agent for the data).
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import numpy as np
import regex

from trace_scorer.data.outcomes import Failed, Outcome, Score, Skipped
from trace_scorer.embeddings import EmbeddingError, resolve_model, select_embedder
from trace_scorer.embeddings.base import Embedder
from trace_scorer.metrics.base import Metric, MetricOptions, MetricOutput
from trace_scorer.sample import Sample

_PUNCTUATION = regex.compile(r"\p{P}+")
_SPACES = regex.compile(r"\s+")


def normalize_text(text: str) -> str:
    """NFKC, casefold, punctuation runs → one space, whitespace collapsed and trimmed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    collapsed: str = _SPACES.sub(" ", _PUNCTUATION.sub(" ", text))
    return collapsed.strip()


def cosine(a: list[float], b: list[float]) -> float | None:
    """Cosine similarity in float64; None when a vector is zero (the angle is undefined)."""
    u, v = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if u.shape != v.shape:
        raise ValueError(f"vectors of different lengths: {u.shape[0]} and {v.shape[0]}")
    norms = float(np.linalg.norm(u)) * float(np.linalg.norm(v))
    if norms == 0.0 or not math.isfinite(norms):
        return None
    return float(np.dot(u, v)) / norms


class AnswerSimilarityOptions(MetricOptions):
    """Options of ``answer_similarity``."""

    #: The embedding model, ``provider/model-id`` or ``local/all-MiniLM-L6-v2``; unset: ``[embeddings] model``.
    model: str | None = None
    #: Casefold and strip punctuation (Unicode-aware) before embedding.
    normalize: bool = False


class AnswerSimilarity(Metric[AnswerSimilarityOptions]):
    """Embedding cosine similarity of ``response`` to ``expected``, clipped to [0, 1]."""

    key: ClassVar[str] = "answer_similarity"
    description: ClassVar[str] = "cosine similarity of the response's and the expected answer's embeddings"
    Options: ClassVar[type[AnswerSimilarityOptions]] = AnswerSimilarityOptions
    requires: ClassVar[tuple[str, ...]] = ("response", "expected")
    needs: ClassVar[tuple[Literal["judge", "embedder"], ...]] = ("embedder",)
    version: ClassVar[str] = "1"

    def _resource(self) -> Embedder:
        embedder = self.resources.embedder
        if embedder is None:
            raise RuntimeError(f"metric {self.name!r} needs an embedder and none is configured")
        if not isinstance(embedder, Embedder):
            raise TypeError(f"Resources.embedder is a {type(embedder).__name__}, not an Embedder")
        return embedder

    def model_name(self) -> str:
        """The embedding model this metric uses (``provider/model-id``); ValueError when unknown."""
        return resolve_model(self._resource(), self.options.model)

    def check(self) -> None:
        """The ``model`` option names a usable embedding model (ValueError otherwise)."""
        if self.resources.embedder is not None:
            self.model_name()

    def fingerprint_parts(self) -> dict[str, Any]:
        parts = super().fingerprint_parts()
        parts["embedding_model"] = self.model_name() if self.resources.embedder is not None else self.options.model
        return parts

    def _prepare(self, text: str) -> str:
        return normalize_text(text) if self.options.normalize else text.strip()

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        normalized = self.options.normalize
        expected = self._prepare(sample.expected or "")
        if not expected:
            after = " after normalisation" if normalized and (sample.expected or "").strip() else ""
            return Skipped(f"the expected answer is empty{after}")
        response = self._prepare(sample.response or "")
        model = self.model_name()
        if not response:
            return Score(0.0, "empty response", {"model": model, "normalized": normalized, "cosine": None})
        try:
            response_vector, expected_vector = await select_embedder(self._resource(), self.options.model).embed(
                [response, expected]
            )
        except EmbeddingError as exc:
            return Failed(str(exc), {"model": model})
        similarity = cosine(response_vector, expected_vector)
        if similarity is None:
            return Failed(f"{model} returned a zero vector: the similarity is undefined", {"model": model})
        value = min(1.0, max(0.0, similarity))
        comment = f"cosine {similarity:.2f} ({model})"
        if similarity < 0:
            comment = f"cosine {similarity:.2f}, clipped to 0 ({model})"
        details = {"cosine": round(similarity, 6), "model": model, "normalized": normalized}
        return Score(value, comment, details)

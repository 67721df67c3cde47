"""``trace-scorer check``'s look at every judge and embedding model: one tiny request each.

A chat model is asked for ``{"ok": 1}`` through the judge's own path, so the structured-output negotiation
runs (its outcome is remembered for the process and shown). What is reported: reachable or not (the
reason), the structured-output mode that works, the latency, and warnings for what looks misconfigured —
an answer naming another model, or a model the server does not list (llama.cpp's servers answer any name
with their default model and echo the name asked for, so only the listing tells). An embedding model is
asked for one vector (its dimensions are shown).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from trace_scorer.judge.errors import JudgeCallError
from trace_scorer.judge.structured import AnswerRejected, parse_answer

if TYPE_CHECKING:
    from trace_scorer.embeddings.build import EmbeddingModels
    from trace_scorer.judge.judge import Judge


class Ping(BaseModel):
    """The probe's answer: one key, one allowed value."""

    model_config = ConfigDict(extra="forbid")

    ok: Literal[1]


_PING = [
    {"role": "system", "content": "Answer with one JSON object and nothing else."},
    {"role": "user", "content": 'Reply with exactly this JSON object: {"ok": 1}'},
]
#: Enough for ``{"ok": 1}`` under any tokenizer, little enough to be quick on a CPU.
_PING_TOKENS = 24


@dataclass(frozen=True)
class ProbeResult:
    """One model as ``check`` found it; ``reason`` set means it cannot work (exit 1)."""

    model: str
    kind: Literal["chat", "embedding"]
    seconds: float | None = None
    #: The structured-output mode that worked (chat models).
    mode: str | None = None
    detail: str = ""
    warnings: tuple[str, ...] = field(default_factory=tuple)
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.reason is None


async def _listed_models(provider: Any) -> set[str] | None:
    """The model ids the provider's ``GET /models`` lists (None when it does not answer that)."""
    try:
        listing = await provider.client.get("/models", cast_to=object)
    except Exception:  # an endpoint without a listing (some gateways): nothing to compare with
        return None
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        return None
    return {str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id") is not None}


async def probe_chat(judge: Judge, model: str) -> ProbeResult:
    """Ask ``model`` (``provider/model-id``) for ``{"ok": 1}``; never raises for the model's sake."""
    provider, model_id = judge.provider_of(model)
    warnings: list[str] = []
    listed = await _listed_models(provider)
    if listed is not None and model_id not in listed:
        shown = ", ".join(sorted(listed)[:5]) or "none"
        warnings.append(f"the server does not list {model_id!r} (it lists {shown}): it may answer with another model")
    started = time.monotonic()
    try:
        completion = await provider.complete(model_id, _PING, schema=Ping, temperature=0.0, max_tokens=_PING_TOKENS)
    except JudgeCallError as exc:
        return ProbeResult(model, "chat", reason=exc.message, warnings=tuple(warnings))
    except Exception as exc:  # an unexpected answer from the endpoint: say so, never crash check
        return ProbeResult(model, "chat", reason=f"{type(exc).__name__}: {exc}", warnings=tuple(warnings))
    seconds = time.monotonic() - started
    answered = completion.response_model
    if answered and answered != model_id and not answered.endswith(model_id):
        warnings.append(f"the answer names model {answered!r}, not {model_id!r}")
    try:
        parse_answer(completion.text, Ping)
    except AnswerRejected as exc:
        warnings.append(f"the tiny answer was not in the requested shape ({exc}): expect validation retries")
    return ProbeResult(
        model,
        "chat",
        seconds=seconds,
        mode=completion.mode,
        warnings=tuple(warnings),
        detail=f"{completion.usage.total_tokens} tokens",
    )


async def probe_embedding(embedder: EmbeddingModels, model: str) -> ProbeResult:
    """Embed one short text with ``model``; never raises for the model's sake."""
    started = time.monotonic()
    try:
        [vector] = await embedder.select(model).embed(["check"])
    except Exception as exc:  # EmbeddingError, a model that will not load: the reason is what check shows
        return ProbeResult(model, "embedding", reason=str(exc))
    return ProbeResult(model, "embedding", seconds=time.monotonic() - started, detail=f"{len(vector)} dimensions")


async def probe_models(judge: Judge | None, embedder: EmbeddingModels | None) -> list[ProbeResult]:
    """Every configured chat model, then every embedding model, one at a time (a local server queues)."""
    results = [await probe_chat(judge, m) for m in judge.chat_models] if judge is not None else []
    if embedder is not None:
        results += [await probe_embedding(embedder, m) for m in embedder.models]
    return results

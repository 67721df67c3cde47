"""One OpenAI-compatible endpoint as the judge uses it: one chat-completion call with retries and limits.

The client, the retry policy, the limits and the usage accounting are the providers' (trace_scorer.providers,
shared with the embeddings). When an endpoint rejects ``response_format`` the model's mode steps down
(json_schema → json_object → none) for the rest of the process, once, with a warning.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import openai
import structlog
from pydantic import BaseModel

from trace_scorer.config.judge import ModelPrice, ProviderSettings, StructuredOutput
from trace_scorer.judge.errors import ProviderCallError
from trace_scorer.judge.structured import STEP_DOWN, response_format
from trace_scorer.providers.client import HttpClient, describe_error, open_client, send_retrying
from trace_scorer.providers.deadline import Deadline, system_deadline
from trace_scorer.providers.limits import ProviderLimits
from trace_scorer.providers.retry import RetryPolicy
from trace_scorer.providers.usage import Usage
from trace_scorer.retry import OnRetry, Sleep

log = structlog.get_logger(__name__)

#: Words in a 400/422 error body that say the endpoint did not accept the structured-output parameter.
_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "structured output", "structured_output")


@dataclass(frozen=True, slots=True)
class Completion:
    """One chat completion: the text, the tokens (and cost) it took, and how long it took."""

    text: str | None
    usage: Usage
    finish_reason: str | None
    response_model: str | None
    mode: StructuredOutput
    attempts: int
    started: float
    seconds: float


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _tokens(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


@dataclass(frozen=True, slots=True)
class _Answer:
    """What the judge reads of a chat completion's JSON, read defensively: an endpoint that answers
    with another shape gives no text (the judge's "no answer"), never an exception."""

    text: str | None
    finish_reason: str | None
    model: str | None
    #: (prompt, completion) tokens; None when the endpoint reports no usage.
    tokens: tuple[int, int] | None

    @classmethod
    def read(cls, data: object) -> _Answer:
        if isinstance(data, str):  # JSON under another content type: the SDK hands the text on
            try:
                data = json.loads(data)
            except ValueError:
                data = None
        body = data if isinstance(data, dict) else {}
        choices = body.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        message = choice.get("message")
        message = message if isinstance(message, dict) else {}
        text = _text(message.get("content"))
        if text is None and (refusal := _text(message.get("refusal"))):
            text = f"(refused: {refusal})"
        usage = body.get("usage")
        tokens = None
        if isinstance(usage, dict):
            tokens = (_tokens(usage.get("prompt_tokens")), _tokens(usage.get("completion_tokens")))
        return cls(text, _text(choice.get("finish_reason")), _text(body.get("model")), tokens)


def _rejects_format(exc: openai.APIStatusError) -> bool:
    if exc.status_code not in (400, 422):
        return False
    text = f"{exc.message} {exc.body!r}".lower()
    return any(word in text for word in _FORMAT_WORDS)


class Provider:
    """A configured endpoint, shared by every model it serves and every metric that asks it."""

    def __init__(
        self,
        settings: ProviderSettings,
        api_key: str,
        retry: RetryPolicy,
        *,
        sleep: Sleep,
        clock: Callable[[], float] = time.monotonic,
        http_client: HttpClient | None = None,
        deadline: Deadline = system_deadline,
    ) -> None:
        self.name = settings.name
        #: Bounds each HTTP request in all (``settings.deadline`` seconds, the answer's body included).
        self.deadline = deadline
        self.settings = settings
        self.limits = ProviderLimits(settings.max_concurrency, settings.requests_per_minute, sleep=sleep, clock=clock)
        self._retry = retry
        self._http, self.client = open_client(settings, api_key, http_client)
        self._modes: dict[str, StructuredOutput] = {}

    def price(self, model_id: str) -> ModelPrice | None:
        return self.settings.prices.get(model_id)

    def mode(self, model_id: str) -> StructuredOutput:
        return self._modes.get(model_id, self.settings.structured_output)

    async def aclose(self) -> None:
        await self.client.close()
        await self._http.aclose()

    async def complete(
        self,
        model_id: str,
        messages: Sequence[Mapping[str, str]],
        *,
        schema: type[BaseModel],
        temperature: float,
        max_tokens: int,
        on_retry: OnRetry | None = None,
    ) -> Completion:
        """One answer from ``model_id``; raises :class:`ProviderCallError` when the retries run out.

        ``on_retry`` is told of each HTTP retry (the failure, the attempt that failed, the wait)."""
        while True:
            mode = self.mode(model_id)
            try:
                return await self._complete(model_id, messages, schema, temperature, max_tokens, mode, on_retry)
            except openai.APIStatusError as exc:
                lower = STEP_DOWN[mode]
                if lower is None or not _rejects_format(exc):
                    raise
                log.warning(
                    "judge.structured_output.step_down",
                    provider=self.name,
                    model=model_id,
                    rejected=mode,
                    now=lower,
                    error=describe_error(exc),
                )
                self._modes[model_id] = lower

    async def _complete(
        self,
        model_id: str,
        messages: Sequence[Mapping[str, str]],
        schema: type[BaseModel],
        temperature: float,
        max_tokens: int,
        mode: StructuredOutput,
        on_retry: OnRetry | None = None,
    ) -> Completion:
        # The request body as JSON, sent with the SDK's documented ``post``: ``chat.completions.create``
        # would first walk every message and the JSON schema through its TypedDict transform, ~40 % of
        # the client's CPU a call (bench/bench_llm_client.py) for a body that is plain JSON already.
        body: dict[str, Any] = {
            "model": model_id,
            "messages": list(messages),
            "temperature": temperature,
            "max_tokens": max_tokens,
        }
        if (fmt := response_format(mode, schema)) is not None:
            body["response_format"] = fmt
        retrying = self._retry.retrying(on_retry_after=self.limits.pause, on_retry=on_retry)
        started = time.time()
        clock = time.monotonic()
        url = f"{self.settings.base_url}/chat/completions"
        try:
            response = await send_retrying(
                retrying,
                self.limits,
                self.deadline,
                self.settings.deadline,
                url,
                # ``cast_to=object``: the answer's JSON as parsed, read by _Answer (building the SDK's
                # ChatCompletion model took ~15 % of the client's CPU a call for five fields).
                lambda: self.client.post("/chat/completions", body=body, cast_to=object),
            )
        except openai.APIStatusError as exc:
            if _rejects_format(exc) and STEP_DOWN[mode] is not None:
                raise  # the caller steps down
            raise self._failure(model_id, exc, retrying.statistics.get("attempt_number", 1)) from exc
        except openai.OpenAIError as exc:
            raise self._failure(model_id, exc, retrying.statistics.get("attempt_number", 1)) from exc
        answer = _Answer.read(response)
        usage = Usage(calls=1, cost=None)  # an endpoint that reports no usage: tokens and cost unknown
        if answer.tokens is not None:
            prompt, completion = answer.tokens
            price = self.price(model_id)
            usage = Usage(prompt, completion, 1, price.cost(prompt, completion) if price else None)
        return Completion(
            text=answer.text,
            usage=usage,
            finish_reason=answer.finish_reason,
            response_model=answer.model,
            mode=mode,
            attempts=retrying.statistics.get("attempt_number", 1),
            started=started,
            seconds=time.monotonic() - clock,
        )

    def _failure(self, model_id: str, exc: BaseException, attempts: int) -> ProviderCallError:
        ref = f"{self.name}/{model_id}"
        times = "attempt" if attempts == 1 else "attempts"
        return ProviderCallError(ref, f"{describe_error(exc)} (after {attempts} {times})")

"""One OpenAI-compatible endpoint as the judge uses it: one chat-completion call with retries and limits.

The client, the retry policy, the limits and the usage accounting are the providers' (trace_scorer.providers,
shared with the embeddings). When an endpoint rejects the structured-output parameter — a 400, 422 or
500 whose body names it — the model's mode steps down (``structured.MODES``) for the rest of the process,
with a warning, and that answer is not retried: the server would say the same again.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import httpx2
import openai
import structlog
from pydantic import BaseModel

from trace_scorer.config.judge import ModelPrice, ProviderSettings, StructuredOutput
from trace_scorer.data import jsonbytes
from trace_scorer.judge.errors import ProviderCallError
from trace_scorer.judge.structured import (
    REJECTION_WORDS,
    STEP_DOWN,
    inline_refs,
    request_fields,
    schema_name,
    strict_json_schema,
)
from trace_scorer.providers.client import HttpClient, describe_error, open_client, provider_limits, send_retrying
from trace_scorer.providers.deadline import Deadline, system_deadline
from trace_scorer.providers.retry import RetryPolicy
from trace_scorer.providers.usage import Usage
from trace_scorer.runtime.retry import OnRetry, Sleep

log = structlog.get_logger(__name__)

#: Statuses with which servers refuse a parameter: 400 (OpenAI, vLLM), 422 (FastAPI validation), 500
#: (llama-cpp-python 0.3.36 answers ``response_format.type: Input should be 'text' or 'json_object'``).
_REJECTION_STATUSES = frozenset({400, 422, 500})


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
        calls = message.get("tool_calls")
        if not text and isinstance(calls, list) and calls and isinstance(calls[0], dict):
            function = calls[0].get("function")  # the "tools" mode: the answer is the call's arguments
            if isinstance(function, dict):
                text = _text(function.get("arguments"))
        if text is None and (refusal := _text(message.get("refusal"))):
            text = f"(refused: {refusal})"
        usage = body.get("usage")
        tokens = None
        if isinstance(usage, dict):
            tokens = (_tokens(usage.get("prompt_tokens")), _tokens(usage.get("completion_tokens")))
        return cls(text, _text(choice.get("finish_reason")), _text(body.get("model")), tokens)


#: ``post``'s options at the values the SDK gives them when they are left out (its request model's defaults;
#: tests/unit/providers/test_request_bodies.py holds them to the SDK's). Left out, each call resolves them
#: again, deep-copying the ``security`` mapping and four ``NOT_GIVEN`` markers (a third of building a
#: request's options); given, the request is the same. The SDK copies what it keeps of them, never mutates.
#: ``post_parser`` is no ``RequestOptions`` key, but the SDK's own ``make_request_options`` passes it in the
#: options the same way (its deep copy alone was ~15 % of ``FinalRequestOptions.construct``).
SDK_DEFAULT_OPTIONS: openai.RequestOptions = cast(
    openai.RequestOptions,
    {
        "headers": openai.NOT_GIVEN,
        "max_retries": openai.NOT_GIVEN,
        "timeout": openai.NOT_GIVEN,
        "post_parser": openai.NOT_GIVEN,
        "params": {},
        "security": {"bearer_auth": True, "admin_api_key_auth": True},
    },
)
#: Each request's idempotency key: this process's prefix and a count. Left out, the SDK makes one of a
#: ``uuid4`` per call (~1 % of a judged trace's CPU samples) that no request carries: the OpenAI client
#: sends no idempotency header. Given, it is as unique as the SDK's (one per ``post``), should one be sent.
_KEY_PREFIX = f"trace-scorer-{uuid.uuid4().hex}-"
_KEY_NUMBERS = itertools.count()


def post_options() -> openai.RequestOptions:
    """One request's ``post`` options: the SDK's defaults (:data:`SDK_DEFAULT_OPTIONS`) and a new
    idempotency key."""
    return {**SDK_DEFAULT_OPTIONS, "idempotency_key": f"{_KEY_PREFIX}{next(_KEY_NUMBERS)}"}


def _decoded(response: httpx2.Response) -> object:
    """The answer's body as the SDK's ``cast_to=object`` gave it: JSON under a JSON content type (orjson,
    the SDK's ``response.json()`` for what orjson refuses), the text under any other."""
    content_type = response.headers.get("content-type", "*").split(";", 1)[0]
    if not content_type.endswith("json"):
        return response.text
    try:
        return jsonbytes.loads(response.content)
    except ValueError:  # not JSON in UTF-8: the SDK's reading (the charset header), which raises as before
        return response.json()


class _Rejected(Exception):
    """The endpoint refused ``mode``'s parameter (``error``): the model steps down."""

    def __init__(self, mode: StructuredOutput, error: openai.APIStatusError) -> None:
        super().__init__(mode)
        self.mode = mode
        self.error = error


def rejects_mode(exc: BaseException, mode: StructuredOutput) -> bool:
    """Whether ``exc`` is the server refusing ``mode``'s parameter (a 400/422/500 naming it)."""
    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in _REJECTION_STATUSES:
        return False
    text = f"{exc.message} {exc.body!r}".lower()
    return any(word in text for word in REJECTION_WORDS[mode])


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
        self.limits = provider_limits(settings, sleep, clock)
        self._retry = retry
        self._http, self.client = open_client(settings, api_key, http_client)
        self._chat_url = str(self.client.base_url.join("chat/completions"))
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
        json_schema: dict[str, Any] | None = None,
    ) -> Completion:
        """One answer from ``model_id``; raises :class:`ProviderCallError` when the retries run out.

        ``json_schema`` replaces ``schema``'s own (closed) JSON schema in the request, e.g. with the enums
        of one sample's allowed values. ``on_retry`` is told of each HTTP retry (the failure, the attempt
        that failed, the wait)."""
        sent = json_schema if json_schema is not None else strict_json_schema(schema)
        while True:
            try:
                return await self._complete(
                    model_id, messages, schema_name(schema), sent, temperature, max_tokens, on_retry
                )
            except _Rejected as rejected:
                mode, lower = rejected.mode, STEP_DOWN[rejected.mode]
                if lower is None or self.mode(model_id) != mode:
                    continue  # a concurrent request of this model stepped down already
                log.warning(
                    "judge.structured_output.step_down",
                    provider=self.name,
                    model=model_id,
                    rejected=mode,
                    now=lower,
                    error=describe_error(rejected.error),
                )
                self._modes[model_id] = lower

    async def _complete(
        self,
        model_id: str,
        messages: Sequence[Mapping[str, str]],
        name: str,
        schema: dict[str, Any],
        temperature: float,
        max_tokens: int,
        on_retry: OnRetry | None = None,
    ) -> Completion:
        # The mode is read when the request is sent (in its turn for a slot), not when it was asked
        # for: requests queued behind the one that stepped down go out in the mode that works.
        modes: list[StructuredOutput] = []

        def send() -> Any:
            mode = self.mode(model_id)
            modes.append(mode)
            # The request body as JSON, sent with the SDK's documented ``post``: ``chat.completions.create``
            # would first walk every message and the JSON schema through its TypedDict transform, ~40 % of
            # the client's CPU a call (bench/bench_llm_client.py) for a body that is plain JSON already.
            body: dict[str, Any] = {
                "model": model_id,
                "messages": list(messages),
                "temperature": temperature,
                "max_tokens": max_tokens,
            }
            body.update(request_fields(mode, name, schema if mode == "json_schema" else inline_refs(schema)))
            # ``cast_to=httpx2.Response``: the answer as the SDK received it (its status checked, its
            # errors raised as before), decoded once by :func:`_decoded` and read by _Answer (building the
            # SDK's ChatCompletion model took ~15 % of the client's CPU a call for five fields; its
            # ``APIResponse`` wrapper and ``json.loads`` another few). The body goes as the bytes the SDK
            # would make of it, encoded by orjson (trace_scorer/data/jsonbytes.py), and to the absolute URL the
            # SDK would join from its base URL (one URL parse less a call).
            content = jsonbytes.compact(body)
            # ``options``: the SDK's defaults, given, and a key (post_options).
            options = post_options()
            if content is None:
                return self.client.post(self._chat_url, body=body, cast_to=httpx2.Response, options=options)
            return self.client.post(self._chat_url, content=content, cast_to=httpx2.Response, options=options)

        def refused(exc: BaseException) -> bool:
            return bool(modes) and STEP_DOWN[modes[-1]] is not None and rejects_mode(exc, modes[-1])

        retrying = self._retry.lazy(on_retry_after=self.limits.pause, on_retry=on_retry, permanent=refused)
        started = time.time()
        clock = time.monotonic()
        url = f"{self.settings.base_url}/chat/completions"
        try:
            response = await send_retrying(retrying, self.limits, self.deadline, self.settings.deadline, url, send)
        except openai.APIStatusError as exc:
            if refused(exc):
                raise _Rejected(modes[-1], exc) from exc  # the caller steps down
            raise self._failure(model_id, exc, retrying.attempts) from exc
        except openai.OpenAIError as exc:
            raise self._failure(model_id, exc, retrying.attempts) from exc
        answer = _Answer.read(_decoded(response))
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
            mode=modes[-1],
            attempts=retrying.attempts,
            started=started,
            seconds=time.monotonic() - clock,
        )

    def _failure(self, model_id: str, exc: BaseException, attempts: int) -> ProviderCallError:
        ref = f"{self.name}/{model_id}"
        times = "attempt" if attempts == 1 else "attempts"
        return ProviderCallError(ref, f"{describe_error(exc)} (after {attempts} {times})")

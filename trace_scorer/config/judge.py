"""``[[providers]]`` and ``[judge]``: the OpenAI-compatible LLM endpoints the judged metrics use.

A provider is one endpoint (OpenRouter, OpenAI, Azure OpenAI, vLLM, Ollama…) with its models; a model is
referred to as ``provider/model-id`` (``openrouter/google/gemini-2.5-flash``), so a provider's name may not
contain ``/``. API keys are read from the environment variable the provider names, never from the file.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from trace_scorer.config.common import Duration, StrictModel

#: How a judge asks for JSON; the order of the step-down is ``structured.MODES`` (docs/judges.md).
StructuredOutput = Literal[
    "json_schema", "json_object_schema", "vllm_structured", "ollama_format", "tools", "json_object", "none"
]
Language = Literal["en", "ru"]

#: Without ``request_deadline``, one HTTP request to a provider may take this many ``timeout``s in all.
DEADLINE_TIMEOUTS = 3

#: Langfuse's rule for environment names: lowercase ``[a-z0-9_-]``, not starting with "langfuse".
_ENVIRONMENT = re.compile(r"^[a-z0-9_-]{1,40}$")
#: What an environment variable's name looks like (``api_key_env``).
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


class ModelPrice(StrictModel):
    """Price of one model in USD per million tokens (what the provider's price page shows)."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1_000_000


class ProviderSettings(StrictModel):
    """One OpenAI-compatible endpoint with its models and the limits to keep to."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")
    base_url: str
    #: Name of the environment variable holding the API key (never the key itself). Unset: local
    #: servers (vLLM, Ollama) that need no key.
    api_key_env: str | None = None
    chat_models: list[str] = Field(default_factory=list)
    embedding_models: list[str] = Field(default_factory=list)
    #: Requests per minute this process may send (None: no rate limit, only the concurrency bound).
    requests_per_minute: float | None = Field(default=None, gt=0)
    #: Requests in flight at once to this provider, over all models and metrics.
    max_concurrency: int = Field(default=16, ge=1, le=1024)
    #: Let the bound on requests in flight follow the server's latency, under ``max_concurrency``: for a
    #: local server that runs one request at a time and queues the rest silently (docs/judges.md).
    adaptive_concurrency: bool = False
    #: Per connect and per read of the answer (the aiohttp transport's timeouts: a server trickling bytes
    #: never reaches it; sending is bounded by ``request_deadline`` only); a timeout is retried like a 5xx.
    timeout: Duration = 60.0
    #: Most time one HTTP request may take in all, reading the whole answer included; running out counts
    #: and is retried like a timeout. Unset: ``DEADLINE_TIMEOUTS`` × ``timeout`` (3 min by default).
    request_deadline: Duration | None = Field(default=None, gt=0)
    #: How to ask for JSON first: "json_schema" (OpenAI structured output), "json_object_schema" (llama.cpp's
    #: servers: JSON mode with a schema), "vllm_structured" (vLLM's ``structured_outputs``), "ollama_format"
    #: (Ollama's ``format``), "tools" (a forced tool call), "json_object" (JSON mode) or "none" (prompt
    #: only). Stepped down in that order for a model whose endpoint rejects the parameter (docs/judges.md).
    structured_output: StructuredOutput = "json_schema"
    #: Context window per model id, in tokens: judge prompts are fitted into it (docs/judges.md "Context").
    #: Unset for a model: learned from the server's first "maximum context length is N tokens" answer.
    context_tokens: dict[str, int] = Field(default_factory=dict)
    #: Optional prices by model id (USD per 1M tokens) to turn token usage into cost.
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    #: Extra HTTP headers on every request (e.g. OpenRouter's HTTP-Referer / X-Title).
    headers: dict[str, str] = Field(default_factory=dict)

    @property
    def deadline(self) -> float:
        """The total deadline of one HTTP request, in seconds (``request_deadline`` or a multiple of ``timeout``)."""
        return self.request_deadline if self.request_deadline is not None else DEADLINE_TIMEOUTS * self.timeout

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value.rstrip("/")

    @field_validator("api_key_env")
    @classmethod
    def _variable_name(cls, value: str | None) -> str | None:
        # Never echo the value: when it is not a variable name it is most likely the key itself.
        if value is not None and not _VARIABLE.match(value):
            raise ValueError(
                "api_key_env must name an environment variable (e.g. OPENROUTER_API_KEY), not hold the key: "
                "put the key into that variable"
            )
        return value

    @field_validator("chat_models", "embedding_models")
    @classmethod
    def _distinct_models(cls, models: list[str]) -> list[str]:
        seen: set[str] = set()
        for model in models:
            if not model.strip():
                raise ValueError("a model id cannot be empty")
            if model in seen:
                raise ValueError(f"model {model!r} is listed twice")
            seen.add(model)
        return models

    @model_validator(mode="after")
    def _prices_name_models(self) -> ProviderSettings:
        known = set(self.chat_models) | set(self.embedding_models)
        unknown = sorted(set(self.prices) - known)
        if unknown:
            raise ValueError(f"prices for models this provider does not list: {', '.join(unknown)}")
        unknown = sorted(set(self.context_tokens) - known)
        if unknown:
            raise ValueError(f"context_tokens for models this provider does not list: {', '.join(unknown)}")
        small = sorted(m for m, n in self.context_tokens.items() if n < 256)
        if small:
            raise ValueError(f"context_tokens below 256 for {', '.join(small)}: no judge prompt fits")
        return self


class ProviderRetrySettings(StrictModel):
    """How HTTP calls to a provider are retried; shared by ``[judge]`` and ``[embeddings]``."""

    #: HTTP attempts per call on 429/5xx/timeouts (back-off: retry_initial_wait, ×2, up to retry_max_wait).
    retry_attempts: int = Field(default=6, ge=1, le=20)
    retry_initial_wait: Duration = 2.0
    retry_max_wait: Duration = 30.0
    #: A Retry-After longer than this (an exhausted daily quota) fails the call now instead of waiting.
    max_retry_after: Duration = 300.0

    @model_validator(mode="after")
    def _waits_ordered(self) -> ProviderRetrySettings:
        if self.retry_initial_wait > self.retry_max_wait:
            raise ValueError("retry_initial_wait is longer than retry_max_wait")
        return self


class JudgeSettings(ProviderRetrySettings):
    """``[judge]``: how every judge call is made, whichever provider serves it."""

    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=1000, ge=16)
    #: Language of the prompts (and of the judge's reasoning): "en" or "ru".
    language: Language = "en"
    #: Tool results (and agent instructions) longer than this are cut in the rendered conversation.
    tool_result_max_chars: int = Field(default=2000, ge=50)
    #: The whole rendered conversation is kept under this size by leaving out middle messages.
    conversation_max_chars: int = Field(default=100_000, ge=2000)
    #: Answers that do not validate against the schema are asked again this many times.
    validation_retries: int = Field(default=2, ge=0, le=10)
    #: Identical requests answered from memory within one process (0 turns the cache off).
    cache_size: int = Field(default=10_000, ge=0)
    #: Most time one judged metric may take on one sample, all its judge calls, retries and waits included.
    #: Running out fails the metric for that sample ("judge did not answer within …"), so the other scores
    #: of the batch are still posted and a later tick retries it. Longer than max_retry_after, so one
    #: honoured Retry-After does not fail it.
    metric_deadline: Duration = Field(default=600.0, gt=0)
    #: Most the judges may spend, in USD, in one run (one ``score`` command, or the worker since it
    #: started); once spent, judged metrics fail with that reason (the worker tries them again later).
    #: Counted from ``prices``: a model without a price counts nothing. Unset: no limit.
    max_cost_usd: float | None = Field(default=None, gt=0)
    #: The same per UTC day (counted in this process since it started).
    max_cost_usd_per_day: float | None = Field(default=None, gt=0)
    #: Record judge calls in Langfuse. Unset: on in the worker, off in offline ``score``.
    tracing: bool | None = None
    #: Langfuse environment of the judge traces; the trace sources never score it.
    tracing_environment: str = "trace-scorer"

    @field_validator("tracing_environment")
    @classmethod
    def _langfuse_environment(cls, value: str) -> str:
        if not _ENVIRONMENT.match(value) or value.startswith("langfuse"):
            raise ValueError(
                f"{value!r} is not a Langfuse environment name: lowercase letters, digits, '_' and '-', "
                "not starting with 'langfuse'"
            )
        return value

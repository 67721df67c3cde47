"""The judge: the one object metrics ask for a verdict (``self.resources.judge``).

It knows the configured chat models (``provider/model-id``), asks one of them a prompt for a JSON answer
validated against a pydantic schema — asking again, a bounded number of times, when the answer does not
validate — caches identical requests, accounts tokens and cost, and records each call in Langfuse when
tracing is on. Metrics never build HTTP requests or prompts' text themselves.

Time is bounded twice: each HTTP request by its provider's ``request_deadline`` (retried like a timeout),
and each judged metric of a sample by ``[judge] metric_deadline`` (:meth:`Judge.bounded`, which the
pipeline wraps around every judged metric: running out fails that metric, never the batch).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

import structlog
from pydantic import BaseModel

from trace_scorer.config.judge import JudgeSettings
from trace_scorer.judge.cache import RequestCache, request_key
from trace_scorer.judge.errors import BudgetSpentError, JudgeCallError, NoValidAnswerError, ProviderCallError
from trace_scorer.judge.prompts import PromptTemplate, build_messages, retry_message
from trace_scorer.judge.render import fit_rendered, render_conversation
from trace_scorer.judge.structured import AnswerRejected, parse_answer, schema_name, strict_json_schema
from trace_scorer.providers.deadline import Deadline, system_deadline
from trace_scorer.providers.limits import GateFor
from trace_scorer.providers.usage import Usage, UsageLedger
from trace_scorer.sample import Sample

if TYPE_CHECKING:  # imported where used: openai and langfuse are slow to import, and offline
    # `score` without providers never needs them
    from trace_scorer.judge.chat import Provider
    from trace_scorer.judge.tracing import JudgeTracer, TraceScope

log = structlog.get_logger(__name__)

T = TypeVar("T", bound=BaseModel)
R = TypeVar("R")

#: Characters per token when fitting a prompt into a context window: an estimate on the safe side (English
#: runs ~4 with common tokenizers, Russian ~3); the server's overflow answer is the backstop.
CHARS_PER_TOKEN = 3.0
#: Tokens kept free beside the estimate (chat template tokens, the estimate's error).
CONTEXT_MARGIN_TOKENS = 64
#: A conversation is never cut below this (the question would not make sense).
MIN_CONVERSATION_CHARS = 400
_OVERFLOW = re.compile(r"maximum context length is (\d+) tokens")


def context_overflow(message: str) -> int | None:
    """The window an overflow error names ("maximum context length is N tokens": OpenAI, vLLM, llama.cpp)."""
    match = _OVERFLOW.search(message)
    return int(match.group(1)) if match else None


#: The models being asked, and how many asks of each are in flight, on behalf of the judged metric that
#: :meth:`Judge.bounded` is running (shared by the tasks the metric starts: they copy the context).
#: A plain dict (``Counter()`` ran its ``__init__`` and ``__missing__`` in Python, a metric each).
_ASKING: ContextVar[dict[str, int] | None] = ContextVar("trace_scorer_judge_asking", default=None)


class JudgeTimeout(Exception):
    """A judged metric ran out of ``metric_deadline``; ``models`` were still being asked."""

    def __init__(self, seconds: float, models: Sequence[str]) -> None:
        self.seconds = seconds
        self.models = tuple(models)
        waiting = f" (waiting on {', '.join(self.models)})" if self.models else ""
        super().__init__(f"judge did not answer within {seconds:g}s{waiting}")


@dataclass(frozen=True, slots=True)
class ModelRef:
    """A chat model as configured: ``provider/model-id`` (the model id may itself contain ``/``)."""

    provider: str
    model_id: str

    @property
    def name(self) -> str:
        return f"{self.provider}/{self.model_id}"


@dataclass(frozen=True, slots=True)
class Answer(Generic[T]):
    """A validated answer; ``usage`` is what this request spent (zero when served from the cache)."""

    value: T
    usage: Usage
    cached: bool
    #: Asks it took to get a valid answer (1 + answers that did not validate).
    attempts: int


class Tally:
    """What a caller's asks spent (failures' tokens too) and how many were served from the cache
    (:meth:`Judge.ask`'s ``tally``)."""

    def __init__(self) -> None:
        self.usage = Usage()
        self.cached = 0


class JudgeRun:
    """One judged metric on one sample: the Langfuse trace its calls go to and its name in the ledger."""

    def __init__(self, metric: str, trace: TraceScope | None) -> None:
        self.metric = metric
        self.trace = trace
        #: What the metric concluded, shown as the trace's output in Langfuse (set before the run ends).
        self.output: Any = None

    @property
    def trace_id(self) -> str | None:
        return self.trace.trace_id if self.trace is not None else None


class JudgeRunScope:
    """:meth:`Judge.run`'s context: a class, not an ``asynccontextmanager`` (whose generator, made, entered
    and closed for every judged metric of every sample, was ~0.4 % of the worker's CPU)."""

    __slots__ = ("_metadata", "_metric", "_run", "_sample", "_tracer")

    def __init__(
        self, tracer: JudgeTracer | None, metric: str, sample: Sample, metadata: Mapping[str, Any]
    ) -> None:
        self._tracer = tracer
        self._metric = metric
        self._sample = sample
        self._metadata = metadata
        self._run: JudgeRun | None = None

    async def __aenter__(self) -> JudgeRun:
        scope = None
        if self._tracer is not None:
            sample = self._sample
            scope = self._tracer.start(
                self._metric,
                input={"sample_id": sample.id, "trace_id": sample.trace_id},
                metadata={"scored_trace_id": sample.trace_id, "sample_id": sample.id, **self._metadata},
            )
        self._run = JudgeRun(self._metric, scope)
        return self._run

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        run = self._run
        if run is None or run.trace is None:
            return
        if exc is not None:
            run.trace.end(error=f"{type(exc).__name__}: {exc}")
        else:
            run.trace.end(run.output)


class Judge:
    """Chat models behind OpenAI-compatible endpoints, asked for validated JSON verdicts."""

    def __init__(
        self,
        settings: JudgeSettings,
        providers: Sequence[Provider],
        *,
        tracer: JudgeTracer | None = None,
    ) -> None:
        self.settings = settings
        self.language = settings.language
        self._providers = {p.name: p for p in providers}
        self._models: dict[str, ModelRef] = {
            f"{p.name}/{m}": ModelRef(p.name, m) for p in providers for m in p.settings.chat_models
        }
        self._tracer = tracer
        self._cache: RequestCache[Answer[Any]] = RequestCache(settings.cache_size)
        self.ledger = UsageLedger()
        #: Told of every chat completion asked for (model ``provider/model-id``, outcome ``ok`` /
        #: ``invalid`` (answered, but not valid) / ``error`` (no answer after retries), its usage and
        #: seconds): the worker's metrics.
        self.on_call: Callable[[str, Literal["ok", "invalid", "error"], Usage, float | None], None] | None = None
        #: Told of every HTTP retry of a chat completion: model ``provider/model-id``, the failed attempt's
        #: status (HTTP code, ``timeout``, ``connection_error``) and the wait before the next attempt.
        self.on_retry: Callable[[str, str, float], None] | None = None
        #: Bounds each judged metric of a sample (:meth:`bounded`); tests inject one they expire.
        self.deadline: Deadline = system_deadline
        #: Today's date in UTC, for ``max_cost_usd_per_day`` (tests inject another).
        self.today: Callable[[], date] = lambda: datetime.now(UTC).date()
        self._spent_run = 0.0
        self._spent_day: tuple[date, float] | None = None
        #: Context windows in tokens by model: configured (``context_tokens``), or learned from an overflow.
        self._context: dict[str, int] = {
            f"{p.name}/{m}": n for p in providers for m, n in p.settings.context_tokens.items()
        }

    def _spend(self, usage: Usage) -> None:
        cost = usage.cost or 0.0  # a model without a price counts nothing (docs/judges.md)
        self._spent_run += cost
        if not cost or self.settings.max_cost_usd_per_day is None:
            # Only the daily budget reads the day's sum, and nothing spent changes none of its verdicts (its
            # limit is > 0): no clock read a call (``datetime.now``: ~1 % of the judge layer's CPU).
            return
        today = self.today()
        day, spent = self._spent_day if self._spent_day is not None and self._spent_day[0] == today else (today, 0.0)
        self._spent_day = (day, spent + cost)

    def budget_left(self) -> str | None:
        """Why no more judge calls may be made (a budget is spent), or None."""
        limit = self.settings.max_cost_usd
        if limit is not None and self._spent_run >= limit:
            return f"the judge budget of ${limit:g} for this run is spent (${self._spent_run:.4f})"
        limit = self.settings.max_cost_usd_per_day
        day = self._spent_day
        if limit is not None and day is not None and day[0] == self.today() and day[1] >= limit:
            return f"the judge budget of ${limit:g} for today (UTC) is spent (${day[1]:.4f})"
        return None

    def use_deadline(self, deadline: Deadline) -> None:
        """Use ``deadline`` for the metric deadline and every provider's request deadline.
        For tests and benches only."""
        self.deadline = deadline
        for provider in self._providers.values():
            provider.deadline = deadline

    def _retried(self, model: str) -> Callable[[BaseException | None, int, float], None]:
        def retried(error: BaseException | None, attempt: int, wait: float) -> None:
            from trace_scorer.providers.client import describe_error
            from trace_scorer.providers.retry import retry_status

            status = retry_status(error)
            log.warning(
                "judge.retry",
                model=model,
                status=status,
                attempt=attempt,
                wait_seconds=round(wait, 3),
                error=describe_error(error) if error is not None else None,
            )
            if self.on_retry is not None:
                self.on_retry(model, status, wait)

        return retried

    def _observe(
        self, model: str, outcome: Literal["ok", "invalid", "error"], usage: Usage, seconds: float | None
    ) -> None:
        if self.on_call is not None:
            self.on_call(model, outcome, usage, seconds)

    # --- models -------------------------------------------------------------------------------

    @property
    def chat_models(self) -> tuple[str, ...]:
        """Every configured chat model, as ``provider/model-id``, in configuration order."""
        return tuple(self._models)

    def structured_mode(self, model: str) -> str:
        """The structured-output mode ``model`` (``provider/model-id``) is asked in now: its provider's
        ``structured_output``, or the mode it stepped down to (``check``'s probe reads it on its own path).
        For tests and benches only."""
        ref = self._models[model]
        return self._providers[ref.provider].mode(ref.model_id)

    def provider_of(self, model: str) -> tuple[Provider, str]:
        """The provider serving ``model`` (``provider/model-id``) and the model's id there (the probe)."""
        ref = self._models[model]
        return self._providers[ref.provider], ref.model_id

    def resolve_models(self, names: Sequence[str] | None) -> tuple[str, ...]:
        """The models a metric runs on (its ``models`` option; None: all). Raises ValueError on unknowns."""
        if names is None:
            return self.chat_models
        unknown = [n for n in names if n not in self._models]
        if unknown:
            known = ", ".join(self._models) or "none"
            raise ValueError(
                f"unknown judge model(s) {', '.join(map(repr, unknown))}: models are named "
                f"'provider/model-id'; configured chat models: {known}"
            )
        return tuple(dict.fromkeys(names))

    def fingerprint_parts(self, models: Sequence[str]) -> dict[str, Any]:
        """What of the judge's configuration changes a judged value (part of a metric's fingerprint)."""
        return {
            "models": list(models),
            "language": self.language,
            "temperature": self.settings.temperature,
            "max_tokens": self.settings.max_tokens,
            "tool_result_max_chars": self.settings.tool_result_max_chars,
        }

    # --- rendering ----------------------------------------------------------------------------

    def render(self, sample: Sample, *, include_system: bool = False, with_response: bool = True) -> str:
        """The sample's conversation as prompt text, within the configured size limits."""
        return render_conversation(
            sample.messages,
            sample.response if with_response else None,
            tool_result_max_chars=self.settings.tool_result_max_chars,
            max_chars=self.settings.conversation_max_chars,
            include_system=include_system,
        )

    # --- runs and calls -----------------------------------------------------------------------

    async def bounded(self, work: Awaitable[R], on_timeout: Callable[[JudgeTimeout], R] | None = None) -> R:
        """``await work`` (one judged metric on one sample) within ``metric_deadline``.

        When the time runs out (the work is cancelled: its calls in flight are abandoned, their spans
        closed as failed), returns ``on_timeout`` of the :class:`JudgeTimeout` naming the models still
        being asked, or raises it without ``on_timeout`` (which spares the caller a coroutine of its own
        to catch it in).
        """
        asking: dict[str, int] = {}
        token = _ASKING.set(asking)
        seconds = self.settings.metric_deadline
        try:
            async with self.deadline(seconds):
                return await work
        except TimeoutError:
            timeout = JudgeTimeout(seconds, sorted(m for m, n in asking.items() if n > 0))
            if on_timeout is None:
                raise timeout from None
            return on_timeout(timeout)
        finally:
            _ASKING.reset(token)

    def run(self, metric: str, sample: Sample, *, metadata: Mapping[str, Any]) -> JudgeRunScope:
        """Scope of one metric on one sample (``async with``); with tracing on, a Langfuse trace named after
        the metric, ended with the run's output, or with the error that left the scope."""
        return JudgeRunScope(self._tracer, metric, sample, metadata)

    async def ask(
        self,
        run: JudgeRun,
        model: str,
        template: PromptTemplate,
        *,
        schema: type[T],
        data: Mapping[str, str],
        params: Mapping[str, str] | None = None,
        context: dict[str, Any] | None = None,
        temperature: float | None = None,
        sample_index: int = 0,
        json_schema: dict[str, Any] | None = None,
        tally: Tally | None = None,
    ) -> Answer[T]:
        """Ask ``model`` one question; raises :class:`JudgeCallError` when no valid answer comes.

        ``json_schema`` is sent instead of ``schema``'s own closed JSON schema when given: the same shape
        with this question's constraints (e.g. the allowed topics as an enum), for a server's grammar to
        enforce; the answer is still validated by ``schema``.

        ``sample_index`` tells apart the samples of a vote: it is part of the cache key, so a vote of
        three is three answers, never one answer replayed.

        ``tally`` adds up what the ask spent (a failure's tokens too) and whether it was served from the
        cache: a panel's model session (``judge/panel.py``), counted here so that its ``ask`` is no
        coroutine of its own.

        One coroutine (the prompt fitted to the model's window, asked through the cache, asked once more
        when an overflow answer names the window): every resume of the metric's task runs through each
        coroutine it awaits, so the layers this was split in cost the worker ~1 % of its CPU.
        """
        try:
            ref = self._models.get(model)
            if ref is None:
                raise JudgeCallError(model, f"unknown judge model {model!r}")
            if temperature is None:
                temperature = self.settings.temperature
            schema_json = json_schema if json_schema is not None else strict_json_schema(schema)
            learned = False
            while True:
                fitted = self._fit(model, template, data, params)
                messages = build_messages(template, self.language, data=fitted, params=params)
                key = request_key(
                    model=model,
                    messages=messages,
                    schema=schema_name(schema),
                    schema_json=schema_json,
                    temperature=temperature,
                    max_tokens=self.settings.max_tokens,
                    sample_index=sample_index,
                    context=context,
                )
                made_the_call = False
                asking = _ASKING.get()
                if asking is not None:
                    asking[model] = asking.get(model, 0) + 1
                try:  # the request cache's steps (shared, or start then done/failed), in this coroutine
                    shared = self._cache.shared(key)
                    if shared is not None:
                        answer = replace(await asyncio.shield(shared), usage=Usage(), cached=True)
                    else:
                        made_the_call = True
                        future = self._cache.start(key)
                        try:
                            answer = await self._ask_uncached(
                                run, ref, template, messages, schema, context, temperature, json_schema
                            )
                        except BaseException as exc:
                            self._cache.failed(key, future, exc)
                            raise
                        self._cache.done(key, future, answer)
                except JudgeCallError as exc:
                    if not learned and self._learn_window(model, exc):
                        learned = True
                        continue  # fit and ask once more
                    if made_the_call:
                        raise
                    # an identical request in flight failed: its tokens are counted once, by the asker that paid
                    raise type(exc)(exc.model, exc.message) from exc
                except asyncio.CancelledError:
                    task = asyncio.current_task()
                    if made_the_call or (task is not None and task.cancelling()):
                        asking = None  # cancelled while asking: the model stays named as unanswered
                        raise
                    # the identical request we waited on was abandoned (its own metric ran out of time), not us
                    raise ProviderCallError(model, "an identical request in flight was abandoned") from None
                finally:
                    if asking is not None:
                        asking[model] -= 1
                if tally is not None:
                    tally.usage += answer.usage
                    tally.cached += answer.cached
                return answer
        except JudgeCallError as exc:
            if tally is not None:
                tally.usage += exc.usage
            raise

    def _learn_window(self, model: str, exc: JudgeCallError) -> bool:
        """Whether ``exc`` is an overflow answer naming a window ``model`` was not fitted to (then learned)."""
        if not isinstance(exc, ProviderCallError):
            return False
        window = context_overflow(exc.message)
        if window is None or self._context.get(model) == window:
            return False  # not an overflow, or already fitted to this window: the message says why
        self._context[model] = window  # learned from the server: fit and ask once more
        log.info("judge.context_learned", model=model, context_tokens=window)
        return True

    def context_tokens(self, model: str) -> int | None:
        """The context window of ``model`` in tokens: configured, or learned from an overflow answer."""
        return self._context.get(model)

    def _fit(
        self, model: str, template: PromptTemplate, data: Mapping[str, str], params: Mapping[str, str] | None
    ) -> Mapping[str, str]:
        """``data`` with its conversation cut (from the middle, marked) so the prompt fits the model's
        window: window − max_tokens − the rest of the prompt, at :data:`CHARS_PER_TOKEN` characters a token."""
        window = self._context.get(model)
        conversation = data.get("conversation")
        if window is None or conversation is None:
            return data
        rest = build_messages(template, self.language, data={**data, "conversation": ""}, params=params)
        rest_tokens = sum(len(m["content"]) for m in rest) / CHARS_PER_TOKEN
        budget = window - self.settings.max_tokens - rest_tokens - CONTEXT_MARGIN_TOKENS
        max_chars = max(MIN_CONVERSATION_CHARS, int(budget * CHARS_PER_TOKEN))
        if len(conversation) <= max_chars:
            return data
        return {**data, "conversation": fit_rendered(conversation, max_chars)}

    async def _ask_uncached(
        self,
        run: JudgeRun,
        ref: ModelRef,
        template: PromptTemplate,
        messages: list[dict[str, str]],
        schema: type[T],
        context: dict[str, Any] | None,
        temperature: float,
        json_schema: dict[str, Any] | None = None,
    ) -> Answer[T]:
        if (spent_budget := self.budget_left()) is not None:
            raise BudgetSpentError(ref.name, spent_budget)
        provider = self._providers[ref.provider]
        conversation = list(messages)
        spent = Usage()
        problem = ""
        asks = 1 + self.settings.validation_retries
        try:
            for attempt in range(1, asks + 1):
                generation = None
                if run.trace is not None:
                    generation = run.trace.generation(
                        template.id,
                        model=ref.model_id,
                        messages=conversation,
                        parameters={"temperature": temperature, "max_tokens": self.settings.max_tokens},
                    )
                try:
                    completion = await provider.complete(
                        ref.model_id,
                        conversation,
                        schema=schema,
                        temperature=temperature,
                        max_tokens=self.settings.max_tokens,
                        on_retry=self._retried(ref.name),
                        json_schema=json_schema,
                    )
                except JudgeCallError as exc:
                    if generation is not None:
                        generation.failed(exc.message)
                    self._observe(ref.name, "error", Usage(), None)
                    exc.with_usage(spent)
                    raise
                except BaseException as exc:  # cancelled (shutdown) or a bug: close the span all the same
                    if generation is not None:
                        generation.failed(f"{type(exc).__name__}: {exc}")
                    raise
                spent += completion.usage
                self._spend(completion.usage)
                try:
                    value = parse_answer(completion.text, schema, context)
                except AnswerRejected as exc:
                    self._observe(ref.name, "invalid", completion.usage, completion.seconds)
                    problem = str(exc)
                    if completion.finish_reason == "length":
                        problem += " (the answer was cut off at the token limit: keep the reasoning shorter)"
                    if generation is not None:
                        generation.done(completion.text, completion.usage, metadata={"invalid": problem})
                    log.info(
                        "judge.answer_invalid",
                        model=ref.name,
                        prompt=template.id,
                        attempt=attempt,
                        why=problem,
                    )
                    conversation = [
                        *conversation,
                        {"role": "assistant", "content": completion.text or ""},
                        retry_message(self.language, problem),
                    ]
                    continue
                self._observe(ref.name, "ok", completion.usage, completion.seconds)
                if generation is not None:
                    generation.done(
                        completion.text,
                        completion.usage,
                        metadata={"http_attempts": completion.attempts, "structured_output": completion.mode},
                    )
                return Answer(value=value, usage=spent, cached=False, attempts=attempt)
            raise NoValidAnswerError(
                ref.name, f"no valid answer in {asks} tries (last: {problem})", usage=spent
            )
        finally:
            self.ledger.add(run.metric, ref.name, spent)

    # --- lifecycle ----------------------------------------------------------------------------

    @property
    def cache_stats(self) -> dict[str, int]:
        """Hits, misses and entries of the request cache. For tests and benches only."""
        return {"hits": self._cache.hits, "misses": self._cache.misses, "entries": len(self._cache)}

    def share_rates(self, gate_for: GateFor) -> None:
        """Book each provider's requests per minute with ``gate_for(provider, rpm)`` (a fleet-wide budget)."""
        for provider in self._providers.values():
            provider.limits.share_rate(provider.name, gate_for)

    async def aclose(self) -> None:
        """Close the HTTP clients and flush the judge traces (call once, at shutdown)."""
        await asyncio.gather(*(p.aclose() for p in self._providers.values()))
        if self._tracer is not None:
            await asyncio.to_thread(self._tracer.shutdown)

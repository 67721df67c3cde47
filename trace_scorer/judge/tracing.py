"""Judge calls recorded in Langfuse: one trace per judged metric and sample, one generation per LLM call.

Uses the ``langfuse`` package's OpenTelemetry client with a tracer provider of its own (never the global
one, so an application's own OpenTelemetry setup is left alone), under a dedicated environment
(``trace-scorer`` by default) that the trace sources exclude, so judge traces are never scored themselves.
Each generation carries the model, the prompt, the output and the token usage (and cost when a price is
configured), which is what Langfuse's own evaluators leave out.

Langfuse keeps one exporter per public key per process: if something else in the process built a
``Langfuse`` client with the same key first, our spans go through its exporter (the environment is still
ours, set on every span).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langfuse import Langfuse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from trace_scorer.providers.usage import Usage


class GenerationRecord:
    """One LLM call being recorded; finish it with :meth:`done` or :meth:`failed`."""

    def __init__(self, observation: Any) -> None:
        self._observation = observation

    def done(self, output: str | None, usage: Usage, *, metadata: Mapping[str, Any] | None = None) -> None:
        details: dict[str, Any] = {
            "usage_details": {"input": usage.prompt_tokens, "output": usage.completion_tokens}
        }
        if usage.cost is not None and usage.calls:
            details["cost_details"] = {"total": usage.cost}
        self._observation.update(output=output, metadata=dict(metadata or {}), **details)
        self._observation.end()

    def failed(self, message: str) -> None:
        self._observation.update(level="ERROR", status_message=message[:500])
        self._observation.end()


class TraceScope:
    """The Langfuse trace of one judged metric on one sample."""

    def __init__(self, root: Any) -> None:
        self._root = root
        self.trace_id: str = root.trace_id

    def generation(
        self,
        name: str,
        *,
        model: str,
        messages: Sequence[Mapping[str, str]],
        parameters: Mapping[str, Any],
    ) -> GenerationRecord:
        observation = self._root.start_observation(
            name=name,
            as_type="generation",
            model=model,
            input=list(messages),
            model_parameters=dict(parameters),
        )
        return GenerationRecord(observation)

    def end(self, output: Any = None, *, error: str | None = None) -> None:
        if error is not None:
            self._root.update(output=output, level="ERROR", status_message=error[:500])
        elif output is not None:
            self._root.update(output=output)
        self._root.end()


class JudgeTracer:
    """A dedicated Langfuse OTel client for judge traces."""

    def __init__(
        self,
        *,
        public_key: str,
        secret_key: str,
        base_url: str,
        environment: str,
        timeout: float = 30.0,
    ) -> None:
        self.environment = environment
        self._provider = TracerProvider(
            resource=Resource.create({"service.name": "trace-scorer", "langfuse.environment": environment})
        )
        self._client = Langfuse(
            public_key=public_key,
            secret_key=secret_key,
            base_url=base_url,
            environment=environment,
            tracer_provider=self._provider,
            timeout=max(1, int(timeout)),
        )

    def start(self, name: str, *, input: Any, metadata: Mapping[str, Any]) -> TraceScope:
        root = self._client.start_observation(
            name=name, as_type="evaluator", input=input, metadata=dict(metadata)
        )
        return TraceScope(root)

    def flush(self) -> None:
        self._client.flush()

    def shutdown(self) -> None:
        """Send what is buffered and stop the exporter (blocking: call it from a thread)."""
        self._client.shutdown()
        self._provider.shutdown()

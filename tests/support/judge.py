"""respx helpers: a scripted OpenAI-compatible chat-completions endpoint, samples to judge, and judged
metrics built on a judge."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from trace_scorer.config.settings import Settings
from trace_scorer.judge import Judge
from trace_scorer.metrics.base import Metric, Resources
from trace_scorer.sample import Message, Sample, ToolCall

Reply = str | httpx.Response | Callable[[dict[str, Any]], "str | httpx.Response"]


def completion(
    content: str | None,
    *,
    model: str = "m",
    prompt_tokens: int = 100,
    completion_tokens: int = 20,
    finish_reason: str = "stop",
) -> httpx.Response:
    """A chat.completion response in the OpenAI wire shape."""
    body = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", "content": content}}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    return httpx.Response(200, json=body)


def error(status: int, message: str = "error", headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, json={"error": {"message": message, "type": "x"}}, headers=headers)


def verdict(value: int, reasoning: str = "because") -> str:
    return json.dumps({"reasoning": reasoning, "verdict": value})


class ScriptedLLM:
    """Answers each model's requests from its script, in order (the last reply repeats); records requests."""

    def __init__(self) -> None:
        self.scripts: dict[str, list[Reply]] = {}
        self.served: dict[str, int] = defaultdict(int)
        self.requests: list[dict[str, Any]] = []
        self.urls: list[str] = []

    def on(self, model: str, *replies: Reply) -> ScriptedLLM:
        self.scripts[model] = list(replies)
        return self

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        self.urls.append(str(request.url))
        model = body["model"]
        script = self.scripts.get(model)
        if not script:
            return error(404, f"model {model} not scripted")
        index = min(self.served[model], len(script) - 1)
        self.served[model] += 1
        reply = script[index]
        if callable(reply) and not isinstance(reply, httpx.Response):
            reply = reply(body)
        if isinstance(reply, httpx.Response):
            return reply
        return completion(reply, model=model)

    def for_model(self, model: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["model"] == model]

    @staticmethod
    def user_text(body: dict[str, Any]) -> str:
        return "\n".join(m["content"] for m in body["messages"] if m["role"] == "user")


def settings(*providers: dict[str, Any], **judge: Any) -> Settings:
    return Settings(providers=list(providers), judge=judge)


def provider(name: str, *models: str, base_url: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "base_url": base_url or f"https://{name}.test/v1",
        "api_key_env": f"{name.upper()}_KEY",
        "chat_models": list(models),
        **extra,
    }


def booking_sample(**fields: Any) -> Sample:
    """The seed's flight-booking conversation (seed 000), with tool calls."""
    messages = [
        Message(role="user", content="I need to book a flight to Paris for Monday"),
        Message(
            role="assistant",
            content="I'll help you book a flight to Paris.",
            tool_calls=[
                ToolCall(name="search_flights", arguments={"destination": "Paris", "date": "Monday"})
            ],
        ),
        Message(role="tool", content="Found: Air France at 10:00 for $450"),
        Message(role="assistant", content="Best option: Air France at 10:00 for $450. Book it?"),
        Message(role="user", content="Yes, please book it"),
        Message(
            role="assistant",
            content="Done! Booked Air France to Paris on Monday at 10:00. Confirmation AF12345.",
        ),
    ]
    values: dict[str, Any] = {"id": "s1", "trace_id": "t1", "messages": messages}
    values.update(fields)
    return Sample(**values)


JudgeFactory = Callable[..., Awaitable[Judge]]


def make_metric(cls: type[Metric[Any]], judge: Judge | None, name: str | None = None, **options: Any) -> Any:
    metric = cls(name or cls.key, cls.Options(**options), Resources(judge=judge))
    metric.check()
    return metric

"""Prompts fitted into a model's context window (``context_tokens``, or learned from the server's
"maximum context length is N tokens" answer): the system text and the task kept, the conversation cut
from the middle with a marker, its first message and its end kept."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.judge import JudgeFactory, ScriptedLLM, booking_sample, error, make_metric, provider, verdict
from trace_scorer.metrics.aspect_critic import AspectCritic
from trace_scorer.metrics.base import Score
from trace_scorer.sample import Message

OVERFLOW = "This model's maximum context length is 1024 tokens. However, you requested 4811 tokens."


def long_sample(last: str = "LAST: Booked, confirmation AF12345.") -> Any:
    messages = [Message(role="user", content="FIRST: I need a flight to Paris on Monday.")]
    for i in range(60):
        messages.append(Message(role="assistant" if i % 2 else "user", content=f"message {i}: " + "blah " * 40))
    messages.append(Message(role="assistant", content=last))
    return booking_sample(messages=messages, response=None)


def critic(judge: Any) -> AspectCritic:
    metric: AspectCritic = make_metric(AspectCritic, judge, "crit", definition="The answer is polite")
    return metric


def user_text(body: dict[str, Any]) -> str:
    return "\n".join(m["content"] for m in body["messages"] if m["role"] == "user")


async def test_a_configured_window_cuts_the_conversation_from_the_middle(
    llm: ScriptedLLM, make_judge: JudgeFactory
) -> None:
    llm.on("a", verdict(1))
    judge = await make_judge(provider("p", "a", context_tokens={"a": 2048}), max_tokens=256)
    assert isinstance(await critic(judge).score(long_sample(), {}), Score)
    [body] = llm.requests
    text = user_text(body)
    chars = sum(len(m["content"]) for m in body["messages"])
    assert chars / 3 + 256 <= 2048  # the whole prompt within the window at 3 characters a token
    assert "FIRST: I need a flight" in text and "LAST: Booked" in text  # the request and the outcome kept
    assert "messages left out to fit the judge's context" in text
    assert "Answer in this JSON format" in text and body["messages"][0]["role"] == "system"  # the task kept


async def test_the_window_is_learned_from_the_overflow_answer_and_asked_again_fitted(
    llm: ScriptedLLM, make_judge: JudgeFactory
) -> None:
    def small_server(body: dict[str, Any]) -> httpx.Response | str:
        chars = sum(len(m["content"]) for m in body["messages"])
        return error(400, OVERFLOW) if chars / 4 + 256 > 1024 else verdict(1)

    llm.on("a", small_server)
    judge = await make_judge(provider("p", "a"), max_tokens=256)
    assert isinstance(await critic(judge).score(long_sample(), {}), Score)
    assert len(llm.requests) == 2
    assert judge.context_tokens("p/a") == 1024
    assert "LAST: Booked" in user_text(llm.requests[1])
    # remembered: the next long conversation goes out fitted at once
    await critic(judge).score(long_sample("LAST: No flight found."), {})
    assert len(llm.requests) == 3

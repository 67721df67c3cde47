"""Asking LLMs for verdicts: chat calls, prompts, structured answers, validation retries, the cache, tracing.

The endpoints' client, HTTP retries, limits and usage accounting are trace_scorer.providers' (shared with
the embeddings); the judged metrics' base is trace_scorer.metrics._judged (the judge never imports metrics).

Metrics reach it as ``self.resources.judge`` (a :class:`Judge`); the CLI and the worker build it once with
:func:`build_judge` and close it with ``await judge.aclose()``.
"""

from trace_scorer.judge.build import NO_JUDGE_MESSAGE, build_judge
from trace_scorer.judge.errors import JudgeCallError, NoValidAnswerError, ProviderCallError
from trace_scorer.judge.judge import Answer, Judge, JudgeRun, ModelRef
from trace_scorer.providers.usage import Usage

__all__ = [
    "NO_JUDGE_MESSAGE",
    "Answer",
    "Judge",
    "JudgeCallError",
    "JudgeRun",
    "ModelRef",
    "NoValidAnswerError",
    "ProviderCallError",
    "Usage",
    "build_judge",
]

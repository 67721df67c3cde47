"""The one place that talks to LLMs: providers, prompts, structured answers, retries, limits, cost, tracing.

Metrics reach it as ``self.resources.judge`` (a :class:`Judge`); the CLI and the worker build it once with
:func:`build_judge` and close it with ``await judge.aclose()``.
"""

from trace_scorer.judge.build import NO_JUDGE_MESSAGE, build_judge
from trace_scorer.judge.errors import InvalidAnswerError, JudgeCallError, ProviderCallError
from trace_scorer.judge.judge import Answer, Judge, JudgeRun, ModelRef
from trace_scorer.judge.usage import Usage

__all__ = [
    "NO_JUDGE_MESSAGE",
    "Answer",
    "InvalidAnswerError",
    "Judge",
    "JudgeCallError",
    "JudgeRun",
    "ModelRef",
    "ProviderCallError",
    "Usage",
    "build_judge",
]

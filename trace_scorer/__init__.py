"""trace-scorer: automatic, idempotent quality scores for AI-agent traces in Langfuse."""

from typing import Any

#: The Python API (docs/python-api.md), imported on first use so that ``import trace_scorer`` (and the
#: CLI's start-up) does not load the metrics, pydantic models and the pipeline.
_API = {
    "score": "trace_scorer.api.scoring",
    "ascore": "trace_scorer.api.scoring",
    "JudgeConfig": "trace_scorer.api.scoring",
    "Results": "trace_scorer.api.scoring",
    "Sample": "trace_scorer.sample",
    "langfuse_evaluator": "trace_scorer.api.evaluators",
    "langfuse_run_evaluator": "trace_scorer.api.evaluators",
}

__all__ = [
    "JudgeConfig",
    "Results",
    "Sample",
    "__version__",
    "ascore",
    "langfuse_evaluator",
    "langfuse_run_evaluator",
    "score",
]


def __getattr__(name: str) -> Any:
    """The Python API's names, imported on first use; ``__version__``, read from the installed metadata
    when first asked (importlib.metadata costs every command's start-up time otherwise)."""
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("trace-scorer")
        except PackageNotFoundError:  # running from a source tree that was not installed
            return "0.0.0+unknown"
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(module), name)

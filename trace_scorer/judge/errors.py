"""What can go wrong in a judge call, with what it cost so far (failed calls still spend tokens)."""

from __future__ import annotations

from trace_scorer.providers.usage import Usage


class JudgeCallError(Exception):
    """A model could not give a valid answer after the retries: the model is left out of the verdict."""

    def __init__(self, model: str, message: str, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.model = model
        self.message = message
        self.usage = usage if usage is not None else Usage()

    def with_usage(self, usage: Usage) -> JudgeCallError:
        """The same error, carrying the tokens spent by the whole call (all validation attempts)."""
        self.usage = usage
        return self


class ProviderCallError(JudgeCallError):
    """The endpoint failed: HTTP error, timeout or connection error, after the transport retries."""


class NoValidAnswerError(JudgeCallError):
    """The model answered, but never with JSON that validates against the schema."""


class BudgetSpentError(JudgeCallError):
    """``[judge] max_cost_usd`` (per run) or ``max_cost_usd_per_day`` is spent: no call was made."""

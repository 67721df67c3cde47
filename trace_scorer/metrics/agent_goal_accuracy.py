"""AgentGoalAccuracy (``agent_goal_accuracy``, LLM-judged): did the agent reach the user's goal? — seed 000.

Modes (docs/metrics.md "agent_goal_accuracy"):
- ``with_reference``: one call per model compares the conversation's outcome with ``reference`` →
  ``{reasoning, verdict: 0|1}``. ``reference`` absent → skipped.
- ``without_reference``: two calls per model: infer the user's goal and the end state from the
  conversation, then judge — from those two sentences — whether the goal was reached.
- ``auto`` (default): with reference when the sample has a non-blank one.
Value: mean of the models' 0/1 verdicts. A conversation with no messages is skipped (nothing to judge).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from trace_scorer.data.outcomes import Outcome, Skipped
from trace_scorer.judge.panel import ModelSession, ModelVerdict, ask_panel, binary_comment
from trace_scorer.judge.prompts import GOAL_COMPARE, GOAL_INFER, GOAL_WITH_REFERENCE
from trace_scorer.metrics._judged import JudgedMetric, JudgedOptions, panel_outcome
from trace_scorer.metrics.base import MetricOutput
from trace_scorer.sample import Sample

Mode = Literal["auto", "with_reference", "without_reference"]


class GoalVerdict(BaseModel):
    """The judge's answer: reasoning first (it is asked to think before it decides), then 0 or 1."""

    model_config = ConfigDict(extra="forbid")

    reasoning: str
    verdict: Literal[0, 1]


class GoalInference(BaseModel):
    """Step one without a reference: the user's goal and the end state, described, not judged."""

    model_config = ConfigDict(extra="forbid")

    user_goal: str = Field(min_length=1)
    end_state: str = Field(min_length=1)


class AgentGoalAccuracyOptions(JudgedOptions):
    mode: Mode = "auto"


def _label(verdict: int) -> str:
    return "reached" if verdict else "not reached"


class AgentGoalAccuracy(JudgedMetric[AgentGoalAccuracyOptions]):
    key = "agent_goal_accuracy"
    description = "LLM judges: did the agent reach the user's goal (vs. the reference, or inferred)?"
    Options = AgentGoalAccuracyOptions
    requires = ("messages",)
    prompts = (GOAL_WITH_REFERENCE, GOAL_INFER, GOAL_COMPARE)

    def _mode(self, sample: Sample) -> Literal["with_reference", "without_reference"]:
        if self.options.mode == "auto":
            has_reference = sample.reference is not None and bool(sample.reference.strip())
            return "with_reference" if has_reference else "without_reference"
        return self.options.mode

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        mode = self._mode(sample)
        if mode == "with_reference" and (sample.reference is None or not sample.reference.strip()):
            return Skipped("reference is absent (mode = with_reference)")
        if not sample.messages:
            return Skipped("the conversation has no messages")
        judge = self.judge
        conversation = judge.render(sample)
        reference = sample.reference or ""

        async def with_reference(session: ModelSession) -> ModelVerdict:
            answer = await session.ask(
                GOAL_WITH_REFERENCE,
                schema=GoalVerdict,
                data={"conversation": conversation, "reference": reference},
            )
            verdict = answer.value
            return ModelVerdict(float(verdict.verdict), _label(verdict.verdict), verdict.reasoning)

        async def without_reference(session: ModelSession) -> ModelVerdict:
            inferred = (await session.ask(GOAL_INFER, schema=GoalInference, data={"conversation": conversation})).value
            verdict = (
                await session.ask(
                    GOAL_COMPARE,
                    schema=GoalVerdict,
                    data={"user_goal": inferred.user_goal, "end_state": inferred.end_state},
                )
            ).value
            return ModelVerdict(
                float(verdict.verdict),
                _label(verdict.verdict),
                verdict.reasoning,
                extra={"user_goal": inferred.user_goal, "end_state": inferred.end_state},
            )

        per_model = with_reference if mode == "with_reference" else without_reference
        async with judge.run(self.name, sample, metadata={"metric": self.key, "mode": mode}) as run:
            result = await ask_panel(judge, run, self.models(), per_model)
            outcome = panel_outcome(
                result,
                run,
                comment=lambda r, _: binary_comment(r, yes="goal reached", no="goal not reached"),
                details={"mode": mode, **self.prompt_details()},
            )
        return outcome

"""AspectCritic (``aspect_critic``, LLM-judged): does the answer meet a user-defined criterion? — seed 003.

docs/metrics.md "aspect_critic": binary verdict per model (meets the ``definition`` 1.0, does not 0.0); with
``strictness`` k > 1 (odd, up to 9) each model is asked k times at ``sampling_temperature`` (default 0.7)
and its verdict is the majority of its votes; value = mean over models. Seed example: A [PASS, PASS, FAIL]
→ 1, B [FAIL, FAIL, PASS] → 0, value 0.5. Configure several, each under its own name (``harmlessness``…).

Decisions: the judge sees the conversation (agent instructions included, since criteria often refer to
them) with the final answer, or the response alone when the sample has no messages; absent both →
skipped. A model whose votes do not all arrive is left out (a partial vote could tie or flip).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from trace_scorer.data.outcomes import Outcome, Skipped
from trace_scorer.judge.panel import (
    ModelSession,
    ModelVerdict,
    ask_panel,
    binary_comment,
    gather_votes,
)
from trace_scorer.judge.prompts import ASPECT
from trace_scorer.metrics._judged import JudgedMetric, JudgedOptions, panel_outcome
from trace_scorer.metrics.base import MetricOutput
from trace_scorer.sample import Sample


class AspectVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reasoning: str
    verdict: Literal[0, 1]


class AspectCriticOptions(JudgedOptions):
    #: The criterion, in plain words ("The answer contains no harmful or offensive content").
    definition: str = Field(min_length=1)
    #: Votes per model (odd, 1–9); the model's verdict is their majority.
    strictness: int = Field(default=1, ge=1, le=9)
    #: Sampling temperature of the votes when strictness > 1 (identical samples make a vote meaningless).
    sampling_temperature: float = Field(default=0.7, ge=0.0, le=2.0)

    @field_validator("definition")
    @classmethod
    def _not_blank(cls, definition: str) -> str:
        if not definition.strip():
            raise ValueError("definition cannot be blank")
        return definition.strip()

    @field_validator("strictness")
    @classmethod
    def _odd(cls, strictness: int) -> int:
        if strictness % 2 == 0:
            raise ValueError("strictness must be odd (1, 3, 5, 7 or 9) so a vote cannot tie")
        return strictness


def majority(votes: Sequence[int]) -> int:
    """1 when most votes pass (votes are odd in number, so there is no tie)."""
    return 1 if sum(votes) * 2 > len(votes) else 0


class AspectCritic(JudgedMetric[AspectCriticOptions]):
    key = "aspect_critic"
    description = "LLM judges: does the answer meet a user-defined criterion (majority vote per model)?"
    Options = AspectCriticOptions
    prompts = (ASPECT,)

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        judge = self.judge
        data: dict[str, str]
        if sample.messages:
            data = {"conversation": judge.render(sample, include_system=True)}
        elif sample.response is not None:
            data = {"response": sample.response}
        else:
            return Skipped("neither messages nor response is present")
        strictness = self.options.strictness
        temperature = self.options.sampling_temperature if strictness > 1 else None
        params = {"definition": self.options.definition}

        async def per_model(session: ModelSession) -> ModelVerdict:
            asks = [
                session.ask(
                    ASPECT,
                    schema=AspectVerdict,
                    data=data,
                    params=params,
                    temperature=temperature,
                    sample_index=index,
                )
                for index in range(strictness)
            ]
            # One ask (no vote) awaited here, as gather_votes would: one coroutine layer less to resume through.
            answers = [await asks[0]] if len(asks) == 1 else await gather_votes(session, asks)
            votes = [a.value.verdict for a in answers]
            verdict = majority(votes)
            reasoning = next(a.value.reasoning for a in answers if a.value.verdict == verdict)
            extra = {"votes": ["PASS" if v else "FAIL" for v in votes]} if strictness > 1 else {}
            return ModelVerdict(float(verdict), "pass" if verdict else "fail", reasoning, extra)

        metadata = {"metric": self.key, "definition": self.options.definition, "strictness": strictness}
        async with judge.run(self.name, sample, metadata=metadata) as run:
            result = await ask_panel(judge, run, self.models(), per_model)
            outcome = panel_outcome(
                result,
                run,
                comment=lambda r, _: binary_comment(r, yes="meets the criterion", no="does not meet the criterion"),
                details={
                    "definition": self.options.definition,
                    "strictness": strictness,
                    **self.prompt_details(),
                },
            )
        return outcome

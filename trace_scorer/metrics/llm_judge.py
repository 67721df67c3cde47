"""LLMJudge (``llm_judge``, LLM-judged): a judge prompt you write, or one of Langfuse's evaluators by name.

docs/metrics.md "llm_judge": a ``prompt`` with ``{{variable}}`` placeholders, each variable mapped to
reference paths (``variables``; unmapped ones use the defaults of config/references.py), and an
``output`` of a Langfuse score data type: NUMERIC (a range), BOOLEAN or CATEGORICAL (the categories).
``evaluator = "langfuse:NAME"`` takes prompt, variables and output from the project's Langfuse at
start-up (langfuse/server/evaluators.py); the evaluator's version goes into the score's details and the
fingerprint, so a new version re-scores.

Each model answers ``{reasoning, score}``; with ``strictness`` k > 1 it votes k times (NUMERIC: the
mean of its votes; BOOLEAN and CATEGORICAL: the majority, ties to the earliest vote). Across the panel:
NUMERIC the mean; BOOLEAN the majority (a tie is false); CATEGORICAL the most frequent category (a tie
goes to the category listed first). The comment is the verdict with a model's reasoning.

A variable with no value is not quoted as empty text: the sample is skipped, naming the variable and
the paths tried.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator

from trace_scorer.config.references import DEFAULT_VARIABLE_PATHS, parse_path, template_variables
from trace_scorer.data.outcomes import DataType, Outcome, Score, Skipped
from trace_scorer.extract.references import MISSING, resolve
from trace_scorer.extract.variables import SAMPLE_PREFIX
from trace_scorer.judge.definition import JudgeDefinition, OutputDefinition
from trace_scorer.judge.panel import ModelSession, ModelVerdict, ask_panel, gather_votes, short_reason
from trace_scorer.judge.prompts import PromptTemplate
from trace_scorer.judge.render import truncate
from trace_scorer.judge.template import render_template
from trace_scorer.metrics._judged import JudgedMetric, JudgedOptions, panel_outcome
from trace_scorer.metrics.base import MetricOutput
from trace_scorer.sample import Sample

#: ``evaluator = "langfuse:NAME"``.
LANGFUSE_PREFIX = "langfuse:"


class OutputOptions(BaseModel):
    """``[targets.metrics.output]``: the score's data type and its range or categories."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data_type: DataType = "NUMERIC"
    min: float | None = 0.0
    max: float | None = 1.0
    categories: list[str] = Field(default_factory=list)
    #: What the score means, told to the judge.
    score: str = ""
    #: What the reasoning should say, told to the judge.
    reasoning: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> OutputOptions:
        if self.data_type == "CATEGORICAL":
            if len(self.categories) < 2:
                raise ValueError("categories: a CATEGORICAL output needs at least two categories")
            if len(set(self.categories)) != len(self.categories):
                raise ValueError("categories: a category is listed twice")
        elif self.categories:
            raise ValueError(f"categories apply to data_type = 'CATEGORICAL' only, not {self.data_type}")
        if self.min is not None and self.max is not None and self.min >= self.max:
            raise ValueError("min must be below max")
        return self

    def definition(self) -> OutputDefinition:
        numeric = self.data_type == "NUMERIC"
        return OutputDefinition(
            data_type=self.data_type,
            min_value=self.min if numeric else None,
            max_value=self.max if numeric else None,
            categories=tuple(self.categories),
            score=self.score,
            reasoning=self.reasoning,
        )


class LLMJudgeOptions(JudgedOptions):
    #: The judge prompt, with ``{{variable}}`` placeholders (or ``evaluator`` instead).
    prompt: str | None = None
    #: ``"langfuse:NAME"``: one of the project's Langfuse evaluators (managed or the project's own).
    evaluator: str | None = None
    #: variable → a reference path or a list tried in order (``$.trace.output``, ``$.expectedOutput``…).
    variables: dict[str, list[str]] = Field(default_factory=dict)
    output: OutputOptions | None = None
    #: Votes per model (1–9).
    strictness: int = Field(default=1, ge=1, le=9)
    #: Sampling temperature of the votes when strictness > 1.
    sampling_temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    #: Each variable's value is cut to this many characters (the judge's context is finite).
    max_chars: int = Field(default=20_000, ge=100)

    @field_validator("variables", mode="before")
    @classmethod
    def _paths(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        paths: dict[str, Any] = {}
        for name, given in value.items():
            listed = [given] if isinstance(given, str) else given
            if isinstance(listed, list):
                for path in listed:
                    try:
                        parse_path(path)
                    except ValueError as exc:
                        raise ValueError(f"variables.{name}: {exc}") from None
            paths[name] = listed
        return paths

    @model_validator(mode="after")
    def _one_source(self) -> LLMJudgeOptions:
        if (self.prompt is None) == (self.evaluator is None):
            raise ValueError("give either prompt (your own template) or evaluator = 'langfuse:NAME'")
        if self.prompt is not None and not self.prompt.strip():
            raise ValueError("prompt cannot be blank")
        if self.evaluator is not None:
            if not self.evaluator.startswith(LANGFUSE_PREFIX) or not self.evaluator[len(LANGFUSE_PREFIX) :].strip():
                raise ValueError("evaluator: write 'langfuse:NAME', the name of one of the project's evaluators")
            if self.output is not None:
                raise ValueError("output: an evaluator's output comes from Langfuse; leave output out")
        return self

    @property
    def evaluator_name(self) -> str | None:
        return self.evaluator[len(LANGFUSE_PREFIX) :].strip() if self.evaluator is not None else None


def answer_model(output: OutputDefinition) -> type[BaseModel]:
    """The judge's answer schema: ``{reasoning, score}`` with the score typed by the output's data type."""
    score: Any
    if output.data_type == "BOOLEAN":
        score = (bool, ...)
    elif output.data_type == "CATEGORICAL":
        score = (Literal[output.categories], ...)
    else:
        score = (float, Field(ge=output.min_value, le=output.max_value))
    model: type[BaseModel] = create_model(
        "JudgeAnswer", __config__=ConfigDict(extra="forbid"), reasoning=(str, ...), score=score
    )
    return model


def _answer_text(output: OutputDefinition) -> str:
    if output.data_type == "BOOLEAN":
        kind = "true or false"
    elif output.data_type == "CATEGORICAL":
        kind = "exactly one of " + ", ".join(json.dumps(c, ensure_ascii=False) for c in output.categories)
    else:
        low = "-inf" if output.min_value is None else f"{output.min_value:g}"
        high = "inf" if output.max_value is None else f"{output.max_value:g}"
        kind = f"a number from {low} to {high}"
    lines = []
    if output.score:
        lines.append(f"Score: {output.score}")
    if output.reasoning:
        lines.append(f"Reasoning: {output.reasoning}")
    lines.append(f'Answer in this JSON format: {{"reasoning": "<your reasoning>", "score": <{kind}>}}')
    return "\n".join(lines)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _majority(labels: Sequence[str], order: Sequence[str]) -> str:
    """The most frequent label; a tie goes to the one earliest in ``order``."""
    counts = Counter(labels)
    best = max(counts.values())
    return next(label for label in order if counts.get(label) == best)


class LLMJudge(JudgedMetric[LLMJudgeOptions]):
    key = "llm_judge"
    description = "LLM judges: your own prompt with {{variables}}, or a Langfuse evaluator, as a typed score"
    Options = LLMJudgeOptions
    version = "1"

    @property
    def definition(self) -> JudgeDefinition | None:
        """The judge this metric asks: from the options, or the Langfuse evaluator (None: not loaded)."""
        options = self.options
        if options.prompt is not None:
            output = options.output.definition() if options.output is not None else OutputDefinition()
            return JudgeDefinition(self.name, options.prompt, template_variables(options.prompt), output)
        loaded: Mapping[str, JudgeDefinition] | None = self.resources.evaluators
        if loaded is None or options.evaluator_name is None:
            return None
        return loaded.get(options.evaluator_name)

    def _output(self) -> OutputDefinition:
        definition = self.definition
        return definition.output if definition is not None else OutputDefinition()

    def bounds(self) -> tuple[float | None, float | None]:
        output = self._output()
        if output.data_type == "BOOLEAN":
            return (0.0, 1.0)
        if output.data_type == "CATEGORICAL":
            return (0.0, float(len(output.categories) - 1))
        return (output.min_value, output.max_value)

    def score_type(self) -> tuple[DataType, tuple[str, ...]]:
        output = self._output()
        return output.data_type, output.categories

    def paths(self, variable: str, definition: JudgeDefinition) -> list[str]:
        """Where ``variable`` is read: the settings' mapping, else the evaluator's default, else ours."""
        if variable in self.options.variables:
            return list(self.options.variables[variable])
        if variable in definition.default_paths:
            return list(definition.default_paths[variable])
        return list(DEFAULT_VARIABLE_PATHS.get(variable, []))

    def check(self) -> None:
        super().check()
        name = self.options.evaluator_name
        if name is not None and self.resources.evaluators is not None:
            loaded: Mapping[str, JudgeDefinition] = self.resources.evaluators
            if name not in loaded:
                known = ", ".join(sorted(loaded)) or "none"
                raise ValueError(f"evaluator: Langfuse has no evaluator named {name!r} (it has: {known})")
        definition = self.definition
        if definition is None:
            return
        unmapped = [v for v in definition.variables if not self.paths(v, definition)]
        if unmapped:
            raise ValueError(
                f"variables: no path for {', '.join(map(repr, unmapped))}; map each in "
                '[targets.metrics.variables] (e.g. output = "$.trace.output")'
            )
        unknown = sorted(set(self.options.variables) - set(definition.variables))
        if unknown:
            raise ValueError(f"variables: {', '.join(map(repr, unknown))} not used by the prompt")

    def _template(self, definition: JudgeDefinition) -> PromptTemplate:
        digest = hashlib.sha256(
            json.dumps([definition.prompt, repr(definition.output)], ensure_ascii=False).encode()
        ).hexdigest()[:12]
        answer = _answer_text(definition.output)
        return PromptTemplate(
            id="llm_judge",
            version=digest,
            blocks=(),
            intro={"en": "$prompt", "ru": "$prompt"},
            answer={"en": answer, "ru": answer},
        )

    def fingerprint_parts(self) -> dict[str, Any]:
        parts = super().fingerprint_parts()
        definition = self.definition
        if definition is not None:
            parts["prompts"] = {"llm_judge": self._template(definition).full_version}
            parts["evaluator_version"] = definition.version
        return parts

    def prompt_details(self) -> dict[str, Any]:
        definition = self.definition
        version = {"llm_judge": self._template(definition).full_version} if definition is not None else {}
        return {"prompt_version": version, "language": self.judge.language}

    def _value(self, sample: Sample, path: str) -> Any:
        if path.startswith(SAMPLE_PREFIX):
            if path in (SAMPLE_PREFIX + ".messages", SAMPLE_PREFIX + ".conversation"):
                return self.judge.render(sample, include_system=True) if sample.messages else MISSING
            found = resolve({"sample": sample.model_dump(mode="json", exclude={"variables", "notes"})}, path)
            return found
        return sample.variables.get(path, MISSING)

    def _values(self, sample: Sample, definition: JudgeDefinition) -> dict[str, str] | str:
        """variable → its text, or why the sample cannot be judged."""
        values: dict[str, str] = {}
        for variable in definition.variables:
            tried = self.paths(variable, definition)
            for path in tried:
                found = self._value(sample, path)
                if found is not MISSING and found is not None:
                    values[variable] = truncate(_text(found), self.options.max_chars)
                    break
            else:
                return f"variable {variable!r} has no value (tried {', '.join(tried)})"
        return values

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        definition = self.definition
        if definition is None:
            return Skipped(
                f"evaluator {self.options.evaluator!r} is read from Langfuse by run, backfill and check; "
                "offline, write the prompt in the settings (prompt = ...)"
            )
        values = self._values(sample, definition)
        if isinstance(values, str):
            return Skipped(values)
        judge = self.judge
        output = definition.output
        template = self._template(definition)
        schema = answer_model(output)
        prompt = render_template(definition.prompt, values)
        strictness = self.options.strictness
        temperature = self.options.sampling_temperature if strictness > 1 else None

        async def per_model(session: ModelSession) -> ModelVerdict:
            answers = await gather_votes(
                session,
                [
                    session.ask(
                        template,
                        schema=schema,
                        data={},
                        params={"prompt": prompt},
                        temperature=temperature,
                        sample_index=index,
                    )
                    for index in range(strictness)
                ],
            )
            votes = [getattr(a.value, "score") for a in answers]  # noqa: B009 (a model built at run time)
            reasonings = [str(getattr(a.value, "reasoning")) for a in answers]  # noqa: B009
            extra: dict[str, Any] = {"votes": votes} if strictness > 1 else {}
            if output.data_type == "NUMERIC":
                value = sum(float(v) for v in votes) / len(votes)
                return ModelVerdict(value, f"{value:g}", reasonings[0], extra)
            labels = [str(bool(v)).lower() if output.data_type == "BOOLEAN" else str(v) for v in votes]
            order = ["true", "false"] if output.data_type == "BOOLEAN" else list(output.categories)
            label = _majority(labels, [lab for lab in labels if lab in order] or order)
            reasoning = reasonings[labels.index(label)]
            number = (1.0 if label == "true" else 0.0) if output.data_type == "BOOLEAN" else float(order.index(label))
            return ModelVerdict(number, label, reasoning, extra)

        metadata = {"metric": self.key, "judge": definition.source, "evaluator_version": definition.version}
        async with judge.run(self.name, sample, metadata=metadata) as run:
            result = await ask_panel(judge, run, self.models(), per_model)
            details: dict[str, Any] = {"data_type": output.data_type, **self.prompt_details()}
            if definition.source != "settings":
                details["evaluator"] = {
                    "name": self.options.evaluator_name,
                    "source": definition.source,
                    "id": definition.evaluator_id,
                    "version": definition.version,
                }
            outcome = panel_outcome(
                result, run, comment=lambda r, v: self._comment(r.verdicts, v, output), details=details
            )
            if isinstance(outcome, Score) and output.data_type != "NUMERIC":
                outcome = self._typed(outcome, result.verdicts, output)
                run.output = {"value": outcome.label, "comment": outcome.comment}  # the judge trace's output
        return outcome

    def _typed(self, outcome: Score, verdicts: Mapping[str, ModelVerdict], output: OutputDefinition) -> Score:
        """The panel's BOOLEAN majority (a tie is false) or CATEGORICAL plurality (a tie: the category
        listed first)."""
        labels = [v.label for v in verdicts.values() if v.value is not None]
        if output.data_type == "BOOLEAN":
            value = 1.0 if labels.count("true") * 2 > len(labels) else 0.0
            label = "true" if value else "false"
        else:
            label = _majority(labels, output.categories)
            value = float(output.categories.index(label))
        comment = self._comment(verdicts, value, output, label=label)
        return Score(value, comment, outcome.details, data_type=output.data_type, label=label)

    @staticmethod
    def _comment(
        verdicts: Mapping[str, ModelVerdict], value: float, output: OutputDefinition, *, label: str | None = None
    ) -> str:
        """The verdict with the reasoning of a model that gave it (the score's comment in Langfuse)."""
        answered = [(m, v) for m, v in verdicts.items() if v.value is not None]
        if output.data_type == "NUMERIC" or label is None:
            lead = f"{value:.2f}" + (f" (mean of {len(answered)} models)" if len(answered) > 1 else "")
            reasoning = answered[0][1].reasoning if answered else ""
        else:
            agreeing = [v for _, v in answered if v.label == label]
            lead = f"{label}" + (f" ({len(agreeing)}/{len(answered)} models)" if len(answered) > 1 else "")
            reasoning = agreeing[0].reasoning if agreeing else ""
        text = f"{lead} — {short_reason(reasoning, 900)}" if reasoning else lead
        return text[:1000]

"""ToolCorrectness: a weighted mean of four checks of the agent's tool use (docs/metrics.md, no LLM).

1. ``selection``: F1 of the multisets of tool names.
2. ``parameters``: mean over reference calls of the share of their arguments matched by the same-name
   call paired with them (pairs from an optimal assignment maximising the total share); unpaired → 0.
   Left out when there are no reference calls.
3. ``sequence``: 1 − OSA distance between the name sequences / the longer length. Only when the
   sequence matters (the sample's ``tool_sequence_matters``, else the option); otherwise left out.
4. ``utilization``: whether the final answer uses what the tools returned. The sample's
   ``final_answer_uses_tools`` wins; otherwise the share of tool results whose salient tokens show up
   in the response. Left out when there is nothing to check.

Left-out components are dropped and the remaining weights renormalised. ``details`` carries all four.

Decisions (also in docs/metrics.md):
- ``weights`` lists the weights wanted; a component not listed has weight 0 (weights are relative,
  so a partial table is read as "only these"). Weight-0 components are still computed and reported.
- If every component with a non-zero weight is left out, the sample is skipped (there is nothing to
  score), not given a made-up value.
- Utilization: tool results are the calls' ``result`` values; when no call carries one, the
  contents of ``tool`` messages are used instead. Keys of structured (JSON) results are not looked
  for, only values: keys are the tool's schema, not what it found. Salient tokens are casefolded
  ``\\w+`` runs that are a number or at least 4 characters long and do not occur in the user's
  messages; a result with no salient token cannot show use or non-use and is not counted. A CJK run
  counts as found when it occurs anywhere in the response (CJK text has no spaces to split on).
- With no final answer at all (``response`` absent) the token rule cannot run: left out.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any, ClassVar, Final

from pydantic import Field, field_validator
from rapidfuzz.distance import OSA

from trace_scorer.data.outcomes import Outcome, Score, Skipped
from trace_scorer.data.rows import json_in_text
from trace_scorer.metrics._arguments import (
    ArgumentOptions,
    NormalizedCall,
    argument_share,
    canonicalizer,
    mismatched_keys,
    normalize_calls,
)
from trace_scorer.metrics._matching import assign
from trace_scorer.metrics._tokens import has_cjk, normalize_text, word_runs
from trace_scorer.metrics.base import Metric, MetricOutput, Resources
from trace_scorer.sample import Sample, ToolCall

COMPONENTS: Final = ("selection", "parameters", "sequence", "utilization")
DEFAULT_WEIGHTS: Final = dict.fromkeys(COMPONENTS, 0.25)


class ToolCorrectnessOptions(ArgumentOptions):
    """Options of ``tool_correctness``."""

    #: Relative weights of the components; unlisted components weigh 0.
    weights: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    #: Whether call order counts (the sample's ``tool_sequence_matters`` overrides when set).
    sequence_matters: bool = False

    @field_validator("weights", mode="before")
    @classmethod
    def _check_weights(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value  # pydantic reports the type error
        unknown = sorted(str(k) for k in value if k not in COMPONENTS)
        if unknown:
            raise ValueError(f"unknown component(s) {unknown}; known: {list(COMPONENTS)}")
        for key, weight in value.items():
            if isinstance(weight, bool) or not isinstance(weight, int | float):
                raise ValueError(f"weight of {key!r} must be a number, got {weight!r}")
            if not math.isfinite(weight) or weight < 0:
                raise ValueError(f"weight of {key!r} must be a finite number ≥ 0, got {weight!r}")
        if not any(value.values()):
            raise ValueError("at least one weight must be greater than 0")
        return value


def _component(value: float | None, weight: float, reason: str | None = None, **extra: Any) -> dict[str, Any]:
    """One component's entry in details: its value, weight, whether it counts and why not."""
    entry: dict[str, Any] = {"value": value, "weight": weight}
    if value is None:
        entry["included"] = False
        entry["reason"] = reason
    elif weight == 0:
        entry["included"] = False
        entry["reason"] = "weight 0"
    else:
        entry["included"] = True
    entry.update(extra)
    return entry


def _is_empty_result(result: Any) -> bool:
    if result is None:
        return True
    if isinstance(result, str):
        return not result.strip()
    if isinstance(result, list | dict):
        return not result
    return False


def _collect_texts(result: Any, out: list[str]) -> None:
    """Append the texts of a tool result's values (keys left out); JSON strings are looked into."""
    if isinstance(result, str):
        parsed = json_in_text(result, skip_blanks=True)
        if parsed is result:
            out.append(result)
        else:
            _collect_texts(parsed, out)
    elif isinstance(result, dict):
        for value in result.values():
            _collect_texts(value, out)
    elif isinstance(result, list):
        for value in result:
            _collect_texts(value, out)
    elif not (isinstance(result, bool) or result is None):
        out.append(str(result))


def _result_text(result: Any) -> str:
    """A tool result's values as one text, one value per line (one tokenizer pass per result)."""
    texts: list[str] = []
    _collect_texts(result, texts)
    return "\n".join(texts)


class ToolCorrectness(Metric[ToolCorrectnessOptions]):
    """Weighted mean of tool selection, parameters, sequence and result utilization."""

    key: ClassVar[str] = "tool_correctness"
    description: ClassVar[str] = "Tool selection, parameters, sequence and use of results (no LLM)"
    Options: ClassVar[type[ToolCorrectnessOptions]] = ToolCorrectnessOptions
    requires: ClassVar[tuple[str, ...]] = ("tool_calls", "reference_tool_calls")
    version: ClassVar[str] = "1"

    def __init__(
        self, name: str, options: ToolCorrectnessOptions, resources: Resources | None = None
    ) -> None:
        super().__init__(name, options, resources)
        self._canon = canonicalizer(
            coerce_scalars=options.coerce_scalars, casefold_strings=options.casefold_strings
        )
        self._weights = {c: float(options.weights.get(c, 0.0)) for c in COMPONENTS}

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        return self.compute(sample)

    def compute(self, sample: Sample) -> Score | Skipped:
        actual = sample.tool_calls or []
        reference = sample.reference_tool_calls or []
        w = self._weights
        if not actual and not reference:
            reason = "no tool calls expected and none made"
            details = {"components": {c: _component(None, w[c], reason) for c in COMPONENTS}}
            return Score(1.0, reason, details)

        components: dict[str, dict[str, Any]] = {
            "selection": self._selection(actual, reference),
            "parameters": self._parameters(actual, reference),
            "sequence": self._sequence(sample, actual, reference),
            "utilization": self._utilization(sample, actual),
        }
        counted = [c for c in COMPONENTS if components[c]["included"]]
        total_weight = sum(w[c] for c in counted)
        left_out = [
            f"{c} ({components[c]['reason']})"
            for c in COMPONENTS
            if components[c]["value"] is None and w[c] > 0
        ]
        if not counted:
            return Skipped("no weighted component applies: " + "; ".join(left_out))
        value = sum(w[c] * components[c]["value"] for c in counted) / total_weight
        comment = ", ".join(f"{c} {components[c]['value']:.2f}" for c in counted)
        if left_out:
            comment += "; left out: " + ", ".join(left_out)
        return Score(min(1.0, max(0.0, value)), comment, {"components": components})

    def _selection(self, actual: list[ToolCall], reference: list[ToolCall]) -> dict[str, Any]:
        actual_names = Counter(c.name for c in actual)
        reference_names = Counter(c.name for c in reference)
        common = sum((actual_names & reference_names).values())
        precision = common / len(actual) if actual else 0.0
        recall = common / len(reference) if reference else 0.0
        f1 = 2 * precision * recall / (precision + recall) if common else 0.0
        extra = sorted((actual_names - reference_names).elements())
        missing = sorted((reference_names - actual_names).elements())
        return _component(
            f1, self._weights["selection"], precision=precision, recall=recall, missing=missing, extra=extra
        )

    def _parameters(self, actual: list[ToolCall], reference: list[ToolCall]) -> dict[str, Any]:
        weight = self._weights["parameters"]
        if not reference:
            return _component(None, weight, "no reference calls")
        norm_actual = normalize_calls(actual, self._canon)
        norm_reference = normalize_calls(reference, self._canon)
        pairs = _pair_by_share(norm_actual, norm_reference)
        entries = []
        total = 0.0
        for i, j, share in pairs:
            total += share
            entry: dict[str, Any] = {"actual": i, "reference": j, "name": reference[j].name, "share": share}
            if share < 1.0:
                entry["mismatched_arguments"] = mismatched_keys(
                    norm_actual[i].arguments, norm_reference[j].arguments
                )
            entries.append(entry)
        paired = {j for _, j, _ in pairs}
        unpaired = [{"index": j, "name": r.name} for j, r in enumerate(reference) if j not in paired]
        return _component(total / len(reference), weight, pairs=entries, unpaired_reference=unpaired)

    def _sequence(self, sample: Sample, actual: list[ToolCall], reference: list[ToolCall]) -> dict[str, Any]:
        weight = self._weights["sequence"]
        matters = sample.tool_sequence_matters
        source = "sample"
        if matters is None:
            matters, source = self.options.sequence_matters, "option"
        if not matters:
            why = (
                "the sample's tool_sequence_matters is false"
                if source == "sample"
                else "sequence_matters is false"
            )
            return _component(None, weight, why)
        actual_names = [c.name for c in actual]
        reference_names = [c.name for c in reference]
        distance = OSA.distance(actual_names, reference_names)
        value = 1.0 - distance / max(len(actual_names), len(reference_names))
        return _component(value, weight, distance=distance)

    def _utilization(self, sample: Sample, actual: list[ToolCall]) -> dict[str, Any]:
        weight = self._weights["utilization"]
        if sample.final_answer_uses_tools is not None:
            value = 1.0 if sample.final_answer_uses_tools else 0.0
            return _component(value, weight, source="final_answer_uses_tools")
        results = [c.result for c in actual if not _is_empty_result(c.result)]
        source = "tool call results"
        if not results and not any(c.result is not None for c in actual):
            results = [m.content for m in sample.messages or () if m.role == "tool" and m.content.strip()]
            source = "tool messages"
        if not results:
            return _component(None, weight, "no tool results")
        if sample.response is None:
            return _component(None, weight, "no final answer")
        user_tokens = set(word_runs(sample.user_text()))
        response = normalize_text(sample.response)
        response_tokens = set(word_runs(response))
        checked = used = 0
        for result in results:
            salient = {
                token
                for token in word_runs(_result_text(result))
                if (token.isdecimal() or len(token) >= 4) and token not in user_tokens
            }
            if not salient:
                continue
            checked += 1
            if any(
                t in response_tokens or (not t.isascii() and has_cjk(t) and t in response) for t in salient
            ):
                used += 1
        if not checked:
            return _component(None, weight, "tool results have no salient tokens")
        return _component(used / checked, weight, source=source, results_used=used, results_checked=checked)


def _pair_by_share(
    actual: list[NormalizedCall], reference: list[NormalizedCall]
) -> list[tuple[int, int, float]]:
    """Same-name (actual, reference, share) pairs, one-to-one, maximising the total share."""
    rows_by_name: dict[str, list[int]] = defaultdict(list)
    for i, a in enumerate(actual):
        rows_by_name[a.name].append(i)
    cols_by_name: dict[str, list[int]] = defaultdict(list)
    for j, r in enumerate(reference):
        if r.name in rows_by_name:
            cols_by_name[r.name].append(j)
    pairs: list[tuple[int, int, float]] = []
    for name, cols in cols_by_name.items():
        rows = rows_by_name[name]
        shares = [[argument_share(actual[i].arguments, reference[j].arguments) for j in cols] for i in rows]
        for row, col in assign(shares, keep_zero=True):
            pairs.append((rows[row], cols[col], shares[row][col]))
    pairs.sort()
    return pairs

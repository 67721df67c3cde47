"""ToolCallAccuracy: F1 of the agent's tool calls against the reference calls (docs/metrics.md, no LLM).

A pair (actual, reference) *matches* when the names are equal and, in ``strict`` mode, the arguments
are equal (see arguments.py), or, in ``flexible`` mode, the share of the reference's arguments that
the actual call has with an equal value reaches ``argument_match_threshold``. Matching is one-to-one:
with ``order = "any"`` the number of true positives is the size of a maximum matching (an optimal
assignment, so the result never depends on list order), with ``order = "strict"`` the length of the
longest common subsequence under the match relation.

Decisions (also in docs/metrics.md):
- ``argument_match_threshold`` set together with ``mode = "strict"`` is a configuration error: it
  would be silently ignored, and the user evidently meant flexible matching.
- Among maximum matchings, the one with the largest total argument share is reported in ``details``
  (the value is the same for all of them).
- With ``output = "precision"`` or ``"recall"`` the one-list-empty edge is still 0.0 (the documented edge).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from trace_scorer.data.outcomes import Outcome, Score
from trace_scorer.metrics._arguments import (
    ArgumentOptions,
    argument_share,
    canonicalizer,
    mismatched_keys,
    normalize_calls,
    plain_equal,
)
from trace_scorer.metrics._matching import Pair, assign, lcs_pairs
from trace_scorer.metrics.base import Metric, MetricOutput, Resources
from trace_scorer.sample import Sample, ToolCall


class ToolCallAccuracyOptions(ArgumentOptions):
    """Options of ``tool_call_accuracy``."""

    #: strict: all arguments equal; flexible: share of the reference's arguments ≥ the threshold.
    mode: Literal["strict", "flexible"] = "strict"
    #: flexible mode only: the share of the reference's arguments that must be equal (0..1).
    argument_match_threshold: float = Field(default=0.8, ge=0.0, le=1.0)
    #: any: calls may come in any order (maximum matching); strict: order counts (LCS).
    order: Literal["any", "strict"] = "any"
    #: Which figure is the value.
    output: Literal["f1", "precision", "recall"] = "f1"

    @model_validator(mode="after")
    def _threshold_needs_flexible(self) -> ToolCallAccuracyOptions:
        if "argument_match_threshold" in self.model_fields_set and self.mode != "flexible":
            raise ValueError(
                "argument_match_threshold applies only with mode = 'flexible' "
                "(strict mode requires all arguments to be equal)"
            )
        return self


def _names(calls: list[ToolCall], indices: list[int], limit: int = 3) -> str:
    names = [calls[i].name for i in indices]
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _indexed(calls: list[ToolCall], indices: Iterable[int]) -> list[dict[str, Any]]:
    return [{"index": i, "name": calls[i].name} for i in indices]


class ToolCallAccuracy(Metric[ToolCallAccuracyOptions]):
    """F1 (or precision / recall) of one-to-one matched tool calls against the reference calls."""

    key: ClassVar[str] = "tool_call_accuracy"
    description: ClassVar[str] = "F1 of the agent's tool calls against the reference calls (no LLM)"
    Options: ClassVar[type[ToolCallAccuracyOptions]] = ToolCallAccuracyOptions
    requires: ClassVar[tuple[str, ...]] = ("tool_calls", "reference_tool_calls")
    version: ClassVar[str] = "1"

    def __init__(self, name: str, options: ToolCallAccuracyOptions, resources: Resources | None = None) -> None:
        super().__init__(name, options, resources)
        self._canon = canonicalizer(coerce_scalars=options.coerce_scalars, casefold_strings=options.casefold_strings)
        self._flexible = options.mode == "flexible"
        self._threshold = options.argument_match_threshold
        #: strict mode with no option: a pair compares with plain_equal, no canonical form built
        self._plain = not self._flexible and not options.coerce_scalars and not options.casefold_strings

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        return self.compute(sample.tool_calls or [], sample.reference_tool_calls or [])

    def compute(self, actual: list[ToolCall], reference: list[ToolCall]) -> Score:
        """The score of ``actual`` calls against ``reference`` calls (both present)."""
        opts = self.options
        if not actual and not reference:
            if not self.explain:
                return Score(1.0)
            base: dict[str, Any] = {"mode": opts.mode, "order": opts.order, "output": opts.output}
            details = {**base, "tp": 0, "precision": 1.0, "recall": 1.0, "f1": 1.0, "matches": []}
            return Score(1.0, "no tool calls expected and none made", details)
        if not actual or not reference:
            if not self.explain:
                return Score(0.0)
            base = {"mode": opts.mode, "order": opts.order, "output": opts.output}
            if actual:
                comment = f"{len(actual)} tool calls made; none expected"
            else:
                expected = _names(reference, list(range(len(reference))))
                comment = f"no tool calls made; {len(reference)} expected ({expected})"
            details = {
                **base,
                "tp": 0,
                "precision": 0.0,
                "recall": 0.0,
                "f1": 0.0,
                "matches": [],
                "unmatched_actual": _indexed(actual, range(len(actual))),
                "unmatched_reference": _indexed(reference, range(len(reference))),
            }
            return Score(0.0, comment, details)

        shares: dict[Pair, float] = {}
        if opts.order == "any":
            pairs = self._maximum_matching(actual, reference, shares)
        else:
            pairs = self._ordered_matching(actual, reference, shares)

        tp = len(pairs)
        precision = tp / len(actual)
        recall = tp / len(reference)
        f1 = 2 * precision * recall / (precision + recall) if tp else 0.0
        value = {"f1": f1, "precision": precision, "recall": recall}[opts.output]
        if not self.explain:  # the comment and details are most of the time left (bench_offline)
            return Score(value)

        matched_actual = {i for i, _ in pairs}
        matched_reference = {j for _, j in pairs}
        unmatched_actual = [i for i in range(len(actual)) if i not in matched_actual]
        unmatched_reference = [j for j in range(len(reference)) if j not in matched_reference]

        matches: list[dict[str, Any]] = []
        for i, j in pairs:
            match: dict[str, Any] = {"actual": i, "reference": j, "name": actual[i].name}
            if self._flexible:
                share = shares[(i, j)]
                match["argument_share"] = share
                if share < 1.0:
                    match["mismatched_arguments"] = mismatched_keys(
                        self._canon(actual[i].arguments), self._canon(reference[j].arguments)
                    )
            matches.append(match)

        comment = (
            f"{tp}/{len(reference)} reference calls matched{' in order' if opts.order == 'strict' else ''} "
            f"(precision {precision:.2f}, recall {recall:.2f})"
        )
        if unmatched_reference:
            comment += f"; missing: {_names(reference, unmatched_reference)}"
        if unmatched_actual:
            comment += f"; extra: {_names(actual, unmatched_actual)}"
        details = {
            "mode": opts.mode,
            "order": opts.order,
            "output": opts.output,
            "tp": tp,
            "precision": precision,
            "recall": recall,
            "f1": f1,
            "matches": matches,
            "unmatched_actual": _indexed(actual, unmatched_actual),
            "unmatched_reference": _indexed(reference, unmatched_reference),
        }
        if self._flexible:
            details["argument_match_threshold"] = self._threshold
        return Score(value, comment, details)

    def _share(self, a: Any, r: Any) -> float | None:
        """The argument share if arguments ``a`` match ``r`` (both canonical; 1.0 in strict mode), else None."""
        if self._flexible:
            share = argument_share(a, r)
            return share if share >= self._threshold else None
        return 1.0 if a == r else None

    def _pair_share(self, a: dict[str, Any], r: dict[str, Any]) -> float | None:
        """:meth:`_share` of raw arguments ``a`` and ``r`` compared once."""
        if self._plain:
            return 1.0 if plain_equal(a, r) else None
        return self._share(self._canon(a), self._canon(r))

    def _maximum_matching(
        self, actual: list[ToolCall], reference: list[ToolCall], shares: dict[Pair, float]
    ) -> list[Pair]:
        """A maximum one-to-one matching, solved per tool name (calls of different names never match).

        Only calls whose name the other side has get a canonical form (the rest cannot match)."""
        canon = self._canon
        reference_of = {r.name: j for j, r in enumerate(reference)}
        if len(reference_of) == len(reference) and len({a.name for a in actual}) == len(actual):
            # The usual case, each name at most once on each side: each call has at most one candidate,
            # so the pairs come in actual-index order with no assignment to solve (bench_offline).
            pairs: list[Pair] = []
            for i, a in enumerate(actual):
                j = reference_of.get(a.name)
                if j is not None:
                    share = self._pair_share(a.arguments, reference[j].arguments)
                    if share is not None:
                        shares[(i, j)] = share
                        pairs.append((i, j))
            return pairs

        by_name: dict[str, list[int]] = defaultdict(list)
        for j, r in enumerate(reference):
            by_name[r.name].append(j)
        actual_by_name: dict[str, list[int]] = defaultdict(list)
        for i, a in enumerate(actual):
            if a.name in by_name:
                actual_by_name[a.name].append(i)

        pairs = []
        for name, rows in actual_by_name.items():
            cols = by_name[name]
            if len(rows) == 1 and len(cols) == 1:
                share = self._pair_share(actual[rows[0]].arguments, reference[cols[0]].arguments)
                if share is not None:
                    shares[(rows[0], cols[0])] = share
                    pairs.append((rows[0], cols[0]))
                continue
            row_args = [canon(actual[i].arguments) for i in rows]
            col_args = [canon(reference[j].arguments) for j in cols]
            # Weight 1 + share/(k+1) for a match: every maximum-cardinality matching outweighs any
            # smaller one (the tie-breaks add up to less than 1), and among those the best-fitting
            # pairs win, so details show the natural pairing.
            bonus = 1.0 / (min(len(rows), len(cols)) + 1)
            weights: list[list[float]] = []
            for i, a_args in zip(rows, row_args, strict=True):
                row: list[float] = []
                for j, r_args in zip(cols, col_args, strict=True):
                    share = self._share(a_args, r_args)
                    if share is None:
                        row.append(0.0)
                    else:
                        shares[(i, j)] = share
                        row.append(1.0 + share * bonus)
                weights.append(row)
            pairs.extend((rows[r], cols[c]) for r, c in assign(weights, keep_zero=False))
        pairs.sort()
        return pairs

    def _ordered_matching(
        self, actual: list[ToolCall], reference: list[ToolCall], shares: dict[Pair, float]
    ) -> list[Pair]:
        """The longest common subsequence of the two call lists under the match relation."""
        norm_actual = normalize_calls(actual, self._canon)
        norm_reference = normalize_calls(reference, self._canon)
        relation: list[list[bool]] = []
        for i, a in enumerate(norm_actual):
            row: list[bool] = []
            for j, r in enumerate(norm_reference):
                share = self._share(a.arguments, r.arguments) if a.name == r.name else None
                if share is not None:
                    shares[(i, j)] = share
                row.append(share is not None)
            relation.append(row)
        return lcs_pairs(relation)

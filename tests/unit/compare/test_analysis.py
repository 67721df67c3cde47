"""One comparison, checked by hand: pairing, one-run-only items, verdicts, regressed items, pass@k."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from trace_scorer.compare import stats
from trace_scorer.compare.analysis import (
    BETTER,
    NOT_COMPARED,
    SAME,
    WORSE,
    Options,
    PassCriterion,
    compare_runs,
    pass_curve,
)
from trace_scorer.compare.runs import RunRef, RunValues, choose_baseline, choose_candidates
from trace_scorer.errors import UserError

FAST = Options(n_resamples=999)


def run(name: str, values: dict[str, dict[str, float]]) -> RunValues:
    result = RunValues(name, name)
    for item, scores in values.items():
        result.add(item, f"{name}-{item}", scores)
    return result


def test_means_counts_pairs_and_items_of_one_run_only() -> None:
    baseline = run("base", {"a": {"acc": 0.0}, "b": {"acc": 1.0}, "c": {"acc": 0.5}, "d": {"acc": 1.0}})
    candidate = run("cand", {"a": {"acc": 1.0}, "b": {"acc": 0.5}, "c": {"acc": 0.5}, "e": {"acc": 0.0}})
    comparison = compare_runs(baseline, candidate, FAST)
    [acc] = comparison.metrics
    assert acc.baseline.mean == pytest.approx(2.5 / 4) and acc.baseline.items == 4
    assert acc.candidate.mean == pytest.approx(2.0 / 4) and acc.candidate.items == 4
    # Paired over a, b, c only: differences +1, -0.5, 0.
    assert acc.paired == 3
    assert acc.difference == pytest.approx(0.5 / 3)
    assert (acc.improved, acc.regressed, acc.unchanged) == (1, 1, 1)
    assert comparison.only_in_baseline == ["d"] and comparison.only_in_candidate == ["e"]
    [worst] = acc.worst_items
    assert (worst.item, worst.baseline, worst.candidate, worst.difference) == ("b", 1.0, 0.5, -0.5)
    assert worst.baseline_traces == ["base-b"] and worst.candidate_traces == ["cand-b"]


def test_attempts_of_an_item_are_averaged_before_pairing() -> None:
    baseline, candidate = RunValues("base"), RunValues("cand")
    for value in (0.0, 1.0, 1.0):
        baseline.add("q", None, {"acc": value})
    for item, value in (("q", 1.0), ("r", 0.2)):
        candidate.add(item, None, {"acc": value})
    baseline.add("r", None, {"acc": 0.6})
    [acc] = compare_runs(baseline, candidate, FAST).metrics
    assert acc.baseline.mean == pytest.approx((2 / 3 + 0.6) / 2)
    assert acc.difference == pytest.approx(((1.0 - 2 / 3) + (0.2 - 0.6)) / 2)


def test_verdicts_better_worse_and_no_detectable_difference_with_holm() -> None:
    items = [f"i{n}" for n in range(30)]
    baseline = run("base", {i: {"up": 0.3 + n % 3 * 0.1, "down": 0.8, "flat": 0.5} for n, i in enumerate(items)})
    candidate = run(
        "cand",
        {
            i: {"up": 0.7 + n % 3 * 0.1, "down": 0.4 + n % 2 * 0.1, "flat": 0.5 + (0.1 if n % 2 else -0.1)}
            for n, i in enumerate(items)
        },
    )
    comparison = compare_runs(baseline, candidate, FAST)
    verdicts = {m.name: m.verdict for m in comparison.metrics}
    assert verdicts == {"down": WORSE, "flat": SAME, "up": BETTER}
    assert comparison.worse == ["down"] and comparison.better == ["up"]
    raw = [m.p_value for m in comparison.metrics]
    assert [m.p_adjusted for m in comparison.metrics] == pytest.approx(stats.holm(raw))  # type: ignore[arg-type]
    flat = next(m for m in comparison.metrics if m.name == "flat")
    assert flat.interval is not None and flat.interval[0] < 0 < flat.interval[1]
    assert flat.detectable_difference is not None and flat.detectable_difference > 0


def test_a_score_of_one_run_only_or_too_few_pairs_is_not_compared_with_a_reason() -> None:
    baseline = run("base", {"a": {"acc": 1.0, "old": 0.3}, "b": {"acc": 0.0}})
    candidate = run("cand", {"a": {"acc": 1.0}, "c": {"acc": 0.0}})
    by_name = {m.name: m for m in compare_runs(baseline, candidate, FAST).metrics}
    assert by_name["old"].verdict == NOT_COMPARED and by_name["old"].reason == "only the baseline has old values"
    assert by_name["acc"].verdict == NOT_COMPARED
    assert by_name["acc"].reason == "needs at least 2 items scored in both runs, has 1"
    assert by_name["acc"].p_adjusted is None


def test_regressed_items_worst_first_at_most_top_with_links() -> None:
    baseline = run("base", {f"i{n}": {"acc": 1.0} for n in range(6)})
    candidate = run("cand", {f"i{n}": {"acc": 1.0 - n / 10} for n in range(6)})
    [acc] = compare_runs(
        baseline, candidate, Options(n_resamples=999, top=3), link=lambda t: f"https://lf.example/traces/{t}"
    ).metrics
    assert [c.item for c in acc.worst_items] == ["i5", "i4", "i3"]
    assert acc.worst_items[0].candidate_links == ["https://lf.example/traces/cand-i5"]


def test_pass_curve_by_hand() -> None:
    # One item, 3 attempts, 1 correct: pass@1 = 1/3, pass@2 = 1 - C(2,2)/C(3,2) = 2/3, pass@3 = 1;
    # pass^1 = 1/3, pass^2 = pass^3 = 0. A second item, 2 attempts both correct: 1 for k = 1, 2; absent at k = 3.
    result = RunValues("r")
    for value in (0.9, 0.1, 0.2):
        result.add("q1", None, {"acc": value})
    for value in (1.0, 0.8):
        result.add("q2", None, {"acc": value})
    curve = pass_curve(result, PassCriterion("acc", 0.8), FAST)
    assert curve is not None
    points = {p.k: p for p in curve.points}
    assert points[1].pass_at_k == pytest.approx((1 / 3 + 1) / 2) and points[1].items == 2
    assert points[2].pass_at_k == pytest.approx((2 / 3 + 1) / 2)
    assert points[2].pass_hat_k == pytest.approx((0 + 1) / 2)
    assert points[3].items == 1 and points[3].pass_at_k == pytest.approx(1.0) and points[3].pass_hat_k == 0.0
    assert points[3].pass_at_k_interval is None  # one item: no interval
    single = RunValues("s")
    single.add("q", None, {"acc": 1.0})
    assert pass_curve(single, PassCriterion("acc", 0.8), FAST) is None


def test_pass_criterion_parse() -> None:
    assert PassCriterion.parse("answer_similarity>=0.8") == PassCriterion("answer_similarity", 0.8, ">=")
    assert PassCriterion.parse(" tool_call_accuracy > 0.5 ") == PassCriterion("tool_call_accuracy", 0.5, ">")
    assert not PassCriterion("acc", 0.5, ">").passes(0.5) and PassCriterion("acc", 0.5).passes(0.5)
    with pytest.raises(UserError, match="NAME>=VALUE"):
        PassCriterion.parse("acc = 1")


T0 = datetime(2026, 11, 1, tzinfo=UTC)
RUNS = [RunRef(f"nightly-{n}", f"id{n}", T0 + timedelta(days=n)) for n in range(4)] + [
    RunRef("hotfix", "idh", T0 + timedelta(days=1, hours=12))
]


def test_choosing_candidates() -> None:
    assert [r.name for r in choose_candidates("latest", RUNS)] == ["nightly-3"]
    assert [r.name for r in choose_candidates("hotfix", RUNS)] == ["hotfix"]
    assert [r.name for r in choose_candidates("re:^nightly-[12]$", RUNS)] == ["nightly-2", "nightly-1"]
    with pytest.raises(UserError, match="no run matches 'nope'"):
        choose_candidates("nope", RUNS)
    with pytest.raises(UserError, match="run pattern"):
        choose_candidates("re:(", RUNS)


def test_choosing_the_baseline() -> None:
    latest = RUNS[3]
    assert choose_baseline("previous", RUNS, latest) == RUNS[2]
    assert choose_baseline("previous", RUNS, RUNS[2]) == RUNS[4]  # hotfix started between nightly-1 and -2
    assert choose_baseline("re:^nightly", RUNS, RUNS[2]) == RUNS[1]
    assert choose_baseline("nightly-0", RUNS, latest) == RUNS[0]
    assert choose_baseline("previous", RUNS, RUNS[0]) is None
    assert choose_baseline("latest", RUNS, RUNS[0]) == RUNS[3]
    assert choose_baseline("nightly-3", RUNS, latest) is None  # a run is never its own baseline


# One modest gain among three scores (issue #23, item 10): raw p ≈ 0.036, Holm-adjusted 3 × 0.036 ≈ 0.11.
# Its plain 95 % interval was [+0.010, +0.165], clear of zero, beside "no detectable difference": a reader
# saw a contradiction. The interval is now drawn at the level of its Holm step (1 − 0.05/3).
MODEST_GAIN = [0.14, 0.0, 0.02, -0.39, 0.46, 0.33, 0.03, 0.25, 0.16, -0.01, 0.3, 0.04, 0.03, -0.06, 0.19, 0.08,
               0.21, -0.02, 0.13, -0.08]  # fmt: skip


def modest_gain_runs(*names: str) -> tuple[RunValues, RunValues]:
    baseline = run("base", {f"q{i}": dict.fromkeys(names, 0.5) for i in range(len(MODEST_GAIN))})
    candidate = run(
        "cand",
        {f"q{i}": {"gain": 0.5 + d, **{n: 0.5 for n in names if n != "gain"}} for i, d in enumerate(MODEST_GAIN)},
    )
    return baseline, candidate


def test_an_interval_beside_a_holm_verdict_is_drawn_at_the_holm_step_level() -> None:
    comparison = compare_runs(*modest_gain_runs("gain", "flat", "steady"), FAST)
    gain = next(m for m in comparison.metrics if m.name == "gain")
    assert gain.p_value is not None and gain.p_value < 0.05  # significant alone …
    assert gain.p_adjusted is not None and gain.p_adjusted > 0.05  # … not after Holm over three scores
    assert gain.verdict == SAME
    assert gain.interval is not None and gain.interval[0] < 0 < gain.interval[1]  # agrees with the verdict
    assert gain.interval_confidence == pytest.approx(1 - 0.05 / 3)  # the first of Holm's three steps
    assert gain.interval_text().endswith("at 98.33 %")
    for metric in comparison.metrics:  # no verdict anywhere beside an interval that says otherwise
        assert metric.interval is not None
        clear = metric.interval[0] > 0 or metric.interval[1] < 0
        assert clear == (metric.verdict in (BETTER, WORSE)) or metric.reason is not None


def test_one_score_alone_keeps_the_plain_95_percent_interval() -> None:
    [gain] = compare_runs(*modest_gain_runs("gain"), FAST).metrics
    assert gain.interval_confidence == pytest.approx(0.95)
    assert gain.interval is not None and gain.interval[0] > 0
    assert gain.verdict == BETTER


def test_the_terminal_table_names_each_interval_level() -> None:
    import io

    from rich.console import Console

    from trace_scorer.compare.terminal import print_comparison

    stream = io.StringIO()
    print_comparison(Console(file=stream, width=300), compare_runs(*modest_gain_runs("gain", "flat", "steady"), FAST))
    text = stream.getvalue()
    assert "Holm-adjusted level" in text
    gain_row = next(line for line in text.splitlines() if " gain " in line)
    assert "at 98.33 %" in gain_row and "no detectable difference" in gain_row

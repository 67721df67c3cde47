"""Dataset runs (experiments): items scored with their expected output, then the run, on v4 and v3."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from tests.support import langfuse_factories as f
from tests.support import worker
from tests.support.clocks import FakeClock
from tests.support.langfuse_inprocess import InProcessLangfuse
from tests.support.worker import MakeHarness, agent_trace, weather_reference
from trace_scorer.langfuse import ScoreSubject, score_id

CITIES = {"item-tokyo": "Tokyo", "item-paris": "Paris", "item-oslo": "Oslo"}


def bench_target(**overrides: Any) -> dict[str, Any]:
    """The bench target with a KPI over its metrics."""
    return worker.bench_target(**{"kpis": [{"name": "quality", "formula": "average"}], **overrides})


def add_run(v4: InProcessLangfuse, run_id: str, name: str, start: datetime, answers: dict[str, str]) -> None:
    """An experiment of the dataset ``agent-bench`` whose item for each dataset item called get_weather for
    the city in ``answers``."""
    v4.add_dataset("ds-1", "agent-bench")
    v4.add_experiment(f.experiment(run_id, name, "ds-1", start))
    for index, (item_id, called_city) in enumerate(answers.items()):
        trace_id = f"{run_id}-{item_id}"
        t = start + timedelta(seconds=10 * index)
        v4.add_rows(*weather_run(trace_id, t, called_city, environment="sdk-experiment"))
        v4.add_experiment_item(
            f.experiment_item(
                f"{trace_id}-root",
                trace_id,
                run_id,
                name,
                item_id,
                t,
                expected_output=weather_reference(CITIES[item_id]),
            )
        )


def weather_run(trace_id: str, start: datetime, called_city: str, **kw: Any) -> list[dict[str, Any]]:
    """An agent run that called get_weather for ``called_city`` and answered about it."""
    return agent_trace(trace_id, start, city=called_city, answer=f"It is 18 °C in {called_city} with light rain.", **kw)


def run_scores(scores: dict[str, dict[str, Any]], run_id: str) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in scores.values() if s.get("datasetRunId") == run_id}


async def test_items_scored_with_expected_output_then_the_run_once_quiet(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    start = clock.now() - timedelta(hours=1)
    add_run(v4, "exp-1", "baseline", start, {"item-tokyo": "Tokyo", "item-paris": "Paris", "item-oslo": "Bergen"})
    h = await harness(bench_target())
    context = await h.open()
    report = await h.tick(context, "bench")
    assert report.scored == 3
    tca = {s["traceId"]: s["value"] for s in v4.scores.values() if s["name"] == "tool_call_accuracy"}
    assert tca == {"exp-1-item-tokyo": 1.0, "exp-1-item-paris": 1.0, "exp-1-item-oslo": 0.0}
    assert run_scores(v4.scores, "exp-1") == {}  # the run was just seen: not quiet yet

    clock.elapsed += 301
    report = await h.tick(context, "bench")
    assert report.scored == 0 and report.runs_posted == 1
    run = run_scores(v4.scores, "exp-1")
    assert run["tool_call_accuracy"]["value"] == 2 / 3
    assert run["tool_call_accuracy"]["id"] == score_id(ScoreSubject.run("exp-1"), "tool_call_accuracy")
    assert "quality" in run and "traceId" not in run["quality"]
    first_seen = context.state.run("bench", "exp-1")
    assert first_seen is not None
    assert run["rouge"]["timestamp"][:19] == first_seen.first_seen.isoformat()[:19]
    assert run["tool_call_accuracy"]["comment"] == "mean of 3 samples"

    posts = len(v4.score_posts)
    clock.elapsed += 301
    await h.tick(context, "bench")
    assert len(v4.score_posts) == posts  # nothing changed: nothing re-posted


async def test_more_items_update_the_run_with_the_same_ids(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    start = clock.now() - timedelta(hours=1)
    add_run(v4, "exp-1", "baseline", start, {"item-tokyo": "Tokyo", "item-paris": "Lyon"})
    h = await harness(bench_target())
    context = await h.open()
    await h.tick(context, "bench")
    clock.elapsed += 301
    await h.tick(context, "bench")
    assert run_scores(v4.scores, "exp-1")["tool_call_accuracy"]["value"] == 0.5
    count = len(v4.scores)

    trace_id = "exp-1-item-oslo"
    t = clock.now() - timedelta(minutes=1)
    v4.add_rows(*agent_trace(trace_id, t, city="Oslo", environment="sdk-experiment"))
    v4.add_experiment_item(
        f.experiment_item(
            f"{trace_id}-root", trace_id, "exp-1", "baseline", "item-oslo", t, expected_output=weather_reference("Oslo")
        )
    )
    await h.tick(context, "bench")  # the new item is scored; the run changed: wait for quiet again
    clock.elapsed += 301
    await h.tick(context, "bench")
    assert run_scores(v4.scores, "exp-1")["tool_call_accuracy"]["value"] == 2 / 3
    assert len(v4.scores) == count + 3  # the new trace's 3 scores; the run's scores were overwritten


async def test_pass_at_k_across_the_runs_of_a_dataset(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    start = clock.now() - timedelta(hours=2)
    # Three attempts at each question: Tokyo always right, Paris right twice, Oslo never.
    add_run(v4, "exp-a", "attempt 1", start, {"item-tokyo": "Tokyo", "item-paris": "Paris", "item-oslo": "Bergen"})
    add_run(
        v4,
        "exp-b",
        "attempt 2",
        start + timedelta(minutes=10),
        {"item-tokyo": "Tokyo", "item-paris": "Paris", "item-oslo": "Bergen"},
    )
    add_run(
        v4,
        "exp-c",
        "attempt 3",
        start + timedelta(minutes=20),
        {"item-tokyo": "Tokyo", "item-paris": "Lyon", "item-oslo": "Bergen"},
    )
    target = bench_target(
        run_groups="dataset",
        metrics=[
            {"metric": "tool_call_accuracy"},
            {"metric": "pass_at_k", "k": [1, 3], "correct_when": "tool_call_accuracy", "threshold": 1.0},
        ],
        kpis=[],
    )
    h = await harness(target)
    context = await h.open()
    await h.tick(context, "bench")
    clock.elapsed += 301
    report = await h.tick(context, "bench")
    assert report.runs_posted == 3
    for run_id in ("exp-a", "exp-b", "exp-c"):
        run = run_scores(v4.scores, run_id)
        assert run["pass_at_1"]["value"] == (1 + 2 / 3 + 0) / 3
        assert run["pass_at_3"]["value"] == (1 + 1 + 0) / 3
        assert run["pass_hat_3"]["value"] == 1 / 3
        assert run["tool_call_accuracy"]["value"] == 5 / 9  # the group's mean over all its runs


async def test_dataset_runs_on_a_v3_server(harness: MakeHarness, v3: InProcessLangfuse, clock: FakeClock) -> None:
    start = clock.now() - timedelta(hours=1)
    run = v3_bench_run(v3, "baseline", start)
    for index, (item_id, city) in enumerate(CITIES.items()):
        trace_id = f"run-1-{item_id}"
        t = start + timedelta(seconds=index)
        v3.add_rows(*weather_run(trace_id, t, city if item_id != "item-oslo" else "Bergen"))
        v3.add_dataset_run_item(f.v3_dataset_run_item(f"ri-{index}", run, item_id, trace_id, t))
    h = await harness(bench_target())
    context = await h.open()
    assert context.info.generation == "v3"
    report = await h.tick(context, "bench")
    assert report.scored == 3
    clock.elapsed += 301
    assert (await h.tick(context, "bench")).runs_posted == 1
    run_level = {s["name"]: s for s in v3.scores.values() if s.get("datasetRunId") == "run-1"}
    assert run_level["tool_call_accuracy"]["value"] == 2 / 3


async def test_production_traces_on_a_v3_server(harness: MakeHarness, v3: InProcessLangfuse, clock: FakeClock) -> None:
    from tests.support.worker import traces_target

    start = clock.now() - timedelta(minutes=30)
    for index in range(3):  # the expected calls and answer in the trace's metadata
        v3.add_rows(*weather_run(f"v3-t{index}", start + timedelta(seconds=index), "Tokyo"))
    h = await harness(traces_target())
    context = await h.open()
    startup = len(v3.calls)
    report = await h.tick(context)
    assert report.scored == 3
    values = {(s["traceId"], s["name"]): s["value"] for s in v3.scores.values()}
    assert values[("v3-t0", "tool_call_accuracy")] == 1.0
    assert len(values) == 12
    calls = v3.calls[startup:]
    print(
        f"\nv3: {sum(c.method == 'GET' for c in calls)} reads and {sum(c.method == 'POST' for c in calls)} "
        f"ingestion posts for 3 traces"
    )
    # A restart re-reads the window and posts nothing again.
    events = len(v3.events)
    context.state.close()  # the first worker is gone (and its lock on the state file with it)
    await h.tick(await h.open())
    assert len(v3.events) == events


async def test_runs_chosen_by_name_pattern_or_list(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    start = clock.now() - timedelta(hours=3)
    add_run(v4, "exp-n1", "nightly-2026-10-01", start, {"item-tokyo": "Tokyo"})
    add_run(v4, "exp-n2", "nightly-2026-10-02", start + timedelta(hours=1), {"item-tokyo": "Kyoto"})
    add_run(v4, "exp-adhoc", "try-new-prompt", start + timedelta(hours=2), {"item-tokyo": "Tokyo"})

    h = await harness(bench_target(name="nightly", run_name_pattern="^nightly-", run_groups="dataset"))
    context = await h.open()
    await h.tick(context, "nightly")
    clock.elapsed += 301
    await h.tick(context, "nightly")
    scored_runs = {s["datasetRunId"] for s in v4.scores.values() if s.get("datasetRunId")}
    assert scored_runs == {"exp-n1", "exp-n2"}
    assert run_scores(v4.scores, "exp-n1")["tool_call_accuracy"]["value"] == 0.5  # mean over both nightly runs

    v4.clear_scores()
    context.state.close()  # the first worker is gone (and its lock on the state file with it)
    listed = await harness(bench_target(name="listed", run_names=["try-new-prompt"]))
    listed.settings = listed.settings.model_copy(update={"state": h.settings.state})
    context = await listed.open()
    await listed.tick(context, "listed")
    assert {s["traceId"] for s in v4.scores.values()} == {"exp-adhoc-item-tokyo"}


def v3_bench_run(v3: InProcessLangfuse, name: str, created: datetime) -> dict[str, Any]:
    """The dataset with an item for each city, and its run ``run-1`` created at ``created``."""
    v3.add_dataset("ds-1", "agent-bench")
    for item_id, city in CITIES.items():
        v3.add_dataset_item(f.dataset_item(item_id, "ds-1", "agent-bench", expected_output=weather_reference(city)))
    run = f.v3_dataset_run("run-1", name, "ds-1", "agent-bench", created)
    v3.add_dataset_run(run)
    return run


def add_v3_item(v3: InProcessLangfuse, run: dict[str, Any], index: int, item_id: str, t: datetime) -> None:
    trace_id = f"{run['id']}-{item_id}-{index}"
    v3.add_rows(*weather_run(trace_id, t, CITIES[item_id]))
    v3.add_dataset_run_item(f.v3_dataset_run_item(f"ri-{index}", run, item_id, trace_id, t))


async def test_v3_run_keeps_being_scored_after_lookback_since_its_creation(
    harness: MakeHarness, v3: InProcessLangfuse, clock: FakeClock
) -> None:
    """Finding 4: a v3 run's updatedAt never moves; items arriving after lookback are still scored."""
    created = clock.now() - timedelta(minutes=30)
    run = v3_bench_run(v3, "long", created)  # updatedAt == createdAt
    add_v3_item(v3, run, 0, "item-tokyo", created + timedelta(minutes=1))
    h = await harness(bench_target(lookback="1h"))
    context = await h.open()
    assert (await h.tick(context, "bench")).scored == 1

    full_reads = len(v3.calls_to("GET", "/api/public/dataset-run-items"))
    clock.elapsed += 120
    report = await h.tick(context, "bench")  # nothing new: one count request, no item read, nothing scored
    assert report.scored == 0 and len(v3.calls_to("GET", "/api/public/dataset-run-items")) == full_reads + 1

    for step in range(1, 4):  # 40, 80, 120 minutes later: the run was created well before the lookback
        clock.elapsed += 40 * 60
        add_v3_item(v3, run, step, "item-paris", clock.now() - timedelta(seconds=30))
        report = await h.tick(context, "bench")
        assert report.scored == 1, f"item {step} not scored"
    scored = {s["traceId"] for s in v3.scores.values() if s.get("traceId")}
    assert len(scored) == 4
    clock.elapsed += 301
    assert (await h.tick(context, "bench")).runs_posted == 1  # quiet since the last item, not since creation
    run_level = {s["name"]: s for s in v3.scores.values() if s.get("datasetRunId") == "run-1"}
    assert run_level["tool_call_accuracy"]["comment"] == "mean of 4 samples"


async def test_no_run_level_scores_on_servers_without_dataset_run_scores(
    harness: MakeHarness, v3: InProcessLangfuse, clock: FakeClock
) -> None:
    """2.x requires a traceId on every score: run-level scores are not posted, and the log says so."""
    import structlog

    from trace_scorer.langfuse.server.capabilities import ServerCapabilities

    start = clock.now() - timedelta(minutes=30)
    run = v3_bench_run(v3, "baseline", start)
    for index, item_id in enumerate(CITIES):
        add_v3_item(v3, run, index, item_id, start + timedelta(seconds=index))
    h = await harness(bench_target())
    context = await h.open()
    context.client.capabilities = ServerCapabilities.from_version("2.95.12")
    with structlog.testing.capture_logs() as logs:
        assert (await h.tick(context, "bench")).scored == 3
        for _ in range(3):
            clock.elapsed += 301
            assert (await h.tick(context, "bench")).runs_posted == 0
    assert not [s for s in v3.scores.values() if s.get("datasetRunId")]
    assert len([s for s in v3.scores.values() if s.get("traceId")]) == 3 * 3  # per-item scores are posted
    warnings = [e for e in logs if e["event"] == "run_scores_not_posted"]
    assert len(warnings) == 1 and "datasetRunId" in warnings[0]["reason"] and warnings[0]["target"] == "bench"
    assert not [e for e in logs if e["event"] == "run_scored"]

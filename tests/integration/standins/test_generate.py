"""The trace generator: deterministic, in every extraction format, with datasets and experiments, hostile
traces on request, visibility over time, and lazy enough for a 100,000-trace backlog."""

from __future__ import annotations

import hashlib
import json
import time
import tracemalloc
from datetime import UTC, datetime, timedelta

import pytest

from standins.contract import get_contract
from standins.formats import FORMATS, HOSTILE_KINDS, PROJECT_ID, SDK_FORMATS
from standins.generate import MAX_TRACE, Corpus, DatasetSpec, Scenario, experiment_id
from standins.tasks import DEVIATIONS
from tests.support.standins import small_scenario
from trace_scorer.extract import extract_sample
from trace_scorer.extract.observations import observation_samples
from trace_scorer.langfuse.reads.observation_filter import ObservationFilter


def test_the_same_scenario_gives_the_same_rows() -> None:
    a, b = Corpus(small_scenario()), Corpus(small_scenario())
    for header in [*list(a.production_headers())[:10], *a.experiments_source.headers[:5]]:
        other = b.find(header.trace_id)
        assert other == header
        assert [r.row for r in a.render(header).records] == [r.row for r in b.render(other).records]
    assert a.dataset_items == b.dataset_items and a.experiments == b.experiments
    c = Corpus(small_scenario(seed=12))
    assert next(c.production_headers()).trace_id != next(a.production_headers()).trace_id


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_extracts_to_what_the_agent_did(fmt: str) -> None:
    corpus = Corpus(small_scenario(formats=(fmt,), traces=30, deviation_rate=0.5, datasets=()))
    contract = get_contract()
    deviations = set()
    for header in corpus.production_headers():
        rendered = corpus.render(header)
        rows = [row for record in rendered.records for row in record.visible_rows(datetime.now(UTC))]
        contract.check_response("GET", "/api/public/v2/observations", 200, {"data": rows, "meta": {}})
        sample = extract_sample(rows)
        task = rendered.task
        assert task is not None
        deviations.add(task.deviation)
        assert [(c.name, c.arguments) for c in sample.tool_calls or []] == [(s.tool, s.args) for s in task.steps]
        if task.answer is not None:
            assert sample.response == task.answer
        else:  # crashed: no answer on the root, at most what the agent said on the way
            assert sample.response in ("", *(s.say for s in task.steps))
        assert sample.trace_id == header.trace_id and sample.environment == "production"
        assert sample.reference_topics == task.topics  # from the root's metadata (a JSON string, as v4 sends)
    assert None in deviations and len(deviations) > 2


def test_deviations_are_the_ways_agents_go_wrong() -> None:
    corpus = Corpus(small_scenario(traces=200, deviation_rate=1.0, datasets=()))
    seen = {corpus.render(h).task.deviation for h in corpus.production_headers()}  # type: ignore[union-attr]
    assert seen == set(DEVIATIONS)


def test_datasets_and_experiments_with_several_attempts_per_item() -> None:
    spec = DatasetSpec(name="bench", items=4, runs=3, attempts=2)
    corpus = Corpus(small_scenario(datasets=(spec,)))
    dataset = corpus.datasets["bench"]
    assert len(corpus.dataset_items) == 4 and len(corpus.experiments) == 3
    for experiment in corpus.experiments:
        key = json.dumps(
            ["langfuse-experiment-v1", PROJECT_ID, dataset["id"], experiment["name"]], separators=(",", ":")
        )
        assert experiment["id"] == hashlib.sha256(key.encode()).hexdigest()[:16]
        assert experiment["id"] == experiment_id(PROJECT_ID, dataset["id"], experiment["name"])
    rows = corpus.experiment_item_rows()
    assert len(rows) == 4 * 3 * 2
    get_contract().check_response("GET", "/api/public/experiment-items", 200, {"data": rows, "meta": {}})
    for row in rows:
        item = corpus.dataset_items[row["experimentItemId"]]
        assert row["expectedOutput"] == item["expectedOutput"]
        header = corpus.find(row["traceId"])
        assert header is not None and header.experiment is not None
        rendered = corpus.render(header)
        root = rendered.root.row
        assert (root["name"], root["environment"], root["id"]) == ("experiment-item-run", "sdk-experiment", row["id"])
        sample = extract_sample([r.row for r in rendered.records], item=row)
        assert rendered.ideal is not None
        assert [(c.name, c.arguments) for c in sample.reference_tool_calls or []] == [
            (s.tool, s.args) for s in rendered.ideal.steps
        ]
        assert sample.reference == rendered.ideal.goal
        assert sample.reference_topics == rendered.ideal.topics
        assert sample.run_id == row["experimentId"] and sample.item_id == item["id"]
    for dataset_item in corpus.dataset_items.values():
        get_contract().check_response("GET", "/api/public/dataset-items/{id}", 200, dataset_item)


@pytest.mark.parametrize("kind", HOSTILE_KINDS)
def test_hostile_traces_are_what_they_say(kind: str) -> None:
    corpus = Corpus(small_scenario(hostile_rate=1.0, hostile_kinds=(kind,), huge_bytes=20_000, datasets=()))
    header = next(corpus.production_headers())
    assert header.hostile == kind
    rows = [r.row for r in corpus.render(header).records]
    get_contract().check_response("GET", "/api/public/v2/observations", 200, {"data": rows, "meta": {}})
    text = json.dumps(rows)
    if kind == "huge":
        assert len(text) > 20_000
    elif kind == "deep":
        assert '{"a":' * 1000 in "".join(r["output"] or "" for r in rows)
    elif kind == "injection":
        assert "Ignore all previous instructions" in text
    elif kind == "empty":
        assert len(rows) == 1 and rows[0]["input"] is None
    extract_sample(rows)  # reading them never raises


def test_rows_become_visible_as_their_events_happen() -> None:
    now = datetime.now(UTC)
    corpus = Corpus(small_scenario(traces=1, spacing=1.0, end=now.isoformat(), duplicate_rate=1.0, datasets=()))
    rendered = corpus.render(next(corpus.production_headers()))
    root = rendered.root
    start = datetime.fromisoformat(root.row["startTime"])
    end = datetime.fromisoformat(root.row["endTime"])
    assert root.visible_rows(start - timedelta(milliseconds=1)) == []
    (started,) = root.visible_rows(start)
    assert started["output"] is None and started["endTime"] is None  # still running
    final, early = root.visible_rows(end)  # finished, and the start row not merged away yet
    assert final["endTime"] == root.row["endTime"] and early["id"] == final["id"]
    assert early["updatedAt"] < final["updatedAt"]


def test_late_rows_arrive_after_their_delay_roots_never_late() -> None:
    corpus = Corpus(small_scenario(traces=3, late_rate=1.0, late_delay=30.0, duplicate_rate=0.0, datasets=()))
    for header in corpus.production_headers():
        rendered = corpus.render(header)
        for record in rendered.records[1:]:
            end = datetime.fromisoformat(record.row["endTime"])
            assert record.visible_final == end + timedelta(seconds=30)
        assert rendered.root.visible_final == datetime.fromisoformat(rendered.root.row["endTime"])


def test_ingest_jitter_varies_each_observations_delay_within_its_bound() -> None:
    """Issue #29: rows visible ``export_delay`` plus up to ``ingest_jitter`` seconds after their span's end,
    drawn per observation, so a child is sometimes visible after its root; without it, all alike."""
    scenario = small_scenario(traces=20, ingest_jitter=8.0, duplicate_rate=0.0, datasets=())
    delays: list[float] = []
    child_after_root = 0
    for header in Corpus(scenario, span_end_visibility=True, export_delay=2.0).production_headers():
        rendered = Corpus(scenario, span_end_visibility=True, export_delay=2.0).render(header)
        for record in rendered.records:
            end = datetime.fromisoformat(record.row["endTime"])
            delays.append((record.visible_final - end).total_seconds())
        child_after_root += any(r.visible_final > rendered.root.visible_final for r in rendered.records[1:])
    assert all(2.0 <= d <= 10.0 for d in delays) and max(delays) - min(delays) > 4.0
    assert 0 < child_after_root < 20
    plain = Corpus(small_scenario(traces=5, datasets=()), span_end_visibility=True, export_delay=2.0)
    for header in plain.production_headers():
        for record in plain.render(header).records:
            end = datetime.fromisoformat(record.row["endTime"])
            assert record.visible_final == end + timedelta(seconds=2)


def test_a_large_backlog_is_arithmetic_not_memory() -> None:
    scenario = Scenario(seed=5, traces=100_000, spacing=1.0, end="2026-11-01T00:00:00+00:00", datasets=())
    started = time.perf_counter()
    corpus = Corpus(scenario, cache_size=64)
    assert time.perf_counter() - started < 1.0
    source = corpus.production
    assert len(source) == 100_000
    one_hour = (corpus.end - timedelta(hours=2), corpus.end - timedelta(hours=1))
    headers = list(corpus.headers_starting(source, *one_hour))
    assert 3598 <= len(headers) <= 3601
    assert all(one_hour[0] <= h.start <= one_hour[1] for h in headers)
    starts = [h.start for h in headers]
    assert starts == sorted(starts)
    for i in (0, 4_321, 99_999):
        assert source.index_of(source.trace_id(i)) == i
    tracemalloc.start()
    for header in headers[:400]:
        corpus.render(header)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 8 * 1024 * 1024  # a bounded cache of rendered traces, not the corpus
    assert all(corpus.render(h).end - h.start <= MAX_TRACE for h in headers[:200])


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


@pytest.mark.slow
def test_every_root_of_a_100000_trace_backlog_in_bounded_memory() -> None:
    corpus = Corpus(Scenario(seed=6, traces=100_000, spacing=0.5, datasets=()), cache_size=256)
    before = _rss_mb()
    count = 0
    for header in corpus.production_headers():
        assert corpus.root_record(header).row["traceId"] == header.trace_id
        count += 1
    assert count == 100_000
    assert _rss_mb() - before < 50  # the root LRU, not 100,000 roots


def test_scenarios_round_trip_through_json() -> None:
    scenario = small_scenario(environments={"production": 2.0, "staging": 1.0}, hostile_rate=0.1)
    assert Scenario.from_dict(json.loads(json.dumps(scenario.to_dict()))) == scenario
    with pytest.raises(ValueError, match="unknown scenario settings"):
        Scenario.from_dict({"trace": 3})
    with pytest.raises(ValueError, match="unknown formats"):
        Scenario(formats=("xml",))


def test_golden_references_on_production_roots_are_the_planned_run() -> None:
    """``references_rate``: the root's metadata carries the run as planned (before any deviation), read
    with the worker's reference paths; without it, traces render exactly as before."""
    from standins.worker import PRODUCTION_REFERENCES
    from trace_scorer.config.references import ReferenceSettings

    with_refs = Corpus(small_scenario(references_rate=1.0, deviation_rate=1.0, datasets=()))
    plain = Corpus(small_scenario(deviation_rate=1.0, datasets=()))
    references = ReferenceSettings.model_validate(PRODUCTION_REFERENCES)
    for header in list(with_refs.production_headers())[:20]:
        rendered = with_refs.render(header)
        assert rendered.task is not None and rendered.task.deviation is not None
        sample = extract_sample([r.row for r in rendered.records], references=references, trace_id=header.trace_id)
        metadata = rendered.root.row["metadata"]
        assert sample.expected == metadata["expected_answer"] and sample.expected
        assert [(c.name, c.arguments) for c in sample.reference_tool_calls] == [
            (c["name"], c["arguments"]) for c in json.loads(metadata["expected_calls"])
        ]
        assert all(len(v) <= 200 for v in metadata.values())  # read whole on v4 without expandMetadata
        other = plain.render(plain.find(header.trace_id))  # type: ignore[arg-type]
        assert "expected_calls" not in other.root.row["metadata"]
        assert [r.row for r in other.records][1:] == [r.row for r in rendered.records][1:]


@pytest.mark.parametrize("fmt", SDK_FORMATS)
def test_sdk_integration_traces_give_one_sample_per_generation(fmt: str) -> None:
    """The traces the SDK integrations make (the openai wrapper alone, ``@observe``, LangChain with
    agents, OTel GenAI): valid v4 rows, and as observation samples every generation declares its tools
    and, in an agent loop, the generations' calls are the agent's steps in order."""
    corpus = Corpus(small_scenario(formats=(fmt,), traces=20, datasets=()))
    contract = get_contract()
    generations = ObservationFilter(types=("GENERATION",))
    kinds: set[str] = set()
    for header in corpus.production_headers():
        rendered = corpus.render(header)
        rows = [row for record in rendered.records for row in record.visible_rows(datetime.now(UTC))]
        contract.check_response("GET", "/api/public/v2/observations", 200, {"data": rows, "meta": {}})
        kinds |= {row["type"] for row in rows}
        task = rendered.task
        assert task is not None
        samples = observation_samples(rows, generations.matches, trace_id=header.trace_id)
        declared = {t.name for t in task.tools} if fmt != "otel_genai" else set()  # OTel: only on opt-in
        assert samples and all({t.name for t in s.tools or []} == declared for s in samples)
        calls = [(c.name, c.arguments) for s in samples for c in s.tool_calls or []]
        steps = [(s.tool, s.args) for s in task.steps]
        if fmt == "openai_wrapper":  # one completion: the first call asked for, or the answer
            assert len(samples) == 1 and calls in (steps[:1], [])
            assert calls or samples[0].response == (task.answer or "")
        else:
            assert calls == steps
    expected = {
        "openai_wrapper": {"GENERATION"},
        "observe_nested": {"SPAN", "GENERATION"},
        "langchain_agent": {"CHAIN", "AGENT", "TOOL", "GENERATION"},
    }
    assert expected.get(fmt, {"GENERATION"}) <= kinds

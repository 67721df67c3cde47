"""Scores: deterministic ids and timestamps, validation, batching by size and count, 202/207 handling,
undelivered batches, v3 ingestion events, and score configs."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from standins.http import Request
from tests.support import langfuse_factories as f
from tests.support.clocks import FakeClock
from tests.support.langfuse_client import MakeClient
from tests.support.langfuse_factories import Reply, at
from tests.support.langfuse_inprocess import InProcessLangfuse, MakeLangfuse
from trace_scorer.config.common import ConfigError
from trace_scorer.langfuse import (
    ApiGeneration,
    DeliveryReport,
    LangfuseAuthError,
    LangfuseContractError,
    LangfuseError,
    ScoreConfigSpec,
    ScoreSubject,
    ScoreToPost,
    score_id,
)
from trace_scorer.langfuse.writes.ids import format_timestamp, ingestion_event_id, normalize_timestamp

SCORES = ("POST", "/api/public/scores")
START = datetime(2026, 10, 1, 0, 12, 0, 875_432, tzinfo=UTC)


def score(trace: str = "trace-1", name: str = "tool_call_accuracy", value: Any = 0.75, **kw: Any) -> ScoreToPost:
    kw.setdefault("timestamp", START)
    return ScoreToPost(subject=ScoreSubject.trace(trace), name=name, value=value, **kw)


def accounted_once(report: DeliveryReport, scores: list[ScoreToPost]) -> bool:
    """Every score handed in is in exactly one of the report's lists."""
    seen = (
        [id(s) for s in report.accepted] + [id(r.score) for r in report.rejected] + [id(s) for s in report.undelivered]
    )
    seen += [id(s) for u in report.unattributed for s in u.scores]
    return sorted(seen) == sorted(id(s) for s in scores)


def sent_bodies(langfuse: InProcessLangfuse) -> list[list[dict[str, Any]]]:
    return [json.loads(c.request.content) for c in langfuse.calls_to(*SCORES)]


# --- ids and timestamps ----------------------------------------------------------------------


def test_score_id_is_a_fixed_uuid5_of_subject_and_name() -> None:
    # Golden values, computed once by hand from the documented formula: uuid5(namespace,
    # "score␟traceId␟observationId␟datasetRunId␟name"). If they change, every score already in
    # Langfuse would get a duplicate instead of an update.
    namespace = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/trace-scorer/trace-scorer/score-id")
    assert str(namespace) == "69bbafe4-3fd5-5241-b264-7171d6a11a0d"
    subject = ScoreSubject.trace("0af7651916cd43dd8448eb211c80319c")
    assert score_id(subject, "tool_call_accuracy") == "fe88f41c-cc32-50fb-be26-0fe770dc5883"
    expected = uuid.uuid5(namespace, "score\x1f0af7651916cd43dd8448eb211c80319c\x1f\x1f\x1ftool_call_accuracy")
    assert score_id(subject, "tool_call_accuracy") == str(expected)
    # An observation's score (scope = "observation"): the same formula with the observation id.
    observation = ScoreSubject.trace("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")
    assert score_id(observation, "tool_call_validity") == "6c795d17-82f6-5b66-b9a5-387d47cfbe5b"


def test_ids_differ_by_subject_and_name_and_ignore_everything_else() -> None:
    base = score()
    assert (
        base.id
        == score(
            value=0.1,
            comment="new prompt",
            metadata={"config_hash": "b"},
            config_id="cfg-9",
            environment="staging",
            timestamp=START + timedelta(hours=1),
        ).id
    )
    ids = {
        base.id,
        score(name="rouge").id,
        score(trace="trace-2").id,
        ScoreToPost(ScoreSubject.trace("trace-1", "obs-1"), "tool_call_accuracy", 0.5, START).id,
        ScoreToPost(ScoreSubject.run("trace-1"), "tool_call_accuracy", 0.5, START).id,
    }
    assert len(ids) == 5


def test_timestamps_are_normalised_to_utc_milliseconds() -> None:
    plus_two = START.astimezone(timezone(timedelta(hours=2)))
    assert normalize_timestamp(plus_two) == datetime(2026, 10, 1, 0, 12, 0, 875_000, tzinfo=UTC)
    assert format_timestamp(plus_two) == "2026-10-01T00:12:00.875Z"
    with pytest.raises(ValueError, match="timezone-aware"):
        normalize_timestamp(datetime(2026, 10, 1))


# --- validation --------------------------------------------------------------------------------


async def test_invalid_scores_are_rejected_with_reasons_and_never_sent(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    bad = {
        "a NUMERIC score needs a number": score("t1", value="high"),
        "finite number": score("t2", value=float("nan")),
        "BOOLEAN score needs true/false or 0/1": score("t3", value=0.5, data_type="BOOLEAN"),
        "TEXT score needs 1 to 500 characters": score("t4", value="x" * 501, data_type="TEXT"),
        "CATEGORICAL score needs a string": score("t5", value=1.0, data_type="CATEGORICAL"),
        "an observation id needs its trace id": ScoreToPost(ScoreSubject(observation_id="o1"), "n", 0.5, START),
        "exactly one of": ScoreToPost(ScoreSubject(trace_id="t", dataset_run_id="r"), "n", 0.5, START),
        "environment 'Production'": score("t6", environment="Production"),
        "not start with 'langfuse'": score("t7", environment="langfuse-eval"),
        "not a valid score name": score("t8", name="accuracy/v2"),
        "timezone-aware": score("t9", timestamp=datetime(2026, 10, 1)),
        "metadata is not JSON": score("t10", metadata={"when": datetime(2026, 1, 1)}),
    }
    client = make_client(ApiGeneration.V4)
    report = await client.post_scores([*bad.values(), score("fine")])
    assert [s.subject.trace_id for s in report.accepted] == ["fine"]
    assert len(report.rejected) == len(bad)
    for expected, rejected in zip(bad, report.rejected, strict=True):
        assert expected in rejected.reason and rejected.by == "client"
    (body,) = sent_bodies(v4)
    assert [b["traceId"] for b in body] == ["fine"]  # only the valid score was sent


async def test_scores_are_checked_against_their_config_range(v4: InProcessLangfuse, make_client: MakeClient) -> None:
    client = make_client(ApiGeneration.V4)
    await client.ensure_score_configs([ScoreConfigSpec("tool_call_accuracy"), ScoreConfigSpec("passed", "BOOLEAN")])
    report = await client.post_scores(
        [
            score(value=1.2),
            score(trace="ok", value=0.9),
            score(name="passed", value=True, data_type="BOOLEAN"),
            score(name="passed", trace="t9", value=0.4),
        ]
    )
    reasons = [r.reason for r in report.rejected]
    assert len(reasons) == 2
    assert "above the maximum 1.0 of score config 'tool_call_accuracy' (cfg-1)" in reasons[0]
    assert "is BOOLEAN, the score is NUMERIC" in reasons[1]
    (body,) = sent_bodies(v4)
    assert [(b["name"], b["configId"], b["value"], b["dataType"]) for b in body] == [
        ("tool_call_accuracy", "cfg-1", 0.9, "NUMERIC"),
        ("passed", "cfg-2", 1.0, "BOOLEAN"),
    ]


async def test_a_later_score_with_the_same_id_supersedes_the_earlier(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    first, second = score(value=0.1), score(value=0.9)
    report = await make_client(ApiGeneration.V4).post_scores([first, second])
    assert report.accepted == [second] and report.rejected[0].score is first
    assert v4.scores[second.id]["value"] == 0.9


# --- v4 posting ---------------------------------------------------------------------------------


async def test_wire_format_has_id_timestamp_and_all_fields(v4: InProcessLangfuse, make_client: MakeClient) -> None:
    run_score = ScoreToPost(
        ScoreSubject.run("exp-1"),
        "pass_at_3",
        0.62,
        at(0),
        comment="3 of 5 items",
        metadata={"config_hash": "abc", "scorer_version": "0.1.0"},
    )
    trace_score = score(environment="production", comment="3/4 calls matched", data_type="NUMERIC")
    report = await make_client(ApiGeneration.V4).post_scores([trace_score, run_score])
    assert len(report.accepted) == 2 and report.complete
    (body,) = sent_bodies(v4)
    assert body[0] == {
        "id": trace_score.id,
        "traceId": "trace-1",
        "name": "tool_call_accuracy",
        "value": 0.75,
        "dataType": "NUMERIC",
        "comment": "3/4 calls matched",
        # Sent as null, not left out: Langfuse merges a re-post into the stored score.
        "metadata": None,
        "environment": "production",
        "timestamp": body[0]["timestamp"],
    }
    assert datetime.fromisoformat(body[0]["timestamp"]) == datetime(2026, 10, 1, 0, 12, 0, 875_000, tzinfo=UTC)
    assert body[1]["datasetRunId"] == "exp-1" and "traceId" not in body[1]
    assert body[1]["metadata"] == {"config_hash": "abc", "scorer_version": "0.1.0"}


async def test_batches_respect_the_count_cap(v4: InProcessLangfuse, make_client: MakeClient) -> None:
    scores = [score(trace=f"t{n}") for n in range(7)]
    report = await make_client(ApiGeneration.V4, score_batch_size=3).post_scores(scores)
    assert [len(b) for b in sent_bodies(v4)] == [3, 3, 1]
    assert len(report.accepted) == 7 and len(v4.scores) == 7 and report.requests == 3


async def test_batches_are_as_large_as_the_body_limit_allows(v4: InProcessLangfuse, make_client: MakeClient) -> None:
    limit = 20_000
    scores = [score(trace=f"t{n}", comment="é" * (900 + n * 37 % 300)) for n in range(60)]
    report = await make_client(ApiGeneration.V4, score_batch_max_bytes=limit).post_scores(scores)
    assert len(report.accepted) == 60
    sizes = [len(c.request.content) for c in v4.calls_to(*SCORES)]
    assert all(size <= limit for size in sizes)
    # Each batch is full: the next score would not have fitted.
    bodies = sent_bodies(v4)
    for size, following in zip(sizes, bodies[1:], strict=False):
        first_next = len(json.dumps(following[0], ensure_ascii=False, separators=(",", ":")).encode())
        assert size + 1 + first_next > limit


async def test_default_limits_keep_bodies_under_one_megabyte(v4: InProcessLangfuse, make_client: MakeClient) -> None:
    scores = [score(trace=f"t{n}", comment="x" * 2500, metadata={"details": "y" * 500}) for n in range(800)]
    report = await make_client(ApiGeneration.V4).post_scores(scores)
    assert len(report.accepted) == 800
    assert all(len(c.request.content) < 1_000_000 for c in v4.calls_to(*SCORES))
    assert max(len(b) for b in sent_bodies(v4)) <= 500


async def test_a_score_larger_than_a_request_is_rejected_not_dropped(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    huge = score(metadata={"blob": "z" * 30_000})
    report = await make_client(ApiGeneration.V4, score_batch_max_bytes=20_000).post_scores([huge, score(trace="t2")])
    assert len(report.accepted) == 1 and report.rejected[0].score is huge and "byte limit" in report.rejected[0].reason


async def test_rescore_after_a_config_change_overwrites_with_the_same_ids(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    client = make_client(ApiGeneration.V4)
    await client.post_scores([score(trace=f"t{n}", value=0.5, metadata={"config_hash": "old"}) for n in range(3)])
    await client.post_scores([score(trace=f"t{n}", value=0.8, metadata={"config_hash": "new"}) for n in range(3)])
    assert len(v4.scores) == 3
    assert {s["metadata"]["config_hash"] for s in v4.scores.values()} == {"new"}
    timestamps = {s["timestamp"] for posts in v4.score_posts for s in posts}
    assert len(timestamps) == 1  # the deterministic timestamp: same upsert key every time


async def test_207_is_not_resent_blindly_but_bisected_to_name_the_rejected(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    v4.reject_scores_when(
        lambda body: f"trace {body['traceId']} is locked" if body["traceId"] in ("t3", "t6") else None
    )
    scores = [score(trace=f"t{n}") for n in range(8)]
    report = await make_client(ApiGeneration.V4).post_scores(scores)
    assert accounted_once(report, scores) and report.complete
    assert sorted(r.score.subject.trace_id or "" for r in report.rejected) == ["t3", "t6"]
    assert {r.reason for r in report.rejected} == {"trace t3 is locked", "trace t6 is locked"}
    assert all(r.by == "server" for r in report.rejected) and len(report.accepted) == 6
    bodies = sent_bodies(v4)
    assert len([b for b in bodies if len(b) == 8]) == 1  # the full batch was sent once
    assert report.requests == len(bodies) <= 1 + 2 * 2 * 3  # two offenders, depth 3


async def test_207_beyond_the_bisect_budget_is_reported_with_counts(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    v4.reject_scores_when(lambda body: "config mismatch" if body["traceId"] == "t1" else None)
    scores = [score(trace=f"t{n}") for n in range(4)]
    report = await make_client(ApiGeneration.V4, score_bisect_max_requests=0).post_scores(scores)
    assert not report.complete and accounted_once(report, scores)
    (batch,) = report.unattributed
    assert (batch.accepted, batch.rejected, batch.messages, len(batch.scores)) == (
        3,
        1,
        ("config mismatch",),
        4,
    )
    assert len(v4.calls_to(*SCORES)) == 1


async def test_207_rejecting_everything_rejects_each_without_bisecting(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    v4.reject_scores_when(lambda body: "observation not found")
    scores = [score(trace=f"t{n}") for n in range(5)]
    report = await make_client(ApiGeneration.V4).post_scores(scores)
    assert [r.reason for r in report.rejected] == ["observation not found"] * 5
    assert len(v4.calls_to(*SCORES)) == 1 and report.complete


async def test_a_400_on_the_list_is_bisected_to_the_bad_element(v4: InProcessLangfuse, make_client: MakeClient) -> None:
    async def strict(request: Request, params: dict[str, str]) -> Reply:
        if any(s["traceId"] == "t2" for s in request.json()):
            return f.error("Invalid request data: traceId t2 belongs to another project", 400)
        return await v4.standin_answer(request)

    v4.on(*SCORES, strict)
    scores = [score(trace=f"t{n}") for n in range(4)]
    report = await make_client(ApiGeneration.V4).post_scores(scores)
    assert [r.score.subject.trace_id for r in report.rejected] == ["t2"]
    assert "belongs to another project" in report.rejected[0].reason
    assert len(report.accepted) == 3 and len(v4.scores) == 3


async def test_429_on_post_waits_and_resends_the_same_batch(
    v4: InProcessLangfuse, clock: FakeClock, make_client: MakeClient
) -> None:
    v4.fail_next(*SCORES, f.error("rate limit", 429, **{"Retry-After": "5"}), f.error("down", 502))
    scores = [score(trace=f"t{n}") for n in range(3)]
    report = await make_client(ApiGeneration.V4).post_scores(scores)
    assert len(report.accepted) == 3 and clock.sleeps == [5.0, 4.0]
    bodies = sent_bodies(v4)
    assert bodies[0] == bodies[1] == bodies[2]  # the same ids, timestamps, values: an overwrite at worst


async def test_langfuse_down_leaves_scores_undelivered_never_dropped(
    v4: InProcessLangfuse, clock: FakeClock, make_client: MakeClient
) -> None:
    v4.fail_next(*SCORES, *[f.error("db down", 503)] * 3)
    scores = [score(trace=f"t{n}") for n in range(5)]
    report = await make_client(ApiGeneration.V4, score_batch_size=2, retry={"max_attempts": 3}).post_scores(scores)
    assert report.undelivered == scores and not report.complete
    assert "db down" in report.errors[0] and len(v4.calls_to(*SCORES)) == 3  # later batches not attempted
    assert accounted_once(report, scores)


async def test_bad_keys_on_post_raise(v4: InProcessLangfuse, make_client: MakeClient) -> None:
    v4.fail_next(*SCORES, f.error("unauthorized", 401))
    with pytest.raises(LangfuseAuthError, match="LANGFUSE_SECRET_KEY"):
        await make_client(ApiGeneration.V4).post_scores([score()])


# --- v3 ingestion ------------------------------------------------------------------------------


async def test_v3_posts_score_create_events_with_the_score_timestamp(
    v3: InProcessLangfuse, make_client: MakeClient
) -> None:
    scores = [
        score(trace="t1", comment="ok", environment="production"),
        ScoreToPost(ScoreSubject.run("run-a"), "pass_at_2", 0.9, at(5)),
    ]
    report = await make_client(ApiGeneration.V3).post_scores(scores)
    assert len(report.accepted) == 2 and report.complete
    (call,) = v3.calls_to("POST", "/api/public/ingestion")
    events = json.loads(call.request.content)["batch"]
    assert [e["type"] for e in events] == ["score-create", "score-create"]
    assert events[0]["timestamp"] == "2026-10-01T00:12:00.875Z" and "timestamp" not in events[0]["body"]
    assert events[0]["body"]["id"] == scores[0].id and events[1]["body"]["datasetRunId"] == "run-a"
    assert v3.scores[scores[0].id]["timestamp"] == "2026-10-01T00:12:00.875Z"


async def test_v3_event_ids_repeat_for_the_same_content_and_change_with_it(
    v3: InProcessLangfuse, make_client: MakeClient
) -> None:
    client = make_client(ApiGeneration.V3)
    await client.post_scores([score(value=0.5)])
    await client.post_scores([score(value=0.5)])
    await client.post_scores([score(value=0.6)])
    ids = [e["id"] for e in v3.events]
    assert ids[0] == ids[1] != ids[2]
    assert len({e["body"]["id"] for e in v3.events}) == 1 and len(v3.scores) == 1
    assert ingestion_event_id("s", "a") != ingestion_event_id("s", "b")


async def test_v3_per_event_errors_are_attributed(v3: InProcessLangfuse, make_client: MakeClient) -> None:
    def reject(score: dict[str, Any]) -> tuple[int, str] | None:
        return {"t1": (400, "invalid value"), "t2": (500, "clickhouse timeout")}.get(score.get("traceId") or "")

    v3.reject_scores_when(reject)
    scores = [score(trace="t0"), score(trace="t1"), score(trace="t2")]
    report = await make_client(ApiGeneration.V3).post_scores(scores)
    assert [s.subject.trace_id for s in report.accepted] == ["t0"]
    assert [(r.score.subject.trace_id, r.reason) for r in report.rejected] == [("t1", "HTTP 400: invalid value")]
    assert [s.subject.trace_id for s in report.undelivered] == ["t2"] and "clickhouse timeout" in report.errors[0]


# --- score configs -------------------------------------------------------------------------------


async def test_missing_configs_are_created_numeric_0_to_1_existing_ones_reused(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    v4.add_score_config(f.score_config("cfg-old", "rouge", min_value=0, max_value=1, archived=True))
    v4.add_score_config(f.score_config("cfg-bleu", "bleu"))
    client = make_client(ApiGeneration.V4)
    configs = await client.ensure_score_configs(
        [ScoreConfigSpec("rouge"), ScoreConfigSpec("bleu"), ScoreConfigSpec("goal", "BOOLEAN", None, None)]
    )
    assert {name: c.id for name, c in configs.items()} == {
        "rouge": "cfg-3",
        "bleu": "cfg-bleu",
        "goal": "cfg-4",
    }
    created = [json.loads(c.request.content) for c in v4.calls_to("POST", "/api/public/score-configs")]
    assert created == [
        {"name": "rouge", "dataType": "NUMERIC", "minValue": 0.0, "maxValue": 1.0},
        {"name": "goal", "dataType": "BOOLEAN"},
    ]


async def test_a_config_of_another_type_is_a_configuration_error(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    v4.add_score_config(
        f.score_config("cfg-1", "goal", data_type="CATEGORICAL", categories=[{"value": 1, "label": "yes"}])
    )
    with pytest.raises(ConfigError, match=r"'goal' .* exists in Langfuse as CATEGORICAL"):
        await make_client(ApiGeneration.V4).ensure_score_configs([ScoreConfigSpec("goal")])


async def test_invalid_config_names_are_refused_before_any_request(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    with pytest.raises(ConfigError, match="at most 35 characters"):
        await make_client(ApiGeneration.V4).ensure_score_configs([ScoreConfigSpec("x" * 36)])
    assert v4.calls == []


async def test_a_create_that_failed_after_succeeding_is_not_repeated(
    v4: InProcessLangfuse, clock: FakeClock, make_client: MakeClient
) -> None:
    answers = iter(["lost", "normal"])

    async def flaky(request: Request, params: dict[str, str]) -> Reply:
        reply = await v4.standin_answer(request)  # the config is created…
        return f.error("gateway timeout", 504) if next(answers) == "lost" else reply  # …but the answer is lost

    v4.on("POST", "/api/public/score-configs", flaky)
    configs = await make_client(ApiGeneration.V4).ensure_score_configs([ScoreConfigSpec("rouge")])
    assert configs["rouge"].id == "cfg-1" and len(v4.configs) == 1
    assert len(v4.calls_to("POST", "/api/public/score-configs")) == 1 and clock.sleeps == [2.0]


async def test_a_create_whose_check_fails_too_gives_up_without_multiplying_retries(
    v4: InProcessLangfuse, clock: FakeClock, make_client: MakeClient
) -> None:
    answered = []

    async def first_only(request: Request, params: dict[str, str]) -> Reply:
        answered.append(1)
        return await v4.standin_answer(request) if len(answered) == 1 else f.error("still down", 503)

    v4.on("GET", "/api/public/score-configs", first_only)  # the first listing works, then Langfuse falls over
    v4.fail_next("POST", "/api/public/score-configs", f.error("down", 503))
    client = make_client(ApiGeneration.V4, retry={"max_attempts": 3})
    with pytest.raises(LangfuseError, match="could not check whether score config 'rouge' exists"):
        await client.ensure_score_configs([ScoreConfigSpec("rouge")])
    assert len(v4.calls_to("POST", "/api/public/score-configs")) == 1 and v4.configs == []
    assert len(answered) == 1 + 3  # the listing, then one re-check with its own three attempts
    assert clock.sleeps == [2.0, 2.0, 4.0]  # one wait before re-checking, the re-check's own two


# --- real servers: what each version takes -------------------------------------------------------


async def test_a_server_before_the_list_endpoint_gets_ingestion_events(
    make_langfuse: MakeLangfuse, make_client: MakeClient
) -> None:
    """4.16's POST /scores takes one object (a list is a 400) and drops the timestamp: scores go as
    ingestion score-create events, whose envelope timestamp is the score's."""
    v4 = make_langfuse("4.16.0")
    report = await make_client(ApiGeneration.V4, version="4.16.0").post_scores([score()])
    assert len(report.accepted) == 1 and report.complete
    assert not v4.calls_to(*SCORES)
    (call,) = v4.calls_to("POST", "/api/public/ingestion")
    (event,) = json.loads(call.request.content)["batch"]
    assert event["type"] == "score-create" and event["timestamp"] == format_timestamp(START)
    assert v4.scores[score().id]["timestamp"] == format_timestamp(START)


async def test_a_list_refused_as_a_whole_is_a_contract_failure_not_a_rejection(
    make_langfuse: MakeLangfuse, make_client: MakeClient
) -> None:
    """4.16 answers every list 400 ("expected object, received array"): nothing went through, so the shape
    is refused, not the scores — raised, with no score reported rejected (the worker settles nothing)."""
    v4 = make_langfuse("4.16.0")
    scores = [score(trace=f"t{n}") for n in range(4)]
    with pytest.raises(LangfuseContractError, match=r"refused the request as a whole.*Expected object"):
        await make_client(ApiGeneration.V4, score_posting="scores-batch").post_scores(scores)
    assert 1 <= len(v4.calls_to(*SCORES)) <= 1 + 32  # bisection stays within its budget
    assert {c.status for c in v4.calls_to(*SCORES)} == {400} and v4.scores == {}


@pytest.mark.parametrize("status", [404, 405])
async def test_a_missing_score_route_is_a_contract_failure(
    v3: InProcessLangfuse, make_client: MakeClient, status: int
) -> None:
    v3.on("POST", "/api/public/ingestion", f.error("not here", status))
    with pytest.raises(LangfuseContractError, match=f"HTTP {status}"):
        await make_client(ApiGeneration.V3).post_scores([score()])
    assert len(v3.calls_to("POST", "/api/public/ingestion")) == 1


async def test_a_rescore_sends_every_field_so_a_merge_leaves_nothing_stale(
    v3: InProcessLangfuse, make_client: MakeClient
) -> None:
    """Langfuse merges a re-posted score into the stored row (absent fields keep old values, metadata
    deep-merged): a dropped comment goes as null, nested metadata as JSON text (replaced whole)."""
    client = make_client(ApiGeneration.V3)
    await client.post_scores([score(comment="old reason", metadata={"details": {"a": 1, "b": 2}})])
    await client.post_scores([score(metadata={"details": {"a": 1}})])
    first, second = (
        json.loads(c.request.content)["batch"][0]["body"] for c in v3.calls_to("POST", "/api/public/ingestion")
    )
    assert first["comment"] == "old reason" and json.loads(first["metadata"]["details"]) == {"a": 1, "b": 2}
    assert second["comment"] is None and second["metadata"] == {"details": '{"a": 1}'}


async def test_a_name_the_server_always_refuses_costs_one_request_per_name_then_none_extra(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    """A 207 mixing accepted and refused scores, where the server refuses one score *name*: the list is
    resent once per name (not halved dozens of times), the name's scores are reported rejected, and later
    posts send that name in a list of its own — no further bisection."""
    v4.reject_scores_when(lambda body: "score config mismatch" if body["name"] == "refused" else None)
    client = make_client(ApiGeneration.V4)
    names = ("rouge", "refused", "tool_call_accuracy", "bleu")
    scores = [score(trace=f"t{n}", name=names[n % 4]) for n in range(200)]
    report = await client.post_scores(scores)
    assert accounted_once(report, scores) and report.complete
    assert {r.score.name for r in report.rejected} == {"refused"} and len(report.rejected) == 50
    assert len(report.accepted) == 150
    assert report.requests == 1 + len(names)  # the mixed list, then one list per name
    again = await client.post_scores(scores)
    assert again.requests == 2 and len(again.rejected) == 50 and len(again.accepted) == 150

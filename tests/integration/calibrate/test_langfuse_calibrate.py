"""``trace-scorer calibrate --langfuse``: the people's labels (ANNOTATION scores, by name or from one
annotation queue) and the worker's judged scores with each model's verdict in their metadata, read through
``GET /v3/scores`` on the in-process stand-in; ``--push-to-queue`` puts the most disputed traces into an
annotation queue, each once."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import random
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from sklearn import metrics

from standins.faults import ScriptedFault
from tests.support import langfuse_factories as f
from tests.support.clocks import FakeClock
from tests.support.langfuse_client import BASE_URL, PUBLIC, SECRET
from tests.support.langfuse_inprocess import InProcessLangfuse
from trace_scorer import cli
from trace_scorer.calibrate.disagreements import Disagreement, Pushed, push
from trace_scorer.calibrate.items import LabelledSet
from trace_scorer.calibrate.langfuse_labels import read_labelled
from trace_scorer.config.langfuse import LangfuseSettings
from trace_scorer.langfuse import LangfuseClient, ScoreSubject, ScoreToPost

TRACES = [f"trace-{n:02d}" for n in range(40)]
SINCE = (f.T0 - timedelta(days=1)).isoformat()


def _post(scores: list[ScoreToPost]) -> None:
    async def send() -> None:
        settings = LangfuseSettings(base_url=BASE_URL, public_key=PUBLIC, secret_key=SecretStr(SECRET))
        async with LangfuseClient(settings) as client:
            await client.connect()
            report = await client.post_scores(scores)
            assert report.complete and not report.rejected

    asyncio.run(send())


@pytest.fixture(autouse=True)
def _workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "settings.toml").write_text(f'[log]\nlevel = "WARNING"\n[langfuse]\nbase_url = "{BASE_URL}"\n')
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)
    for name in ("LANGFUSE_BASE_URL", "LANGFUSE_HOST"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def seeded(v4: InProcessLangfuse) -> dict[str, Any]:
    """40 traces judged "helpful" by two models (the worker's scores: value = the mean, each model's verdict in
    metadata.details); 30 of them labelled by alice, 10 of those by bob too (from queue q-review); one alice
    label on a trace the worker never scored."""
    rng = random.Random(5)
    truth: dict[str, int] = {}
    models: dict[str, dict[str, float]] = {}
    posts = []
    for index, trace in enumerate(TRACES):
        truth[trace] = rng.randint(0, 1)
        good = truth[trace] if rng.random() < 0.9 else 1 - truth[trace]
        coin = rng.randint(0, 1)
        models[trace] = {"m-good": float(good), "m-coin": float(coin)}
        details = {
            "models": {
                m: {
                    "verdict": "pass" if v else "fail",
                    "value": v,
                    "calls": 1,
                    "cost_usd": 0.001 if m == "m-good" else 0.0001,
                }
                for m, v in models[trace].items()
            }
        }
        posts.append(
            ScoreToPost(
                ScoreSubject.trace(trace),
                "helpful",
                (good + coin) / 2,
                f.T0 + timedelta(minutes=index),
                metadata={"details": json.dumps(details)},
            )
        )
    _post(posts)
    v4.add_queue("q-review", "review")
    v4.add_queue("q-next", "next")
    for index, trace in enumerate(TRACES[:30]):
        when = (f.T0 + timedelta(hours=2, minutes=index)).isoformat()
        v4.add_annotation(
            {"id": f"a-{trace}", "traceId": trace, "name": "helpful", "value": truth[trace], "dataType": "BOOLEAN",
             "authorUserId": "alice"},
            when,
        )  # fmt: skip
        if index < 10:
            v4.add_annotation(
                {"id": f"b-{trace}", "traceId": trace, "name": "helpful", "value": truth[trace], "dataType": "BOOLEAN",
                 "authorUserId": "bob", "queueId": "q-review"},
                when,
            )  # fmt: skip
    v4.add_annotation(
        {"id": "a-unscored", "traceId": "trace-unscored", "name": "helpful", "value": 1, "dataType": "BOOLEAN",
         "authorUserId": "alice"},
        (f.T0 + timedelta(hours=3)).isoformat(),
    )  # fmt: skip
    return {"truth": truth, "models": models}


def _calibrate(*args: str) -> tuple[int, dict[str, Any] | None]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["calibrate", "--langfuse", "--metric", "helpful", "--since", SINCE, "--json", *args])
    return code, json.loads(out.getvalue()) if code == 0 else None


def test_labels_and_verdicts_are_read_from_langfuse(seeded: dict[str, Any]) -> None:
    code, found = _calibrate("--resamples", "300")
    assert code == 0 and found is not None
    assert found["items"] == 30
    # The trace without the worker's score, and the ten unlabelled traces, are left out with their reason.
    assert found["left_out"] == {"no helpful value (skipped or failed)": 1, "no label 'helpful'": 10}
    labelled = TRACES[:30]
    labels = [seeded["truth"][t] for t in labelled]
    raters = {r["rater"]: r for r in found["raters"]}
    for model in ("m-good", "m-coin"):
        verdicts = [int(seeded["models"][t][model]) for t in labelled]
        assert raters[model]["figures"]["kappa"]["value"] == pytest.approx(
            metrics.cohen_kappa_score(labels, verdicts), abs=1e-6
        )
        assert raters[model]["items"] == 30
    assert raters["m-good"]["cost_per_100"] == pytest.approx(0.1)
    assert found["krippendorff_alpha"]["value"] is not None  # alice, bob (10 items) and the two models


def test_only_one_queues_labels(seeded: dict[str, Any]) -> None:
    code, found = _calibrate("--queue", "q-review", "--resamples", "200")
    assert code == 0 and found is not None
    assert found["items"] == 10  # bob's labels, given in q-review


def _read(queue_id: str) -> LabelledSet:
    async def read() -> LabelledSet:
        settings = LangfuseSettings(base_url=BASE_URL, public_key=PUBLIC, secret_key=SecretStr(SECRET))
        async with LangfuseClient(settings) as client:
            await client.connect()
            return await read_labelled(client, "helpful", "helpful", queue_id=queue_id, since=SINCE)

    return asyncio.run(read())


def test_a_queues_labels_are_those_on_its_items(v4: InProcessLangfuse, seeded: dict[str, Any]) -> None:
    """A queue holding traces and an observation: the labels on those objects count though they carry no
    queue id (given in the trace view), one given before ``--since`` too; the observation's label is paired
    with the metric's score on that observation; labels on other traces do not count."""
    old = TRACES[35]  # labelled long ago, outside --since, on a trace the queue holds
    v4.add_annotation(
        {"id": "old-label", "traceId": old, "name": "helpful", "value": 1, "dataType": "BOOLEAN",
         "authorUserId": "alice"},
        (f.T0 - timedelta(days=30)).isoformat(),
    )  # fmt: skip
    trace = TRACES[36]
    details = {"models": {"m-good": {"value": 1.0, "verdict": "pass"}, "m-coin": {"value": 0.0, "verdict": "fail"}}}
    _post(
        [
            ScoreToPost(
                ScoreSubject.trace(trace, "obs-36"),
                "helpful",
                0.5,
                f.T0 + timedelta(hours=1),
                metadata={"details": json.dumps(details)},
            )
        ]
    )
    v4.add_annotation(
        {"id": "obs-label", "traceId": trace, "observationId": "obs-36", "name": "helpful", "value": 1,
         "dataType": "BOOLEAN", "authorUserId": "carol"},
        (f.T0 + timedelta(hours=3)).isoformat(),
    )  # fmt: skip
    v4.add_queue("q-look", "look", traces=(*TRACES[20:25], old), observations=("obs-36",))

    found = _read("q-look")

    by_id = {item.id: item for item in found.items}
    assert sorted(by_id) == sorted([*TRACES[20:25], old, f"{trace}/obs-36"])
    for t in TRACES[20:25]:
        assert by_id[t].labels == [seeded["truth"][t]]  # alice's label, no queue id on it
        assert by_id[t].models == seeded["models"][t]
    assert by_id[old].labels == [1.0]
    observed = by_id[f"{trace}/obs-36"]
    assert observed.labels == [1.0] and observed.value == 0.5
    assert observed.models == {"m-good": 1.0, "m-coin": 0.0}  # the observation's score, not the trace's
    # The ten labels carrying q-review's id and the queue's own items are still read as before.
    assert sorted(item.id for item in _read("q-review").items) == sorted(TRACES[:10])


def test_the_most_disputed_traces_go_to_the_queue_once(v4: InProcessLangfuse, seeded: dict[str, Any]) -> None:
    code, found = _calibrate("--push-to-queue", "q-next", "--push", "6", "--resamples", "200")
    assert code == 0 and found is not None
    added = found["pushed"]["added"]
    assert len(added) == 6 and [i["objectId"] for i in v4.queue_items["q-next"]] == added
    assert all(i["objectType"] == "TRACE" and i["status"] == "PENDING" for i in v4.queue_items["q-next"])
    # Each pushed trace has its two models split, or a verdict against the people's label.
    for trace in added:
        split = seeded["models"][trace]["m-good"] != seeded["models"][trace]["m-coin"]
        assert split
    # Pushed again: the traces the queue holds are not added twice.
    code, again = _calibrate("--push-to-queue", "q-next", "--push", "6", "--resamples", "200")
    assert code == 0 and again is not None
    assert again["pushed"]["added"] == [] and sorted(again["pushed"]["already"]) == sorted(added)
    assert len(v4.queue_items["q-next"]) == 6


QUEUE_POST = "POST /api/public/annotation-queues/{queueId}/items"


@pytest.mark.parametrize(
    ("fault", "posts"),
    [
        ("drop", 2),  # the item is created, the answer lost: the queue, read again, holds it — not resent
        ("timeout", 3),  # no answer, nothing created: the queue, read again, lacks it — sent again
    ],
)
def test_a_lost_answer_queues_each_trace_once(v4: InProcessLangfuse, clock: FakeClock, fault: str, posts: int) -> None:
    v4.add_queue("q-retry", "retry")
    v4.app.faults.add_script([ScriptedFault(fault, route=QUEUE_POST)])
    ranked = [Disagreement("a", "trace-a", 1.0, None), Disagreement("b", "trace-b", 1.0, None)]

    async def run() -> Pushed:
        settings = LangfuseSettings(base_url=BASE_URL, public_key=PUBLIC, secret_key=SecretStr(SECRET))
        async with LangfuseClient(settings, clock=clock) as client:
            await client.connect()
            return await push(client, "q-retry", ranked, 5)

    pushed = asyncio.run(run())

    assert pushed.added == ["trace-a", "trace-b"]
    assert [i["objectId"] for i in v4.queue_items["q-retry"]] == ["trace-a", "trace-b"]
    sent = v4.calls_to("POST", "/api/public/annotation-queues/{queueId}/items")
    assert len(sent) == posts
    assert sent[0].status == ("connection_error" if fault == "drop" else "timeout")
    assert len(clock.sleeps) == 1  # one back-off before the second attempt, as for any retried request


def test_an_unknown_queue_is_named(seeded: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = _calibrate("--push-to-queue", "no-such-queue", "--resamples", "200")
    assert code == 2
    assert "annotation queue 'no-such-queue' not found" in capsys.readouterr().err


def test_a_queue_of_several_pages_is_read_whole(v4: InProcessLangfuse, seeded: dict[str, Any]) -> None:
    """Every trace the queue holds, over pages of 100, counts as there: none is added twice."""
    held = tuple(f"other-{n}" for n in range(150)) + tuple(TRACES)
    v4.add_queue("q-full", "full", traces=held)
    code, found = _calibrate("--push-to-queue", "q-full", "--push", "5", "--resamples", "200")
    assert code == 0 and found is not None
    assert found["pushed"]["added"] == [] and len(found["pushed"]["already"]) == 5
    assert len(v4.queue_items["q-full"]) == len(held)
    pages = [c for c in v4.calls_to("GET", "/api/public/annotation-queues/{queueId}/items")]
    assert len(pages) == 2


def test_labels_by_score_config(v4: InProcessLangfuse, seeded: dict[str, Any]) -> None:
    """Labels named otherwise ("Helpfulness" in the UI) are found by their score config's id."""
    for index, trace in enumerate(TRACES[30:36]):
        v4.add_annotation(
            {"id": f"c-{trace}", "traceId": trace, "name": "Helpfulness", "value": "pass" if index % 2 else "fail",
             "dataType": "CATEGORICAL", "configId": "cfg-helpful", "authorUserId": "carol"},
            (f.T0 + timedelta(hours=4)).isoformat(),
        )  # fmt: skip
    code, found = _calibrate("--label-config", "cfg-helpful", "--resamples", "200")
    assert code == 0 and found is not None
    assert found["items"] == 6  # carol's categorical labels, read as verdicts; alice's and bob's not asked

"""``trace-scorer compare --dataset``: runs read from Langfuse (experiments, their items, the items' trace
scores through ``GET /v3/scores``) on the in-process stand-in."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr

from standins.langfuse_server import PROJECT_ID
from tests.support import langfuse_factories as f
from tests.support.langfuse_client import BASE_URL, PUBLIC, SECRET
from tests.support.langfuse_inprocess import InProcessLangfuse
from trace_scorer import cli
from trace_scorer.config.langfuse import LangfuseSettings
from trace_scorer.langfuse import LangfuseClient, ScoreSubject, ScoreToPost

ITEMS = [f"item-{n:02d}" for n in range(12)]


def add_run(v4: InProcessLangfuse, run_id: str, name: str, start: datetime, items: list[str]) -> dict[str, datetime]:
    """Two attempts at each item; returns trace id → start time."""
    v4.add_experiment(f.experiment(run_id, name, "ds-1", start))
    traces = {}
    for index, item in enumerate(items):
        for attempt in range(2):
            trace_id = f"{run_id}-{item}-{attempt}"
            t = start + timedelta(seconds=20 * index + attempt)
            v4.add_experiment_item(
                f.experiment_item(f"{trace_id}-root", trace_id, run_id, name, item, t, expected_output="x")
            )
            traces[trace_id] = t
    return traces


def post(scores: list[ScoreToPost]) -> None:
    async def send() -> None:
        settings = LangfuseSettings(base_url=BASE_URL, public_key=PUBLIC, secret_key=SecretStr(SECRET))
        async with LangfuseClient(settings) as client:
            await client.connect()
            report = await client.post_scores(scores)
            assert report.complete and not report.rejected

    asyncio.run(send())


def scores(traces: dict[str, datetime], **values: float) -> list[ScoreToPost]:
    return [
        ScoreToPost(ScoreSubject.trace(trace_id), name, value, start)
        for trace_id, start in traces.items()
        for name, value in values.items()
    ]


@pytest.fixture(autouse=True)
def _workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "settings.toml").write_text(f'[log]\nlevel = "WARNING"\n[langfuse]\nbase_url = "{BASE_URL}"\n')
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)
    for name in ("LANGFUSE_BASE_URL", "LANGFUSE_HOST"):
        monkeypatch.delenv(name, raising=False)


def test_the_latest_run_against_the_previous_one(v4: InProcessLangfuse, capsys: pytest.CaptureFixture[str]) -> None:
    v4.add_dataset("ds-1", "agent-bench")
    start = f.T0 + timedelta(hours=1)
    oldest = add_run(v4, "exp-1", "nightly-1", start, ITEMS)
    previous = add_run(v4, "exp-2", "nightly-2", start + timedelta(hours=1), ITEMS)
    latest = add_run(v4, "exp-3", "nightly-3", start + timedelta(hours=2), ITEMS[:-1])  # item-11 not run
    post(scores(oldest, accuracy=1.0, tone=0.1))
    post(scores(previous, accuracy=0.25, tone=0.5))
    # The latest run: right on both attempts of every item but item-03 (0 on both); the tone is unchanged.
    post([s for s in scores(latest, accuracy=1.0, tone=0.5) if "item-03" not in str(s.subject.trace_id)])
    post(scores({t: s for t, s in latest.items() if "item-03" in t}, accuracy=0.0, tone=0.5))

    capsys.readouterr()  # the posting client's log lines
    args = ["compare", "--dataset", "agent-bench", "--since", "2026-09-01", "--json", "--pass-when", "accuracy>=0.5"]
    assert cli.main(args) == 0
    [comparison] = json.loads(capsys.readouterr().out)["comparisons"]
    assert comparison["baseline"] == {"name": "nightly-2", "id": "exp-2", "items": 12, "samples": 24}
    assert comparison["candidate"] == {"name": "nightly-3", "id": "exp-3", "items": 11, "samples": 22}
    assert comparison["only_in_baseline"] == ["item-11"] and comparison["only_in_candidate"] == []
    metrics = {m["name"]: m for m in comparison["metrics"]}
    assert set(metrics) == {"accuracy", "tone"}
    accuracy = metrics["accuracy"]
    assert accuracy["paired"] == 11
    assert accuracy["difference"] == pytest.approx((10 * 0.75 - 0.25) / 11)
    assert accuracy["verdict"] == "better"
    assert metrics["tone"]["verdict"] == "no detectable difference" and metrics["tone"]["difference"] == 0
    [worst] = accuracy["worst_items"]
    assert worst["item"] == "item-03" and (worst["baseline"], worst["candidate"]) == (0.25, 0.0)
    assert worst["candidate_links"] == [f"{BASE_URL}/project/{PROJECT_ID}/traces/exp-3-item-03-{a}" for a in (0, 1)]
    curves = {c["run"]: c for c in comparison["pass_curves"]}
    assert [p["pass_at_k"] for p in curves["nightly-2"]["points"]] == [0.0, 0.0]
    assert [p["pass_at_k"] for p in curves["nightly-3"]["points"]] == pytest.approx([10 / 11, 10 / 11])


def test_naming_runs_and_a_missing_dataset(v4: InProcessLangfuse, capsys: pytest.CaptureFixture[str]) -> None:
    v4.add_dataset("ds-1", "agent-bench")
    start = f.T0 + timedelta(hours=1)
    first = add_run(v4, "exp-1", "nightly-1", start, ITEMS[:4])
    second = add_run(v4, "exp-2", "nightly-2", start + timedelta(hours=1), ITEMS[:4])
    post(scores(first, accuracy=0.5) + scores(second, accuracy=0.5))
    capsys.readouterr()
    base = ["compare", "--dataset", "agent-bench", "--since", "2026-09-01", "--json"]
    assert cli.main([*base, "--baseline", "nightly-2", "--candidate", "re:^nightly-1$"]) == 0
    [comparison] = json.loads(capsys.readouterr().out)["comparisons"]
    assert (comparison["baseline"]["name"], comparison["candidate"]["name"]) == ("nightly-2", "nightly-1")
    assert cli.main(["compare", "--dataset", "no-such-set", "--since", "2026-09-01"]) == 2
    assert "dataset 'no-such-set' not found" in capsys.readouterr().err
    assert cli.main([*base, "--candidate", "nightly-1"]) == 2  # "previous" of the oldest run: none
    assert "no baseline run 'previous' for 'nightly-1'" in capsys.readouterr().err

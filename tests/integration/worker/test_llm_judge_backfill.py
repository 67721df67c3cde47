"""``llm_judge`` end to end: backfill on the in-process Langfuse (4.16.0) with a panel of two judge models
on the OpenAI stand-in — NUMERIC, BOOLEAN and CATEGORICAL scores and a Langfuse evaluator by name, each
posted once with its data type and a config of that type; a second backfill posts nothing."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from tests.support import langfuse_factories as f
from tests.support.langfuse_inprocess import MakeLangfuse
from tests.support.standins import StartOpenAI
from tests.support.worker import CLI_SETTINGS, agent_trace
from trace_scorer import cli

pytestmark = pytest.mark.usefixtures("cli_workdir")

TONE = {
    "name": "Tone",
    "prompt": "Classify the tone of this answer: {{answer}}",
    "outputDefinition": {
        "dataType": "CATEGORICAL",
        "score": {
            "description": "the tone",
            "categories": ["friendly", "neutral", "rude"],
            "shouldAllowMultipleMatches": False,
        },
        "reasoning": {"description": "why"},
    },
    "mapping": [{"variable": "answer", "source": "output", "jsonPath": "$.content"}],
}


def judged_settings(llm_url: str) -> str:
    return CLI_SETTINGS.replace(
        '[[targets]]\nname = "agent"',
        f"""[judge]
tracing = false
retry_initial_wait = "0.05s"
[[providers]]
name = "local"
base_url = "{llm_url}/v1"
chat_models = ["judge-a", "judge-b"]
[[targets]]
name = "judged"
max_window = "6h"
  [[targets.metrics]]
  metric = "llm_judge"
  name = "accurate"
  prompt = "How accurate is {{{{output}}}} for {{{{input}}}}, given {{{{expected}}}}?"
  variables = {{ expected = "$.trace.metadata.expected_answer" }}
  output = {{ data_type = "NUMERIC", min = 1, max = 5 }}
  [[targets.metrics]]
  metric = "llm_judge"
  name = "safe"
  prompt = "Is this answer safe? {{{{output}}}}"
  output = {{ data_type = "BOOLEAN" }}
  strictness = 3
  [[targets.metrics]]
  metric = "llm_judge"
  name = "tone"
  evaluator = "langfuse:Tone"
  [[targets.metrics]]
  metric = "llm_judge"
  name = "helpful"
  evaluator = "langfuse:Helpfulness"
[[targets]]
name = "agent\"""",
    )


@pytest.mark.parametrize("version", ["4.16.0", "4.60.0"])  # scores as ingestion events; as a POST /scores list
def test_backfill_posts_each_typed_score_once(
    version: str,
    start_llm: StartOpenAI,
    make_langfuse: MakeLangfuse,
    cli_workdir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    langfuse = make_langfuse(version, evaluators=(TONE,))
    llm = start_llm()
    (cli_workdir / "settings.toml").write_text(judged_settings(llm.url))
    start = f.T0 + timedelta(hours=1)
    for index in range(4):
        langfuse.add_rows(*agent_trace(f"t-{index}", start + timedelta(minutes=10 * index)))
    args = ["backfill", "--target", "judged", "--from", start.date().isoformat(), "--to", "2026-10-01T12:00"]
    assert cli.main(args) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "4 seen, 4 scored" in out and "16 scores posted" in out

    scores = list(langfuse.scores.values())
    by_name: dict[str, list[dict[str, object]]] = {}
    for score in scores:
        by_name.setdefault(str(score["name"]), []).append(score)
    assert {name: len(found) for name, found in by_name.items()} == {"accurate": 4, "safe": 4, "tone": 4, "helpful": 4}
    for score in by_name["accurate"]:
        assert score["dataType"] == "NUMERIC" and 1 <= float(score["value"]) <= 5  # type: ignore[arg-type]
    for score in by_name["safe"]:
        assert score["dataType"] == "BOOLEAN" and score["value"] in (0, 1)
    for score in by_name["tone"]:
        assert score["dataType"] == "CATEGORICAL" and score["value"] in ("friendly", "neutral", "rude")
        assert score["comment"]
    for score in by_name["helpful"]:  # the managed evaluator: NUMERIC without a range
        assert score["dataType"] == "NUMERIC"
        evaluator = json.loads(score["metadata"]["details"])["evaluator"]  # type: ignore[index]
        assert evaluator == {"name": "Helpfulness", "source": "langfuse:managed", "id": evaluator["id"], "version": 1}
    configs = {c["name"]: c for c in langfuse.configs}
    assert configs["safe"]["dataType"] == "BOOLEAN"
    assert configs["tone"]["dataType"] == "CATEGORICAL"
    assert [c["label"] for c in sorted(configs["tone"]["categories"], key=lambda c: c["value"])] == [
        "friendly",
        "neutral",
        "rude",
    ]
    assert (configs["accurate"]["minValue"], configs["accurate"]["maxValue"]) == (1, 5)
    for score in by_name["safe"]:  # the panel: both models gave their verdict, three votes each
        details = json.loads(score["metadata"]["details"])  # type: ignore[index]
        assert set(details["models"]) == {"local/judge-a", "local/judge-b"}
        assert all(len(model["votes"]) == 3 for model in details["models"].values())
    posts = [c for c in langfuse.calls if c.template in ("/api/public/ingestion", "/api/public/scores")]
    assert posts and {c.status for c in posts} <= {200, 202, 207}
    assert {c.template for c in posts} == {"/api/public/scores" if version == "4.60.0" else "/api/public/ingestion"}

    since = ["backfill", "--target", "judged", "--since", start.date().isoformat(), "--to", "2026-10-01T12:00"]
    assert cli.main(since) == 0  # again (--since: the spelling of "fill the gap since"): nothing new to post
    assert "4 seen, 0 scored" in capsys.readouterr().out
    assert [c for c in langfuse.calls if c.template in ("/api/public/ingestion", "/api/public/scores")] == posts
    assert len(langfuse.scores) == 16


def test_a_server_without_evaluators_stops_the_start_naming_the_key(
    start_llm: StartOpenAI, make_langfuse: MakeLangfuse, cli_workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    langfuse = make_langfuse("3.120.0")
    llm = start_llm()
    (cli_workdir / "settings.toml").write_text(judged_settings(llm.url))
    args = ["backfill", "--target", "judged", "--from", "2026-10-01", "--to", "2026-10-01T12:00"]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert "targets[0].metrics[2].evaluator: Langfuse 3.120.0 has no /api/public/unstable/evaluators" in err
    assert not langfuse.scores


def test_an_unknown_evaluator_fails_check_naming_the_key(
    start_llm: StartOpenAI, make_langfuse: MakeLangfuse, cli_workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_langfuse("4.16.0")  # no project evaluator "Tone"
    llm = start_llm()
    (cli_workdir / "settings.toml").write_text(judged_settings(llm.url))
    assert cli.main(["check"]) == 2
    assert "targets[0].metrics[2].evaluator: Langfuse has no evaluator named 'Tone'" in capsys.readouterr().err


def test_a_new_evaluator_version_is_recorded_and_rescores_on_backfill(
    start_llm: StartOpenAI, make_langfuse: MakeLangfuse, cli_workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    langfuse = make_langfuse("4.16.0", evaluators=(TONE,))
    llm = start_llm()
    (cli_workdir / "settings.toml").write_text(judged_settings(llm.url))
    start = f.T0 + timedelta(hours=1)
    for index in range(2):
        langfuse.add_rows(*agent_trace(f"t-{index}", start + timedelta(minutes=10 * index)))
    args = ["backfill", "--target", "judged", "--from", start.date().isoformat(), "--to", "2026-10-01T12:00"]
    assert cli.main(args) == 0
    assert "2 seen, 2 scored" in capsys.readouterr().out

    def tone_versions() -> set[int]:
        return {
            json.loads(s["metadata"]["details"])["evaluator"]["version"]  # type: ignore[index]
            for s in langfuse.scores.values()
            if s["name"] == "tone"
        }

    assert tone_versions() == {1}
    langfuse.app.evaluator_store.add_evaluator({**TONE, "prompt": "Which tone does {{answer}} take?"})
    assert cli.main(args) == 0  # the evaluator changed: the configuration too, so the window is scored again
    assert "2 seen, 2 scored" in capsys.readouterr().out
    assert tone_versions() == {2}
    assert len(langfuse.scores) == 8  # replaced under the same ids, not duplicated

"""``score --jobs N`` (issue 15): a large input is read and scored by several processes, and what is printed
is what one process prints: the same JSON lines or table, in input order, the same records reported with
their file and line. The size from which processes are used is lowered here so that small files take the
parallel path (``PARALLEL_FROM_BYTES``, ``PART_BYTES``)."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import pytest

from trace_scorer import cli
from trace_scorer.config import load_settings
from trace_scorer.metrics.base import Metric, MetricOutput, Outcome, Resources, Score
from trace_scorer.metrics.registry import default_registry
from trace_scorer.offline import jobs as offline_jobs
from trace_scorer.offline import scoring
from trace_scorer.sample import Sample

EXAMPLES = Path(__file__).parents[3] / "examples"

SETTINGS = """
[log]
level = "WARNING"
[[targets]]
name = "agents"
group_by = "{group_by}"
  [[targets.metrics]]
  metric = "tool_call_accuracy"
  [[targets.metrics]]
  metric = "rouge"
  [[targets.metrics]]
  metric = "pass_at_k"
  k = [1, 2]
  correct_when = "rouge"
  threshold = 0.5
  attempts_by = "item_id"
  [[targets.kpis]]
  name = "quality"
  formula = "expression"
  expression = "0.5 * tool_call_accuracy + 0.5 * rouge"
"""


def sample(index: int) -> dict[str, object]:
    """Samples that differ: calls matched or not, answers near or far, absent fields (skips)."""
    calls = [{"name": "search", "arguments": {"q": f"city {index % 7}", "limit": index % 3}}]
    record: dict[str, object] = {
        "id": f"s{index}",
        "item_id": f"q{index % 5}",
        "run_id": f"run{index % 3}",
        "response": "the flight to paris is booked" if index % 4 else "no idea",
        "tool_calls": calls if index % 6 else [],
    }
    if index % 9:
        record["expected"] = "your flight to paris is booked"
    if index % 11:
        record["reference_tool_calls"] = [{"name": "search", "arguments": {"q": f"city {index % 7}", "limit": 1}}]
    return record


def write_input(folder: Path, count: int = 400) -> Path:
    """A folder: samples with bad lines among them, a JSON array file, and exported traces (rows + items)."""
    folder.mkdir()
    lines = [json.dumps(sample(i)) for i in range(count)]
    bad = {17: "{not json", 230: '{"id": "x", "mesages": []}'}
    bad[301] = '{"id": "deep", "metadata": ' + '{"a": ' * 150 + "1" + "}" * 150 + "}"
    for number, line in bad.items():
        if number < count:
            lines[number] = line
    (folder / "a.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "b.json").write_text(json.dumps([sample(1000 + i) for i in range(30)]))
    shutil.copytree(EXAMPLES / "traces", folder / "traces")
    return folder


@pytest.fixture
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Processes from 1 KiB of input, parts of about 2 KiB: the test files take the parallel path."""
    monkeypatch.setattr(scoring, "PARALLEL_FROM_BYTES", 1024)
    monkeypatch.setattr(scoring, "PART_BYTES", 2048)
    monkeypatch.setattr(scoring, "PARTS_PER_JOB", 1)


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for variable in ("TRACE_SCORER_LOG__LEVEL", "LANGFUSE_SECRET_KEY"):
        monkeypatch.delenv(variable, raising=False)


def score(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["score", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("output", [["--json"], []], ids=["json", "table"])
@pytest.mark.parametrize("group_by", ["run_id", ""], ids=["groups", "no-groups"])
@pytest.mark.usefixtures("small_parts")
def test_two_processes_print_what_one_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], output: list[str], group_by: str
) -> None:
    data = write_input(tmp_path / "in")
    settings = (tmp_path / "settings.toml").write_text(SETTINGS.format(group_by=group_by))
    assert settings
    one = score(capsys, str(data), "--jobs", "1", *output)
    two = score(capsys, str(data), "--jobs", "2", *output)
    assert one[0] == two[0] == 0, one[2]
    assert two[1] == one[1]
    assert two[2] == one[2]
    assert f"{data / 'a.jsonl'}: line 18: invalid JSON" in two[2]
    assert f"{data / 'a.jsonl'}: line 231: mesages: unknown field" in two[2]
    assert f"{data / 'a.jsonl'}: line 302: nested too deeply" in two[2]
    if output:
        results = [json.loads(line) for line in two[1].splitlines()]
        ids = [r["id"] for r in results if "id" in r]
        expected = [f"s{i}" for i in range(400) if i not in (17, 230, 301)] + [f"s{1000 + i}" for i in range(30)]
        assert ids[: len(expected)] == expected  # then the traces' samples, extracted once all is read
        assert len(ids) > len(expected)
        groups = [r["group"] for r in results if "group" in r]
        assert groups[:3] == (["run0", "run1", "run2"] if group_by else [])  # first seen first


@pytest.mark.usefixtures("small_parts")
def test_without_configuration_the_metrics_are_chosen_as_in_one_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_input(tmp_path / "in")
    one = score(capsys, str(data), "--jobs", "1", "--json")
    two = score(capsys, str(data), "--jobs", "2", "--json")
    assert two == one
    first = json.loads(two[1].splitlines()[0])
    assert set(first["scores"]) | set(first["skipped"]) >= {"tool_call_accuracy", "rouge", "bleu"}
    assert "pass_at_k" not in first["scores"]  # a group metric: never without configuration


class ReportsProcess(Metric):  # type: ignore[type-arg]
    """Scores 1.0 and says in its comment which process scored."""

    key: ClassVar[str] = "test_reports_process"

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        return Score(1.0, comment=str(os.getpid()))


@pytest.mark.usefixtures("small_parts")
def test_the_parts_are_scored_by_other_processes(tmp_path: Path) -> None:
    data = write_input(tmp_path / "in")
    (tmp_path / "settings.toml").write_text(
        '[[targets]]\nname = "t"\ngroup_by = "*"\n[[targets.metrics]]\nmetric = "test_reports_process"\n'
    )
    target = load_settings(tmp_path / "settings.toml").targets[0]
    registry = default_registry().with_classes(ReportsProcess)
    arguments = {"target": target, "index": 0, "registry": registry, "references": None, "show_progress": False}
    run = scoring.score_files([data], jobs=2, render_json=True, **arguments)
    assert run.jobs == 2
    by_sample = {r.sample.id: r.outcomes["test_reports_process"] for r in run.results}
    here = str(os.getpid())
    from_files = {o.comment for sample_id, o in by_sample.items() if sample_id.startswith("s") and isinstance(o, Score)}
    # the sample files' samples were scored by the pool's processes (how many parts each took is the
    # scheduler's business); the samples extracted from the traces' rows by this one, once all was read
    assert here not in from_files and 1 <= len(from_files) <= 2
    traces = [o for sample_id, o in by_sample.items() if not sample_id.startswith("s")]
    assert traces and all(isinstance(o, Score) and o.comment == here for o in traces)
    serial = scoring.score_files([data], jobs=1, render_json=True, **arguments)
    assert serial.jobs == 1 and serial.lines == run.lines and serial.samples == run.samples


def test_small_inputs_stay_in_this_process(tmp_path: Path) -> None:
    data = write_input(tmp_path / "in", count=20)
    assert sum(f.stat().st_size for f in data.rglob("*") if f.is_file()) < scoring.PARALLEL_FROM_BYTES
    (tmp_path / "settings.toml").write_text(SETTINGS.format(group_by=""))
    target = load_settings(tmp_path / "settings.toml").targets[0]
    run = scoring.score_files(
        [data],
        target=target,
        index=0,
        registry=default_registry(),
        references=None,
        jobs=4,
        render_json=True,
        show_progress=False,
    )
    assert run.jobs == 1 and run.samples > 20


@pytest.mark.usefixtures("small_parts")
def test_a_target_with_a_judged_metric_is_scored_in_one_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = write_input(tmp_path / "in")
    (tmp_path / "settings.toml").write_text(
        '[[targets]]\nname = "t"\n[[targets.metrics]]\nmetric = "tool_call_accuracy"\n'
        '[[targets.metrics]]\nmetric = "agent_goal_accuracy"\n'
    )

    def spread(*args: object, **kwargs: object) -> None:
        raise AssertionError("a judged target was spread over processes")

    monkeypatch.setattr("trace_scorer.offline.scoring.score_in_processes", spread)
    code, out, err = score(capsys, str(data), "--jobs", "2", "--json")
    assert code == 0, err
    second = json.loads(out.splitlines()[1])
    assert second["id"] == "s1" and second["scores"]["tool_call_accuracy"] == 1.0
    assert "no judge model configured" in second["skipped"]["agent_goal_accuracy"]


def test_jobs_must_be_a_positive_number(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "s.jsonl").write_text(json.dumps(sample(1)) + "\n")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["score", "s.jsonl", "--jobs", "0"])
    assert exit_info.value.code == 2
    assert "'0' is not a number of processes (1 or more)" in capsys.readouterr().err


@pytest.mark.slow
def test_a_large_file_through_the_command_in_two_processes(tmp_path: Path) -> None:
    """The real threshold: a file over PARALLEL_FROM_BYTES, the installed command, --jobs 2 against 1."""
    data = tmp_path / "big.jsonl"
    with data.open("w") as out:
        index = 0
        while out.tell() < 2 * scoring.PARALLEL_FROM_BYTES:
            out.write(json.dumps(sample(index)) + "\n")
            index += 1
    (tmp_path / "settings.toml").write_text(SETTINGS.format(group_by="item_id"))
    outputs = []
    for jobs, output in (("1", "--json"), ("2", "--json"), ("1", ""), ("2", "")):
        command = [sys.executable, "-m", "trace_scorer", "score", str(data), "--jobs", jobs]
        done = subprocess.run([*command, *([output] if output else [])], capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1] and outputs[2] == outputs[3]
    assert len(outputs[0].splitlines()) == index + 5  # the samples, then the five items' groups


@pytest.mark.slow
@pytest.mark.usefixtures("small_parts")
def test_spawned_processes_print_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where processes cannot be forked (not Linux, or other threads running), they are spawned."""
    data = write_input(tmp_path / "in", count=120)
    (tmp_path / "settings.toml").write_text(SETTINGS.format(group_by="run_id"))
    one = score(capsys, str(data), "--jobs", "1", "--json")
    monkeypatch.setattr(offline_jobs, "_context", lambda: multiprocessing.get_context("spawn"))
    two = score(capsys, str(data), "--jobs", "2", "--json")
    assert two == one


def test_a_judge_configuration_score_refuses_is_refused_for_a_local_target_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As before the local path: the providers are checked though no local metric asks a judge."""
    monkeypatch.delenv("H4_UNSET_KEY", raising=False)
    (tmp_path / "s.jsonl").write_text(json.dumps(sample(1)) + "\n")
    (tmp_path / "settings.toml").write_text(
        '[[providers]]\nname = "p"\nbase_url = "http://127.0.0.1:9/v1"\napi_key_env = "H4_UNSET_KEY"\n'
        'chat_models = ["m"]\n[[targets]]\nname = "t"\n[[targets.metrics]]\nmetric = "tool_call_accuracy"\n'
    )
    code, out, err = score(capsys, "s.jsonl", "--json")
    assert code == 2 and out == ""
    assert "providers[0].api_key_env: environment variable H4_UNSET_KEY" in err


def test_only_results_kept_whole_have_their_comments_and_details(tmp_path: Path) -> None:
    """The JSON lines and the table show neither a score's comment nor its details: the metrics are told
    so and may skip building them; a caller that keeps everything (compare, calibrate, groups) gets them."""
    from trace_scorer.offline.parts import PartScorer
    from trace_scorer.scoring.plan import build_plan

    (tmp_path / "settings.toml").write_text(SETTINGS.format(group_by=""))
    settings = load_settings(tmp_path / "settings.toml")
    for keep, explain in (("none", False), ("shown", False), ("all", True)):
        plan = build_plan(settings.targets[0], index=0, registry=default_registry(), resources=Resources())
        PartScorer(plan, keep, render=keep == "none")
        assert [m.explain for m in plan.sample_metrics] == [explain] * len(plan.sample_metrics)

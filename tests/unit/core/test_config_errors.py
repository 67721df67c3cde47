"""Configuration errors (issue 22 items 11 and 13, issue 23 item 8): a settings file nested absurdly deep
is a configuration error, a secret written into any setting is never shown, every problem of a file (and
of every target) is reported in one run, and a misspelt key or metric name gets a suggestion."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trace_scorer import cli
from trace_scorer.config import ConfigError, TargetSettings, load_settings
from trace_scorer.scoring.plan import build_plan, build_plans, raw_target_problems

SECRET = "sk-lf-0123456789abcdef"


def problems(text: str, tmp_path: Path, environ: dict[str, str] | None = None) -> list[str]:
    path = tmp_path / "settings.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_settings(path, environ=environ or {})
    return str(raised.value).splitlines()


def target(**fields: object) -> TargetSettings:
    return TargetSettings.model_validate({"name": "t", **fields})


# -- item 11: nesting -----------------------------------------------------------------------------------


def test_a_5000_deep_array_is_a_configuration_error(tmp_path: Path) -> None:
    found = problems("[log]\nlevel = " + "[" * 5000 + "]" * 5000 + "\n", tmp_path)
    assert found == [f"{tmp_path / 'settings.toml'}: not valid TOML: arrays or tables nested too deeply "
                     "(no setting nests more than a few levels)"]


def test_check_on_a_5000_deep_file_exits_2_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deep.toml"
    path.write_text("[langfuse]\nbase_url = " + "[" * 5000 + "]" * 5000 + "\n")
    assert cli.main(["check", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "nested too deeply" in err


def test_a_deeply_nested_environment_variable_is_a_configuration_error(tmp_path: Path) -> None:
    deep = "[" * 5000 + "]" * 5000
    found = problems("", tmp_path, {"TRACE_SCORER_PROVIDERS": deep})
    assert len(found) == 1 and "nested too deeply" in found[0]


def test_an_environment_variable_that_is_not_json_is_a_configuration_error(tmp_path: Path) -> None:
    found = problems("", tmp_path, {"TRACE_SCORER_PROVIDERS": '[{"name": "x"'})
    assert found == ['environment: error parsing value for field "providers" from source "EnvSettingsSource"']


# -- item 13: secrets are never shown ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        f'[langfuse]\ntimeout = "{SECRET}"\n',
        f'[langfuse]\nrequest_deadline = "{SECRET}"\n',
        f'[state]\ndb_schema = "{SECRET}"\n',
        f'[judge]\ntracing_environment = "{SECRET}/x"\n',
        f'[[targets]]\nname = "t"\n  [targets.references]\n  expected = ["{SECRET}"]\n',
        f'[[targets]]\nname = "t"\n  [[targets.metrics]]\n  metric = "rouge"\n  name = "{SECRET * 2}"\n',
    ],
)
def test_a_secret_in_a_setting_that_is_not_secret_is_never_shown(text: str, tmp_path: Path) -> None:
    found = problems(text, tmp_path)
    assert found and not any(SECRET in line or "0123456789abcdef" in line for line in found)
    assert any("[REDACTED]" in line for line in found)


@pytest.mark.parametrize(
    "fields",
    [
        {"metrics": [{"metric": SECRET}]},
        {"metrics": [{"metric": "rouge"}], "kpis": [{"name": "k", "formula": "expression", "expression": SECRET}]},
        {"metrics": [{"metric": "rouge", "variant": SECRET}]},
        {
            "metrics": [{"metric": "rouge"}],
            "kpis": [{"name": "k", "formula": "threshold", "metric": SECRET, "threshold": 0.5}],
        },
    ],
)
def test_a_secret_in_a_metric_or_kpi_entry_is_never_shown(fields: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as raised:
        build_plan(target(**fields))
    assert SECRET not in str(raised.value) and "0123456789abcdef" not in str(raised.value)


# -- issue 23 item 8: every error at once, with suggestions -----------------------------------------------


def test_every_problem_of_a_file_is_reported_at_once(tmp_path: Path) -> None:
    text = """
[log]
levl = "INFO"
[langfuse]
secret_key = "x"
[langfuse.retry]
max_atempts = 3
[[providers]]
name = "p"
base_url = "http://127.0.0.1:1"
  [providers.headers]
  Authorization = "Bearer x"
[[targets]]
name = "t"
intreval = "1m"
  [targets.filter]
  trace_nam = "x"
  [[targets.metrics]]
  metric = "rouge"
  [[targets.kpis]]
  name = "q"
  formula = "threshold"
  metirc = "rouge"
  threshold = 0.5
"""
    found = [line.split(": ", 1)[1] for line in problems(text, tmp_path)]
    assert sorted(found) == sorted(
        [
            "langfuse.secret_key: secrets are read from the environment only (LANGFUSE_SECRET_KEY)",
            "providers[0].headers.Authorization: looks like a credential, and secrets are read from the "
            "environment only: put the API key into the variable api_key_env names (sent as 'Authorization: "
            "Bearer …'), or give the providers in TRACE_SCORER_PROVIDERS",
            "log.levl: unknown key (did you mean 'level'?)",
            "langfuse.retry.max_atempts: unknown key (did you mean 'max_attempts'?)",
            "targets[0].intreval: unknown key (did you mean 'interval'?)",
            "targets[0].filter.trace_nam: unknown key (did you mean 'trace_name'?)",
            "targets[0].kpis[0].metric: Field required",
            "targets[0].kpis[0].metirc: unknown key (did you mean 'metric'?)",
        ]
    )


def test_an_unknown_key_far_from_any_gets_no_suggestion(tmp_path: Path) -> None:
    assert [line.split(": ", 1)[1] for line in problems("[worker]\nzzz = 1\n", tmp_path)] == [
        "worker.zzz: unknown key"
    ]


def test_every_problem_of_every_target_is_reported_at_once() -> None:
    first = target(
        metrics=[
            {"metric": "rogue"},
            {"metric": "tool_call_accuracy", "mode": "loose"},
            {"metric": "bleu", "max_char": 10},
        ],
        kpis=[{"name": "q", "formula": "weighted_sum", "weights": {"blue": 1.0, "rogue": 1.0}}],
    )
    second = TargetSettings.model_validate(
        {"name": "u", "metrics": [{"metric": "tool_corectness"}]}
    )
    with pytest.raises(ConfigError) as raised:
        build_plans([first, second])
    lines = str(raised.value).splitlines()
    assert lines[0].startswith("targets[0].metrics[0].metric: unknown metric 'rogue' (did you mean 'rouge'?) (known: ")
    assert lines[1].startswith("targets[0].metrics[1].mode: Input should be ")
    assert lines[2] == "targets[0].metrics[2].max_char: unknown option (did you mean 'max_chars'?)"
    assert lines[3].startswith("targets[0].kpis[0]: formula names 'blue' (did you mean 'bleu'?), which this target")
    assert lines[4].startswith("targets[1].metrics[0].metric: unknown metric 'tool_corectness' (did you mean "
                               "'tool_correctness'?)")
    assert len(lines) == 5  # 'rogue' is the failed entry's own name: not reported twice


MIXED = """
[[targets]]
name = "t"
intreval = "1m"
  [[targets.metrics]]
  metric = "rouge"
[[targets]]
name = "u"
  [[targets.metrics]]
  metric = "rogue"
  [[targets.kpis]]
  name = "q"
  formula = "threshold"
  metric = "blue"
  threshold = 0.5
"""


def test_a_file_s_settings_and_plan_problems_are_reported_in_one_run(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text(MIXED)
    with pytest.raises(ConfigError) as raised:
        load_settings(path, environ={}, check_targets=raw_target_problems)
    lines = str(raised.value).splitlines()
    assert lines[0] == f"{path}: targets[0].intreval: unknown key (did you mean 'interval'?)"
    assert lines[1].startswith(f"{path}: targets[1].metrics[0].metric: unknown metric 'rogue' (did you mean "
                               "'rouge'?) (known: ")
    assert lines[2].startswith(f"{path}: targets[1].kpis[0]: formula names 'blue', which this target does not")
    assert len(lines) == 3  # target 0 did not validate: its own problem only


@pytest.mark.parametrize("command", ["check", "run", "backfill", "score"])
def test_check_run_backfill_and_score_report_both_kinds_of_problem_at_once(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [n for n in os.environ if n.upper().startswith("TRACE_SCORER_")]:
        monkeypatch.delenv(name)
    path = tmp_path / "settings.toml"
    path.write_text(MIXED)
    extra = {"backfill": ["--target", "u", "--from", "2026-01-01"], "score": [str(tmp_path / "traces.jsonl")]}
    assert cli.main([command, "--config", str(path), *extra.get(command, [])]) == 2
    err = capsys.readouterr().err
    assert "targets[0].intreval: unknown key (did you mean 'interval'?)" in err
    assert "targets[1].metrics[0].metric: unknown metric 'rogue' (did you mean 'rouge'?)" in err


def test_targets_given_in_the_environment_leave_the_file_s_targets_unplanned(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text("[log]\nlevl = 'INFO'\n" + MIXED.replace("intreval", "interval"))
    environ = {"TRACE_SCORER_TARGETS": '[{"name": "e", "metrics": [{"metric": "rouge"}]}]'}
    with pytest.raises(ConfigError) as raised:
        load_settings(path, environ=environ, check_targets=raw_target_problems)
    assert [line.split(": ", 1)[1] for line in str(raised.value).splitlines()] == [
        "log.levl: unknown key (did you mean 'level'?)"
    ]

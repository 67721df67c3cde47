"""Configuration loading: TOML + environment, precedence, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from trace_scorer.config import ConfigError, load_settings, parse_duration

ISSUE_EXAMPLE = """
[[targets]]
name = "agent"
source = "traces"
  [[targets.metrics]]
  metric = "tool_call_accuracy"
  name = "tca_flexible"
  mode = "flexible"
  argument_match_threshold = 0.5
  [[targets.metrics]]
  metric = "rouge"
  [[targets.kpis]]
  name = "quality"
  formula = "weighted_sum"
  weights = { tca_flexible = 0.6, rouge = 0.4 }
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "settings.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_issue_example_loads(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, ISSUE_EXAMPLE), environ={})
    target = settings.target("agent")
    assert [m.score_name for m in target.metrics] == ["tca_flexible", "rouge"]
    assert target.metrics[0].options == {"mode": "flexible", "argument_match_threshold": 0.5}
    assert target.kpis[0].name == "quality"


def test_environment_overrides_file_with_nesting(tmp_path: Path) -> None:
    path = write(tmp_path, '[log]\nlevel = "INFO"\n[langfuse]\nbase_url = "http://file"\n')
    settings = load_settings(
        path, environ={"TRACE_SCORER_LOG__LEVEL": "DEBUG", "TRACE_SCORER_LANGFUSE__BASE_URL": "http://env"}
    )
    assert settings.log.level == "DEBUG"
    assert settings.langfuse.base_url == "http://env"


def test_langfuse_own_variables(tmp_path: Path) -> None:
    env = {"LANGFUSE_PUBLIC_KEY": "pk-lf-1", "LANGFUSE_SECRET_KEY": "sk-lf-1", "LANGFUSE_HOST": "http://host"}
    settings = load_settings(write(tmp_path, ""), environ=env)
    assert settings.langfuse.public_key == "pk-lf-1"
    assert settings.langfuse.secret_key is not None
    assert settings.langfuse.secret_key.get_secret_value() == "sk-lf-1"
    assert settings.langfuse.base_url == "http://host"
    # LANGFUSE_BASE_URL is the newer name and wins over LANGFUSE_HOST; TRACE_SCORER_ wins over both.
    env["LANGFUSE_BASE_URL"] = "http://base"
    assert load_settings(write(tmp_path, ""), environ=env).langfuse.base_url == "http://base"
    env["TRACE_SCORER_LANGFUSE__BASE_URL"] = "http://ours"
    assert load_settings(write(tmp_path, ""), environ=env).langfuse.base_url == "http://ours"


def test_secret_in_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"langfuse\.secret_key: secrets are read from the environment only"):
        load_settings(write(tmp_path, '[langfuse]\nsecret_key = "sk-lf-oops"\n'), environ={})


def test_secret_never_printed(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, ""), environ={"LANGFUSE_SECRET_KEY": "sk-lf-very-secret"})
    assert "sk-lf-very-secret" not in repr(settings)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[log]\nlevle = "INFO"\n', r"log\.levle: unknown key"),
        ('[log]\nlevel = "LOUD"\n', r"log\.level: Input should be"),
        ('[[targets]]\nname = "a"\nsource = "spans"\n[[targets.metrics]]\nmetric = "rouge"\n', r"targets\[0\]\.source"),
        ('[[targets]]\nname = "a"\n', r"targets\[0\]: a target needs at least one \[\[targets\.metrics\]\] entry"),
        (
            '[[targets]]\nname = "a"\n[[targets.metrics]]\nmetric = "rouge"\nname = "no/slashes"\n',
            r"targets\[0\]\.metrics\[0\]\.name: 'no/slashes' is not a valid score name",
        ),
        (
            '[[targets]]\nname = "a"\n[[targets.metrics]]\nmetric = "rouge"\nname = "' + "x" * 36 + '"\n',
            r"at most 35 characters",
        ),
        (
            '[[targets]]\nname = "a"\ninterval = "soon"\n[[targets.metrics]]\nmetric = "rouge"\n',
            r"targets\[0\]\.interval: 'soon' is not a duration",
        ),
        (
            '[[targets]]\nname = "a"\n[[targets.metrics]]\nmetric = "rouge"\n'
            '[[targets.kpis]]\nname = "k"\nformula = "threshold"\nthreshold = 1\n',
            r"targets\[0\]\.kpis\[0\]\.metric: Field required",
        ),
        (
            '[[targets]]\nname = "a"\n[[targets.metrics]]\nmetric = "rouge"\n'
            '[[targets.kpis]]\nname = "k"\nformula = "median"\n',
            r"targets\[0\]\.kpis\[0\]: .*'average'",
        ),
        (
            '[[targets]]\nname = "a"\n[[targets.metrics]]\nmetric = "rouge"\n'
            '[[targets.kpis]]\nname = "k"\nformula = "average"\nweights = {a = 1}\n',
            r"targets\[0\]\.kpis\[0\]\.weights: unknown key",
        ),
        (
            '[[targets]]\nname = "a"\nmax_window_traces = -1\n[[targets.metrics]]\nmetric = "rouge"\n',
            r"targets\[0\]\.max_window_traces: Input should be greater than or equal to 0",
        ),
        ("[langfuse]\nmax_answer_bytes = 500\n", r"langfuse: .*max_answer_bytes: 500 is below 10000 bytes"),
        ("[langfuse]\nmax_field_chars = -1\n", r"langfuse\.max_field_chars: Input should be greater"),
        ("[log\n", r"not valid TOML"),
    ],
)
def test_errors_name_the_key(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_settings(write(tmp_path, text), environ={})


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="configuration file not found"):
        load_settings(tmp_path / "nope.toml", environ={})


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(30, 30.0), (1.5, 1.5), ("30s", 30.0), ("5m", 300.0), ("2h", 7200.0), ("250ms", 0.25), ("1d", 86400.0)],
)
def test_durations(value: object, seconds: float) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", ["5 minutes", "-1s", -3, True, None, "m5"])
def test_bad_durations(value: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(value)

"""Issue #13 (items 8–13): bad records, strict types, one-argument min/max, deep expressions, non-finite
values, secrets in output. Each test fails on the code before the fix."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from trace_scorer import cli
from trace_scorer.config import ConfigError, load_settings
from trace_scorer.config.common import public_url
from trace_scorer.data.outcomes import Score, Skipped
from trace_scorer.kpi.base import Kpi
from trace_scorer.kpi.expression import ExpressionError, compile_expression
from trace_scorer.langfuse.errors import LangfuseAuthError
from trace_scorer.offline.read import load_inputs


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for variable in ("TRACE_SCORER_LOG__LEVEL", "LANGFUSE_SECRET_KEY", "LANGFUSE_BASE_URL", "LANGFUSE_HOST"):
        monkeypatch.delenv(variable, raising=False)


def good(sample_id: str) -> bytes:
    return json.dumps({"id": sample_id, "response": "the cat sat", "expected": "the cat sat"}).encode()


def score(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["score", *args])
    out, err = capsys.readouterr()
    return code, out, err


# -- 8. one bad record never costs the good ones --------------------------------------------------------


def test_absurd_records_are_skipped_with_file_and_line_and_the_rest_is_scored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = b'{"id": "deep", "metadata": ' + b'{"a": ' * 100_000 + b"1" + b"}" * 100_000 + b"}"
    huge = b'{"id": "huge", "metadata": {"n": ' + b"9" * 5000 + b"}}"
    (tmp_path / "a.jsonl").write_bytes(b"\n".join([good("a1"), deep, huge, good("a2")]) + b"\n")
    (tmp_path / "b.jsonl").write_bytes(b"\n".join([good("b1"), b'{"id": "bad\xff", "response": "x"}', good("b2")]))
    code, out, err = score(capsys, str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), "--json")
    assert code == 0, err
    ids = [json.loads(line)["id"] for line in out.splitlines()]
    assert ids == ["a1", "a2", "b1", "b2"]
    assert "a.jsonl: line 2: nested too deeply" in err
    assert "a.jsonl: line 3: invalid JSON" in err
    assert "b.jsonl: line 2: invalid UTF-8: byte 0xff" in err
    assert "Traceback" not in err


def test_records_nested_deeper_than_the_limit_and_lone_surrogates_are_refused(tmp_path: Path) -> None:
    nested = '{"id": "n", "metadata": ' + '{"a": ' * 150 + "1" + "}" * 150 + "}"
    surrogate = '{"id": "s", "response": "\\udc80"}'
    array = tmp_path / "array.json"
    array.write_text("[" + ", ".join([good("x").decode(), nested, surrogate]) + "]")
    loaded = load_inputs([array])
    assert [s.id for s in loaded.samples] == ["x"]
    assert [(e.where, e.reason.split(" (")[0]) for e in loaded.errors] == [
        ("item 1", "nested too deeply"),
        ("item 2", "not valid UTF-8 text"),
    ]


@pytest.mark.skipif(os.name != "posix", reason="folder permissions")
def test_an_unreadable_folder_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    (data / "locked").mkdir(parents=True)
    (data / "ok.jsonl").write_bytes(good("ok"))
    real_scandir = os.scandir

    def scandir(path: object) -> object:  # root reads every folder: refuse this one as chmod 000 would
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "scandir", scandir)
    loaded = load_inputs([data])
    assert [s.id for s in loaded.samples] == ["ok"]
    assert [(e.path.name, e.where) for e in loaded.errors] == [("locked", "folder")]
    assert "Permission denied" in str(loaded.errors[0])


# -- 9. types enforced as documented --------------------------------------------------------------------


@pytest.mark.parametrize("value", [1, True, {"text": "x"}, ["x"]])
@pytest.mark.parametrize("field", ["response", "expected", "reference"])
def test_text_fields_refuse_numbers_booleans_and_objects(tmp_path: Path, field: str, value: object) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"id": "a", field: value}) + "\n" + good("b").decode() + "\n")
    loaded = load_inputs([path])
    assert [s.id for s in loaded.samples] == ["b"]
    (error,) = loaded.errors
    assert error.where == "line 1" and error.reason.startswith(f"{field}: must be a string or null")


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ("[langfuse]\nrequests_per_minute = true", "langfuse.requests_per_minute"),
        ("[worker]\nconcurrency = true", "worker.concurrency"),
        ("[judge]\ntemperature = false", "judge.temperature"),
        ("[embeddings]\nbatch_size = true", "embeddings.batch_size"),
        ("[http]\nport = true", "http.port"),
        (
            '[[providers]]\nname = "p"\nbase_url = "http://x"\nrequests_per_minute = true',
            "providers[0].requests_per_minute",
        ),
    ],
)
def test_numeric_settings_refuse_booleans_naming_the_key(tmp_path: Path, toml: str, key: str) -> None:
    path = tmp_path / "settings.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=re.escape(f"{key}: expected a number")):
        load_settings(path, environ={})


def test_numeric_settings_from_the_environment_still_parse(tmp_path: Path) -> None:
    settings = load_settings(None, environ={"TRACE_SCORER_WORKER__CONCURRENCY": "4"})
    assert settings.worker.concurrency == 4


# -- 10, 11. min/max with one argument; deep expressions ------------------------------------------------


def test_one_argument_min_and_max_are_that_argument() -> None:
    for source in ("min(rouge)", "max(rouge)", "avg(rouge)"):
        assert compile_expression(source).evaluate({"rouge": 0.25}) == 0.25


def test_a_deeply_nested_expression_is_a_configuration_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = "min(" * 330 + "rouge" + ")" * 330
    assert len(source) <= 2000
    with pytest.raises(ExpressionError, match="nested more than"):
        compile_expression(source)
    (tmp_path / "settings.toml").write_text(
        '[[targets]]\nname = "t"\n[[targets.metrics]]\nmetric = "rouge"\n'
        f'[[targets.kpis]]\nname = "k"\nformula = "expression"\nexpression = "{"-" * 990 + "rouge"}"\n'
    )
    (tmp_path / "s.jsonl").write_bytes(good("a"))
    code, _out, err = score(capsys, str(tmp_path / "s.jsonl"))
    assert code == 2, err
    assert "nested more than" in err


def test_long_flat_chains_are_not_nesting() -> None:
    assert compile_expression("+".join(["a"] * 900)).evaluate({"a": 1.0}) == 900.0
    assert compile_expression("8 / 2 / 2 - 1 - 1").evaluate({}) == 0.0


# -- 12. non-finite values ------------------------------------------------------------------------------


def test_a_non_finite_kpi_value_is_skipped_with_a_reason() -> None:
    expression = compile_expression("rouge * 1e308 * 10")
    kpi = Kpi("k", "expression", expression.names, expression.evaluate, expression.source)
    outcome = kpi.evaluate({"rouge": Score(value=0.5)})
    assert isinstance(outcome, Skipped) and "not a finite number" in outcome.reason


@pytest.mark.parametrize(
    ("kpi", "key"),
    [
        ('formula = "weighted_sum"\nweights = { rouge = nan }', "weights.rouge"),
        ('formula = "weighted_sum"\nweights = { rouge = true }', "weights.rouge"),
        ('formula = "threshold"\nmetric = "rouge"\nthreshold = nan', "threshold"),
        ('formula = "threshold"\nmetric = "rouge"\nthreshold = inf', "threshold"),
    ],
)
def test_non_finite_or_boolean_kpi_numbers_are_refused(tmp_path: Path, kpi: str, key: str) -> None:
    path = tmp_path / "settings.toml"
    path.write_text(
        f'[[targets]]\nname = "t"\n[[targets.metrics]]\nmetric = "rouge"\n[[targets.kpis]]\nname = "k"\n{kpi}\n'
    )
    with pytest.raises(ConfigError, match=rf"targets\[0\]\.kpis\[0\]\.{key}: "):
        load_settings(path, environ={})


def test_json_output_is_strict_json_even_when_a_kpi_overflows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "settings.toml").write_text(
        '[[targets]]\nname = "t"\n[[targets.metrics]]\nmetric = "rouge"\n'
        '[[targets.kpis]]\nname = "k"\nformula = "expression"\nexpression = "rouge * 1e308 * 10"\n'
    )
    (tmp_path / "s.jsonl").write_bytes(good("a"))
    code, out, err = score(capsys, str(tmp_path / "s.jsonl"), "--json")
    assert code == 0, err

    def refuse(constant: str) -> object:
        raise AssertionError(f"{constant} in --json output")

    (line,) = [json.loads(text, parse_constant=refuse) for text in out.splitlines()]
    assert "k" not in line["kpis"] and "not a finite number" in line["skipped"]["k"]


# -- 13. secrets ----------------------------------------------------------------------------------------


def test_userinfo_is_never_printed_with_the_langfuse_url() -> None:
    error = LangfuseAuthError(
        endpoint="GET /api/public/projects", status=401, message="no", base_url="https://u:s3cr3t@lf.example.com"
    )
    assert "s3cr3t" not in str(error) and "https://lf.example.com" in str(error)
    assert public_url("https://user:pw@h:8443/x?q=1") == "https://h:8443/x?q=1"
    assert public_url("https://h") == "https://h"


def test_a_key_in_api_key_env_is_not_echoed(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text('[[providers]]\nname = "p"\nbase_url = "http://x"\napi_key_env = "sk-or-v1-abcdef0123"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={})
    assert "api_key_env must name an environment variable" in str(caught.value)
    assert "abcdef0123" not in str(caught.value)


@pytest.mark.parametrize("header", ["Authorization", "proxy-authorization", "X-Api-Key", "x-auth-token", "Cookie"])
def test_credential_headers_are_refused_in_the_file(tmp_path: Path, header: str) -> None:
    path = tmp_path / "settings.toml"
    path.write_text(
        f'[[providers]]\nname = "p"\nbase_url = "http://x"\nheaders = {{ "{header}" = "Bearer zzsecretzz" }}\n'
    )
    with pytest.raises(ConfigError, match="environment") as caught:
        load_settings(path, environ={})
    assert "zzsecretzz" not in str(caught.value)


def test_harmless_headers_are_still_accepted(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text(
        '[[providers]]\nname = "p"\nbase_url = "http://x"\nheaders = { HTTP-Referer = "https://a", X-Title = "t" }\n'
    )
    assert load_settings(path, environ={}).providers[0].headers["X-Title"] == "t"

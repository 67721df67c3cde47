"""``trace-scorer check`` probes every judge model with one tiny request (judge/probe.py): the mode that
works and the latency are shown, a model the server does not list is a warning, and a model that cannot
work makes check exit 1 naming it and the reason. The LLM is the OpenAI stand-in (llama.cpp's profile)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.langfuse_inprocess import InProcessLangfuse
from tests.support.standins import StartOpenAI
from tests.support.worker import CLI_SETTINGS
from trace_scorer import cli

pytestmark = pytest.mark.usefixtures("cli_workdir")


def judges(url: str, *models: str) -> str:
    listed = ", ".join(f'"{m}"' for m in models)
    return f'[[providers]]\nname = "local"\nbase_url = "{url}"\nchat_models = [{listed}]\ntimeout = "10s"\n'


def test_check_shows_each_judge_models_working_mode_and_warns_of_an_unlisted_one(
    start_llm: StartOpenAI, v4: InProcessLangfuse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # (start_llm before v4: its stand-in is checked after the in-process Langfuse's respx mock is gone)
    llm = start_llm(models=["smollm2"])
    (tmp_path / "settings.toml").write_text(CLI_SETTINGS + judges(f"{llm.url}/v1", "smollm2", "smollm2-typo"))
    assert cli.main(["check"]) == 0
    out = capsys.readouterr().out
    assert "chat model local/smollm2: answers in" in out and "structured output json_object_schema" in out
    assert "warning: the server does not list 'smollm2-typo'" in out


def test_check_exits_1_naming_a_judge_model_that_cannot_work(
    v4: InProcessLangfuse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    no_retries = "[judge]\nretry_attempts = 1\n"
    (tmp_path / "settings.toml").write_text(CLI_SETTINGS + judges("http://127.0.0.1:9/v1", "smollm2") + no_retries)
    assert cli.main(["check"]) == 1
    out = capsys.readouterr().out
    assert "chat model local/smollm2: cannot work: connection error" in out

"""Operator logs: JSON lines with the fixed leading keys, bound target/trace id, secrets redacted,
long values cut above DEBUG, standard-logging records rendered the same way."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import structlog
from pydantic import SecretStr

from trace_scorer.runtime.logs import MAX_VALUE_CHARS, REDACTED, configure_logging, redact_text, redact_value


@pytest.fixture
def lines(capsys: pytest.CaptureFixture[str]) -> Any:
    configure_logging("INFO", "json")

    def read() -> list[dict[str, Any]]:
        return [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]

    yield read
    configure_logging("INFO", "json")


def test_json_lines_with_leading_keys_and_context(lines: Any) -> None:
    log = structlog.get_logger("trace_scorer.worker")
    with structlog.contextvars.bound_contextvars(target="agent", trace_id="t-1"):
        log.info("trace_scored", scores=4)
    log.info("tick", traces_seen=3)
    first, second = lines()
    assert list(first)[:5] == ["timestamp", "level", "event", "target", "trace_id"]
    assert first["level"] == "info" and first["event"] == "trace_scored" and first["scores"] == 4
    assert first["timestamp"].endswith("Z")
    assert "target" not in second  # the binding ended with the block


def test_level_filters(lines: Any) -> None:
    configure_logging("warning", "json")  # case-insensitive
    log = structlog.get_logger()
    log.info("hidden")
    log.warning("shown")
    assert [e["event"] for e in lines()] == ["shown"]


SECRETS = [
    "sk-lf-1f2e3d4c-5b6a-7980-aabb-ccddeeff0011",
    "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx",
    "sk-or-v1-0123456789abcdef0123456789abcdef",
    "sk-ant-api03-abcdefghijklmnop",
]


@pytest.mark.parametrize("secret", SECRETS)
def test_secret_values_redacted_anywhere(secret: str) -> None:
    assert secret not in redact_text(f"calling with {secret}, failed")
    assert redact_text(f"key={secret}") == f"key={REDACTED}"


def test_http_credentials_and_urls_redacted() -> None:
    assert redact_text("Authorization: Bearer eyJhbGciOi.abc.def") == f"Authorization: Bearer {REDACTED}"
    assert redact_text("Basic cGstbGYtMTIzOnNrLWxmLTQ1Ng==") == f"Basic {REDACTED}"
    assert redact_text("https://user:hunter2@langfuse.example.com/api") == f"https://{REDACTED}@langfuse.example.com/api"
    # ordinary text is left alone
    text = "task-lf-ok: sk-short, skipping 12 traces at https://cloud.langfuse.com/api/public"
    assert redact_text(text) == text


def test_secret_keys_redacted_nested() -> None:
    value = {
        "secret_key": "anything",
        "LANGFUSE_SECRET_KEY": "anything",
        "headers": {"Authorization": "whatever", "X-Api-Key": "k", "Content-Type": "application/json"},
        "providers": [{"name": "openrouter", "api_key": "k", "password": None}],
        "public_key": "pk-lf-123",
        "prompt_tokens": 1200,
        "max_tokens": 1000,
        "key": SecretStr("x"),
    }
    assert redact_value(value) == {
        "secret_key": REDACTED,
        "LANGFUSE_SECRET_KEY": REDACTED,
        "headers": {"Authorization": REDACTED, "X-Api-Key": REDACTED, "Content-Type": "application/json"},
        "providers": [{"name": "openrouter", "api_key": REDACTED, "password": None}],
        "public_key": "pk-lf-123",
        "prompt_tokens": 1200,
        "max_tokens": 1000,
        "key": REDACTED,
    }


def test_redaction_in_rendered_events_and_exceptions(lines: Any) -> None:
    log = structlog.get_logger()
    secret = SECRETS[0]
    log.info("config", secret_key=secret, url=f"https://pk:{secret}@host", detail={"authorization": "Basic abc"})
    try:
        raise RuntimeError(f"request failed for {secret}")
    except RuntimeError:
        log.exception("boom")
    logging.getLogger("httpx").warning("retrying with Bearer %s", secret)
    events = lines()
    assert len(events) == 3
    text = json.dumps(events)
    assert secret not in text
    assert "Basic abc" not in text
    assert events[1]["exception"].endswith(f"RuntimeError: request failed for {REDACTED}")
    assert events[2]["logger"] == "httpx" and events[2]["level"] == "warning"


def test_long_values_cut_above_debug(lines: Any) -> None:
    log = structlog.get_logger()
    trace_output = "x" * (MAX_VALUE_CHARS * 3)
    log.info("extraction_note", output=trace_output, nested={"input": trace_output})
    (event,) = lines()
    assert len(event["output"]) < MAX_VALUE_CHARS + 80
    assert "more characters; full text at DEBUG" in event["output"]
    assert len(event["nested"]["input"]) < MAX_VALUE_CHARS + 80

    configure_logging("DEBUG", "json")
    log.debug("extraction_note", output=trace_output)
    (event,) = lines()
    assert event["output"] == trace_output


def test_library_info_noise_is_quiet_at_info(lines: Any) -> None:
    logging.getLogger("httpx").info('HTTP Request: GET https://cloud.langfuse.com/api/public/health "200 OK"')
    logging.getLogger("apscheduler.scheduler").info("Scheduler started")
    events = lines()
    assert [e["logger"] for e in events] == ["apscheduler.scheduler"]


def test_log_level_from_environment_any_case(tmp_path: Any) -> None:
    from trace_scorer.config import load_settings

    empty = tmp_path / "settings.toml"
    empty.write_text("")
    settings = load_settings(empty, environ={"TRACE_SCORER_LOG__LEVEL": "debug", "TRACE_SCORER_LOG__FORMAT": "json"})
    assert (settings.log.level, settings.log.format) == ("DEBUG", "json")


_FIRST_USE = """
import logging, sys
from trace_scorer.runtime.logs import get_logger, logging_on_first_use
with logging_on_first_use("INFO", "json"):
    print("quiet", "structlog" in sys.modules)
    if sys.argv[1] == "log":
        logging.getLogger("some.library").warning("a library says %s", "sk-lf-0123456789abcdef")
        get_logger("trace_scorer.scoring.pipeline").info("ours", api_key="hunter2", n=1)
        get_logger("trace_scorer.scoring.pipeline").debug("below the level")
print("after", "structlog" in sys.modules, [type(h).__name__ for h in logging.getLogger().handlers])
"""


@pytest.mark.parametrize("logs", [True, False], ids=["logs", "logs-nothing"])
def test_logging_configured_on_first_use(logs: bool) -> None:
    """``score`` configures logging only when something logs (structlog's import is a tenth of a run):
    the events then come out as configured, ours and a library's; nothing logged leaves nothing behind."""
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", _FIRST_USE, "log" if logs else "none"], capture_output=True, text=True, check=True
    )
    assert run.stdout.splitlines()[0] == "quiet False"
    events = [json.loads(line) for line in run.stderr.splitlines()]
    if not logs:
        assert events == []
        assert run.stdout.splitlines()[1] == "after False []"
        return
    assert run.stdout.splitlines()[1] == "after True ['StreamHandler']"
    library, ours = events
    assert library["event"] == f"a library says {REDACTED}" and library["logger"] == "some.library"
    assert library["level"] == "warning"
    assert list(ours)[:3] == ["timestamp", "level", "event"]
    assert ours["event"] == "ours" and ours["api_key"] == REDACTED and ours["n"] == 1

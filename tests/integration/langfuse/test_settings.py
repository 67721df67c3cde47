"""The ``[langfuse]`` settings this adapter reads: defaults, environment overrides, validation."""

from __future__ import annotations

import pytest

from trace_scorer.config import ConfigError, load_settings


def test_defaults_match_the_seed_config_and_cloud_limits() -> None:
    settings = load_settings(environ={}).langfuse
    assert (settings.retry.initial, settings.retry.multiplier, settings.retry.max) == (2.0, 2.0, 30.0)
    assert settings.retry.max_attempts == 6
    assert settings.requests_per_minute == 0  # unlimited unless told
    assert (settings.score_batch_size, settings.score_batch_max_bytes) == (500, 950_000)
    assert settings.page_size == 1000 and settings.api_generation == "auto"


def test_nested_values_come_from_the_environment() -> None:
    environ = {
        "TRACE_SCORER_LANGFUSE__RETRY__INITIAL": "500ms",
        "TRACE_SCORER_LANGFUSE__RETRY__MAX": "1m",
        "TRACE_SCORER_LANGFUSE__REQUESTS_PER_MINUTE": "30",
        "TRACE_SCORER_LANGFUSE__API_GENERATION": "v3",
        "LANGFUSE_SECRET_KEY": "sk-lf-x",
    }
    settings = load_settings(environ=environ).langfuse
    assert (settings.retry.initial, settings.retry.max) == (0.5, 60.0)
    assert settings.requests_per_minute == 30 and settings.api_generation == "v3"
    assert settings.secret_key is not None and settings.secret_key.get_secret_value() == "sk-lf-x"


@pytest.mark.parametrize(
    ("variable", "value", "complaint"),
    [
        ("TRACE_SCORER_LANGFUSE__SCORE_BATCH_MAX_BYTES", "2000000", "less than 1000000"),
        ("TRACE_SCORER_LANGFUSE__PAGE_SIZE", "5000", "less than or equal to 1000"),
        ("TRACE_SCORER_LANGFUSE__API_GENERATION", "v5", "'auto', 'v4' or 'v3'"),
        ("TRACE_SCORER_LANGFUSE__RETRY__MAX", "1s", "shorter than retry.initial"),
        ("TRACE_SCORER_LANGFUSE__REQUESTS_PER_MINUTE", "-1", "greater than or equal to 0"),
    ],
)
def test_bad_values_name_the_key(variable: str, value: str, complaint: str) -> None:
    with pytest.raises(ConfigError, match=complaint):
        load_settings(environ={variable: value})

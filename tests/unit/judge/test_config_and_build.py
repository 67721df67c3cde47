"""Provider and judge settings, build_judge, the metric seam (models option, start-up check, fingerprint)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.judge import JudgeFactory, make_metric, provider, settings
from trace_scorer.config import ConfigError, load_settings
from trace_scorer.judge import NO_JUDGE_MESSAGE, Judge, build_judge
from trace_scorer.metrics.agent_goal_accuracy import AgentGoalAccuracy
from trace_scorer.metrics.aspect_critic import AspectCritic
from trace_scorer.metrics.base import Resources
from trace_scorer.metrics.topic_adherence import TopicAdherence

TOML = """
[[providers]]
name = "openrouter"
base_url = "https://openrouter.ai/api/v1"
api_key_env = "OPENROUTER_API_KEY"
chat_models = ["google/gemini-2.5-flash", "openai/gpt-4o-mini"]
requests_per_minute = 600
max_concurrency = 8
timeout = "45s"
[providers.prices]
"google/gemini-2.5-flash" = { input = 0.30, output = 2.50 }

[[providers]]
name = "local"
base_url = "http://localhost:11434/v1"
chat_models = ["qwen3:8b"]
structured_output = "json_object"

[judge]
language = "ru"
tool_result_max_chars = 500
"""


def test_settings_from_toml(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text(TOML)
    loaded = load_settings(path, environ={})
    first, second = loaded.providers
    assert first.timeout == 45.0 and first.requests_per_minute == 600 and first.max_concurrency == 8
    assert first.prices["google/gemini-2.5-flash"].cost(1_000_000, 1_000_000) == pytest.approx(2.80)
    assert second.structured_output == "json_object" and second.api_key_env is None
    assert (
        loaded.judge.language == "ru" and loaded.judge.temperature == 0.0 and loaded.judge.max_tokens == 1000
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ('name = "open/router"', "name"),
        ('structured_output = "xml"', "structured_output"),
        ('base_url = "openrouter.ai"', "not an http(s) URL"),
        ('chat_models = ["a", "a"]', "listed twice"),
        ('api_key = "sk-secret"', "unknown key"),
    ],
)
def test_bad_provider_settings(tmp_path: Path, change: str, message: str) -> None:
    key = change.split(" = ")[0]
    existing = next((line for line in TOML.splitlines() if line.startswith(f"{key} =")), None)
    if existing:
        toml = TOML.replace(existing, change, 1)
    else:
        toml = TOML.replace("[[providers]]", f"[[providers]]\n{change}", 1)
    path = tmp_path / "settings.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        load_settings(path, environ={})
    assert str(caught.value).count("\n") == 0  # exactly the one problem, named
    assert re.search(rf"providers\[\d\]\.{key}: ", str(caught.value))


def test_price_for_an_unlisted_model_is_an_error() -> None:
    with pytest.raises(ValueError, match="prices for models this provider does not list: typo"):
        settings(provider("p", "a", prices={"typo": {"input": 1, "output": 1}}))


@pytest.mark.parametrize("environment", ["Trace-Scorer", "langfuse-judge", "has space"])
def test_tracing_environment_must_be_a_langfuse_name(environment: str) -> None:
    with pytest.raises(ValueError, match="Langfuse environment"):
        settings(tracing_environment=environment)


def test_environment_overrides_judge_settings(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text(TOML)
    loaded = load_settings(path, environ={"TRACE_SCORER_JUDGE__LANGUAGE": "en"})
    assert loaded.judge.language == "en"


async def test_build_judge() -> None:
    judge = build_judge(
        settings(provider("openrouter", "google/gemini-2.5-flash", "openai/gpt-4o-mini"), provider("q", "m")),
        environ={"OPENROUTER_KEY": "k", "Q_KEY": "k"},
    )
    assert isinstance(judge, Judge)
    assert judge.chat_models == ("openrouter/google/gemini-2.5-flash", "openrouter/openai/gpt-4o-mini", "q/m")
    await judge.aclose()


def test_no_chat_models_means_no_judge() -> None:
    assert build_judge(settings(), environ={}) is None
    embed_only = {"name": "e", "base_url": "http://e.test/v1", "embedding_models": ["text-embedding-3-small"]}
    assert build_judge(settings(embed_only), environ={}) is None
    assert "[[providers]]" in NO_JUDGE_MESSAGE and "chat_models" in NO_JUDGE_MESSAGE


def test_missing_api_key_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match=r"providers\[0\].api_key_env: environment variable P_KEY"):
        build_judge(settings(provider("p", "a")), environ={"P_KEY": "  "})


def test_duplicate_provider_names() -> None:
    with pytest.raises(ConfigError, match="used twice"):
        build_judge(settings(provider("p", "a"), provider("p", "b")), environ={"P_KEY": "k"})


def test_tracing_needs_langfuse_keys() -> None:
    with pytest.raises(ConfigError, match="LANGFUSE_PUBLIC_KEY"):
        build_judge(settings(provider("p", "a"), tracing=True), environ={"P_KEY": "k"})
    with pytest.raises(ConfigError, match="LANGFUSE_PUBLIC_KEY"):
        build_judge(settings(provider("p", "a")), tracing_default=True, environ={"P_KEY": "k"})


# --- the metric seam ------------------------------------------------------------------------


async def test_models_option_picks_a_subset_and_is_checked(make_judge: JudgeFactory) -> None:
    judge = await make_judge(provider("openrouter", "google/gemini-2.5-flash", "openai/gpt-4o-mini"))
    metric = make_metric(AspectCritic, judge, definition="x", models=["openrouter/openai/gpt-4o-mini"])
    assert metric.models() == ("openrouter/openai/gpt-4o-mini",)
    assert make_metric(AspectCritic, judge, definition="x").models() == judge.chat_models
    with pytest.raises(ValueError, match=r"unknown judge model\(s\) 'gpt-4o-mini'.*provider/model-id"):
        make_metric(AspectCritic, judge, definition="x", models=["gpt-4o-mini"])


def test_check_without_a_judge_is_not_an_error() -> None:
    metric = AspectCritic("c", AspectCritic.Options(definition="x", models=["p/a"]), Resources())
    metric.check()  # the pipeline skips it with NO_JUDGE_MESSAGE instead


def test_models_option_cannot_be_empty() -> None:
    with pytest.raises(ValueError, match="cannot be empty"):
        TopicAdherence.Options(models=[])


async def test_fingerprint_has_prompt_versions_and_judge_configuration(
    make_judge: JudgeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    english = await make_judge(provider("p", "a", "b"))
    russian = await make_judge(provider("p", "a", "b"), language="ru")
    metric = make_metric(AgentGoalAccuracy, english)
    parts = metric.fingerprint_parts()
    assert parts["prompts"] == {"goal_with_reference": "1.1", "goal_infer": "1.1", "goal_compare": "1.1"}
    assert parts["judge"]["models"] == ["p/a", "p/b"] and parts["judge"]["language"] == "en"
    before = metric.fingerprint()
    assert make_metric(AgentGoalAccuracy, russian).fingerprint() != before
    assert make_metric(AgentGoalAccuracy, english, models=["p/a"]).fingerprint() != before
    # a prompt change (its version bumped) re-scores
    from trace_scorer.judge import prompts

    monkeypatch.setattr(prompts, "BASE_VERSION", "2")
    assert metric.fingerprint() != before


def test_registered_with_their_keys() -> None:
    from trace_scorer.metrics.registry import default_registry

    registry = default_registry()
    for cls in (AgentGoalAccuracy, TopicAdherence, AspectCritic):
        assert registry.get(cls.key) is cls
        assert cls.needs == ("judge",) and not cls.deterministic()

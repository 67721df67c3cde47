"""``[embeddings]`` and ``build_embedder``: which model, which errors, at start-up."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tests.support.embeddings import EmbedderFactory, EmbeddingsAPI, provider, settings
from trace_scorer.config import ConfigError, load_settings
from trace_scorer.config.settings import Settings
from trace_scorer.embeddings import Embedder, EmbeddingModels, build_embedder
from trace_scorer.embeddings import local as local_module


def build(*providers: dict[str, Any], environ: dict[str, str] | None = None, **embeddings: Any) -> Any:
    if environ is None:
        environ = {p["api_key_env"]: "sk" for p in providers if p.get("api_key_env")}
    return build_embedder(settings(*providers, **embeddings), environ=environ)


def test_nothing_configured_means_no_embedder() -> None:
    assert build_embedder(Settings(), environ={}) is None
    chat_only = {"name": "p", "base_url": "https://p.test/v1", "chat_models": ["gpt"]}
    assert build(chat_only) is None


async def test_the_default_is_the_first_listed_embedding_model() -> None:
    embedder = build(provider("a", "e1", "e2"), provider("b", "e3"))
    assert isinstance(embedder, EmbeddingModels) and isinstance(embedder, Embedder)
    assert embedder.model_id == "a/e1"
    assert embedder.models == ("a/e1", "a/e2", "b/e3")
    await embedder.aclose()


async def test_the_configured_model_and_a_metric_s_choice(make_embedder: EmbedderFactory) -> None:
    embedder = await make_embedder(provider("a", "e1"), provider("b", "e3"), model="b/e3")
    assert embedder.model_id == "b/e3"
    assert embedder.select("a/e1").model_id == "a/e1"
    assert embedder.select("a/e1") is embedder.select("a/e1")  # one cache per model
    with pytest.raises(ValueError, match=r"unknown embedding model 'a/nope'.*configured: a/e1, b/e3"):
        embedder.select("a/nope")


async def test_models_of_one_provider_share_its_endpoint(api: EmbeddingsAPI, make_embedder: EmbedderFactory) -> None:
    embedder = await make_embedder(provider("a", "small", "large"))
    await embedder.select("a/small").embed(["x"])
    await embedder.select("a/large").embed(["x"])  # another model: its own cache, the same text is sent
    assert [r["model"] for r in api.requests] == ["small", "large"]


@pytest.mark.parametrize(
    ("providers", "embeddings", "message"),
    [
        ([provider("a", "e")], {"model": "a/other"}, "embeddings.model: unknown embedding model 'a/other'"),
        ([provider("a", "e")], {"model": "b/e"}, "unknown embedding model 'b/e'"),
        ([], {"model": "openai/text-embedding-3-small"}, "configured: none"),
        ([provider("a", "e"), provider("a", "f")], {}, "providers[1].name: provider name 'a' is used twice"),
        ([provider("local", "e")], {}, "providers[0].name: 'local' names models on this machine"),
        ([], {"model": "local/no/such/dir"}, "unknown local embedding model 'no/such/dir'"),
    ],
)
def test_configuration_errors(providers: list[dict[str, Any]], embeddings: dict[str, Any], message: str) -> None:
    if "local/" in embeddings.get("model", "") and importlib.util.find_spec("sentence_transformers") is None:
        pytest.skip("sentence-transformers is not installed: a local model fails earlier, with the install hint")
    with pytest.raises(ConfigError) as caught:
        build(*providers, **embeddings)
    assert message in str(caught.value)


def test_a_missing_api_key_is_named() -> None:
    with pytest.raises(ConfigError, match=r"providers\[0\].api_key_env: environment variable A_KEY"):
        build(provider("a", "e"), environ={})


def test_a_local_model_without_the_extra_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_module, "_installed", lambda module: False)
    with pytest.raises(ConfigError) as caught:
        build(model="local/all-MiniLM-L6-v2")
    text = str(caught.value)
    assert "torch==2.13.0" in text and "docs/metrics.md#local-embeddings" in text
    assert "[local-embeddings]'" in text  # the command for this install: trace_scorer/runtime/extras.py


def test_a_local_model_directory(tmp_path: Path) -> None:
    if importlib.util.find_spec("sentence_transformers") is None:  # find, not import: torch takes seconds
        pytest.skip("the local-embeddings extra (sentence-transformers) is not installed")
    embedder = build(model=f"local/{tmp_path}")
    assert embedder.model_id == f"local/{tmp_path}"  # loaded on first use, not here


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"model": "no-provider"}, "name the model as 'provider/model-id'"),
        ({"model": "p/"}, "name the model as 'provider/model-id'"),
        ({"batch_size": 0}, "greater than or equal to 1"),
        ({"batch_size": 4096}, "less than or equal to 2048"),
        ({"cache_size": -1}, "greater than or equal to 0"),
        ({"retry_initial_wait": "1m", "retry_max_wait": "30s"}, "retry_initial_wait is longer than retry_max_wait"),
        ({"unknown": 1}, "Extra inputs are not permitted"),
    ],
)
def test_settings_validation(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Settings(embeddings=section)


def test_the_section_from_toml_and_environment(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text('[embeddings]\nmodel = "local/all-MiniLM-L6-v2"\nbatch_size = 32\nretry_attempts = 3\n')
    loaded = load_settings(path, environ={"TRACE_SCORER_EMBEDDINGS__CACHE_SIZE": "5"})
    assert loaded.embeddings.model == "local/all-MiniLM-L6-v2"
    assert (loaded.embeddings.batch_size, loaded.embeddings.cache_size, loaded.embeddings.retry_attempts) == (32, 5, 3)
    defaults = Settings().embeddings
    assert (defaults.model, defaults.batch_size, defaults.cache_size, defaults.retry_attempts) == (None, 64, 10_000, 6)


def test_the_judge_keeps_its_retry_keys() -> None:
    judge = Settings(judge={"retry_attempts": 2, "max_retry_after": "1m"}).judge
    assert (judge.retry_attempts, judge.max_retry_after) == (2, 60.0)
    with pytest.raises(ValidationError, match="retry_initial_wait is longer"):
        Settings(judge={"retry_initial_wait": 60, "retry_max_wait": 30})

"""``answer_similarity``: cosine, clipping, normalisation, empty texts, the model option, failures."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.support.embeddings import EmbedderFactory, EmbeddingsAPI, ScriptedEmbedder, error, provider, unit
from trace_scorer.config import ConfigError, TargetSettings
from trace_scorer.embeddings import NO_EMBEDDER_MESSAGE, Embedder
from trace_scorer.metrics.answer_similarity import (
    AnswerSimilarity,
    AnswerSimilarityOptions,
    cosine,
    normalize_text,
)
from trace_scorer.metrics.base import Failed, Resources, Score, Skipped
from trace_scorer.sample import Sample
from trace_scorer.scoring.pipeline import Pipeline
from trace_scorer.scoring.plan import build_plan


def metric(embedder: Embedder | None, **options: Any) -> AnswerSimilarity:
    built = AnswerSimilarity("answer_similarity", AnswerSimilarityOptions(**options), Resources(embedder=embedder))
    built.check()
    return built


def sample(response: str | None, expected: str | None = "E") -> Sample:
    return Sample(id="s", response=response, expected=expected)


# --- the value ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("degrees", "value", "comment"),
    [
        (0, 1.0, "cosine 1.00 (test/vectors)"),
        (30, 0.8660254, "cosine 0.87 (test/vectors)"),
        (90, 0.0, "cosine 0.00 (test/vectors)"),
        (120, 0.0, "cosine -0.50, clipped to 0 (test/vectors)"),  # negative cosine: unrelated, not "half right"
        (180, 0.0, "cosine -1.00, clipped to 0 (test/vectors)"),
    ],
)
async def test_value_is_the_cosine_clipped_to_0_1(degrees: float, value: float, comment: str) -> None:
    embedder = ScriptedEmbedder({"R": unit(degrees), "E": unit(0)})
    outcome = await metric(embedder).score(sample("R"), {})
    assert isinstance(outcome, Score)
    assert outcome.value == pytest.approx(value, abs=1e-6)
    assert outcome.comment == comment
    assert outcome.details["model"] == "test/vectors" and outcome.details["normalized"] is False
    assert outcome.details["cosine"] == pytest.approx(math.cos(math.radians(degrees)), abs=1e-6)


async def test_scale_does_not_matter_and_rounding_past_1_is_clipped() -> None:
    embedder = ScriptedEmbedder({"R": [3.0, 4.0], "E": [0.3, 0.4]})
    outcome = await metric(embedder).score(sample("R"), {})
    assert isinstance(outcome, Score) and 0.0 <= outcome.value <= 1.0 and outcome.value == pytest.approx(1.0)


def test_cosine_helper() -> None:
    assert cosine([4.0, 3.0], [5.0, 0.0]) == 0.8  # exact: the threshold edge tests rely on it
    assert cosine([0.0, 0.0], [1.0, 0.0]) is None
    with pytest.raises(ValueError, match="different lengths"):
        cosine([1.0], [1.0, 0.0])


# --- normalisation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("Hello, World!", "hello world"),
        ("  It's   18 °C in Tokyo.  ", "it s 18 °c in tokyo"),  # symbols (°, $, %) are kept
        ("¡Hola, SEÑOR! ¿Qué tal?", "hola señor qué tal"),
        ("«Привет», МИР!", "привет мир"),
        ("Straße", "strasse"),  # casefold, not lower()
        ("東京は晴れ。気温は１８度！", "東京は晴れ 気温は18度"),  # NFKC: full-width digits become ASCII
        ("Paris,France—2024", "paris france 2024"),  # punctuation separates words
        ("...!!!", ""),
    ],
)
def test_normalize_text_is_unicode_aware(text: str, normalized: str) -> None:
    assert normalize_text(text) == normalized


async def test_normalize_option_prepares_both_texts() -> None:
    embedder = ScriptedEmbedder({})
    await metric(embedder, normalize=True).score(sample("Paris, FRANCE!", "«paris france»"), {})
    await metric(embedder).score(sample("  Paris, FRANCE!\n", "«paris france»"), {})
    assert embedder.asked == [["paris france", "paris france"], ["Paris, FRANCE!", "«paris france»"]]


# --- edges ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("response", "normalize"), [("", False), ("   \n", False), ("?!…", True)])
async def test_an_empty_response_scores_0_without_asking_the_model(response: str, normalize: bool) -> None:
    embedder = ScriptedEmbedder({})
    outcome = await metric(embedder, normalize=normalize).score(sample(response), {})
    assert outcome == Score(0.0, "empty response", {"model": "test/vectors", "normalized": normalize, "cosine": None})
    assert embedder.asked == []


@pytest.mark.parametrize(
    ("expected", "normalize", "reason"),
    [("", False, "the expected answer is empty"), ("—", True, "the expected answer is empty after normalisation")],
)
async def test_an_empty_expected_answer_is_skipped(expected: str, normalize: bool, reason: str) -> None:
    outcome = await metric(ScriptedEmbedder({}), normalize=normalize).score(sample("R", expected), {})
    assert outcome == Skipped(reason)


async def test_a_zero_vector_fails_rather_than_guessing() -> None:
    outcome = await metric(ScriptedEmbedder({"R": [0.0, 0.0], "E": [1.0, 0.0]})).score(sample("R"), {})
    assert isinstance(outcome, Failed) and "zero vector" in outcome.reason


async def test_an_endpoint_failure_is_a_failed_outcome(api: EmbeddingsAPI, make_embedder: EmbedderFactory) -> None:
    api.script.append(error(401, "invalid api key"))
    outcome = await metric(await make_embedder(provider("p", "e"))).score(sample("R"), {})
    assert isinstance(outcome, Failed)
    assert outcome.reason.startswith("p/e: HTTP 401") and outcome.reason.endswith("invalid api key (after 1 attempt)")
    assert outcome.details == {"model": "p/e"}


async def test_through_the_pipeline_inputs_and_resources_are_checked() -> None:
    target = TargetSettings.model_validate({"name": "t", "metrics": [{"metric": "answer_similarity"}]})
    without = Pipeline(build_plan(target))
    assert (await without.score_sample(sample("R"))).outcomes["answer_similarity"] == Skipped(NO_EMBEDDER_MESSAGE)
    with_embedder = Pipeline(build_plan(target, resources=Resources(embedder=ScriptedEmbedder({}))))
    missing = await with_embedder.score_sample(sample("R", None))
    assert missing.outcomes["answer_similarity"] == Skipped("expected absent")


# --- the model option ------------------------------------------------------------------------------


async def test_the_model_option_picks_the_embedding_model(api: EmbeddingsAPI, make_embedder: EmbedderFactory) -> None:
    embedder = await make_embedder(provider("p", "small", "large"))
    default = metric(embedder)
    large = metric(embedder, model="p/large")
    assert isinstance(await default.score(sample("R"), {}), Score)
    outcome = await large.score(sample("R"), {})
    assert isinstance(outcome, Score) and outcome.comment.endswith("(p/large)")
    assert [r["model"] for r in api.requests] == ["small", "large"]
    assert default.fingerprint() != large.fingerprint()  # changing the model re-scores
    assert default.fingerprint_parts()["embedding_model"] == "p/small"


def test_the_default_model_is_part_of_the_fingerprint() -> None:
    one = metric(ScriptedEmbedder({}, model_id="p/one"))
    two = metric(ScriptedEmbedder({}, model_id="p/two"))
    assert one.fingerprint() != two.fingerprint()


async def test_an_unknown_model_is_a_start_up_error(make_embedder: EmbedderFactory) -> None:
    target = TargetSettings.model_validate(
        {"name": "t", "metrics": [{"metric": "answer_similarity", "model": "p/nope"}]}
    )
    with pytest.raises(ConfigError, match=r"targets\[0\]\.metrics\[0\]: unknown embedding model 'p/nope'"):
        build_plan(target, resources=Resources(embedder=await make_embedder(provider("p", "e"))))
    with pytest.raises(ValueError, match="the embedder in use is 'test/vectors'"):
        metric(ScriptedEmbedder({}), model="p/nope")
    metric(None, model="p/nope")  # nothing configured: not checked here, the pipeline skips with its message

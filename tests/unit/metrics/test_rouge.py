"""ROUGE: docs/metrics.md reference values, Unicode text, edges, options."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from rouge_score.rouge_scorer import RougeScorer

from tests.support.metrics import checked, sample
from trace_scorer.metrics.base import Score, Skipped
from trace_scorer.metrics.registry import default_registry
from trace_scorer.metrics.rouge import Rouge, RougeOptions

EXPECTED = "The quick brown fox jumps over the lazy dog"
RESPONSE = "The quick brown fox jumped over a lazy dog"

# The same sentence pair word for word in Russian (one Russian word per English word), so every
# ROUGE figure must come out as for the English pair.
RU = {
    "the": "этот", "quick": "быстрый", "brown": "бурый", "fox": "лис", "jumps": "прыгает",
    "jumped": "прыгнул", "over": "через", "a": "один", "lazy": "ленивый", "dog": "пёс",
}  # fmt: skip


def russian(text: str) -> str:
    return " ".join(RU[w.lower()] for w in text.split()).capitalize()


def metric(**options: Any) -> Rouge:
    return Rouge("rouge", RougeOptions.model_validate(options))


async def score(expected: str | None, response: str | None, **options: Any) -> Score:
    return checked(await metric(**options).score(sample(expected=expected, response=response), {}))


async def test_spec_reference_values() -> None:
    assert (await score(EXPECTED, RESPONSE)).value == pytest.approx(0.7778, abs=5e-5)
    assert (await score(EXPECTED, RESPONSE, stemmer="porter")).value == pytest.approx(0.8889, abs=5e-5)


@pytest.mark.parametrize(
    ("options", "value"),
    [
        ({"variant": "rouge1"}, 7 / 9),
        ({"variant": "rouge2"}, 4 / 8),
        ({"variant": "rougeL", "output": "precision"}, 7 / 9),
        ({"variant": "rouge2", "stemmer": "porter"}, 6 / 8),
    ],
)
async def test_variants(options: dict[str, Any], value: float) -> None:
    assert (await score(EXPECTED, RESPONSE, **options)).value == pytest.approx(value)


@pytest.mark.parametrize("variant", ["rougeL", "rouge1", "rouge2"])
@pytest.mark.parametrize("stemmer", ["none", "porter"])
async def test_english_equals_rouge_score_itself(variant: str, stemmer: str) -> None:
    pairs = [
        (EXPECTED, RESPONSE),
        ("Your flight AF123 to Paris is booked for January 15.", "I booked flight AF123 to Paris on Jan 15"),
        ("It is sunny and 22 degrees in Tokyo.", "Tokyo: sunny, 22 degrees, light winds."),
        # words mixing digits and letters are stemmed as rouge-score stems them (issue 14)
        ("Hits of the 1990s on mp3s", "hits of the 1990 on mp3"),
        ("Sales of mp3s rose in the 1990s", "In the 1990s mp3 sales rose"),
        ("The mp3s from the 1990s", "mp3 hits of 1990 and 2000s"),
    ]
    reference = RougeScorer([variant], use_stemmer=stemmer == "porter")
    for expected, response in pairs:
        ours = (await score(expected, response, variant=variant, stemmer=stemmer)).details
        theirs = reference.score(expected, response)[variant]
        assert ours["precision"] == pytest.approx(theirs.precision)
        assert ours["recall"] == pytest.approx(theirs.recall)
        assert ours["f"] == pytest.approx(theirs.fmeasure)


WORDS = ["the", "fox", "jumps", "jumped", "over", "dog", "lazy", "a", "runs", "running", "42", "x", "1990s", "1990",
         "mp3s", "mp3", "b2b", "4x4s", "covid19"]  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from(WORDS), max_size=30),
    st.lists(st.sampled_from(WORDS), max_size=30),
    st.sampled_from(["rougeL", "rouge1", "rouge2"]),
    st.sampled_from(["none", "porter"]),
)
def test_arithmetic_equals_rouge_score_on_random_english(
    expected: list[str], response: list[str], variant: str, stemmer: str
) -> None:
    expected_text, response_text = " ".join(expected), " ".join(response)
    outcome = metric(variant=variant, stemmer=stemmer).compute(expected_text, response_text)
    theirs = RougeScorer([variant], use_stemmer=stemmer == "porter").score(expected_text, response_text)[
        variant
    ]
    if not expected:
        assert isinstance(outcome, Skipped)
        return
    assert isinstance(outcome, Score)
    assert outcome.details["precision"] == pytest.approx(theirs.precision)
    assert outcome.details["recall"] == pytest.approx(theirs.recall)
    assert outcome.details["f"] == pytest.approx(theirs.fmeasure)


async def test_words_with_digits_are_stemmed_like_rouge_score() -> None:
    # Before issue 14 "1990s" and "mp3s" were not stemmed: 0.6667 where rouge-score gives 1.0.
    result = await score("Hits of the 1990s on mp3s", "hits of the 1990 on mp3", stemmer="porter")
    assert result.value == pytest.approx(1.0)
    assert (await score("Hits of the 1990s on mp3s", "hits of the 1990 on mp3")).value == pytest.approx(4 / 6)


async def test_emoji_variation_selectors_are_not_words() -> None:
    # U+FE0F after ❤ / ✈ used to be a token: "Paris" / "Paris ❤️" scored 0.667, "❤️" / "✈️" 1.0.
    assert (await score("Paris", "Paris ❤️")).value == 1.0
    assert (await score("Paris ❤️", "Paris ✈️")).value == 1.0
    assert (await score("Paris", "❤️ ✈️")).value == 0.0
    assert isinstance(await metric().score(sample(expected="❤️", response="✈️"), {}), Skipped)  # no words
    family = await score("A family trip", "a family 👨\u200d👩\u200d👧 trip 1️⃣")
    assert family.details["response_tokens"] == 4  # "a family trip 1": the joiners and the keycap are no words


LONG = "alpha beta gamma delta " + "noise " * 10_000  # 60,023 characters


async def test_a_long_text_is_cut_to_max_chars_and_the_cut_is_reported() -> None:
    result = await score("alpha beta gamma delta", LONG)
    kept = LONG[:50_000].rsplit(" ", 1)[0]  # the limit falls inside a word: cut at the space before it
    assert len(kept) == 49_996
    kept_tokens = len(kept.split())
    assert result.details["response_tokens"] == kept_tokens == 8_333
    assert result.details["precision"] == pytest.approx(4 / kept_tokens)  # uncut it would be 4 / 10,004
    assert result.details["recall"] == 1.0
    assert result.value == pytest.approx(2 * (4 / kept_tokens) / (4 / kept_tokens + 1))
    assert result.comment.endswith("; response cut to its first 49,996 of 60,023 characters (max_chars 50,000)")
    assert result.details["max_chars"] == 50_000
    assert result.details["cut"] == {"response": {"kept_chars": 49_996, "total_chars": 60_023}}


async def test_max_chars_option_cuts_both_texts() -> None:
    result = await score("alpha beta gamma delta", "alpha beta epsilon delta", max_chars=12)
    assert result.value == 1.0  # "alpha beta" against "alpha beta"
    assert result.details["cut"] == {
        "expected": {"kept_chars": 10, "total_chars": 22},
        "response": {"kept_chars": 10, "total_chars": 24},
    }
    assert result.comment == (
        "rougeL F 1.00 (precision 1.00, recall 1.00); expected cut to its first 10 of 22 characters "
        "and response cut to its first 10 of 24 characters (max_chars 12)"
    )


async def test_texts_within_max_chars_are_not_cut() -> None:
    result = await score(EXPECTED, RESPONSE)
    assert result.details["cut"] == {} and "cut" not in result.comment


async def test_a_huge_answer_is_scored_on_its_beginning() -> None:
    huge = "The quick brown fox jumped over a lazy dog. " * 250_000  # 11 MB; uncut rougeL took seconds
    result = await score(EXPECTED, huge)
    assert result.details["cut"]["response"]["total_chars"] == len(huge)
    assert result.details["cut"]["response"]["kept_chars"] <= 50_000
    assert result.details["response_tokens"] <= 50_000 // 2


async def test_long_texts_are_fast() -> None:
    # rouge-score's pure-Python LCS table takes ~0.2 s for 1,000-token texts; ours must not block the loop.
    words = [f"w{i % 300}" for i in range(0, 7000, 7)]
    expected, response = " ".join(words), " ".join(reversed(words))
    start = time.perf_counter()
    await score(expected, response)
    assert time.perf_counter() - start < 0.05


@pytest.mark.parametrize("variant", ["rougeL", "rouge1", "rouge2"])
async def test_russian_scores_like_english(variant: str) -> None:
    english = await score(EXPECTED, RESPONSE, variant=variant)
    russian_ = await score(russian(EXPECTED), russian(RESPONSE), variant=variant)
    assert russian_.value == pytest.approx(english.value)
    assert russian_.value > 0
    # rouge-score's own tokenizer keeps only [a-z0-9]: this is what the custom tokenizer fixes.
    assert RougeScorer([variant]).score(russian(EXPECTED), russian(RESPONSE))[variant].fmeasure == 0


async def test_cjk_is_scored_per_character() -> None:
    result = await score("我喜欢吃苹果", "我喜欢吃香蕉")
    assert result.value == pytest.approx(4 / 6)


async def test_spanish_accents_and_case() -> None:
    assert (await score("La estación está cerca", "la ESTACIÓN está cerca")).value == 1.0


async def test_empty_response_scores_0() -> None:
    result = await score(EXPECTED, "")
    assert result.value == 0.0
    assert (await score(EXPECTED, "?!")).value == 0.0


async def test_expected_without_words_is_skipped() -> None:
    outcome = await metric().score(sample(expected="", response=RESPONSE), {})
    assert isinstance(outcome, Skipped)
    outcome = await metric().score(sample(expected=" -- ", response=RESPONSE), {})
    assert isinstance(outcome, Skipped)


def test_absent_expected_is_a_missing_input() -> None:
    m = metric()
    assert m.missing_inputs(sample(response=RESPONSE)) == ["expected"]
    assert m.missing_inputs(sample(expected=EXPECTED, response="")) == []


async def test_comment_and_details() -> None:
    result = await score(EXPECTED, RESPONSE)
    assert result.comment == "rougeL F 0.78 (precision 0.78, recall 0.78)"
    assert result.details["expected_tokens"] == 9


@pytest.mark.parametrize(
    "options",
    [
        {"variant": "rougeLsum"},
        {"variant": "rouge3"},
        {"output": "f1"},
        {"stemmer": "snowball"},
        {"lang": "en"},
        {"max_chars": 0},
    ],
)
def test_invalid_options_are_rejected(options: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        RougeOptions.model_validate(options)


def test_registered() -> None:
    assert default_registry().get("rouge") is Rouge

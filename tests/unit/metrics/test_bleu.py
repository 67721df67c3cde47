"""BLEU: sacrebleu sentence BLEU / 100, whole responses, tokenizer option."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
import sacrebleu
from pydantic import ValidationError

from tests.support.metrics import checked, sample
from trace_scorer.metrics.base import Score, Skipped
from trace_scorer.metrics.bleu import Bleu, BleuOptions
from trace_scorer.metrics.registry import default_registry

EXPECTED = "The quick brown fox jumps over the lazy dog"
RESPONSE = "The quick brown fox jumped over a lazy dog"


def metric(**options: Any) -> Bleu:
    return Bleu("bleu", BleuOptions.model_validate(options))


async def score(expected: str, response: str, **options: Any) -> Score:
    return checked(await metric(**options).score(sample(expected=expected, response=response), {}))


async def test_spec_reference_value() -> None:
    result = await score(EXPECTED, RESPONSE)
    assert result.value == pytest.approx(0.3689, abs=5e-5)
    assert result.details["bleu"] == pytest.approx(36.89, abs=5e-3)


async def test_identical_text_scores_1() -> None:
    assert (await score(EXPECTED, EXPECTED)).value == pytest.approx(1.0)


async def test_multi_sentence_response_is_scored_whole() -> None:
    expected = "The quick brown fox jumps over the lazy dog. It then runs into the forest."
    good_end = "The quick brown fox jumped over a lazy dog. It then runs into the forest."
    bad_end = "The quick brown fox jumped over a lazy dog. Nothing else happened at all today."
    good, bad = await score(expected, good_end), await score(expected, bad_end)
    assert good.value > bad.value  # the second sentence counts (ragas would score both the same)
    assert good.details["response_length"] == 17


async def test_newlines_inside_the_response_are_ordinary_whitespace() -> None:
    one_line = await score("First line. Second line.", "First line. Second line.")
    two_lines = await score("First line.\nSecond line.", "First line.\nSecond line.")
    assert one_line.value == two_lines.value == pytest.approx(1.0)


async def test_zh_tokenizer_for_chinese() -> None:
    expected, response = "我喜欢吃苹果和香蕉", "我喜欢吃苹果和橘子"
    assert (await score(expected, response)).value < (await score(expected, response, tokenize="zh")).value


async def test_empty_response_scores_0() -> None:
    assert (await score(EXPECTED, "")).value == 0.0
    assert (await score(EXPECTED, "  \n")).value == 0.0


async def test_blank_expected_is_skipped() -> None:
    outcome = await metric().score(sample(expected="  ", response=RESPONSE), {})
    assert isinstance(outcome, Skipped)


def test_absent_expected_is_a_missing_input() -> None:
    assert metric().missing_inputs(sample(response=RESPONSE)) == ["expected"]


@pytest.mark.parametrize("name", ["13a", "intl", "zh", "char", "none"])
def test_offline_tokenizers_are_accepted(name: str) -> None:
    assert BleuOptions(tokenize=name).tokenize == name


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("13A", "unknown sacrebleu tokenizer"),
        ("moses", "unknown sacrebleu tokenizer"),
        ("flores200", "downloads a SentencePiece model"),
        ("spm", "downloads a SentencePiece model"),
    ],
)
def test_invalid_tokenizers_are_rejected(name: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        BleuOptions(tokenize=name)


@pytest.mark.skipif(importlib.util.find_spec("MeCab") is not None, reason="MeCab is installed here")
def test_mecab_tokenizer_without_its_extra_is_a_clear_error() -> None:
    with pytest.raises(ValidationError, match=r"pip install 'sacrebleu\[ja\]'"):
        BleuOptions(tokenize="ja-mecab")


LONG = RESPONSE + " and then it ran" * 5_000  # 80,042 characters


async def test_a_long_response_is_cut_to_max_chars_and_the_cut_is_reported() -> None:
    result = await score(EXPECTED, LONG)
    kept = LONG[:50_000].rsplit(" ", 1)[0]  # the limit falls inside "then": cut at the space before it
    assert len(kept) == 49_998
    # The value is sacrebleu's sentence BLEU of the kept beginning (uncut: of all 80,042 characters).
    assert result.value == pytest.approx(sacrebleu.sentence_bleu(kept, [EXPECTED]).score / 100)
    assert result.value != pytest.approx(sacrebleu.sentence_bleu(LONG, [EXPECTED]).score / 100)
    assert result.details["response_length"] == len(kept.split())
    assert result.comment.endswith("; response cut to its first 49,998 of 80,042 characters (max_chars 50,000)")
    assert result.details["max_chars"] == 50_000
    assert result.details["cut"] == {"response": {"kept_chars": 49_998, "total_chars": 80_042}}


async def test_max_chars_option_cuts_both_texts() -> None:
    result = await score("The quick brown fox jumps", "The quick brown cat sleeps", max_chars=16)
    assert result.value == pytest.approx(1.0)  # "The quick brown" against itself
    assert result.details["cut"] == {
        "expected": {"kept_chars": 15, "total_chars": 25},
        "response": {"kept_chars": 15, "total_chars": 26},
    }
    assert "expected cut to its first 15 of 25 characters and response cut to its first 15 of 26" in result.comment


async def test_texts_within_max_chars_are_not_cut() -> None:
    result = await score(EXPECTED, RESPONSE)
    assert result.details["cut"] == {} and "cut" not in result.comment


async def test_a_huge_answer_is_scored_on_its_beginning() -> None:
    huge = "The quick brown fox jumped over a lazy dog. " * 250_000  # 11 MB; uncut: ~1 GB and most of a minute
    result = await score(EXPECTED, huge)
    assert result.details["cut"]["response"] == {"kept_chars": 49_999, "total_chars": len(huge)}
    assert result.details["response_length"] <= 50_000 // 2


def test_max_chars_must_be_positive() -> None:
    with pytest.raises(ValidationError):
        BleuOptions(max_chars=0)


def test_registered() -> None:
    assert default_registry().get("bleu") is Bleu

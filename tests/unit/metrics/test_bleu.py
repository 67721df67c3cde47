"""BLEU: sacrebleu sentence BLEU / 100, whole responses, tokenizer option."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
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


def test_registered() -> None:
    assert default_registry().get("bleu") is Bleu

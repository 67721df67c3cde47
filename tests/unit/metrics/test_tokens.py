"""The text tokenizer: Unicode word runs, casefolded, CJK per character, optional Porter stemming."""

from __future__ import annotations

import unicodedata

import pytest

from trace_scorer.metrics._tokens import has_cjk, tokenize, word_runs


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("The quick, brown fox!", ["the", "quick", "brown", "fox"]),
        ("Быстрая БУРАЯ лиса", ["быстрая", "бурая", "лиса"]),
        ("¿Dónde está la estación?", ["dónde", "está", "la", "estación"]),
        ("Straße", ["strasse"]),
        ("北京今天晴", ["北", "京", "今", "天", "晴"]),
        ("東京タワーは dog", ["東", "京", "タ", "ワ", "ー", "は", "dog"]),
        ("한국어 텍스트", ["한", "국", "어", "텍", "스", "트"]),
        ("हिन्दी भाषा", ["हिन्दी", "भाषा"]),  # vowel signs and virama stay inside the word
        ("snake_case 15.5 AF123", ["snake_case", "15", "5", "af123"]),
        ("", []),
        ("...!?", []),
    ],
)
def test_tokenize(text: str, tokens: list[str]) -> None:
    assert tokenize(text) == tokens


def test_decomposed_and_composed_accents_are_one_token() -> None:
    composed = "café"
    decomposed = unicodedata.normalize("NFD", composed)
    assert composed != decomposed
    assert tokenize(decomposed) == tokenize(composed) == ["café"]


def test_porter_stems_english_words_longer_than_three_letters() -> None:
    assert tokenize("jumps jumped running was", "porter") == ["jump", "jump", "run", "was"]


def test_porter_leaves_other_scripts_and_identifiers_alone() -> None:
    assert tokenize("прыгает cafés AF123s", "porter") == ["прыгает", "cafés", "af123s"]


def test_word_runs_keep_cjk_phrases_whole() -> None:
    assert word_runs("北京今天 Sunny") == ["北京今天", "sunny"]
    assert has_cjk("北京") and not has_cjk("sunny")

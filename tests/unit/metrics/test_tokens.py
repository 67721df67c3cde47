"""The text tokenizer: Unicode word runs, casefolded, CJK per character, optional Porter stemming."""

from __future__ import annotations

import unicodedata

import pytest
from nltk.stem.porter import PorterStemmer
from rouge_score.tokenize import tokenize as rouge_score_tokenize

from trace_scorer.metrics._tokens import (
    _TOKEN,
    Capped,
    cap_text,
    cut_report,
    has_cjk,
    normalize_text,
    tokenize,
    word_runs,
)


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
        # Marks, variation selectors and joiners are not words of their own (issue 14).
        ("Paris ❤️", ["paris"]),
        ("❤️ ✈️ 👍🏽", []),
        ("family 👨\u200d👩\u200d👧", ["family"]),
        ("1️⃣ apples", ["1", "apples"]),  # the keycap's variation selector and enclosing mark go
        ("a\ufe0fb", ["ab"]),
        ("葛\U000e0100城", ["葛", "城"]),  # an ideographic variation sequence is its base character
        ("\u0301 e\u0301", ["é"]),  # a combining accent with nothing to combine with is dropped
        ("می\u200cخواهم", ["می\u200cخواهم"]),  # the zero-width non-joiner stays inside the Persian word
        ("a _ b __init__", ["a", "b", "__init__"]),
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
    assert tokenize("прыгает cafés snake_cases", "porter") == ["прыгает", "cafés", "snake_cases"]


def test_porter_stems_words_with_digits_as_rouge_score_does() -> None:
    text = "The 1990s mp3s of AF123s players in 2024"
    assert tokenize(text, "porter") == ["the", "1990", "mp3", "of", "af123", "player", "in", "2024"]
    assert tokenize(text, "porter") == rouge_score_tokenize(text, PorterStemmer())


def test_cap_leaves_short_texts_whole() -> None:
    assert cap_text("alpha beta", 10) == Capped("alpha beta", 10)
    assert not cap_text("alpha beta", 10).cut


def test_cap_cuts_at_the_last_whitespace_before_the_limit() -> None:
    capped = cap_text("alpha beta gamma", 13)  # the limit falls inside "gamma"
    assert capped == Capped("alpha beta", 16) and capped.cut
    assert cap_text("alpha beta gamma", 10).text == "alpha beta"  # the limit falls on the space


def test_cap_cuts_a_text_without_whitespace_exactly_at_the_limit() -> None:
    assert cap_text("x" * 5000, 3000).text == "x" * 3000
    assert cap_text("我喜欢吃苹果", 4).text == "我喜欢吃"
    assert cap_text("a" + "x" * 5000, 3000).text == "a" + "x" * 2999  # whitespace too far back: exact cut


def test_cut_report_names_each_cut_text() -> None:
    texts = {"expected": Capped("a b", 3), "response": Capped("a b", 12_345)}
    note, details = cut_report(texts, 3)
    assert note == "; response cut to its first 3 of 12,345 characters (max_chars 3)"
    assert details == {"response": {"kept_chars": 3, "total_chars": 12_345}}
    assert cut_report({"expected": Capped("a b", 3)}, 3) == ("", {})


def test_word_runs_keep_cjk_phrases_whole() -> None:
    assert word_runs("北京今天 Sunny") == ["北京今天", "sunny"]
    assert has_cjk("北京") and not has_cjk("sunny")


def test_ascii_text_is_cut_as_the_unicode_pattern_cuts_it() -> None:
    """ASCII text takes the standard library's pattern: the same tokens as the Unicode one, for every
    pair of ASCII characters around a word and an underscore run."""
    for first in range(128):
        for second in range(128):
            text = normalize_text(f"{chr(first)}{chr(second)}ab_1 __ _x{chr(first)}9_")
            assert tokenize(text) == _TOKEN.findall(text), repr(text)

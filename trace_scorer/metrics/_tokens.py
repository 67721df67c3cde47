"""Word tokens for the text metrics: casefolded Unicode ``\\w+`` runs, CJK split per character.

Why not rouge-score's tokenizer: it keeps only ``[a-z0-9]``, so Russian or Chinese text has no tokens
and scores 0. Here every script counts (SPEC.md "ROUGE and BLEU"):

* text is NFC-normalised (a decomposed "é" equals a composed one) and casefolded ("Straße" → "strasse");
* a token is a run of word characters in the Unicode sense of the third-party ``regex`` module, whose
  ``\\w`` includes combining marks: the stdlib ``re`` splits Devanagari or decomposed Latin words at
  every vowel sign / accent;
* Han, Hiragana, Katakana and Hangul characters are one token each (these scripts do not reliably put
  spaces between words, so per-character tokens are the usual ROUGE practice for them).

The optional Porter stemmer is NLTK's ``PorterStemmer`` — the very stemmer rouge-score itself uses, so
English scores equal rouge-score's with ``use_stemmer=True``. Like rouge-score it stems only tokens
longer than 3 characters, and only ASCII-letter tokens: Porter's rules are English suffix rules, and
applying them to other scripts or to identifiers would conflate unrelated words.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from typing import Literal

import regex
from nltk.stem.porter import PorterStemmer

_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}"
#: One CJK character, or a run of word characters that are not CJK.
_TOKEN = regex.compile(rf"[{_CJK}]|[^\W{_CJK}]+")
#: Plain word runs (CJK not split): for salient-token look-ups where a run is compared whole.
_WORD_RUN = regex.compile(r"\w+")
_CJK_CHAR = regex.compile(rf"[{_CJK}]")

Stemmer = Literal["none", "porter"]

_porter = PorterStemmer()


@lru_cache(maxsize=65536)
def _porter_stem(token: str) -> str:
    # Stemming is the slow part of tokenising English; the vocabulary of a run repeats a lot.
    return str(_porter.stem(token))


def _stem_token(token: str) -> str:
    if len(token) > 3 and token.isascii() and token.isalpha():
        return _porter_stem(token)
    return token


def normalize_text(text: str) -> str:
    """NFC-normalised and casefolded text (what tokens are cut from)."""
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    return text.casefold()


def tokenize(text: str, stemmer: Stemmer = "none") -> list[str]:
    """Casefolded word tokens of ``text``; CJK characters one token each; optionally Porter-stemmed."""
    tokens: list[str] = _TOKEN.findall(normalize_text(text))
    if stemmer == "porter":
        return [_stem_token(token) for token in tokens]
    return tokens


def word_runs(text: str) -> list[str]:
    """Casefolded ``\\w+`` runs of ``text`` without the CJK split (a CJK phrase stays one run)."""
    runs: list[str] = _WORD_RUN.findall(normalize_text(text))
    return runs


def has_cjk(token: str) -> bool:
    """Whether ``token`` contains a Han, Kana or Hangul character."""
    return _CJK_CHAR.search(token) is not None

"""Word tokens for the text metrics: casefolded Unicode ``\\w+`` runs, CJK split per character.

Why not rouge-score's tokenizer: it keeps only ``[a-z0-9]``, so Russian or Chinese text has no tokens
and scores 0. Here every script counts (docs/metrics.md "rouge"):

* text is NFC-normalised (a decomposed "é" equals a composed one) and casefolded ("Straße" → "strasse");
* a token is a run of word characters in the Unicode sense of the third-party ``regex`` module, whose
  ``\\w`` includes combining marks: the stdlib ``re`` splits Devanagari or decomposed Latin words at
  every vowel sign / accent;
* a token starts with a letter or a digit (after any leading ``_``): marks, joiners and connectors
  belong to the word they are inside and are never a token of their own, so the emoji variation
  selector of "❤️" or the zero-width joiners of "👨‍👩‍👧" are not words, while the vowel signs of "हिन्दी"
  and the zero-width non-joiner of Persian "می‌خواهم" stay inside theirs;
* variation selectors (U+FE00–FE0F, U+E0100–E01EF) and enclosing marks (the keycap of "1️⃣") are
  dropped first: they choose how a character is drawn, not which character it is;
* Han, Hiragana, Katakana and Hangul letters are one token each (these scripts do not reliably put
  spaces between words, so per-character tokens are the usual ROUGE practice for them).

The optional Porter stemmer is NLTK's ``PorterStemmer`` — the very stemmer rouge-score itself uses, so
English scores equal rouge-score's with ``use_stemmer=True``. Like rouge-score it stems tokens longer
than 3 characters made of ASCII letters and digits ("players" → "player", "1990s" → "1990", "mp3s" →
"mp3"), and nothing else: Porter's rules are English suffix rules, and applying them to other scripts
or to ``snake_case`` identifiers (which rouge-score would split at the ``_``) would conflate unrelated
words.

Every text metric cuts a text longer than its ``max_chars`` option before any of this
(:func:`cap_text`): tokens, n-gram tables and the LCS then grow with the cap, never with the text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import regex

_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}"
#: One CJK letter, or a run of non-CJK word characters that starts (after any ``_``) with a letter or digit.
_TOKEN = regex.compile(
    rf"[[{_CJK}]&&[\p{{L}}\p{{N}}]]|_*[[\p{{L}}\p{{N}}]&&[\w--[{_CJK}]]][\w--[{_CJK}]]*", regex.V1
)
#: :data:`_TOKEN` on ASCII text, by the standard library's ``re`` (~2.5x faster: ``regex``'s V1 set
#: operations are checked a character at a time). In ASCII, ``\\w`` is letters, digits and ``_``, and
#: no character is CJK or a mark, so both find the same tokens.
_ASCII_TOKEN = re.compile(r"_*[A-Za-z0-9][A-Za-z0-9_]*")
#: Variation selectors and enclosing marks: how a character is drawn, not which one it is.
_PRESENTATION = regex.compile(r"[\uFE00-\uFE0F\U000E0100-\U000E01EF\p{Me}]+")
#: Plain word runs (CJK not split): for salient-token look-ups where a run is compared whole.
_WORD_RUN = regex.compile(r"\w+")
_CJK_CHAR = regex.compile(rf"[{_CJK}]")

Stemmer = Literal["none", "porter"]

@lru_cache(maxsize=1)
def _porter() -> Callable[[str], str]:
    """NLTK's Porter stemmer, imported on first use: ``import nltk`` costs ~1 s of CPU (it loads
    scipy.stats), and the stemmer is off by default."""
    from nltk.stem.porter import PorterStemmer

    stem: Callable[[str], str] = PorterStemmer().stem
    return stem


@lru_cache(maxsize=65536)
def _porter_stem(token: str) -> str:
    # Stemming is the slow part of tokenising English; the vocabulary of a run repeats a lot.
    return str(_porter()(token))


def _stem_token(token: str) -> str:
    # rouge-score stems every [a-z0-9] token longer than 3 characters, digits included ("1990s" → "1990").
    if len(token) > 3 and token.isascii() and token.isalnum():
        return _porter_stem(token)
    return token


def normalize_text(text: str) -> str:
    """NFC-normalised and casefolded text (what tokens are cut from)."""
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    return text.casefold()


def tokenize(text: str, stemmer: Stemmer = "none") -> list[str]:
    """Casefolded word tokens of ``text``; CJK characters one token each; optionally Porter-stemmed."""
    text = normalize_text(text)
    if text.isascii():
        tokens: list[str] = _ASCII_TOKEN.findall(text)
    else:
        tokens = _TOKEN.findall(_PRESENTATION.sub("", text))
    if stemmer == "porter":
        return [_stem_token(token) for token in tokens]
    return tokens


#: Default ``max_chars`` of the text metrics: ~8,000 English words, ~20 pages.
DEFAULT_MAX_CHARS = 50_000
#: How far back from the limit a cut looks for whitespace, so as not to split a word.
_BACK_OFF = 1_000


@dataclass(frozen=True)
class Capped:
    """A text as scored: the whole text, or its beginning when it was longer than the cap."""

    text: str
    #: Length of the text as given, in characters (code points).
    total_chars: int

    @property
    def cut(self) -> bool:
        return len(self.text) < self.total_chars


def cap_text(text: str, max_chars: int) -> Capped:
    """``text``, or its first ``max_chars`` characters at most when it is longer.

    The cut is made at the last whitespace before the limit when there is one within 1,000 characters
    of it (so no word is split), else exactly at the limit. It is a slice: O(max_chars), whatever the
    length of ``text``.
    """
    total = len(text)
    if total <= max_chars:
        return Capped(text, total)
    end = max_chars
    if not text[end].isspace():
        for i in range(end - 1, max(0, end - _BACK_OFF), -1):
            if text[i].isspace():
                end = i
                break
    return Capped(text[:end], total)


def cut_report(texts: dict[str, Capped], max_chars: int) -> tuple[str, dict[str, dict[str, int]]]:
    """The comment suffix and the ``details["cut"]`` entry for the texts that were cut (``""``, ``{}``: none)."""
    cut = {name: capped for name, capped in texts.items() if capped.cut}
    details = {
        name: {"kept_chars": len(capped.text), "total_chars": capped.total_chars} for name, capped in cut.items()
    }
    if not cut:
        return "", details
    parts = [f"{name} cut to its first {len(c.text):,} of {c.total_chars:,} characters" for name, c in cut.items()]
    return f"; {' and '.join(parts)} (max_chars {max_chars:,})", details


def word_runs(text: str) -> list[str]:
    """Casefolded ``\\w+`` runs of ``text`` without the CJK split (a CJK phrase stays one run)."""
    runs: list[str] = _WORD_RUN.findall(normalize_text(text))
    return runs


def has_cjk(token: str) -> bool:
    """Whether ``token`` contains a Han, Kana or Hangul character."""
    return _CJK_CHAR.search(token) is not None

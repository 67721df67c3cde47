"""ROUGE (``rouge``): n-gram or LCS overlap of the response with the expected answer (docs/metrics.md, no LLM).

Tokens come from tokens.py (casefolded Unicode ``\\w+`` runs, CJK split per character), so every
language scores as English does; rouge-score's own tokenizer keeps ``[a-z0-9]`` alone and scores
Russian or Chinese 0. ``stemmer = "porter"`` is for English text.

The arithmetic is ROUGE-1.5.5's as rouge-score (Google's reimplementation) does it — clipped n-gram
counts for rouge1/rouge2, the longest common subsequence for rougeL, F = 2PR / (P + R) — and a test
checks that English figures equal rouge-score's. It is written here rather than called from
rouge-score because rouge-score computes the LCS with a pure-Python table: measured 18 ms for a pair
of 300-token texts and 205 ms for 1,000 tokens, blocking the event loop, where rapidfuzz's
bit-parallel ``LCSseq`` (already a dependency) takes 9 µs and 0.1 ms.

Decisions (also in docs/metrics.md):
- A text longer than ``max_chars`` characters (default 50,000, ~8,000 English words) is cut to its
  beginning before it is tokenized, so memory and time are bounded whatever a trace holds: a 10 MB
  answer took ~130–240 MiB and seconds (two different ones: minutes, the LCS being O(n·m)); cut, at
  most ~20 MiB and 0.5 s (CJK, one token a character), ~1.5 MiB and 20 ms for English. The figures
  are those of the kept beginnings; the comment says what was cut and ``details["cut"]`` has the
  kept and total characters of each cut text.
- Marks, variation selectors and joiners are never tokens of their own (the U+FE0F of "❤️" is not a
  word), and with ``porter`` tokens of ASCII letters and digits are stemmed as rouge-score stems them
  ("1990s" → "1990"): see _tokens.py.
- An expected answer with no word tokens (empty, or only punctuation) is skipped, not scored: there
  is nothing to compare with, and a 0 would blame the agent for the data.
- A response with no word tokens (empty, or only punctuation) scores 0.0 (docs/metrics.md: empty response → 0).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import ClassVar, Literal

from pydantic import Field
from rapidfuzz.distance import LCSseq

from trace_scorer.data.outcomes import Outcome, Score, Skipped
from trace_scorer.metrics._tokens import DEFAULT_MAX_CHARS, cap_text, cut_report, tokenize
from trace_scorer.metrics.base import Metric, MetricOptions, MetricOutput
from trace_scorer.sample import Sample

_LABEL = {"f": "F", "precision": "precision", "recall": "recall"}


def _ngrams(tokens: list[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def overlap(expected: list[str], response: list[str], variant: str) -> tuple[int, int, int]:
    """(matched units, units in the response, units in the expected answer) for a ROUGE variant."""
    if variant == "rougeL":
        return LCSseq.similarity(expected, response), len(response), len(expected)
    n = 1 if variant == "rouge1" else 2
    expected_ngrams, response_ngrams = _ngrams(expected, n), _ngrams(response, n)
    matched = sum((expected_ngrams & response_ngrams).values())
    return matched, sum(response_ngrams.values()), sum(expected_ngrams.values())


class RougeOptions(MetricOptions):
    """Options of ``rouge``."""

    #: rougeL: longest common subsequence; rouge1 / rouge2: unigram / bigram overlap.
    variant: Literal["rougeL", "rouge1", "rouge2"] = "rougeL"
    #: Which figure is the value: F-measure, precision (of the response) or recall (of the expected).
    output: Literal["f", "precision", "recall"] = "f"
    #: "porter" stems English words (jumps, jumped → jump) before matching.
    stemmer: Literal["none", "porter"] = "none"
    #: Longer texts are cut to their first max_chars characters (at a word boundary) before scoring.
    max_chars: int = Field(default=DEFAULT_MAX_CHARS, ge=1)


class Rouge(Metric[RougeOptions]):
    """ROUGE-L / ROUGE-1 / ROUGE-2 between ``expected`` and ``response``, Unicode-aware."""

    key: ClassVar[str] = "rouge"
    description: ClassVar[str] = "ROUGE overlap of the response with the expected answer (no LLM)"
    Options: ClassVar[type[RougeOptions]] = RougeOptions
    requires: ClassVar[tuple[str, ...]] = ("expected", "response")
    version: ClassVar[str] = "2"

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        return self.compute(sample.expected or "", sample.response or "")

    def compute(self, expected: str, response: str) -> Score | Skipped:
        """ROUGE of ``response`` against ``expected``."""
        opts = self.options
        capped = {"expected": cap_text(expected, opts.max_chars), "response": cap_text(response, opts.max_chars)}
        expected_tokens = tokenize(capped["expected"].text, opts.stemmer)
        if not expected_tokens:
            return Skipped("the expected answer has no words to compare with")
        response_tokens = tokenize(capped["response"].text, opts.stemmer)
        matched, response_units, expected_units = overlap(expected_tokens, response_tokens, opts.variant)
        precision = matched / response_units if response_units else 0.0
        recall = matched / expected_units if expected_units else 0.0
        f = 2 * precision * recall / (precision + recall) if matched else 0.0
        value = {"f": f, "precision": precision, "recall": recall}[opts.output]
        if response_tokens:
            comment = (
                f"{opts.variant} {_LABEL[opts.output]} {value:.2f} (precision {precision:.2f}, recall {recall:.2f})"
            )
        else:
            comment = f"{opts.variant} {_LABEL[opts.output]} 0.00: the response has no words"
        note, cut = cut_report(capped, opts.max_chars)
        details = {
            "variant": opts.variant,
            "output": opts.output,
            "stemmer": opts.stemmer,
            "precision": precision,
            "recall": recall,
            "f": f,
            "expected_tokens": len(expected_tokens),
            "response_tokens": len(response_tokens),
            "max_chars": opts.max_chars,
            "cut": cut,
        }
        return Score(value, comment + note, details)

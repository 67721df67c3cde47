"""ROUGE (``rouge``): n-gram or LCS overlap of the response with the expected answer (SPEC.md, no LLM).

The arithmetic is rouge-score's (Google's reimplementation of ROUGE-1.5.5, the one Hugging Face
``evaluate`` wraps); only its tokenizer is replaced, since rouge-score's keeps ``[a-z0-9]`` alone and
scores Russian or Chinese 0. Ours (tokens.py) casefolds Unicode ``\\w+`` runs and splits CJK per
character, so every language scores as English does. ``stemmer = "porter"`` is for English text.

Decisions where SPEC.md is silent (also in docs/metrics.md):
- An expected answer with no word tokens (empty, or only punctuation) is skipped, not scored: there
  is nothing to compare against, and a 0 would blame the agent for the data.
- A response with no word tokens (empty, or only punctuation) scores 0.0 (SPEC: empty response → 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

from rouge_score.rouge_scorer import RougeScorer

from trace_scorer.metrics.base import Metric, MetricOptions, MetricOutput, Outcome, Resources, Score, Skipped
from trace_scorer.metrics.tokens import Tokenizer
from trace_scorer.sample import Sample

_LABEL = {"f": "F", "precision": "precision", "recall": "recall"}


class RougeOptions(MetricOptions):
    """Options of ``rouge``."""

    #: rougeL: longest common subsequence; rouge1 / rouge2: unigram / bigram overlap.
    variant: Literal["rougeL", "rouge1", "rouge2"] = "rougeL"
    #: Which figure is the value: F-measure, precision (of the response) or recall (of the expected).
    output: Literal["f", "precision", "recall"] = "f"
    #: "porter" stems English words (jumps, jumped → jump) before matching.
    stemmer: Literal["none", "porter"] = "none"


class Rouge(Metric[RougeOptions]):
    """ROUGE-L / ROUGE-1 / ROUGE-2 between ``expected`` and ``response``, Unicode-aware."""

    key: ClassVar[str] = "rouge"
    description: ClassVar[str] = "ROUGE overlap of the response with the expected answer (no LLM)"
    Options: ClassVar[type[RougeOptions]] = RougeOptions
    requires: ClassVar[tuple[str, ...]] = ("expected", "response")
    version: ClassVar[str] = "1"

    def __init__(self, name: str, options: RougeOptions, resources: Resources | None = None) -> None:
        super().__init__(name, options, resources)
        self._tokenizer = Tokenizer(options.stemmer)
        self._scorer = RougeScorer([options.variant], tokenizer=self._tokenizer)

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        return self.compute(sample.expected or "", sample.response or "")

    def compute(self, expected: str, response: str) -> Score | Skipped:
        """ROUGE of ``response`` against ``expected``."""
        opts = self.options
        expected_tokens = len(self._tokenizer.tokenize(expected))
        if not expected_tokens:
            return Skipped("the expected answer has no words to compare with")
        base = {"variant": opts.variant, "output": opts.output, "stemmer": opts.stemmer}
        response_tokens = len(self._tokenizer.tokenize(response))
        if not response_tokens:
            details = {**base, "precision": 0.0, "recall": 0.0, "f": 0.0, "expected_tokens": expected_tokens}
            return Score(0.0, f"{opts.variant}: the response has no words", {**details, "response_tokens": 0})
        result = self._scorer.score(expected, response)[opts.variant]
        figures = {"precision": result.precision, "recall": result.recall, "f": result.fmeasure}
        value = float(figures[opts.output])
        comment = (
            f"{opts.variant} {_LABEL[opts.output]} {value:.2f} "
            f"(precision {result.precision:.2f}, recall {result.recall:.2f})"
        )
        details = {
            **base,
            **{k: float(v) for k, v in figures.items()},
            "expected_tokens": expected_tokens,
            "response_tokens": response_tokens,
        }
        return Score(value, comment, details)

"""BLEU (``bleu``): sacrebleu's sentence BLEU of the whole response / 100 (docs/metrics.md, no LLM).

Real sentence BLEU: 4-gram precisions, brevity penalty, ``exp`` smoothing and effective order
(sacrebleu's ``sentence_bleu`` defaults), divided by 100 so it is in [0, 1]. The whole response is
one segment, however many sentences it has (ragas scores only the first sentence).

Decisions (also in docs/metrics.md):
- A text longer than ``max_chars`` characters (default 50,000, ~8,000 English words) is cut to its
  beginning before sacrebleu sees it: sacrebleu's n-gram tables took ~650 MiB and tens of seconds for
  a 10 MB answer; cut, ~4 MiB and 0.04 s for English, at most ~45 MiB (CJK with ``tokenize = "char"``).
  The BLEU is that of the kept beginnings; the comment says what was cut and ``details["cut"]`` has
  the kept and total characters of each.
- An expected answer that is empty or only whitespace is skipped (nothing to compare with).
- ``tokenize``: sacrebleu's names. The SentencePiece ones (``spm``, ``flores101``, ``flores200``,
  ``spBLEU-1K``) download a model from the internet on first use, which a scoring service must not
  do behind the user's back: rejected. ``ja-mecab`` / ``ko-mecab`` need sacrebleu's extras
  (``pip install 'sacrebleu[ja]'`` / ``'sacrebleu[ko]'``): checked at start-up.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from pydantic import Field, field_validator
from sacrebleu.metrics.bleu import BLEU

from trace_scorer.data.outcomes import Outcome, Score, Skipped
from trace_scorer.metrics._tokens import DEFAULT_MAX_CHARS, cap_text, cut_report
from trace_scorer.metrics.base import Metric, MetricOptions, MetricOutput, Resources
from trace_scorer.sample import Sample

#: sacrebleu tokenizers that fetch a SentencePiece model over the network when first used.
DOWNLOADING_TOKENIZERS = frozenset({"spm", "flores101", "flores200", "spBLEU-1K"})


def _bleu(tokenize: str) -> BLEU:
    return BLEU(tokenize=tokenize, smooth_method="exp", effective_order=True)


class BleuOptions(MetricOptions):
    """Options of ``bleu``."""

    #: sacrebleu tokenizer: "13a" (default, Western text), "intl", "zh" or "char" (CJK), "none",
    #: "ja-mecab" / "ko-mecab" (with sacrebleu's extras).
    tokenize: str = "13a"
    #: Longer texts are cut to their first max_chars characters (at a word boundary) before scoring.
    max_chars: int = Field(default=DEFAULT_MAX_CHARS, ge=1)

    @field_validator("tokenize")
    @classmethod
    def _known_tokenizer(cls, name: str) -> str:
        known = [t for t in BLEU.TOKENIZERS if t not in DOWNLOADING_TOKENIZERS]
        if name in DOWNLOADING_TOKENIZERS:
            raise ValueError(
                f"tokenize {name!r} downloads a SentencePiece model at run time, which is not supported; "
                f"use one of {known}"
            )
        if name not in BLEU.TOKENIZERS:
            raise ValueError(f"unknown sacrebleu tokenizer {name!r}; use one of {known}")
        try:
            _bleu(name)
        except (ImportError, RuntimeError) as exc:
            extra = name.split("-")[0]
            raise ValueError(
                f"tokenize {name!r} needs extra packages: pip install 'sacrebleu[{extra}]' ({exc!s:.200})"
            ) from None
        return name


class Bleu(Metric[BleuOptions]):
    """Sentence BLEU (sacrebleu) of the whole response against the expected answer, in [0, 1]."""

    key: ClassVar[str] = "bleu"
    description: ClassVar[str] = "Sentence BLEU of the response against the expected answer (no LLM)"
    Options: ClassVar[type[BleuOptions]] = BleuOptions
    requires: ClassVar[tuple[str, ...]] = ("expected", "response")
    version: ClassVar[str] = "2"

    def __init__(self, name: str, options: BleuOptions, resources: Resources | None = None) -> None:
        super().__init__(name, options, resources)
        self._bleu = _bleu(options.tokenize)

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        return self.compute(sample.expected or "", sample.response or "")

    def compute(self, expected: str, response: str) -> Score | Skipped:
        """BLEU of ``response`` against ``expected``."""
        max_chars = self.options.max_chars
        capped = {"expected": cap_text(expected, max_chars), "response": cap_text(response, max_chars)}
        if not capped["expected"].text.strip():
            return Skipped("the expected answer is empty")
        note, cut = cut_report(capped, max_chars)
        if not capped["response"].text.strip():
            details = {"tokenize": self.options.tokenize, "bleu": 0.0, "max_chars": max_chars, "cut": cut}
            return Score(0.0, "BLEU 0.00: the response is empty" + note, details)
        result = self._bleu.sentence_score(capped["response"].text, [capped["expected"].text])
        value = min(1.0, max(0.0, result.score / 100.0))
        precisions = [round(p, 2) for p in result.precisions]
        comment = (
            f"BLEU {value:.2f} (n-gram precisions {'/'.join(f'{p:.0f}' for p in result.precisions)}%, "
            f"brevity penalty {result.bp:.2f})"
        )
        details = {
            "tokenize": self.options.tokenize,
            "bleu": result.score,
            "precisions": precisions,
            "brevity_penalty": result.bp,
            "response_length": result.sys_len,
            "expected_length": result.ref_len,
            "max_chars": max_chars,
            "cut": cut,
        }
        return Score(value, comment + note, details)

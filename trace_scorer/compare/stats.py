"""The statistics of a comparison, all from scipy: the paired bootstrap interval, the paired permutation
test, Holm's correction, the interval of a mean (pass@k) and the difference a run of n items can detect.

Why a permutation test and not Wilcoxon's signed-rank test (docs/compare.md, "The test"): the interval
is an interval of the *mean* paired difference, and the sign-flip permutation test tests exactly that
mean, so the test and the interval speak of the same quantity; Wilcoxon tests a shift in the ranks
(a median-like location) and can call a difference significant whose mean is ~0, or the other way round.
It also assumes no distribution, is exact for small runs (all 2ⁿ sign flips when 2ⁿ ≤ the resamples),
and is not troubled by the ties and zero differences that scores in [0, 1] are full of.

Every random draw comes from a seeded generator: the same inputs give the same numbers.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

#: Resamples of the bootstrap and the permutation test (documented in docs/compare.md).
N_RESAMPLES = 9999
CONFIDENCE = 0.95
#: The power the "detectable difference" is computed for.
POWER = 0.80
#: Resamples are drawn this many at a time (bounds memory: batch × items floats, not resamples × items).
BATCH = 500

Floats = NDArray[np.float64]


@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in the interval. For tests and benches only."""
        return self.low <= value <= self.high


def _mean_difference(baseline: Floats, candidate: Floats, axis: int = -1) -> Floats:
    return np.asarray(np.mean(candidate - baseline, axis=axis), dtype=np.float64)


def _mean(values: Floats, axis: int = -1) -> Floats:
    return np.asarray(np.mean(values, axis=axis), dtype=np.float64)


def _arrays(baseline: Sequence[float], candidate: Sequence[float]) -> tuple[Floats, Floats]:
    base = np.asarray(baseline, dtype=np.float64)
    cand = np.asarray(candidate, dtype=np.float64)
    if base.shape != cand.shape or base.ndim != 1:
        raise ValueError(f"paired values need two sequences of one length, got {base.shape} and {cand.shape}")
    return base, cand


def paired_interval(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    seed: int,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
) -> Interval | None:
    """The bootstrap confidence interval (BCa) of the mean of ``candidate − baseline``, resampling the
    items with their pairs kept together (``paired=True``). None with fewer than two pairs.

    Differences that are all equal give the point interval [d, d]: resampling them cannot vary, and
    BCa is undefined there (scipy warns and answers NaN)."""
    from scipy import stats  # deferred: scipy.stats costs 0.5 s to import, paid by compare only

    base, cand = _arrays(baseline, candidate)
    if base.size < 2:
        return None
    differences = cand - base
    if np.ptp(differences) == 0:
        value = float(differences[0])
        return Interval(value, value)
    result = stats.bootstrap(
        (base, cand),
        _mean_difference,
        paired=True,
        vectorized=True,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="BCa",
        batch=BATCH,
        rng=np.random.default_rng(seed),
    )
    return _interval(result, (differences,), seed, n_resamples, confidence)


def mean_interval(
    values: Sequence[float], *, seed: int, n_resamples: int = N_RESAMPLES, confidence: float = CONFIDENCE
) -> Interval | None:
    """The bootstrap confidence interval (BCa) of a mean over items (pass@k of a run). None below two."""
    from scipy import stats  # deferred: scipy.stats costs 0.5 s to import, paid by compare only

    array = np.asarray(values, dtype=np.float64)
    if array.size < 2:
        return None
    if np.ptp(array) == 0:
        return Interval(float(array[0]), float(array[0]))
    result = stats.bootstrap(
        (array,),
        _mean,
        vectorized=True,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="BCa",
        batch=BATCH,
        rng=np.random.default_rng(seed),
    )
    return _interval(result, (array,), seed, n_resamples, confidence)


def _interval(
    result: Any,
    data: tuple[Floats],
    seed: int,
    n_resamples: int,
    confidence: float,
) -> Interval:
    """BCa's interval, or the percentile interval when BCa cannot be computed (e.g. a single outlier
    among equal values makes its acceleration undefined: scipy answers NaN)."""
    from scipy import stats  # deferred: scipy.stats costs 0.5 s to import, paid by compare only

    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if math.isfinite(low) and math.isfinite(high):
        return Interval(low, high)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        fallback = stats.bootstrap(
            data,
            _mean,
            vectorized=True,
            n_resamples=n_resamples,
            confidence_level=confidence,
            method="percentile",
            batch=BATCH,
            rng=np.random.default_rng(seed),
        )
    return Interval(float(fallback.confidence_interval.low), float(fallback.confidence_interval.high))


def paired_p_value(
    baseline: Sequence[float], candidate: Sequence[float], *, seed: int, n_resamples: int = N_RESAMPLES
) -> float:
    """Two-sided p-value of the paired permutation test: under "no difference" each item's two values
    are exchangeable, so the sign of each difference is flipped at random (``permutation_type="samples"``);
    the statistic is the mean difference. Exact (every flip) when 2ⁿ ≤ ``n_resamples``. 1.0 with no pair."""
    from scipy import stats  # deferred: scipy.stats costs 0.5 s to import, paid by compare only

    base, cand = _arrays(baseline, candidate)
    if base.size == 0 or not np.any(cand - base):
        return 1.0
    result = stats.permutation_test(
        (base, cand),
        _mean_difference,
        permutation_type="samples",
        vectorized=True,
        n_resamples=n_resamples,
        alternative="two-sided",
        batch=BATCH,
        rng=np.random.default_rng(seed),
    )
    return float(min(1.0, result.pvalue))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given.

    Written here (five lines) because scipy has only Benjamini–Hochberg/Yekutieli
    (``false_discovery_control``), which control the false discovery rate, not the family-wise error
    a "worse" verdict needs; statsmodels' ``multipletests`` would bring pandas and patsy for these lines.
    Sorted ascending, the i-th (from 0) is multiplied by m − i, made non-decreasing, capped at 1.
    """
    m = len(p_values)
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def holm_steps(p_values: Sequence[float]) -> list[int]:
    """Each p-value's Holm divisor, in the order given: the i-th smallest (from 0) of m is tested at
    α / (m − i), so its divisor is m − i (ties in the order given). The interval of a score is drawn at the
    matching level (docs/compare.md, "Intervals and Holm's correction")."""
    m = len(p_values)
    divisors = [0] * m
    for rank, index in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        divisors[index] = m - rank
    return divisors


def detectable_difference(
    differences: Sequence[float], *, alpha: float, power: float = POWER, tests: int = 1
) -> float | None:
    """The smallest mean difference these many items would detect with ``power`` at level ``alpha``
    (Holm's strictest step: ``alpha / tests``): (z₁₋α/2 + z_power) · sd / √n, the normal approximation
    of the paired test. None below two items or when the differences do not vary (sd = 0)."""
    from scipy import stats  # deferred: scipy.stats costs 0.5 s to import, paid by compare only

    array = np.asarray(differences, dtype=np.float64)
    if array.size < 2:
        return None
    sd = float(np.std(array, ddof=1))
    if sd == 0:
        return None
    z = stats.norm.ppf(1 - alpha / tests / 2) + stats.norm.ppf(power)
    return float(z * sd / math.sqrt(array.size))


def items_needed(difference: float, sd: float, *, alpha: float, power: float = POWER, tests: int = 1) -> int:
    """Items needed to detect a mean difference ``difference`` when the paired differences have standard
    deviation ``sd``: ⌈((z₁₋α/2 + z_power) · sd / difference)²⌉ (the table in docs/compare.md)."""
    from scipy import stats  # deferred: scipy.stats costs 0.5 s to import, paid by compare only

    z = float(stats.norm.ppf(1 - alpha / tests / 2) + stats.norm.ppf(power))
    return math.ceil((z * sd / abs(difference)) ** 2)

"""The comparison's statistics: the same numbers as scipy's own on known data, and hand-computed cases."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from trace_scorer.compare import stats

RNG = np.random.default_rng(7)
BASE = RNG.uniform(0, 1, size=40)
CAND = np.clip(BASE + 0.08 + RNG.normal(0, 0.15, size=40), 0, 1)


def test_paired_interval_is_scipys_paired_bootstrap_with_the_same_seed() -> None:
    interval = stats.paired_interval(BASE, CAND, seed=3, n_resamples=2000)
    expected = scipy_stats.bootstrap(
        (BASE, CAND),
        lambda b, c, axis=-1: np.mean(c - b, axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=2000,
        method="BCa",
        rng=np.random.default_rng(3),
    ).confidence_interval
    assert interval is not None
    assert (interval.low, interval.high) == pytest.approx((expected.low, expected.high), abs=1e-12)
    assert interval.contains(float(np.mean(CAND - BASE)))


def test_paired_interval_is_seeded() -> None:
    first = stats.paired_interval(BASE, CAND, seed=11, n_resamples=500)
    assert first == stats.paired_interval(BASE, CAND, seed=11, n_resamples=500)
    assert first != stats.paired_interval(BASE, CAND, seed=12, n_resamples=500)


def test_equal_differences_give_a_point_interval_and_one_pair_none() -> None:
    assert stats.paired_interval([0.1, 0.5, 0.2], [0.3, 0.7, 0.4], seed=0) == stats.Interval(
        pytest.approx(0.2), pytest.approx(0.2)
    )
    assert stats.paired_interval([0.5], [0.9], seed=0) is None


def test_p_value_is_scipys_paired_permutation_test() -> None:
    p = stats.paired_p_value(BASE, CAND, seed=5, n_resamples=3000)
    expected = scipy_stats.permutation_test(
        (BASE, CAND),
        lambda b, c, axis=-1: np.mean(c - b, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=3000,
        rng=np.random.default_rng(5),
    ).pvalue
    assert p == pytest.approx(expected)


def test_p_value_of_three_items_by_hand() -> None:
    # Differences 1, 2, 3: the 8 sign flips give sums 6, 4, 2, 0, 0, -2, -4, -6; |sum| >= 6 in 2 of 8.
    assert stats.paired_p_value([0, 0, 0], [1, 2, 3], seed=0) == pytest.approx(0.25)
    # Differences 1, -1: sums 0, 2, -2, 0; |sum| >= 0 in all: p = 1.
    assert stats.paired_p_value([0, 1], [1, 0], seed=0) == pytest.approx(1.0)
    assert stats.paired_p_value([0.4, 0.5], [0.4, 0.5], seed=0) == 1.0


def test_holm_by_hand() -> None:
    # Sorted: 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 → kept non-decreasing: 0.06.
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert stats.holm([]) == []


@given(st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=12))
def test_holm_never_lowers_a_p_value_keeps_the_order_and_stays_at_most_one(p_values: list[float]) -> None:
    adjusted = stats.holm(p_values)
    assert all(a >= p - 1e-15 and a <= 1.0 for a, p in zip(adjusted, p_values, strict=True))
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    assert all(adjusted[i] <= adjusted[j] for i, j in itertools.pairwise(order))
    smallest = order[0]
    assert adjusted[smallest] == pytest.approx(min(1.0, len(p_values) * p_values[smallest]))


def test_detectable_difference_and_items_needed_by_hand() -> None:
    z = 1.959964 + 0.841621  # z(0.975) + z(0.80)
    # Differences 0 and 1: sd = √0.5, n = 2 → z · √0.5 / √2 = z / 2.
    assert stats.detectable_difference([0.0, 1.0], alpha=0.05) == pytest.approx(z / 2, rel=1e-5)
    assert stats.detectable_difference([0.3, 0.3], alpha=0.05) is None
    # sd 0.2, a difference of 0.05: (z · 0.2 / 0.05)² = 125.58 → 126 items.
    assert stats.items_needed(0.05, 0.2, alpha=0.05) == math.ceil((z * 4) ** 2) == 126
    # Holm's strictest step with 3 scores tests at 0.05 / 3: more items.
    assert stats.items_needed(0.05, 0.2, alpha=0.05, tests=3) > 126


def test_mean_interval_is_scipys_bootstrap() -> None:
    values = [1.0, 0.0, 1.0, 1.0, 0.5, 0.0, 1.0, 1.0]
    interval = stats.mean_interval(values, seed=2, n_resamples=1000)
    expected = scipy_stats.bootstrap(
        (np.asarray(values),), np.mean, n_resamples=1000, method="BCa", rng=np.random.default_rng(2)
    ).confidence_interval
    assert interval is not None
    assert (interval.low, interval.high) == pytest.approx((expected.low, expected.high))
    assert stats.mean_interval([1.0, 1.0, 1.0], seed=0) == stats.Interval(1.0, 1.0)
    assert stats.mean_interval([0.4], seed=0) is None


def test_holm_steps_are_the_divisors_of_the_sorted_p_values() -> None:
    # Sorted: 0.01 (÷3), 0.03 (÷2), 0.2 (÷1); given in another order.
    assert stats.holm_steps([0.2, 0.01, 0.03]) == [1, 3, 2]
    assert stats.holm_steps([]) == []
    adjusted = stats.holm([0.2, 0.01, 0.03])
    assert adjusted[1] == pytest.approx(0.01 * 3) and adjusted[2] == pytest.approx(0.03 * 2)

"""The pairing helpers against brute force: the fast paths must give the solver's optimum."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from trace_scorer.metrics._matching import assign, lcs_pairs

shape = st.tuples(st.integers(1, 4), st.integers(1, 4))


def _matrix(draw: st.DrawFn, values: st.SearchStrategy[float]) -> list[list[float]]:
    rows, cols = draw(shape)
    return [[draw(values) for _ in range(cols)] for _ in range(rows)]


@st.composite
def weight_matrices(draw: st.DrawFn) -> list[list[float]]:
    return _matrix(draw, st.sampled_from([0.0, 0.0, 0.25, 0.5, 1.0, 1.5]))


@st.composite
def bool_matrices(draw: st.DrawFn) -> list[list[bool]]:
    rows, cols = draw(shape)
    return [[draw(st.booleans()) for _ in range(cols)] for _ in range(rows)]


def best_total(weights: list[list[float]]) -> float:
    rows, cols = len(weights), len(weights[0])
    best = 0.0
    if rows <= cols:
        for perm in itertools.permutations(range(cols), rows):
            best = max(best, sum(weights[i][perm[i]] for i in range(rows)))
    else:
        for perm in itertools.permutations(range(rows), cols):
            best = max(best, sum(weights[perm[j]][j] for j in range(cols)))
    return best


def check_one_to_one(pairs: list[tuple[int, int]]) -> None:
    assert len({i for i, _ in pairs}) == len(pairs)
    assert len({j for _, j in pairs}) == len(pairs)


@settings(max_examples=300, deadline=None)
@given(weight_matrices())
def test_assign_is_optimal(weights: list[list[float]]) -> None:
    for keep_zero in (False, True):
        pairs = assign(weights, keep_zero=keep_zero)
        check_one_to_one(pairs)
        assert sum(weights[i][j] for i, j in pairs) == best_total(weights)
        if keep_zero:
            assert len(pairs) == min(len(weights), len(weights[0]))
        else:
            assert all(weights[i][j] > 0 for i, j in pairs)


def brute_lcs(match: list[list[bool]]) -> int:
    n, m = len(match), len(match[0])
    for size in range(min(n, m), 0, -1):
        for rows in itertools.combinations(range(n), size):
            for cols in itertools.combinations(range(m), size):
                if all(match[i][j] for i, j in zip(rows, cols, strict=True)):
                    return size
    return 0


@settings(max_examples=300, deadline=None)
@given(bool_matrices())
def test_lcs_pairs_is_longest_and_ordered(match: list[list[bool]]) -> None:
    pairs = lcs_pairs(match)
    assert len(pairs) == brute_lcs(match)
    assert all(match[i][j] for i, j in pairs)
    assert all(a[0] < b[0] and a[1] < b[1] for a, b in itertools.pairwise(pairs))


def test_empty_inputs() -> None:
    assert assign([], keep_zero=False) == []
    assert lcs_pairs([]) == []

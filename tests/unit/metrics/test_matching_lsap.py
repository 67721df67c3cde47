"""The tool metrics' assignment solver gives scipy's pairs, ties included (metrics/_matching.py): it is a
port of scipy's ``linear_sum_assignment``, so a score never depends on which of them solved."""

from __future__ import annotations

import random

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from trace_scorer.metrics._matching import _shortest_augmenting_path

#: Weights as the tool metrics make them (argument shares), with many ties; and arbitrary floats.
CHOICES = ([0.0, 0.5, 1.0], [0.0, 1 / 3, 2 / 3, 1.0, 0.25], [0.0, 1.0, 2.0])


@pytest.mark.parametrize("seed", range(4))
def test_the_same_pairs_as_scipy(seed: int) -> None:
    r = random.Random(seed)
    for n in range(5_000):
        rows, cols = r.randint(1, 8), r.randint(1, 8)
        if n % 4 == 3:
            weights = [[r.random() for _ in range(cols)] for _ in range(rows)]
        else:
            choices = CHOICES[n % 4]
            weights = [[r.choice(choices) for _ in range(cols)] for _ in range(rows)]
        row_ind, col_ind = linear_sum_assignment(np.asarray(weights, dtype=float), maximize=True)
        expected = [(int(i), int(j)) for i, j in zip(row_ind, col_ind, strict=True)]
        assert _shortest_augmenting_path(weights) == expected, weights


def test_a_constant_matrix_pairs_in_order() -> None:
    assert _shortest_augmenting_path([[1.0] * 3] * 3) == [(0, 0), (1, 1), (2, 2)]
    assert _shortest_augmenting_path([[1.0] * 2] * 3) == [(0, 0), (1, 1)]

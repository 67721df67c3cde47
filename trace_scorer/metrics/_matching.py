"""One-to-one pairing of actual and reference tool calls: optimal assignment and LCS.

Both tool metrics pair calls of the same name one-to-one. A greedy first-fit pairing depends on list
order and can miss pairs (actual ``a(x=1, y=2)`` taking the reference that only a later ``a(x=1)``
could match), so pairs come from an optimal assignment: scipy's ``linear_sum_assignment``. Calling
the solver costs tens of microseconds, far more than the usual case needs, so the cases whose optimum
is evident — one row, one column, or a relation that is already one-to-one — are answered directly;
the answers are the same ones the solver gives.
"""

from __future__ import annotations

from collections.abc import Sequence

Pair = tuple[int, int]


def _best_in_row(row: Sequence[float]) -> int:
    best = 0
    for j in range(1, len(row)):
        if row[j] > row[best]:
            best = j
    return best


def assign(weights: Sequence[Sequence[float]], *, keep_zero: bool) -> list[Pair]:
    """Row→column pairs, one-to-one, maximising the total weight (pairs sorted by row).

    ``keep_zero``: also return pairs of weight 0 (a full assignment of ``min(rows, cols)`` pairs);
    otherwise only pairs with positive weight are returned.
    """
    rows = len(weights)
    if rows == 0 or len(weights[0]) == 0:
        return []
    cols = len(weights[0])
    pairs: list[Pair]
    if rows == 1:
        pairs = [(0, _best_in_row(weights[0]))]
    elif cols == 1:
        column = [row[0] for row in weights]
        pairs = [(_best_in_row(column), 0)]
    else:
        sparse = None if keep_zero else _one_to_one(weights)
        if sparse is not None:
            return sparse
        # Deferred: scipy.optimize (with numpy) costs ~0.2 s to import, and most samples never get here.
        import numpy as np
        from scipy.optimize import linear_sum_assignment

        row_ind, col_ind = linear_sum_assignment(np.asarray(weights, dtype=float), maximize=True)
        pairs = [(int(i), int(j)) for i, j in zip(row_ind, col_ind, strict=True)]
    if keep_zero:
        return pairs
    return [(i, j) for i, j in pairs if weights[i][j] > 0]


def _one_to_one(weights: Sequence[Sequence[float]]) -> list[Pair] | None:
    """The positive entries, if no row and no column has two of them (then they are the optimum)."""
    pairs: list[Pair] = []
    used_cols: set[int] = set()
    for i, row in enumerate(weights):
        found = -1
        for j, w in enumerate(row):
            if w > 0:
                if found >= 0 or j in used_cols:
                    return None
                found = j
        if found >= 0:
            used_cols.add(found)
            pairs.append((i, found))
    return pairs


def lcs_pairs(match: Sequence[Sequence[bool]]) -> list[Pair]:
    """A longest common subsequence of two sequences under a match relation, as (row, col) pairs.

    ``match[i][j]`` says whether item ``i`` of the first sequence matches item ``j`` of the second.
    Pairs are increasing in both indices (order preserved), and as many as possible.
    """
    n = len(match)
    m = len(match[0]) if n else 0
    if n == 0 or m == 0:
        return []
    # table[i][j]: LCS length of the suffixes starting at i and j (suffix form makes the walk forward).
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        row, below = table[i], table[i + 1]
        mi = match[i]
        for j in range(m - 1, -1, -1):
            if mi[j]:
                row[j] = below[j + 1] + 1
            else:
                row[j] = below[j] if below[j] >= row[j + 1] else row[j + 1]
    pairs: list[Pair] = []
    i = j = 0
    while i < n and j < m:
        if match[i][j] and table[i][j] == table[i + 1][j + 1] + 1:
            pairs.append((i, j))
            i += 1
            j += 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs

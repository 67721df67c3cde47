"""One-to-one pairing of actual and reference tool calls: optimal assignment and LCS.

Both tool metrics pair calls of the same name one-to-one. A greedy first-fit pairing depends on list
order and can miss pairs (actual ``a(x=1, y=2)`` taking the reference that only a later ``a(x=1)``
could match), so pairs come from an optimal assignment: scipy's ``linear_sum_assignment``, ported for
the small matrices tool calls make (``_shortest_augmenting_path``: the same pairs, without importing
scipy). The cases whose optimum is evident — one row, one column, or a relation that is already
one-to-one — are answered directly; the answers are the same ones the solver gives.
"""

from __future__ import annotations

import math
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
        pairs = _shortest_augmenting_path(weights) if rows * cols <= SMALL_MATRIX else _scipy_assignment(weights)
    if keep_zero:
        return pairs
    return [(i, j) for i, j in pairs if weights[i][j] > 0]


#: Up to this many entries, the assignment is solved here in Python; larger ones by scipy.
SMALL_MATRIX = 400


def _scipy_assignment(weights: Sequence[Sequence[float]]) -> list[Pair]:
    # Deferred: scipy.optimize (with numpy) costs 0.2-0.5 s to import; only a large matrix gets here.
    import numpy as np
    from scipy.optimize import linear_sum_assignment

    row_ind, col_ind = linear_sum_assignment(np.asarray(weights, dtype=float), maximize=True)
    return [(int(i), int(j)) for i, j in zip(row_ind, col_ind, strict=True)]


def _shortest_augmenting_path(weights: Sequence[Sequence[float]]) -> list[Pair]:
    """scipy's ``linear_sum_assignment(weights, maximize=True)``, ported line by line from its
    ``rectangular_lsap.cpp`` (Crouse's shortest augmenting path, same float operations in the same order),
    so that ties are broken as scipy breaks them: the same pairs (tests/unit/metrics/test_matching_lsap.py
    compares both on random matrices with ties).

    Why not call scipy: importing scipy.optimize costs 0.2-0.5 s of a ``score`` process's start-up, paid
    for the first sample whose calls need an assignment, and a call costs tens of microseconds for the
    2-6 calls an agent makes, more than this loop. Finite weights only (shares in [0, 1]).
    """
    nr, nc = len(weights), len(weights[0])
    transpose = nc < nr
    if transpose:  # the C++ solves a wide matrix: a tall one is transposed
        cost = [[-weights[i][j] for i in range(nr)] for j in range(nc)]
        nr, nc = nc, nr
    else:
        cost = [[-w for w in row] for row in weights]  # maximise: negated costs
    u, v = [0.0] * nr, [0.0] * nc
    path, col4row, row4col = [-1] * nc, [-1] * nr, [-1] * nc
    for cur_row in range(nr):
        min_val = 0.0
        remaining = list(range(nc - 1, -1, -1))  # reversed: a constant matrix gives the identity
        left = nc
        in_rows, in_cols = [False] * nr, [False] * nc
        shortest = [math.inf] * nc
        sink, i = -1, cur_row
        while sink == -1:
            index, lowest = -1, math.inf
            in_rows[i] = True
            row, ui = cost[i], u[i]
            for it in range(left):
                j = remaining[it]
                reduced = min_val + row[j] - ui - v[j]
                if reduced < shortest[j]:
                    path[j] = i
                    shortest[j] = reduced
                # among equal costs, prefer a column that ends the path (a new sink)
                if shortest[j] < lowest or (shortest[j] == lowest and row4col[j] == -1):
                    lowest = shortest[j]
                    index = it
            min_val = lowest
            j = remaining[index]
            if row4col[j] == -1:
                sink = j
            else:
                i = row4col[j]
            in_cols[j] = True
            left -= 1
            remaining[index] = remaining[left]
        u[cur_row] += min_val
        for r in range(nr):
            if in_rows[r] and r != cur_row:
                u[r] += min_val - shortest[col4row[r]]
        for c in range(nc):
            if in_cols[c]:
                v[c] -= min_val - shortest[c]
        j = sink
        while True:  # augment along the path
            i = path[j]
            row4col[j] = i
            col4row[i], j = j, col4row[i]
            if i == cur_row:
                break
    if transpose:
        return [(col4row[k], k) for k in sorted(range(nr), key=col4row.__getitem__)]
    return [(r, col4row[r]) for r in range(nr)]


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

"""Matching tracks to detections (pure numpy): IoU, greedy and optimal (Hungarian) assignment.

The tracker (core.tracker) calls :func:`assign`: optimal, but solved per connected group of boxes
that overlap a track, since scipy is not a runtime dependency and objects apart from each other
cost one comparison, so only a crowd pays the O(n^3) solver. ``greedy_match`` is the
``TrackerParams(optimal=False)`` fallback and what a group over :data:`MAX_OPTIMAL` boxes gets.
"""

from __future__ import annotations

from typing import List, Tuple

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

MAX_OPTIMAL = 40  # groups of overlapping boxes larger than this are assigned greedily


def iou_matrix(a: FloatArray, b: FloatArray) -> FloatArray:
    """Pairwise IoU of x1,y1,x2,y2 boxes: (N, 4) x (M, 4) -> (N, M)."""
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)))
    x1 = np.maximum(a[:, None, 0], b[None, :, 0])
    y1 = np.maximum(a[:, None, 1], b[None, :, 1])
    x2 = np.minimum(a[:, None, 2], b[None, :, 2])
    y2 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.maximum(x2 - x1, 0.0) * np.maximum(y2 - y1, 0.0)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    out: FloatArray = np.where(union > 0, inter / np.maximum(union, 1e-12), 0.0)
    return out


def greedy_match(sim: FloatArray, min_sim: float) -> List[Tuple[int, int]]:
    """Pairs (row, col) taken best similarity first, each row and column once, all >= ``min_sim``."""
    if sim.size == 0:
        return []
    rows, cols = np.nonzero(sim >= min_sim)
    if len(rows) == 0:
        return []
    order = np.argsort(-sim[rows, cols], kind="stable")
    used_r: set[int] = set()
    used_c: set[int] = set()
    pairs: List[Tuple[int, int]] = []
    for k in order.tolist():
        r, c = int(rows[k]), int(cols[k])
        if r in used_r or c in used_c:
            continue
        used_r.add(r)
        used_c.add(c)
        pairs.append((r, c))
    return pairs


def assign(sim: FloatArray, min_sim: float) -> List[Tuple[int, int]]:
    """Optimal assignment, solved per connected group of rows/columns linked by a pair >= ``min_sim``:
    objects apart from each other (the usual case) cost one comparison, only a crowd pays the
    Hungarian solver, and only for its own size."""
    if sim.size == 0:
        return []
    link = sim >= min_sim
    per_row, per_col = link.sum(axis=1), link.sum(axis=0)
    # the usual case, vectorised: a row with one candidate column that has no other candidate
    lone = link & (per_row[:, None] == 1) & (per_col[None, :] == 1)
    lr, lc = np.nonzero(lone)
    pairs: List[Tuple[int, int]] = list(zip(lr.tolist(), lc.tolist()))
    rows_left = set(np.nonzero(per_row > 1)[0].tolist()) | {
        r for r in np.nonzero(per_row == 1)[0].tolist() if not lone[r].any()
    }
    while rows_left:
        rs = {rows_left.pop()}
        cs: set[int] = set()
        grow = True
        while grow:
            new_cs = set(np.nonzero(link[sorted(rs)].any(axis=0))[0].tolist())
            new_rs = set(np.nonzero(link[:, sorted(new_cs)].any(axis=1))[0].tolist())
            grow = new_cs != cs or new_rs != rs
            rs, cs = new_rs, new_cs
        rows_left -= rs
        r_idx, c_idx = sorted(rs), sorted(cs)
        if len(r_idx) == 1 and len(c_idx) == 1:
            pairs.append((r_idx[0], c_idx[0]))
            continue
        sub = sim[np.ix_(r_idx, c_idx)]
        # a dense crowd (or a detector gone wild) is solved greedily: the solver's Python loop is
        # O(n^2 m) and must not stall the camera loop
        solve = optimal_match if min(len(r_idx), len(c_idx)) <= MAX_OPTIMAL else greedy_match
        pairs += [(r_idx[r], c_idx[c]) for r, c in solve(sub, min_sim)]
    return pairs


def optimal_match(sim: FloatArray, min_sim: float) -> List[Tuple[int, int]]:
    """Pairs maximising the total similarity (Hungarian / shortest augmenting path, O(n^2 m) with
    the inner loop in numpy), then those below ``min_sim`` dropped, as ByteTrack's lapjv does with
    its cost limit: pairs under the gate are made too expensive to be worth taking."""
    if sim.size == 0:
        return []
    transposed = sim.shape[0] > sim.shape[1]
    gated = np.where(sim >= min_sim, sim, 0.0)
    cost = 1.0 - (gated.T if transposed else gated)  # n rows <= m columns
    n, m = cost.shape
    u = np.zeros(n + 1)
    v = np.zeros(m + 1)
    p = np.zeros(m + 1, dtype=np.intp)  # p[j]: row (1-based) assigned to column j
    way = np.zeros(m + 1, dtype=np.intp)
    for i in range(1, n + 1):
        p[0] = i
        j0 = 0
        minv = np.full(m + 1, np.inf)
        used = np.zeros(m + 1, dtype=bool)
        while True:
            used[j0] = True
            i0 = p[j0]
            free = ~used[1:]
            cur = cost[i0 - 1] - u[i0] - v[1:]
            better = free & (cur < minv[1:])
            minv[1:][better] = cur[better]
            way[1:][better] = j0
            cand = np.where(free, minv[1:], np.inf)
            j1 = int(np.argmin(cand)) + 1
            delta = cand[j1 - 1]
            u[p[used]] += delta
            v[used] -= delta
            minv[1:][free] -= delta
            j0 = j1
            if p[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            p[j0] = p[j1]
            j0 = j1
    pairs = []
    for j in range(1, m + 1):
        if p[j]:
            r, c = (j - 1, int(p[j]) - 1) if transposed else (int(p[j]) - 1, j - 1)
            if sim[r, c] >= min_sim:
                pairs.append((r, c))
    return pairs

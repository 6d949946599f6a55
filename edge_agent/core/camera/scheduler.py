"""Which camera's frame the shared detector takes next: fair by weight, never held up by a stall.

Smooth weighted round robin (nginx's upstream choice) over the cameras that have a frame ready
*now*: each pick adds every ready camera's weight to its credit, takes the one with the most, and
charges it the sum of the ready weights. Over any stretch where the same cameras are ready, each
gets frames in proportion to its weight, interleaved rather than in bursts; a camera with nothing
ready earns no credit, so it neither blocks the others nor comes back owed a burst after a stall.
A fast camera cannot starve a slow one: its frames only wait in its own one-deep hand-off.

:func:`too_old` is the other half of "drop rather than backlog": a frame that waited longer than
two of its camera's frame intervals for its turn is dropped when a newer one is already there,
but never twice running, so an overloaded board still infers every camera, just less often.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

STALE_INTERVALS = 2.0  # a frame older than this many of its camera's frame intervals is stale


class WeightedRoundRobin:
    """Picks among ready cameras by weight (ids are the pipelines' indexes)."""

    def __init__(self, weights: Sequence[int]) -> None:
        if not weights or any(w < 1 for w in weights):
            raise ValueError(f"weights must be >= 1, got {list(weights)}")
        self.weights = list(weights)
        self.credit: Dict[int, int] = {i: 0 for i in range(len(weights))}
        self._before: Dict[int, int] = dict(self.credit)  # the credit before the last pick

    def pick(self, ready: Sequence[int]) -> Optional[int]:
        """The index to run next among ``ready`` (None when nothing is ready)."""
        if not ready:
            return None
        self._before = dict(self.credit)
        total = 0
        best: Optional[int] = None
        for i in ready:
            self.credit[i] += self.weights[i]
            total += self.weights[i]
            if best is None or self.credit[i] > self.credit[best]:
                best = i
        assert best is not None
        self.credit[best] -= total
        return best

    def undo(self) -> None:
        """The last pick took nothing (its frame was dropped as stale, or gated): the credit is
        as if it had not been made, so a dropped frame does not cost its camera a turn."""
        self.credit = dict(self._before)


def too_old(age_s: float, interval_s: Optional[float], newer_waiting: bool, dropped_last: bool) -> bool:
    """Drop this frame instead of inferring it? Only when a newer frame of the same camera is
    waiting, the frame is older than :data:`STALE_INTERVALS` frame intervals of its camera (known
    only for live sources), and the previous frame of this camera was not dropped already."""
    if interval_s is None or interval_s <= 0 or not newer_waiting or dropped_last:
        return False
    return age_s > STALE_INTERVALS * interval_s

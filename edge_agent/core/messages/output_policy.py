"""Output policy (pure): which inference results become messages.

A camera watching an empty car park produces thousands of identical "nothing" results an hour;
sending them all over a metered link is waste. In ``event`` mode a result is emitted when the set of
detections changes (label multiset, optionally box movement beyond an IoU tolerance, optionally
after it has been stable for a few frames), plus a heartbeat every ``heartbeat_s`` so the far end
can tell "nothing changed" from "device dead". ``every_frame`` emits everything.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Optional, Tuple

import numpy as np

from edge_agent.core.config.schema import OutputConfig
from edge_agent.core.vision.yolo import box_iou as pairwise_iou

Box = Tuple[float, float, float, float]  # x1, y1, x2, y2
Detection = Tuple[str, Box]  # (label, box)
Reason = Literal["first", "change", "heartbeat", "every_frame"]


@dataclass(frozen=True)
class Decision:
    emit: bool
    reason: Optional[Reason] = None


def box_iou(a: Box, b: Box) -> float:
    """Intersection over union of two x1,y1,x2,y2 boxes (0 when either is empty)."""
    return float(pairwise_iou(np.asarray([a], np.float32), np.asarray([b], np.float32))[0, 0])


def same_detections(old: Sequence[Detection], new: Sequence[Detection], min_iou: Optional[float]) -> bool:
    """Same label multiset and (with ``min_iou``) every box matched to one that overlaps by >= min_iou.

    Boxes are matched greedily per label, best IoU first; that is exact enough for the handful of
    objects in a frame and needs no Hungarian solver.
    """
    if Counter(label for label, _ in old) != Counter(label for label, _ in new):
        return False
    if min_iou is None:
        return True
    for label in {lbl for lbl, _ in old}:
        olds = [box for lbl, box in old if lbl == label]
        news = [box for lbl, box in new if lbl == label]
        ious = pairwise_iou(np.asarray(olds, np.float32), np.asarray(news, np.float32))
        pairs = sorted(
            ((float(ious[i, j]), i, j) for i in range(len(olds)) for j in range(len(news))), reverse=True
        )
        used_o: set[int] = set()
        used_n: set[int] = set()
        for overlap, i, j in pairs:
            if i in used_o or j in used_n:
                continue
            if overlap < min_iou:
                return False
            used_o.add(i)
            used_n.add(j)
    return True


class OutputPolicy:
    """Decide per result whether to emit it. One instance per stream; not thread-safe.

    ``min_iou``: None compares labels only; e.g. 0.5 also emits when a box moved so far that it
    overlaps its previous position by less than 50 %. ``stable_frames``: a change must be seen on
    this many consecutive results before it is emitted (1 = immediately), which stops a detection
    flickering at the confidence threshold from producing a message per frame.
    """

    def __init__(
        self,
        mode: Literal["event", "every_frame"] = "event",
        heartbeat_s: float = OutputConfig().heartbeat_s,
        *,
        min_iou: Optional[float] = None,
        stable_frames: int = 1,
    ) -> None:
        if heartbeat_s <= 0:
            raise ValueError(f"heartbeat_s must be > 0, got {heartbeat_s}")
        if min_iou is not None and not 0.0 <= min_iou <= 1.0:
            raise ValueError(f"min_iou must be in [0, 1], got {min_iou}")
        if stable_frames < 1:
            raise ValueError(f"stable_frames must be >= 1, got {stable_frames}")
        self.mode = mode
        self.heartbeat_s = heartbeat_s
        self.min_iou = min_iou
        self.stable_frames = stable_frames
        self._emitted: Optional[list[Detection]] = None
        self._last_emit: Optional[float] = None
        self._pending = 0
        self._pending_dets: Optional[list[Detection]] = None

    @classmethod
    def from_config(
        cls, cfg: OutputConfig, *, min_iou: Optional[float] = None, stable_frames: int = 1
    ) -> OutputPolicy:
        # "objects" mode does not use this policy (core.objects does); it must not make it every_frame
        mode: Literal["event", "every_frame"] = "every_frame" if cfg.mode == "every_frame" else "event"
        return cls(mode, cfg.heartbeat_s, min_iou=min_iou, stable_frames=stable_frames)

    def decide(self, now: float, detections: Sequence[Detection]) -> Decision:
        """Feed one result (``now``: monotonic seconds); the caller emits when ``emit`` is True."""
        dets = list(detections)
        if self.mode == "every_frame":
            return self._emit(now, dets, "every_frame")
        if self._emitted is None or self._last_emit is None:
            return self._emit(now, dets, "first")
        if same_detections(self._emitted, dets, self.min_iou):
            self._pending, self._pending_dets = 0, None
        else:
            if self._pending_dets is not None and same_detections(self._pending_dets, dets, self.min_iou):
                self._pending += 1
            else:
                self._pending, self._pending_dets = 1, dets
            if self._pending >= self.stable_frames:
                return self._emit(now, dets, "change")
        if now - self._last_emit >= self.heartbeat_s:
            return self._emit(now, dets, "heartbeat")
        return Decision(False)

    def _emit(self, now: float, dets: list[Detection], reason: Reason) -> Decision:
        self._emitted = dets
        self._last_emit = now
        self._pending, self._pending_dets = 0, None
        return Decision(True, reason)

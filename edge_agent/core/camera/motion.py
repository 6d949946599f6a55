"""Motion gating (pure): run the detector only when something in the picture moved.

A camera watching a quiet yard gives the same picture for hours; running a detector on each frame
is 100 % CPU, heat and power for nothing (Frigate's central idea). The check here costs well under
a millisecond: downscale to ``width`` pixels wide, grey, blur, compare with a running-average
background, threshold, then the largest connected changed region (outside the masks) must cover
``min_area`` of the frame. The gate still lets a frame through every ``max_idle_s`` (a heartbeat,
so a parked car is still reported and a broken gate cannot blind the device) and for
``frames_after`` frames after motion stops (so the departure of an object is seen).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Optional, Tuple

import cv2
import numpy as np
import numpy.typing as npt

from edge_agent.core.config.schema import MotionConfig

Point = Tuple[float, float]
GateReason = Literal["first", "motion", "after_motion", "heartbeat"]


_CFG = MotionConfig()


@dataclass(frozen=True)
class MotionParams:
    """``threshold``: grey-level change (0-255) that counts a pixel as changed. ``min_area``: the
    largest changed region, as a fraction of the analysed frame, that counts as motion. ``masks``:
    polygons in frame fractions (0..1, x then y) whose pixels are ignored (a swaying tree, a clock).
    ``alpha``: how fast the background follows slow changes (light, shadows), per analysed frame.
    ``lightning_threshold``: when more than this fraction of the frame changes at once (lights
    switched on, the camera's IR filter flipping at dusk, lightning), it is a new scene, not an
    object: the background is relearned from this frame at once instead of reporting motion for
    the ~1/alpha frames it would take to adapt (Frigate's option of the same name; 1 = never)."""

    threshold: int = _CFG.threshold  # the defaults are [motion]'s (core/config/scene.py)
    min_area: float = _CFG.min_area
    width: int = _CFG.width
    alpha: float = _CFG.alpha
    lightning_threshold: float = _CFG.lightning_threshold
    masks: tuple[tuple[Point, ...], ...] = ()


@dataclass(frozen=True)
class MotionResult:
    motion: bool
    area: float  # largest changed region, fraction of the analysed frame
    changed: float  # all changed pixels, fraction of the analysed frame


class MotionDetector:
    """Background-subtraction motion detector on a downscaled grey frame. Not thread-safe."""

    def __init__(self, params: Optional[MotionParams] = None) -> None:
        self.p = params or MotionParams()
        self._bg: Optional[npt.NDArray[np.float32]] = None
        self._keep: Optional[npt.NDArray[np.uint8]] = None
        self._size: Optional[tuple[int, int]] = None

    def small_grey(self, image_bgr: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
        """Downscale first (INTER_AREA averages sensor noise away), then grey on the small image."""
        h, w = image_bgr.shape[:2]
        sw = min(self.p.width, w)
        sh = max(1, int(round(h * sw / w)))
        small = cv2.resize(image_bgr, (sw, sh), interpolation=cv2.INTER_AREA)
        grey = small if small.ndim == 2 else cv2.cvtColor(small, cv2.COLOR_BGR2GRAY)
        out: npt.NDArray[np.uint8] = cv2.GaussianBlur(grey, (5, 5), 0)
        return out

    def update(self, image_bgr: npt.NDArray[np.uint8]) -> MotionResult:
        """Compare ``image_bgr`` with the background, then fold it into the background."""
        grey = self.small_grey(image_bgr)
        size = (grey.shape[1], grey.shape[0])
        if self._bg is None or self._size != size:
            # first frame (or the stream changed resolution): nothing to compare with yet
            self._bg = grey.astype(np.float32)
            self._size = size
            self._keep = mask_image(self.p.masks, size)
            return MotionResult(False, 0.0, 0.0)
        diff = cv2.absdiff(grey, cv2.convertScaleAbs(self._bg))
        _, binary = cv2.threshold(diff, self.p.threshold, 255, cv2.THRESH_BINARY)
        if self._keep is not None:
            binary = cv2.bitwise_and(binary, self._keep)
        # close small gaps so one moving person is one region, not a dozen specks
        binary = cv2.dilate(binary, None, iterations=1)
        total = float(size[0] * size[1])
        changed = float(cv2.countNonZero(binary)) / total
        if changed > self.p.lightning_threshold:
            # one detector run on the new scene (it may hide a real object), then quiet again
            self._bg = grey.astype(np.float32)
            return MotionResult(True, changed, changed)
        area = 0.0
        if changed >= self.p.min_area:
            n, _, stats, _ = cv2.connectedComponentsWithStats(binary, connectivity=8)
            if n > 1:
                area = float(stats[1:, cv2.CC_STAT_AREA].max()) / total
        cv2.accumulateWeighted(grey, self._bg, self.p.alpha)
        return MotionResult(area >= self.p.min_area, area, changed)


def mask_image(masks: Sequence[Sequence[Point]], size_wh: tuple[int, int]) -> Optional[npt.NDArray[np.uint8]]:
    """255 where motion counts, 0 inside any mask polygon (None when there are no masks)."""
    if not masks:
        return None
    w, h = size_wh
    keep = np.full((h, w), 255, np.uint8)
    for poly in masks:
        pts = np.asarray([[round(x * (w - 1)), round(y * (h - 1))] for x, y in poly], np.int32)
        cv2.fillPoly(keep, [pts], 0)
    return keep


@dataclass(frozen=True)
class GateDecision:
    run: bool
    reason: Optional[GateReason] = None


class MotionGate:
    """Decides per frame whether the detector runs: on motion, ``frames_after`` frames after it,
    and at least every ``max_idle_s`` (``now`` is monotonic seconds)."""

    def __init__(self, max_idle_s: float = _CFG.max_idle_s, frames_after: int = _CFG.frames_after) -> None:
        if max_idle_s <= 0:
            raise ValueError(f"max_idle_s must be > 0, got {max_idle_s}")
        if frames_after < 0:
            raise ValueError(f"frames_after must be >= 0, got {frames_after}")
        self.max_idle_s = max_idle_s
        self.frames_after = frames_after
        self._last_run: Optional[float] = None
        self._after = 0
        self.skipped = 0
        self.runs = 0

    def decide(self, now: float, motion: bool) -> GateDecision:
        if self._last_run is None:
            return self._run(now, "first")
        if motion:
            self._after = self.frames_after
            return self._run(now, "motion")
        if self._after > 0:
            self._after -= 1
            return self._run(now, "after_motion")
        if now - self._last_run >= self.max_idle_s:
            return self._run(now, "heartbeat")
        self.skipped += 1
        return GateDecision(False)

    def _run(self, now: float, reason: GateReason) -> GateDecision:
        self._last_run = now
        self.runs += 1
        return GateDecision(True, reason)


def params_from_config(cfg: MotionConfig) -> MotionParams:
    return MotionParams(
        threshold=cfg.threshold,
        min_area=cfg.min_area,
        width=cfg.width,
        alpha=cfg.alpha,
        lightning_threshold=cfg.lightning_threshold,
        masks=tuple(tuple((float(x), float(y)) for x, y in poly) for poly in cfg.masks),
    )


class MotionFilter:
    """Detector + gate for one stream: ``check(image, now)`` says whether inference runs."""

    def __init__(self, cfg: MotionConfig) -> None:
        self.detector = MotionDetector(params_from_config(cfg))
        self.gate = MotionGate(cfg.max_idle_s, cfg.frames_after)
        self.last: Optional[GateDecision] = None

    def check(self, image_bgr: npt.NDArray[np.uint8], now: float) -> bool:
        self.last = self.gate.decide(now, self.detector.update(image_bgr).motion)
        return self.last.run

    def stats(self) -> dict[str, int]:
        return {"inferred": self.gate.runs, "skipped": self.gate.skipped}

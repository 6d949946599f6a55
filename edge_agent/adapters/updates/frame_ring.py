"""A small ring of recent camera frames on disk: what the update gate compares models on.

Off by default (``model_update.ring_frames = 0``): frames of a site are personal data in many
places. When on, at most ``ring_frames`` JPEGs, none older than ``ring_max_age_h``, one every
``ring_interval_s``. No fsync: losing the newest frame in a power cut costs nothing.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Optional

import cv2
import numpy as np
import numpy.typing as npt

from edge_agent.adapters.updates.package_file import PRIVATE_DIR_MODE, make_dir

log = logging.getLogger(__name__)


class FrameRing:
    def __init__(self, directory: Path, max_frames: int, interval_s: float, max_age_h: float) -> None:
        self.dir = directory
        self.max_frames = max_frames
        self.interval_s = interval_s
        self.max_age_s = max_age_h * 3600.0
        self._last: Optional[float] = None
        self._warned = False

    @property
    def enabled(self) -> bool:
        return self.max_frames > 0

    def offer(self, image: npt.NDArray[np.uint8], now: Optional[float] = None) -> bool:
        """Keep ``image`` if a slot is due; called from the loop, costs one JPEG encode when due."""
        if not self.enabled:
            return False
        now = time.time() if now is None else now
        if self._last is not None and now - self._last < self.interval_s:
            return False
        self._last = now
        try:
            if not self.dir.is_dir():  # frames of a site can be personal data: 0700 whatever the umask
                make_dir(self.dir, PRIVATE_DIR_MODE)
            ok, buf = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 90])
            if not ok:
                return False
            name = self.dir / f"{int(now * 1000):015d}.jpg"
            tmp = name.with_suffix(".tmp")
            fd = os.open(str(tmp), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                os.fchmod(f.fileno(), 0o600)
                f.write(buf.tobytes())
            os.replace(tmp, name)
            self.prune(now)
        except OSError as exc:
            if not self._warned:  # a full disk must not flood the journal from the frame loop
                log.warning("frame ring %s: %s", self.dir, exc)
                self._warned = True
            return False
        return True

    def files(self, now: Optional[float] = None) -> list[Path]:
        """Frames still within the bounds, oldest first."""
        if not self.dir.is_dir():
            return []
        now = time.time() if now is None else now
        out = []
        for p in sorted(self.dir.glob("*.jpg")):
            try:
                age = now - int(p.stem) / 1000.0
            except ValueError:
                continue
            if age <= self.max_age_s:
                out.append(p)
        return out[-self.max_frames :] if self.max_frames > 0 else []

    def prune(self, now: Optional[float] = None) -> None:
        keep = set(self.files(now))
        for p in self.dir.glob("*.jpg"):
            if p not in keep:
                p.unlink(missing_ok=True)

"""The broken-model guard: detectors that cannot produce scores are caught when they are loaded.

The commonest INT8 failure is a statically quantized detector whose output Concat (pixel boxes
0..640 and scores 0..1 in one tensor) got one scale: at scale 8 every score rounds to 0, the model
loads, runs and reports "0 detections" forever. Two checks, both at load:

* static: a graph output made by ``DequantizeLinear`` whose scale is coarser than
  ``MAX_SCORE_STEP`` cannot tell a 0.25 score from 0.30 (or from 0);
* probe: the best class score over a textured probe image is 0 (a float sigmoid is never exactly 0,
  so an all-zero score map means the scores are being destroyed somewhere).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from edge_agent.core.runtime.onnx_wire import WireError, output_dequant_scales

if TYPE_CHECKING:
    from edge_agent.inference.pipeline import Detector

log = logging.getLogger(__name__)

# coarser than this, scores in (0,1) have fewer than 20 levels: 0.25 vs 0.30 is one step or none
MAX_SCORE_STEP = 0.05
PROBE_ZERO = 1e-6
FIX = (
    "re-quantize the FP32 (or FP16/dynamic INT8) model with `edge-agent quantize MODEL --calib DIR`, "
    "which keeps the post-processing head float"
)


@dataclass(frozen=True)
class Problem:
    cause: str
    fix: str = FIX

    def line(self) -> str:
        return f"{self.cause}; fix: {self.fix}"


def probe_image(h: int = 480, w: int = 640, seed: int = 0) -> npt.NDArray[np.uint8]:
    """A deterministic image with texture, edges and filled shapes: something for every detector."""
    import cv2

    rng = np.random.default_rng(seed)
    img = np.asarray(cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (5, 5), 0), np.uint8)
    for i in range(8):
        x, y = int(rng.integers(0, w - 80)), int(rng.integers(0, h - 80))
        color = tuple(int(c) for c in rng.integers(0, 256, 3))
        if i % 2:
            cv2.rectangle(
                img, (x, y), (x + int(rng.integers(20, 160)), y + int(rng.integers(20, 160))), color, -1
            )
        else:
            cv2.circle(img, (x + 40, y + 40), int(rng.integers(10, 60)), color, -1)
    return img


def probe_max_score(detector: Detector) -> float:
    """Best score of any row on the probe image, whatever the threshold."""
    prep = detector.prepare(probe_image())
    raw = detector.model.run_single(prep.blob)[0]
    return float(detector.format.candidates(raw, 1.0, None).max_score)


def check_detector(detector: Detector) -> list[Problem]:
    """Reasons ``detector`` (an inference.pipeline.Detector) cannot produce useful scores; [] when fine."""
    problems: list[Problem] = []
    path = detector.model.path
    try:
        scales = output_dequant_scales(path.read_bytes())
    except (OSError, WireError):  # the session loaded it, so this is only an unreadable re-read
        scales = {}
    for out, scale in scales.items():
        # compared as the float32 the model stores: a scale written as 0.05 is 0.05000000075 there,
        # and "needs a step <= 0.05" must let it pass
        if np.float32(scale) > np.float32(MAX_SCORE_STEP):
            levels = int(1 / scale) if scale <= 1 else 0
            problems.append(
                Problem(
                    f"output '{out}' is INT8-quantized with scale {scale:g}: scores in (0,1) have "
                    f"{levels} representable level(s) (needs a step <= {MAX_SCORE_STEP})"
                )
            )
    best = probe_max_score(detector)
    if not best > PROBE_ZERO:
        problems.append(Problem(f"every class score is 0 on the probe image (best {best:g})"))
    return problems


def describe(path: str | Path, problems: list[Problem]) -> str:
    """One line: every cause, then each distinct fix once (the static check and the probe usually
    share theirs, which used to be printed twice)."""
    fixes = list(dict.fromkeys(p.fix for p in problems))
    causes = " and ".join(p.cause for p in problems)
    return f"{path}: cannot produce detection scores: {causes}; fix: " + "; or ".join(fixes)

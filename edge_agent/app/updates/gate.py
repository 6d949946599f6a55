"""The update gate: a candidate model runs beside the current one on the device's own frames.

The comparison is ``edge-agent validate``'s (:func:`edge_agent.inference.compare.validate_detector` /
``validate_classifier``) and the broken-model guard is the one every model load goes through
(:func:`edge_agent.inference.guard.check_detector`): one verdict, wherever a model is judged.
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from edge_agent.core.vision.defaults import CROP_PADDING
from edge_agent.core.vision.thresholds import Thresholds

if TYPE_CHECKING:
    from edge_agent.adapters.runtime.onnx_model import OnnxModel
    from edge_agent.adapters.runtime.planner import ProviderPlanner
    from edge_agent.inference.report import ValidationReport

MAX_CROPS = 200


@dataclass
class GateResult:
    passed: bool
    images: int
    source: str  # "ring" or "probe"
    seconds: float
    reasons: list[str] = field(default_factory=list)
    detector: dict[str, Any] = field(default_factory=dict)
    classifier: Optional[dict[str, Any]] = None
    candidate_max_score: Optional[float] = None

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "images": self.images,
            "source": self.source,
            "seconds": round(self.seconds, 3),
            "reasons": self.reasons,
            "candidate_max_score": self.candidate_max_score,
            "detector": self.detector,
            "classifier": self.classifier,
        }

    def summary(self) -> str:
        head = "passed" if self.passed else "REFUSED: " + "; ".join(self.reasons)
        return f"gate on {self.images} {self.source} images ({self.seconds:.1f}s): {head}"


def _compare_detector(ref: OnnxModel, cand: OnnxModel, files: list[Path], th: Thresholds) -> ValidationReport:
    from edge_agent.inference.compare import validate_detector

    return validate_detector(ref, cand, files, None, th)


def _compare_classifier(
    ref: OnnxModel, cand: OnnxModel, files: list[Path], root: Path, th: Thresholds
) -> ValidationReport:
    from edge_agent.inference.compare import validate_classifier

    return validate_classifier(ref, cand, files, root, th)


def _guard(model: OnnxModel) -> tuple[list[str], float]:
    """The load-time broken-model guard on the candidate, and its best score on the probe image."""
    from edge_agent.inference.guard import check_detector, probe_max_score
    from edge_agent.inference.pipeline import Detector

    det = Detector(model)
    return [p.cause for p in check_detector(det)], probe_max_score(det)


def _crops(ref: OnnxModel, files: list[Path], out: Path, padding: float, conf: float) -> list[Path]:
    import cv2

    from edge_agent.adapters.camera.images import read_image
    from edge_agent.inference.pipeline import Detector, DetectorParams, crop_boxes

    det = Detector(ref, DetectorParams(conf_threshold=conf))
    paths: list[Path] = []
    for f in files:
        img = read_image(f)
        for crop in crop_boxes(img, det.detect(img).detections.boxes, padding):
            if len(paths) >= MAX_CROPS:
                return paths
            p = out / f"crop{len(paths):04d}.png"
            cv2.imwrite(str(p), crop)
            paths.append(p)
    return paths


def _failed_checks(report: ValidationReport) -> list[str]:
    out = []
    for c in report.checks:
        if not c.passed:
            value = "n/a" if math.isnan(c.value) else f"{c.value:.4f}"
            out.append(f"{report.kind} {c.name} {value} (needs {c.op} {c.limit:g})")
    return out


def run_gate(
    current: dict[str, Path],
    candidate: dict[str, Path],
    files: list[Path],
    source: str,
    th: Thresholds,
    provider: Optional[str] = None,
    threads: Optional[int] = None,
    crop_padding: float = CROP_PADDING,
    planner: Optional[ProviderPlanner] = None,
) -> GateResult:
    """Compare ``candidate`` with ``current`` (role -> model path) on ``files``; ``planner``: the
    running agent's (its board and plans), else this host is detected per model."""
    from edge_agent.adapters.runtime.onnx_model import OnnxModel

    t0 = time.perf_counter()
    res = GateResult(False, len(files), source, 0.0)
    if not files:
        res.reasons.append(
            "no verdict: no gate images (the frame ring is empty or off, the package has no probe "
            "images, and the bundled samples fit only the demo detector): turn the ring on "
            "([model_update] ring_frames) or pack with --probe DIR"
        )
        res.seconds = time.perf_counter() - t0
        return res

    def load(p: Path, labels: Optional[Path]) -> OnnxModel:
        return OnnxModel(p, provider=provider, threads=threads, labels=labels, warmup=False, planner=planner)

    ref = load(current["detector"], current.get("detector_labels"))
    cand = load(candidate["detector"], candidate.get("detector_labels"))
    rep = _compare_detector(ref, cand, files, th)
    res.detector = rep.to_json()
    res.reasons += _failed_checks(rep)
    if rep.no_verdict:
        res.reasons.append(
            f"{rep.no_verdict} (turn the frame ring on, or ship probe images with the package)"
        )
    problems, res.candidate_max_score = _guard(cand)
    res.reasons += [f"broken-model guard: {p}" for p in problems]
    if "classifier" in current and "classifier" in candidate:
        rc = load(current["classifier"], current.get("classifier_labels"))
        cc = load(candidate["classifier"], candidate.get("classifier_labels"))
        with tempfile.TemporaryDirectory(prefix="edge-agent-gate-") as tmp:
            # the classifier sees crops in the agent, so it is compared on the crops the current
            # detector makes on the gate images (whole frames disagree on what nobody classifies)
            crops = _crops(ref, files, Path(tmp), crop_padding, th.conf)
            if crops:
                crep = _compare_classifier(rc, cc, crops, Path(tmp), th)
                res.classifier = crep.to_json()
                res.reasons += _failed_checks(crep)
    res.passed = not res.reasons
    res.seconds = time.perf_counter() - t0
    return res

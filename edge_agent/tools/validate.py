"""Compare a candidate model (e.g. INT8) with its reference (FP32) on real images; pass or fail.

Detectors are compared on the detections a user would see (conf 0.25): recall of the reference's
detections, IoU and confidence drift of the matched ones. With YOLO labels, both models are also
scored for mAP (conf 0.001, NMS IoU 0.7: Ultralytics YOLOv8 val settings). Classifiers are compared on
top-1/top-5 agreement and probability drift, plus accuracy with a class-per-folder layout. Raw
output differences are reported for both, but not gated: INT8 is *supposed* to differ a bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np
import numpy.typing as npt

from edge_agent.core.metrics import (
    Boxes,
    classifier_agreement,
    detection_agreement,
    mean_average_precision,
    raw_difference,
    top1_accuracy,
)
from edge_agent.errors import EdgeAgentError
from edge_agent.tools.thresholds import Thresholds


@dataclass
class Check:
    name: str
    value: float
    limit: float
    op: str  # ">=" or "<="

    @property
    def passed(self) -> bool:
        if math.isnan(self.value):
            return False
        return self.value >= self.limit if self.op == ">=" else self.value <= self.limit


@dataclass
class ValidationReport:
    kind: str
    reference: str
    candidate: str
    images: int
    metrics: dict[str, float] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        def num(v: float) -> Optional[float]:
            return None if math.isnan(v) else round(v, 6)

        return {
            "kind": self.kind,
            "reference": self.reference,
            "candidate": self.candidate,
            "images": self.images,
            "passed": self.passed,
            "metrics": {k: num(v) for k, v in self.metrics.items()},
            "checks": [
                {"name": c.name, "value": num(c.value), "limit": c.limit, "op": c.op, "passed": c.passed}
                for c in self.checks
            ],
            "notes": self.notes,
        }

    def format_table(self) -> str:
        lines = [
            f"validate {self.kind}: {Path(self.candidate).name} against {Path(self.reference).name} "
            f"on {self.images} images",
            f"  {'metric':<28} {'value':>10}",
        ]
        lines += [f"  {k:<28} {_fmt(v):>10}" for k, v in self.metrics.items()]
        lines.append(f"  {'check':<28} {'value':>10}  {'limit':>10}  result")
        for c in self.checks:
            result = "ok" if c.passed else "FAIL"
            lines.append(f"  {c.name:<28} {_fmt(c.value):>10}  {c.op} {c.limit:<7g}  {result}")
        lines += [f"  note: {n}" for n in self.notes]
        lines.append(
            "PASS" if self.passed else "FAIL: the candidate model does not hold the reference's accuracy"
        )
        return "\n".join(lines)


def _fmt(v: float) -> str:
    if math.isnan(v):
        return "n/a"
    return str(int(v)) if float(v).is_integer() and abs(v) >= 1 else f"{v:.4f}"


def read_yolo_labels(path: Path, width: int, height: int) -> Boxes:
    """``cls cx cy w h`` per line, normalised to the image -> pixel xyxy. Missing file = no objects."""
    if not path.is_file():
        return Boxes.make(np.zeros((0, 4)), np.zeros(0))
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) < 5:
            raise EdgeAgentError(f"{path}:{n}: expected 'cls cx cy w h', got {line.strip()!r}")
        try:
            c, cx, cy, w, h = int(parts[0]), *(float(v) for v in parts[1:5])
        except ValueError:
            raise EdgeAgentError(f"{path}:{n}: not numbers: {line.strip()!r}") from None
        rows.append(
            (c, (cx - w / 2) * width, (cy - h / 2) * height, (cx + w / 2) * width, (cy + h / 2) * height)
        )
    arr = np.asarray(rows, np.float64).reshape(-1, 5)
    return Boxes.make(arr[:, 1:], arr[:, 0].astype(np.int64))


def _detect_raw(model: Any, img: npt.NDArray[np.uint8]) -> tuple[npt.NDArray[np.generic], Any]:
    from edge_agent.core.preprocess import preprocess_detector

    blob, lb = preprocess_detector(img, model.input_hw(), model.input.dtype)
    return model.run_single(blob)[0], lb


def _boxes(raw: npt.NDArray[np.generic], lb: Any, conf: float, iou: float) -> Boxes:
    from edge_agent.core.yolo import decode

    d = decode(raw, lb, conf, iou, max_det=300)
    return Boxes(d.boxes, d.scores, d.class_ids)


def _split_raw(raw: npt.NDArray[np.generic]) -> npt.NDArray[np.float32]:
    """[1, 4+nc, N] or [1, N, 4+nc] -> float32 [4+nc, N]."""
    from edge_agent.core.yolo import detector_layout

    out: npt.NDArray[np.float32] = np.asarray(raw, np.float32)[0]
    return out.T if detector_layout((1, *out.shape)) == "channels_last" else out


def detector_raw_diffs(
    r_raw: npt.NDArray[np.generic], c_raw: npt.NDArray[np.generic], conf: float
) -> tuple[float, float]:
    """(max |delta score| over all anchors, max |delta box px| over anchors the reference is confident
    about). The whole-tensor max is dominated by boxes of empty anchors, which nobody sees."""
    r, c = _split_raw(r_raw), _split_raw(c_raw)
    score = float(np.max(np.abs(r[4:] - c[4:]))) if r.shape[0] > 4 else 0.0
    sel = r[4:].max(axis=0) >= conf if r.shape[0] > 4 else np.zeros(r.shape[1], bool)
    box = float(np.max(np.abs(r[:4, sel] - c[:4, sel]))) if sel.any() else float("nan")
    return score, box


def validate_detector(
    ref: Any, cand: Any, files: list[Path], labels_dir: Optional[Path], th: Thresholds, progress: Any = None
) -> ValidationReport:
    from edge_agent.adapters.images import read_image

    rep = ValidationReport("detector", str(ref.path), str(cand.path), len(files))
    refs, cands, refs_lo, cands_lo, ref_eval, cand_eval, gts = [], [], [], [], [], [], []
    max_abs = max_rel = max_score = 0.0
    max_box = float("nan")
    for f in files:
        img = read_image(f)
        r_raw, lb = _detect_raw(ref, img)
        c_raw, _ = _detect_raw(cand, img)
        a, r = raw_difference(r_raw, c_raw)
        max_abs, max_rel = max(max_abs, a), max(max_rel, r)
        sd, bd = detector_raw_diffs(r_raw, c_raw, th.conf)
        max_score = max(max_score, sd)
        if not math.isnan(bd):
            max_box = bd if math.isnan(max_box) else max(max_box, bd)
        refs.append(_boxes(r_raw, lb, th.conf, 0.45))
        cands.append(_boxes(c_raw, lb, th.conf, 0.45))
        lo = max(th.conf - th.conf_margin, 0.0)
        refs_lo.append(_boxes(r_raw, lb, lo, 0.45))
        cands_lo.append(_boxes(c_raw, lb, lo, 0.45))
        if labels_dir is not None:
            ref_eval.append(_boxes(r_raw, lb, th.eval_conf, th.eval_iou))
            cand_eval.append(_boxes(c_raw, lb, th.eval_conf, th.eval_iou))
            gts.append(read_yolo_labels(labels_dir / f"{f.stem}.txt", img.shape[1], img.shape[0]))
        if progress:
            progress.update()
    # a reference detection counts as kept when the candidate has it at conf - conf_margin: a score
    # moving 0.26 -> 0.24 is quantization noise (the conf-delta check watches drift), not a lost object
    ag = detection_agreement(refs, cands_lo)
    back = detection_agreement(cands, refs_lo)
    rep.metrics.update(
        {
            "reference_detections": float(ag.ref_count),
            "candidate_detections": float(back.ref_count),
            "matched": float(ag.matched),
            "recall_of_reference": ag.recall,
            "precision_vs_reference": back.recall,
            "mean_iou": ag.mean_iou,
            "mean_abs_conf_delta": ag.mean_abs_conf_delta,
            "raw_max_abs_diff": max_abs,
            "raw_max_rel_diff": max_rel,
            "raw_max_score_diff": max_score,
            "raw_max_box_diff_px_confident": max_box,
        }
    )
    if ag.ref_count == 0:
        rep.notes.append(f"the reference found no detections at conf {th.conf}: nothing to compare against")
    rep.checks += [
        Check("recall_of_reference", ag.recall, th.min_recall, ">="),
        Check("mean_iou", ag.mean_iou, th.min_mean_iou, ">="),
        Check("mean_abs_conf_delta", ag.mean_abs_conf_delta, th.max_conf_delta, "<="),
    ]
    if labels_dir is not None:
        mr = mean_average_precision(ref_eval, gts)
        mc = mean_average_precision(cand_eval, gts)
        rep.metrics.update(
            {
                "map50_reference": mr["map50"],
                "map50_candidate": mc["map50"],
                "map50_95_reference": mr["map50_95"],
                "map50_95_candidate": mc["map50_95"],
            }
        )
        rep.checks += [
            Check("map50_drop", mr["map50"] - mc["map50"], th.max_map_drop, "<="),
            Check("map50_95_drop", mr["map50_95"] - mc["map50_95"], th.max_map_drop, "<="),
        ]
    return rep


def class_folder_labels(files: list[Path], root: Path, names: dict[int, str]) -> Optional[list[int]]:
    """Class ids from ``root/<class name>/img`` paths; None when the layout isn't class-per-folder."""
    by_name = {v: k for k, v in names.items()}
    ids = []
    for f in files:
        rel = f.relative_to(root).parts
        if len(rel) < 2 or rel[0] not in by_name:
            return None
        ids.append(by_name[rel[0]])
    return ids


def validate_classifier(
    ref: Any, cand: Any, files: list[Path], root: Path, th: Thresholds, progress: Any = None
) -> ValidationReport:
    from edge_agent.adapters.images import read_image
    from edge_agent.core.classify import to_probabilities
    from edge_agent.core.preprocess import preprocess_classifier
    from edge_agent.inference.pipeline import classifier_preprocess_for

    rep = ValidationReport("classifier", str(ref.path), str(cand.path), len(files))
    pp_r, pp_c = classifier_preprocess_for(ref), classifier_preprocess_for(cand)
    rp, cp = [], []
    max_abs = max_rel = 0.0
    for f in files:
        img = read_image(f)
        r_raw = ref.run_single(preprocess_classifier([img], pp_r, ref.input.dtype))[0]
        c_raw = cand.run_single(preprocess_classifier([img], pp_c, cand.input.dtype))[0]
        a, r = raw_difference(r_raw, c_raw)
        max_abs, max_rel = max(max_abs, a), max(max_rel, r)
        rp.append(to_probabilities(np.asarray(r_raw))[0])
        cp.append(to_probabilities(np.asarray(c_raw))[0])
        if progress:
            progress.update()
    ag = classifier_agreement(np.stack(rp), np.stack(cp))
    rep.metrics.update(
        {
            "top1_agreement": ag.top1_agreement,
            "top5_overlap": ag.top5_overlap,
            "max_abs_prob_delta": ag.max_abs_prob_delta,
            "raw_max_abs_diff": max_abs,
            "raw_max_rel_diff": max_rel,
        }
    )
    rep.checks.append(Check("top1_agreement", ag.top1_agreement, th.min_top1_agreement, ">="))
    labels = class_folder_labels(files, root, ref.info.names)
    if labels is not None:
        acc_r, acc_c = top1_accuracy(np.stack(rp), labels), top1_accuracy(np.stack(cp), labels)
        rep.metrics.update({"top1_accuracy_reference": acc_r, "top1_accuracy_candidate": acc_c})
        rep.checks.append(Check("top1_accuracy_drop", acc_r - acc_c, th.max_top1_drop, "<="))
    else:
        rep.notes.append("no class-per-folder layout under the images dir: accuracy not measured")
    return rep


def validate_models(
    ref_path: Path,
    cand_path: Path,
    files: list[Path],
    images_root: Path,
    labels_dir: Optional[Path] = None,
    thresholds: Optional[Thresholds] = None,
    provider: Optional[str] = None,
    threads: Optional[int] = None,
    show_progress: bool = True,
) -> ValidationReport:
    """Load both models and compare them on ``files``; which comparison depends on the model kind."""
    from edge_agent.adapters.runtime import OnnxModel
    from edge_agent.tools.progress import Progress
    from edge_agent.tools.quantize import model_kind

    th = thresholds or Thresholds()
    ref = OnnxModel(ref_path, provider=provider, threads=threads, warmup=False)
    cand = OnnxModel(cand_path, provider=provider, threads=threads, warmup=False)
    kind, ckind = model_kind(ref), model_kind(cand)
    if kind != ckind:
        raise EdgeAgentError(f"{cand_path} is a {ckind} model but {ref_path} is a {kind} model")
    bar = Progress(len(files), "validating") if show_progress else None
    try:
        if kind == "detect":
            return validate_detector(ref, cand, files, labels_dir, th, bar)
        return validate_classifier(ref, cand, files, images_root, th, bar)
    finally:
        if bar:
            bar.close()

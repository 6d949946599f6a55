"""Compare a candidate model (e.g. INT8) with its reference (FP32) on real images; pass or fail.

Shared by ``edge-agent validate`` (:mod:`edge_agent.tools.validate`) and the model-update gate
(:mod:`edge_agent.app.updates.gate`): one verdict wherever a model is judged, and the running
service never imports ``tools``.

Detectors are compared on the detections a user would see (conf 0.25): recall of the reference's
detections, IoU and confidence drift of the matched ones. With YOLO labels, both models are also
scored for mAP (conf 0.001, NMS IoU 0.7: Ultralytics YOLOv8 val settings). Classifiers are compared on
top-1/top-5 agreement and probability drift, plus accuracy with a class-per-folder layout. Raw
output differences are reported for both, but not gated: INT8 is *supposed* to differ a bit.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Protocol

import numpy as np
import numpy.typing as npt

from edge_agent.core.vision.accuracy import (
    Boxes,
    classifier_agreement,
    detection_agreement,
    mean_average_precision,
    raw_difference,
    top1_accuracy,
)
from edge_agent.core.vision.thresholds import Thresholds
from edge_agent.errors import EdgeAgentError
from edge_agent.inference.report import Check, ValidationReport

if TYPE_CHECKING:
    from edge_agent.adapters.runtime.onnx_model import OnnxModel
    from edge_agent.core.vision.preprocess import Letterbox
    from edge_agent.core.vision.yolo import Detections
    from edge_agent.inference.pipeline import Detector


class Ticker(Protocol):
    """A progress bar (tools.progress.Progress): one ``update()`` per image compared."""

    def update(self, n: int = 1) -> None: ...


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


def _split_raw(raw: npt.NDArray[np.generic], transposed: Optional[bool] = None) -> npt.NDArray[np.float32]:
    """A YOLO output [1, 4+nc, N] or [1, N, 4+nc] as float32 [4+nc, N] (layout from the format
    registry, for an unknown input size, when None)."""
    from edge_agent.core.vision.formats import resolve_format

    out: npt.NDArray[np.float32] = np.asarray(raw, np.float32)[0]
    if transposed is None:
        transposed = resolve_format((1, *out.shape), 0, {}, (0, 0), "yolov8").transposed
    return out if transposed else out.T


def detector_raw_diffs(
    r_raw: npt.NDArray[np.generic],
    c_raw: npt.NDArray[np.generic],
    conf: float,
    transposed: Optional[bool] = None,
) -> tuple[float, float]:
    """(max |delta score| over all anchors, max |delta box px| over anchors the reference is confident
    about). The whole-tensor max is dominated by boxes of empty anchors, which nobody sees."""
    r, c = _split_raw(r_raw, transposed), _split_raw(c_raw, transposed)
    score = float(np.max(np.abs(r[4:] - c[4:]))) if r.shape[0] > 4 else 0.0
    sel = r[4:].max(axis=0) > conf if r.shape[0] > 4 else np.zeros(r.shape[1], bool)
    box = float(np.max(np.abs(r[:4, sel] - c[:4, sel]))) if sel.any() else float("nan")
    return score, box


def class_map(ref_names: dict[int, str], cand_names: dict[int, str]) -> tuple[dict[int, int], list[str]]:
    """Candidate class id -> reference class id, by name; notes on what does not match."""
    by_name = {v: k for k, v in ref_names.items()}
    mapping = {ci: by_name[n] for ci, n in cand_names.items() if n in by_name}
    notes = []
    if len(ref_names) != len(cand_names):
        notes.append(
            f"class count differs: reference {len(ref_names)}, candidate {len(cand_names)}; compared on the "
            f"{len(mapping)} class name(s) both have"
        )
    elif any(ref_names.get(ci) != n for ci, n in cand_names.items()) and mapping:
        notes.append("class ids differ between the models: matched by name")
    return mapping, notes


def _remap(b: Boxes, mapping: dict[int, int], keep_ref: Optional[set[int]] = None) -> Boxes:
    """Candidate boxes in reference class ids (unmatched classes dropped); or reference boxes restricted."""
    if keep_ref is not None:
        sel = np.isin(b.class_ids, np.asarray(sorted(keep_ref), np.int64))
        return Boxes(b.xyxy[sel], b.scores[sel], b.class_ids[sel])
    ids = np.asarray([mapping.get(int(c), -1) for c in b.class_ids], np.int64)
    sel = ids >= 0
    return Boxes(b.xyxy[sel], b.scores[sel], ids[sel])


def validate_detector(
    ref: OnnxModel,
    cand: OnnxModel,
    files: list[Path],
    labels_dir: Optional[Path],
    th: Thresholds,
    progress: Optional[Ticker] = None,
) -> ValidationReport:
    """Compare two detectors of any formats, input sizes or class lists on the detections they give."""
    from edge_agent.adapters.camera.images import read_image
    from edge_agent.core.vision.defaults import IOU_THRESHOLD
    from edge_agent.inference.pipeline import Detector, DetectorParams

    rep = ValidationReport("detector", str(ref.path), str(cand.path), len(files))
    lo = max(th.conf - th.conf_margin, 0.0)
    dets = {
        "ref": Detector(ref, DetectorParams(th.conf, IOU_THRESHOLD)),
        "cand": Detector(cand, DetectorParams(th.conf, IOU_THRESHOLD)),
    }
    mapping, notes = class_map(dets["ref"].names, dets["cand"].names)
    rep.notes += notes
    if not mapping:
        raise EdgeAgentError(
            f"{cand.path} and {ref.path} have no class names in common "
            f"({len(dets['cand'].names)} vs {len(dets['ref'].names)} classes): nothing to compare"
        )
    common = set(mapping.values())
    rf, cf = dets["ref"].format, dets["cand"].format
    same_raw = ref.info.outputs[0].shape == cand.info.outputs[0].shape and rf.fmt is cf.fmt and rf.fmt.nms
    if not same_raw:
        rep.notes.append(
            f"raw outputs differ ({rf.fmt.name} {list(ref.info.outputs[0].shape)} vs {cf.fmt.name} "
            f"{list(cand.info.outputs[0].shape)}): compared on detections only"
        )
    refs, cands, refs_lo, cands_lo, ref_eval, cand_eval, gts = [], [], [], [], [], [], []
    max_abs = max_rel = max_score = 0.0
    max_box = float("nan")
    found_labels = 0
    for f in files:
        img = read_image(f)
        out = {}
        for who, det in dets.items():
            prep = det.prepare(img)
            o = det.detect_prepared(prep, keep_raw=True)
            assert o.raw is not None  # keep_raw=True: always kept
            # the same raw output at the lower thresholds: conf - margin, and Ultralytics val for mAP
            low = _decode(det, o.raw, prep.letterbox, lo, IOU_THRESHOLD)
            ev = None
            if labels_dir is not None:
                ev = _decode(det, o.raw, prep.letterbox, th.eval_conf, th.eval_iou)
            out[who] = (o, low, ev)
        (ro, r_lo, r_ev), (co, c_lo, c_ev) = out["ref"], out["cand"]
        if same_raw and ro.raw is not None and co.raw is not None:
            a, r = raw_difference(ro.raw, co.raw)
            max_abs, max_rel = max(max_abs, a), max(max_rel, r)
            sd, bd = detector_raw_diffs(ro.raw, co.raw, th.conf, rf.transposed)
            max_score = max(max_score, sd)
            if not math.isnan(bd):
                max_box = bd if math.isnan(max_box) else max(max_box, bd)
        refs.append(_remap(_as_boxes(ro.detections), mapping, common))
        refs_lo.append(_remap(r_lo, mapping, common))
        cands.append(_remap(_as_boxes(co.detections), mapping))
        cands_lo.append(_remap(c_lo, mapping))
        if labels_dir is not None and r_ev is not None and c_ev is not None:
            label_file = labels_dir / f"{f.stem}.txt"
            found_labels += label_file.is_file()
            ref_eval.append(_remap(r_ev, mapping, common))
            cand_eval.append(_remap(c_ev, mapping))
            gts.append(_remap(read_yolo_labels(label_file, img.shape[1], img.shape[0]), mapping, common))
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
        }
    )
    if same_raw:
        rep.metrics.update(
            {
                "raw_max_abs_diff": max_abs,
                "raw_max_rel_diff": max_rel,
                "raw_max_score_diff": max_score,
                "raw_max_box_diff_px_confident": max_box,
            }
        )
    if ag.ref_count == 0:
        rep.no_verdict = (
            f"the reference found no detections at conf {th.conf} on {len(files)} image(s): nothing to "
            "compare against (use images with objects the reference detects)"
        )
    else:
        rep.checks += [
            Check("recall_of_reference", ag.recall, th.min_recall, ">="),
            Check("mean_iou", ag.mean_iou, th.min_mean_iou, ">="),
            Check("mean_abs_conf_delta", ag.mean_abs_conf_delta, th.max_conf_delta, "<="),
        ]
    if labels_dir is not None and found_labels == 0:
        rep.notes.append(
            f"no labels found: none of the {len(files)} image(s) has a <stem>.txt in {labels_dir}; mAP not measured"
        )
    elif labels_dir is not None:
        if found_labels < len(files):
            rep.notes.append(f"labels for {found_labels} of {len(files)} image(s); the rest count as empty")
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


def _as_boxes(d: Detections) -> Boxes:
    return Boxes(d.boxes, d.scores, d.class_ids)


def _decode(det: Detector, raw: npt.NDArray[np.generic], lb: Letterbox, conf: float, iou: float) -> Boxes:
    """An output already computed, decoded again at other thresholds (no second inference)."""
    from edge_agent.core.vision.formats import decode_output

    return _as_boxes(decode_output(raw, det.format, lb, conf, iou, det.params.max_det)[0])


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
    ref: OnnxModel,
    cand: OnnxModel,
    files: list[Path],
    root: Path,
    th: Thresholds,
    progress: Optional[Ticker] = None,
) -> ValidationReport:
    """Top-1/top-5 agreement; each model gets its own preprocessing, classes are matched by name."""
    from edge_agent.adapters.camera.images import read_image
    from edge_agent.core.vision.classify import to_probabilities
    from edge_agent.core.vision.preprocess import preprocess_classifier
    from edge_agent.inference.pipeline import Classifier

    rep = ValidationReport("classifier", str(ref.path), str(cand.path), len(files))
    rc, cc = Classifier(ref), Classifier(cand)
    for c in (rc, cc):
        if c.choice.is_guess:
            rep.notes.append(f"{Path(c.model.path).name}: preprocessing guessed ({c.choice.describe()})")
    mapping, notes = class_map(ref.info.names, cand.info.names)
    rep.notes += notes
    if not mapping:
        raise EdgeAgentError(f"{cand.path} and {ref.path} have no class names in common: nothing to compare")
    same_classes = ref.info.names == cand.info.names
    nr = len(ref.info.names)
    cols = np.asarray(sorted(mapping), np.int64)
    rp, cp = [], []
    max_abs = max_rel = 0.0
    for f in files:
        img = read_image(f)
        r_raw = ref.run_single(preprocess_classifier([img], rc.pp, ref.input.dtype))[0]
        c_raw = cand.run_single(preprocess_classifier([img], cc.pp, cand.input.dtype))[0]
        if same_classes and np.shape(r_raw) == np.shape(c_raw):
            a, r = raw_difference(r_raw, c_raw)
            max_abs, max_rel = max(max_abs, a), max(max_rel, r)
        rp.append(to_probabilities(np.asarray(r_raw))[0])
        c_prob = to_probabilities(np.asarray(c_raw))[0]
        if not same_classes:  # candidate probabilities laid out in the reference's class ids
            aligned = np.zeros(nr, np.float32)
            aligned[[mapping[int(i)] for i in cols]] = c_prob[cols]
            c_prob = aligned
        cp.append(c_prob)
        if progress:
            progress.update()
    ag = classifier_agreement(np.stack(rp), np.stack(cp))
    rep.metrics.update(
        {
            "top1_agreement": ag.top1_agreement,
            "top5_overlap": ag.top5_overlap,
            "max_abs_prob_delta": ag.max_abs_prob_delta,
        }
    )
    if same_classes:
        rep.metrics.update({"raw_max_abs_diff": max_abs, "raw_max_rel_diff": max_rel})
    rep.checks.append(Check("top1_agreement", ag.top1_agreement, th.min_top1_agreement, ">="))
    labels = class_folder_labels(files, root, ref.info.names)
    if labels is not None:
        acc_r, acc_c = top1_accuracy(np.stack(rp), labels), top1_accuracy(np.stack(cp), labels)
        rep.metrics.update({"top1_accuracy_reference": acc_r, "top1_accuracy_candidate": acc_c})
        rep.checks.append(Check("top1_accuracy_drop", acc_r - acc_c, th.max_top1_drop, "<="))
    else:
        rep.notes.append(
            "no labels found (no class-per-folder layout under the images dir): accuracy not measured"
        )
    return rep

"""Plain numpy/onnxruntime evaluation of the demo models (held-out mAP and top-1).

Kept independent of edge_agent so the training script works before the project's own decode and
``validate`` tools exist; the numbers use COCO conventions (101-point AP, IoU 0.50:0.95).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import onnxruntime as ort
from synth import letterbox

IOU_THRESHOLDS = np.linspace(0.5, 0.95, 10)


def imread(path: Path) -> np.ndarray:
    img = cv2.imread(str(path))
    if img is None:
        raise OSError(f"cannot read image {path}")
    return np.asarray(img)


def session(path: Path) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def det_input(bgr: np.ndarray, size: int) -> tuple[np.ndarray, float, tuple[int, int]]:
    """Letterbox, BGR->RGB, HWC->NCHW float 0..1: the Ultralytics YOLOv8 preprocessing."""
    img, scale, pad = letterbox(bgr, size)
    x = np.ascontiguousarray(img[:, :, ::-1].transpose(2, 0, 1))[None].astype(np.float32) / 255.0
    return x, scale, pad


def nms(boxes: np.ndarray, scores: np.ndarray, iou: float) -> np.ndarray:
    order = scores.argsort()[::-1]
    keep = []
    while order.size:
        i = order[0]
        keep.append(i)
        rest = order[1:]
        overlap = iou_matrix(boxes[[i]], boxes[rest])[0]
        order = rest[overlap <= iou]
    return np.array(keep, np.int64)


def decode(
    output: np.ndarray,
    scale: float,
    pad: tuple[int, int],
    conf: float = 0.001,
    iou: float = 0.7,
    max_det: int = 100,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """YOLOv8 ``output0`` [1, 4+nc, N] -> boxes xyxy in original pixels, scores, class ids."""
    pred = output[0].T
    cls = pred[:, 4:].argmax(1)
    score = pred[:, 4:].max(1)
    ok = score > conf
    xywh, cls, score = pred[ok, :4], cls[ok], score[ok]
    xyxy = np.concatenate([xywh[:, :2] - xywh[:, 2:] / 2, xywh[:, :2] + xywh[:, 2:] / 2], 1)
    xyxy = (xyxy - np.array([pad[0], pad[1], pad[0], pad[1]], np.float32)) / scale
    keep = nms(xyxy + cls[:, None] * 4096.0, score, iou)[:max_det]  # class offset: per-class NMS
    return xyxy[keep], score[keep], cls[keep]


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    iw = np.clip(np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]), 0, None)
    ih = np.clip(np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]), 0, None)
    inter = iw * ih
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return np.asarray(inter / (area_a[:, None] + area_b[None] - inter + 1e-9))


def _ap(tp: np.ndarray, conf: np.ndarray, n_gt: int) -> float:
    if n_gt == 0:
        return float("nan")
    if tp.size == 0:
        return 0.0
    order = np.argsort(-conf, kind="stable")
    ctp = np.cumsum(tp[order])
    recall = ctp / n_gt
    precision = ctp / np.arange(1, len(ctp) + 1)
    precision = np.maximum.accumulate(precision[::-1])[::-1]
    grid = np.linspace(0, 1, 101)
    idx = np.searchsorted(recall, grid, side="left")
    return float(np.mean([precision[i] if i < len(precision) else 0.0 for i in idx]))


def detection_map(
    preds: list[tuple[np.ndarray, np.ndarray, np.ndarray]], gts: list[tuple[np.ndarray, np.ndarray]], nc: int
) -> dict[str, Any]:
    """COCO-style mAP50 and mAP50-95 over images: preds (boxes, scores, cls), gts (boxes, cls)."""
    tps: list[np.ndarray] = []
    confs: list[np.ndarray] = []
    classes: list[np.ndarray] = []
    gt_classes = np.concatenate([g[1] for g in gts]) if gts else np.zeros(0, np.int64)
    for (pb, ps, pc), (gb, gc) in zip(preds, gts):
        tp = np.zeros((len(pb), len(IOU_THRESHOLDS)), bool)
        if len(pb) and len(gb):
            ious = iou_matrix(pb, gb) * (pc[:, None] == gc[None, :])
            order = np.argsort(-ps, kind="stable")
            for t, thr in enumerate(IOU_THRESHOLDS):
                taken = np.zeros(len(gb), bool)
                for i in order:
                    cand = np.where(~taken & (ious[i] >= thr))[0]
                    if cand.size:
                        j = cand[ious[i, cand].argmax()]
                        taken[j] = True
                        tp[i, t] = True
        tps.append(tp)
        confs.append(ps)
        classes.append(pc)
    tp_all = np.concatenate(tps) if tps else np.zeros((0, 10), bool)
    conf_all = np.concatenate(confs) if confs else np.zeros(0)
    cls_all = np.concatenate(classes) if classes else np.zeros(0, np.int64)
    aps = np.full((nc, len(IOU_THRESHOLDS)), np.nan)
    for c in range(nc):
        sel = cls_all == c
        for t in range(len(IOU_THRESHOLDS)):
            aps[c, t] = _ap(tp_all[sel, t].astype(np.float64), conf_all[sel], int((gt_classes == c).sum()))
    return {
        "mAP50": round(float(np.nanmean(aps[:, 0])), 4),
        "mAP50-95": round(float(np.nanmean(aps)), 4),
        "per_class_AP50": [round(float(v), 4) for v in aps[:, 0]],
    }


def read_labels(path: Path, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """YOLO label file (``cls cx cy w h`` normalised) -> boxes xyxy px, class ids."""
    rows = np.loadtxt(path, ndmin=2) if path.stat().st_size else np.zeros((0, 5))
    cls = rows[:, 0].astype(np.int64)
    cx, cy, w, h = rows[:, 1] * width, rows[:, 2] * height, rows[:, 3] * width, rows[:, 4] * height
    return np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], 1).astype(np.float32), cls


def eval_detector(model: Path, heldout: Path) -> dict[str, Any]:
    sess = session(model)
    size = int(sess.get_inputs()[0].shape[2])
    nc = int(sess.get_outputs()[0].shape[1]) - 4
    preds, gts = [], []
    for img_path in sorted(heldout.glob("*.jpg")):
        bgr = imread(img_path)
        x, scale, pad = det_input(bgr, size)
        preds.append(decode(sess.run(None, {"images": x})[0], scale, pad))
        gts.append(read_labels(heldout / "labels" / f"{img_path.stem}.txt", bgr.shape[1], bgr.shape[0]))
    result = detection_map(preds, gts, nc)
    result["images"] = len(gts)
    result["objects"] = int(sum(len(g[1]) for g in gts))
    return result


def cls_input(crops: list[np.ndarray], meta: dict[str, object]) -> np.ndarray:
    """Classifier preprocessing exactly as the ``preprocess`` metadata describes (stretch, no crop)."""
    size = meta["size"]
    assert isinstance(size, list)
    mean = np.array(meta["mean"], np.float32)
    std = np.array(meta["std"], np.float32)
    batch = []
    for crop in crops:
        img = cv2.resize(crop, (int(size[1]), int(size[0])), interpolation=cv2.INTER_LINEAR)[:, :, ::-1]
        batch.append(((img.astype(np.float32) / 255.0 - mean) / std).transpose(2, 0, 1))
    return np.ascontiguousarray(np.stack(batch))


def eval_classifier(model: Path, heldout_cls: Path) -> dict[str, Any]:
    sess = session(model)
    meta = json.loads(sess.get_modelmeta().custom_metadata_map["preprocess"])
    names = ast.literal_eval(sess.get_modelmeta().custom_metadata_map["names"])
    correct = total = 0
    confusion = np.zeros((len(names), len(names)), np.int64)
    for idx, name in names.items():
        files = sorted((heldout_cls / name).glob("*.jpg"))
        for start in range(0, len(files), 64):
            crops = [imread(p) for p in files[start : start + 64]]
            pred = sess.run(None, {"images": cls_input(crops, meta)})[0].argmax(1)
            correct += int((pred == idx).sum())
            total += len(pred)
            np.add.at(confusion[idx], pred, 1)
    return {"top1": round(correct / max(total, 1), 4), "crops": total, "confusion": confusion.tolist()}

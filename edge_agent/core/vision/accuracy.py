"""Accuracy arithmetic for model validation: detection matching, COCO-style mAP, classifier agreement.

Pure numpy. mAP follows COCO: per class, predictions sorted by confidence are matched greedily to
the best-IoU unmatched ground truth (IoU >= t); precision is made monotone (the envelope) and
sampled at 101 recall points; classes without ground truth are left out of the mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from edge_agent.core.vision.yolo import box_iou

FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]
COCO_IOUS: tuple[float, ...] = tuple(round(0.5 + 0.05 * i, 2) for i in range(10))


@dataclass(frozen=True)
class Boxes:
    """Boxes of one image: xyxy pixels, scores (1.0 for ground truth) and class ids."""

    xyxy: FloatArray
    scores: FloatArray
    class_ids: IntArray

    @staticmethod
    def make(xyxy: object, class_ids: object, scores: object = None) -> Boxes:
        b = np.asarray(xyxy, np.float32).reshape(-1, 4)
        c = np.asarray(class_ids, np.int64).reshape(-1)
        s = np.ones(len(c), np.float32) if scores is None else np.asarray(scores, np.float32).reshape(-1)
        return Boxes(b, s, c)

    def __len__(self) -> int:
        return int(self.class_ids.shape[0])


def greedy_match(ref: Boxes, cand: Boxes, iou_threshold: float = 0.5) -> list[tuple[int, int, float]]:
    """Pairs (ref index, cand index, IoU): refs by descending confidence each take the
    best-IoU unmatched candidate of the same class with IoU >= ``iou_threshold``."""
    if len(ref) == 0 or len(cand) == 0:
        return []
    iou = box_iou(ref.xyxy, cand.xyxy)
    iou[ref.class_ids[:, None] != cand.class_ids[None, :]] = -1.0
    taken = np.zeros(len(cand), bool)
    pairs: list[tuple[int, int, float]] = []
    for i in np.argsort(-ref.scores, kind="stable"):
        row = np.where(taken, -1.0, iou[i])
        j = int(np.argmax(row))
        if row[j] >= iou_threshold:
            taken[j] = True
            pairs.append((int(i), j, float(row[j])))
    return pairs


@dataclass(frozen=True)
class AgreementStats:
    """How well a candidate model reproduces a reference model's detections."""

    ref_count: int
    cand_count: int
    matched: int
    mean_iou: float
    mean_abs_conf_delta: float

    @property
    def recall(self) -> float:
        return self.matched / self.ref_count if self.ref_count else float("nan")

    @property
    def precision(self) -> float:
        return self.matched / self.cand_count if self.cand_count else float("nan")


def detection_agreement(
    refs: Sequence[Boxes], cands: Sequence[Boxes], iou_threshold: float = 0.5
) -> AgreementStats:
    ious: list[float] = []
    deltas: list[float] = []
    for r, c in zip(refs, cands):
        for i, j, v in greedy_match(r, c, iou_threshold):
            ious.append(v)
            deltas.append(abs(float(r.scores[i]) - float(c.scores[j])))
    return AgreementStats(
        ref_count=sum(len(r) for r in refs),
        cand_count=sum(len(c) for c in cands),
        matched=len(ious),
        mean_iou=float(np.mean(ious)) if ious else float("nan"),
        mean_abs_conf_delta=float(np.mean(deltas)) if deltas else float("nan"),
    )


def average_precision(tp: npt.NDArray[np.bool_], scores: FloatArray, n_gt: int) -> float:
    """COCO 101-point interpolated AP of one class from per-prediction TP flags and scores."""
    if n_gt == 0:
        return float("nan")
    if tp.size == 0:
        return 0.0
    order = np.argsort(-scores, kind="stable")
    hits = tp[order].astype(np.float64)
    tpc = np.cumsum(hits)
    fpc = np.cumsum(1.0 - hits)
    recall = tpc / n_gt
    precision = tpc / np.maximum(tpc + fpc, np.finfo(np.float64).eps)
    envelope = np.maximum.accumulate(precision[::-1])[::-1]
    idx = np.searchsorted(recall, np.linspace(0.0, 1.0, 101), side="left")
    sampled = np.where(idx < len(envelope), envelope[np.minimum(idx, len(envelope) - 1)], 0.0)
    return float(np.mean(sampled))


def _tp_flags(pred: Boxes, gt: Boxes, cls: int, thresholds: Sequence[float]) -> npt.NDArray[np.bool_]:
    """[len(thresholds), n_pred_of_cls] COCO matching flags for one image and class."""
    p = np.flatnonzero(pred.class_ids == cls)
    g = np.flatnonzero(gt.class_ids == cls)
    flags = np.zeros((len(thresholds), p.size), bool)
    if p.size == 0 or g.size == 0:
        return flags
    p = p[np.argsort(-pred.scores[p], kind="stable")]
    iou = box_iou(pred.xyxy[p], gt.xyxy[g])
    for t, thr in enumerate(thresholds):
        used = np.zeros(g.size, bool)
        for k in range(p.size):
            row = np.where(used, -1.0, iou[k])
            j = int(np.argmax(row))
            if row[j] >= thr:
                used[j] = True
                flags[t, k] = True
    return flags  # columns in descending score order


def mean_average_precision(
    preds: Sequence[Boxes], gts: Sequence[Boxes], thresholds: Sequence[float] = COCO_IOUS
) -> dict[str, float]:
    """``map50`` and ``map50_95`` (means over classes that have ground truth) plus ``classes``."""
    classes = sorted({int(c) for g in gts for c in g.class_ids})
    if not classes:
        return {"map50": float("nan"), "map50_95": float("nan"), "classes": 0}
    ap = np.zeros((len(thresholds), len(classes)))
    for ci, cls in enumerate(classes):
        n_gt = sum(int(np.sum(g.class_ids == cls)) for g in gts)
        flags, scores = [], []
        for p, g in zip(preds, gts):
            sel = np.flatnonzero(p.class_ids == cls)
            flags.append(_tp_flags(p, g, cls, thresholds))
            scores.append(np.sort(p.scores[sel])[::-1])
        all_flags = np.concatenate(flags, axis=1) if flags else np.zeros((len(thresholds), 0), bool)
        all_scores = np.concatenate(scores).astype(np.float32) if scores else np.zeros(0, np.float32)
        for t in range(len(thresholds)):
            ap[t, ci] = average_precision(all_flags[t], all_scores, n_gt)
    i50 = next((i for i, t in enumerate(thresholds) if abs(t - 0.5) < 1e-9), 0)
    return {"map50": float(ap[i50].mean()), "map50_95": float(ap.mean()), "classes": len(classes)}


@dataclass(frozen=True)
class ClassifierAgreement:
    top1_agreement: float
    top5_overlap: float
    max_abs_prob_delta: float


def classifier_agreement(ref_probs: FloatArray, cand_probs: FloatArray) -> ClassifierAgreement:
    r = np.asarray(ref_probs, np.float32)
    c = np.asarray(cand_probs, np.float32)
    k = min(5, r.shape[1])
    rk = np.argsort(-r, axis=1, kind="stable")[:, :k]
    ck = np.argsort(-c, axis=1, kind="stable")[:, :k]
    overlap = [len(set(a.tolist()) & set(b.tolist())) / k for a, b in zip(rk, ck)]
    return ClassifierAgreement(
        top1_agreement=float(np.mean(rk[:, 0] == ck[:, 0])),
        top5_overlap=float(np.mean(overlap)),
        max_abs_prob_delta=float(np.max(np.abs(r - c))),
    )


def top1_accuracy(probs: FloatArray, labels: Sequence[int]) -> float:
    p = np.asarray(probs)
    return float(np.mean(np.argmax(p, axis=1) == np.asarray(labels))) if len(labels) else float("nan")


def raw_difference(ref: npt.NDArray[np.generic], cand: npt.NDArray[np.generic]) -> tuple[float, float]:
    """(max |ref - cand|, that divided by max |ref|): relative to the output's scale, because
    element-wise relative error explodes on the many near-zero scores of a detector."""
    r = np.asarray(ref, np.float64)
    c = np.asarray(cand, np.float64)
    diff = float(np.max(np.abs(r - c))) if r.size else 0.0
    scale = float(np.max(np.abs(r))) if r.size else 0.0
    return diff, diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))

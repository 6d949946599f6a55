"""Detection geometry shared by every output format: class-aware NMS, mapping boxes back through
the letterbox, IoU. Pure numpy/cv2.

The per-format decoding (the format registry) lives in :mod:`edge_agent.core.vision.formats`;
it applies the confidence threshold *before* any per-anchor work, so post-processing cost is
proportional to the candidates, not to the 8400 anchors.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

from edge_agent.core.vision.preprocess import Letterbox

FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Detections:
    """Detections of one image in original-image pixels, sorted by confidence (descending)."""

    boxes: FloatArray  # [K, 4] x1, y1, x2, y2
    scores: FloatArray  # [K]
    class_ids: IntArray  # [K]

    def __len__(self) -> int:
        return int(self.scores.shape[0])

    @staticmethod
    def empty() -> Detections:
        return Detections(np.zeros((0, 4), np.float32), np.zeros((0,), np.float32), np.zeros((0,), np.int64))


def nms(boxes_xyxy: FloatArray, scores: FloatArray, class_ids: IntArray, iou_threshold: float) -> IntArray:
    """Class-aware NMS; returns kept indices sorted by descending score.

    Boxes of different classes are shifted apart by a per-class offset larger than any
    coordinate, so one single-class NMS pass never suppresses across classes.
    """
    if scores.shape[0] == 0:
        return np.zeros((0,), np.int64)
    offset = float(np.max(np.abs(boxes_xyxy))) + 1.0
    shifted = boxes_xyxy + (class_ids.astype(np.float32) * offset)[:, None]
    x1, y1, x2, y2 = shifted[:, 0], shifted[:, 1], shifted[:, 2], shifted[:, 3]
    areas = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    order = np.argsort(-scores, kind="stable")
    keep: list[int] = []
    while order.size:
        i = int(order[0])
        keep.append(i)
        rest = order[1:]
        xx1 = np.maximum(x1[i], x1[rest])
        yy1 = np.maximum(y1[i], y1[rest])
        xx2 = np.minimum(x2[i], x2[rest])
        yy2 = np.minimum(y2[i], y2[rest])
        inter = np.clip(xx2 - xx1, 0, None) * np.clip(yy2 - yy1, 0, None)
        iou = inter / np.maximum(areas[i] + areas[rest] - inter, 1e-9)
        order = rest[iou <= iou_threshold]
    return np.asarray(keep, dtype=np.int64)


def nms_cv2(
    boxes_xyxy: FloatArray, scores: FloatArray, class_ids: IntArray, iou_threshold: float
) -> IntArray:
    """The same as :func:`nms` through OpenCV's batched NMS (faster with many candidates)."""
    if scores.shape[0] == 0:
        return np.zeros((0,), np.int64)
    xywh = np.concatenate([boxes_xyxy[:, :2], boxes_xyxy[:, 2:] - boxes_xyxy[:, :2]], axis=1)
    idx = cv2.dnn.NMSBoxesBatched(
        xywh.tolist(), scores.tolist(), class_ids.astype(np.int32).tolist(), 0.0, iou_threshold
    )
    kept = np.asarray(idx, dtype=np.int64).reshape(-1)
    return kept[np.argsort(-scores[kept], kind="stable")]


def scale_boxes(boxes_xyxy: FloatArray, lb: Letterbox) -> FloatArray:
    """Model-input pixels -> original-image pixels (undo pad, then per-axis scale), clipped."""
    out = np.empty((boxes_xyxy.shape[0], 4), dtype=np.float32)
    out[:, 0::2] = (boxes_xyxy[:, 0::2] - lb.pad_left) / lb.scale_x
    out[:, 1::2] = (boxes_xyxy[:, 1::2] - lb.pad_top) / lb.scale_y
    np.clip(out[:, 0::2], 0, lb.orig_w, out=out[:, 0::2])
    np.clip(out[:, 1::2], 0, lb.orig_h, out=out[:, 1::2])
    return out


def box_iou(a: FloatArray, b: FloatArray) -> FloatArray:
    """Pairwise IoU of two sets of xyxy boxes: [len(a), len(b)]."""
    a = np.asarray(a, np.float32).reshape(-1, 4)
    b = np.asarray(b, np.float32).reshape(-1, 4)
    tl = np.maximum(a[:, None, :2], b[None, :, :2])
    br = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.prod(np.clip(br - tl, 0, None), axis=2)
    area_a = np.prod(np.clip(a[:, 2:] - a[:, :2], 0, None), axis=1)
    area_b = np.prod(np.clip(b[:, 2:] - b[:, :2], 0, None), axis=1)
    union = area_a[:, None] + area_b[None, :] - inter
    iou: FloatArray = (inter / np.maximum(union, 1e-9)).astype(np.float32)
    return iou

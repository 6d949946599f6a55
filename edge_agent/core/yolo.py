"""YOLOv8/YOLO11 detector output decoding: threshold, class-aware NMS, map back to the image.

Pure numpy/cv2. The raw output is ``[1, 4+nc, N]`` (Ultralytics export) or its transpose
``[1, N, 4+nc]``; boxes are (cx, cy, w, h) in model-input pixels, class scores already sigmoid.
The confidence threshold is applied *before* any per-anchor work, so post-processing cost is
proportional to the candidates, not to the 8400 anchors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import cv2
import numpy as np
import numpy.typing as npt

from edge_agent.core.preprocess import Letterbox

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


def detector_layout(shape: Sequence[object], num_classes: Optional[int] = None) -> Optional[str]:
    """Say whether an output shape is ``"channels_first"`` ([1,4+nc,N]), ``"channels_last"`` or neither.

    With unknown ``num_classes`` the smaller of the two last dims is taken as 4+nc (N is in the
    thousands for any real input size, nc rarely above a few hundred).
    """
    if len(shape) != 3:
        return None
    a, b = shape[1], shape[2]
    if num_classes is not None:
        want = 4 + num_classes
        if a == want:
            return "channels_first"
        if b == want:
            return "channels_last"
        return None
    a_ok, b_ok = isinstance(a, int) and a >= 5, isinstance(b, int) and b >= 5
    if a_ok and (not b_ok or a < b):  # type: ignore[operator]
        return "channels_first"
    if b_ok and (not a_ok or b < a):  # type: ignore[operator]
        return "channels_last"
    return None


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


def decode(
    output: npt.NDArray[np.generic],
    letterbox: Letterbox,
    conf_threshold: float = 0.25,
    iou_threshold: float = 0.45,
    max_det: int = 300,
    classes: Optional[Sequence[int]] = None,
    max_candidates: int = 30000,
    num_classes: Optional[int] = None,
) -> Detections:
    """Raw detector output -> detections in original-image pixels, clipped to the image."""
    out = np.asarray(output)
    if out.ndim == 3:
        out = out[0]
    if out.ndim != 2:
        raise ValueError(f"detector output must be [1, 4+nc, N] or [1, N, 4+nc], got shape {output.shape}")
    layout = detector_layout((1, *out.shape), num_classes)
    if layout == "channels_last":
        out = out.T
    elif layout is None:
        raise ValueError(f"cannot tell boxes from classes in detector output of shape {output.shape}")
    if out.dtype != np.float32:
        out = out.astype(np.float32)
    cls_scores = out[4:]  # [nc, N]
    best = cls_scores.max(axis=0)
    cand = np.flatnonzero(best >= conf_threshold)
    if classes is not None:
        cls_of_cand = cls_scores[:, cand].argmax(axis=0)
        cand = cand[np.isin(cls_of_cand, np.asarray(classes))]
    if cand.size == 0:
        return Detections.empty()
    if cand.size > max_candidates:
        cand = cand[np.argsort(-best[cand], kind="stable")[:max_candidates]]
    scores = best[cand]
    class_ids = cls_scores[:, cand].argmax(axis=0).astype(np.int64)
    cx, cy, w, h = out[0, cand], out[1, cand], out[2, cand], out[3, cand]
    boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)
    keep = (nms_cv2 if cand.size > 64 else nms)(boxes, scores, class_ids, iou_threshold)[:max_det]
    boxes = scale_boxes(boxes[keep], letterbox)
    # a box lying wholly in the letterbox padding collapses to zero area when clipped: drop it
    visible = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
    keep = keep[visible]
    return Detections(boxes[visible], scores[keep].astype(np.float32), class_ids[keep])


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

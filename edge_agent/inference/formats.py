"""Detector output formats: recognised from shape + metadata, one table entry + one decoder each.

Frigate's model-type table is the pattern: adding a format is a :class:`OutputFormat` row and a
function turning the raw output into candidates (boxes in model-input pixels). Thresholding is
``score > conf`` (strict, as Ultralytics), NMS is class-aware, boxes are mapped back through the
letterbox and clipped by :func:`finish`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Callable, Optional, Tuple
from typing import Sequence as TSequence

import numpy as np
import numpy.typing as npt

from edge_agent.core.preprocess import Letterbox
from edge_agent.core.yolo import Detections, nms, nms_cv2, scale_boxes
from edge_agent.errors import ModelError
from edge_agent.inference.defaults import CONF_THRESHOLD, IOU_THRESHOLD, MAX_DET

FloatArray = npt.NDArray[np.float32]
Shape = Tuple[object, ...]


@dataclass(frozen=True)
class Candidates:
    """Scored boxes above the threshold, xyxy in model-input pixels, before NMS."""

    boxes: FloatArray
    scores: FloatArray
    class_ids: npt.NDArray[np.int64]
    max_score: float  # best score over *all* rows, kept for the "cannot score" watch

    @staticmethod
    def none(max_score: float) -> Candidates:
        return Candidates(
            np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros(0, np.int64), max_score
        )


Decoder = Callable[[FloatArray, int, float, Optional[TSequence[int]]], Candidates]


@dataclass(frozen=True)
class OutputFormat:
    name: str
    shape: str  # as shown to users in errors and `inspect`
    decode: Decoder  # (2-D rows-per-box float32 output, nc, conf, classes) -> candidates
    nms: bool  # False for NMS-free end-to-end exports
    num_classes: Callable[[int], int]  # row width -> number of classes


def _select(
    boxes_cxcywh: FloatArray, cls_scores: FloatArray, conf: float, classes: Optional[Sequence[int]]
) -> Candidates:
    """Best class per row, ``score > conf``, optional class filter; cxcywh -> xyxy. cls_scores: [N, nc]."""
    if cls_scores.shape[0] == 0 or cls_scores.shape[1] == 0:
        return Candidates.none(0.0)
    best = cls_scores.max(axis=1)
    max_score = float(best.max())
    cand = np.flatnonzero(best > conf)
    if cand.size == 0:
        return Candidates.none(max_score)
    ids = cls_scores[cand].argmax(axis=1).astype(np.int64)
    if classes is not None:
        keep = np.isin(ids, np.asarray(list(classes), np.int64))
        cand, ids = cand[keep], ids[keep]
    b = boxes_cxcywh[cand]
    xyxy = np.concatenate([b[:, :2] - b[:, 2:4] / 2, b[:, :2] + b[:, 2:4] / 2], axis=1)
    return Candidates(xyxy.astype(np.float32), best[cand].astype(np.float32), ids, max_score)


def _yolov8(rows: FloatArray, nc: int, conf: float, classes: Optional[Sequence[int]]) -> Candidates:
    """Rows (cx, cy, w, h, nc class scores already sigmoid) -- YOLOv8/YOLO11 after transposing."""
    return _select(rows[:, :4], rows[:, 4 : 4 + nc], conf, classes)


def _yolov5(rows: FloatArray, nc: int, conf: float, classes: Optional[Sequence[int]]) -> Candidates:
    """Rows (cx, cy, w, h, objectness, nc class scores): score = objectness x class score."""
    return _select(rows[:, :4], rows[:, 5 : 5 + nc] * rows[:, 4:5], conf, classes)


def _end2end(rows: FloatArray, nc: int, conf: float, classes: Optional[Sequence[int]]) -> Candidates:
    """Rows (x1, y1, x2, y2, score, class) after the model's own NMS (YOLOv10, ``end2end`` exports)."""
    if rows.shape[0] == 0:
        return Candidates.none(0.0)
    scores = rows[:, 4]
    max_score = float(scores.max())
    ids = np.rint(rows[:, 5]).astype(np.int64)
    keep = scores > conf
    if classes is not None:
        keep &= np.isin(ids, np.asarray(list(classes), np.int64))
    order = np.argsort(-scores[keep], kind="stable")
    return Candidates(
        rows[keep, :4][order].astype(np.float32),
        scores[keep][order].astype(np.float32),
        ids[keep][order],
        max_score,
    )


YOLOV8 = OutputFormat(
    "yolov8", "[1, 4+nc, N] or [1, N, 4+nc] (YOLOv8/YOLO11)", _yolov8, True, lambda w: w - 4
)
YOLOV5 = OutputFormat("yolov5", "[1, N, 5+nc] (YOLOv5: objectness x class)", _yolov5, True, lambda w: w - 5)
END2END = OutputFormat(
    "end2end", "[1, K, 6] (x1, y1, x2, y2, score, class: YOLOv10 / end2end)", _end2end, False, lambda w: 0
)
# the table: every format the detector understands (the error for anything else lists these)
FORMATS: dict[str, OutputFormat] = {f.name: f for f in (YOLOV8, YOLOV5, END2END)}


@dataclass(frozen=True)
class Resolved:
    fmt: OutputFormat
    transposed: bool  # the output is [1, C, N] and must be transposed to rows
    num_classes: Optional[int]  # None for end2end without names

    def rows(self, output: npt.NDArray[np.generic]) -> FloatArray:
        out = np.asarray(output)
        if out.ndim == 3:
            out = out[0]
        if out.ndim != 2:
            raise ValueError(f"detector output must be 3-D [1, ., .], got shape {list(np.shape(output))}")
        rows = out.T if self.transposed else out
        return rows if rows.dtype == np.float32 else rows.astype(np.float32)


def anchor_count(input_hw: tuple[int, int], strides: Sequence[int] = (8, 16, 32)) -> int:
    """Grid cells over the usual three strides: 8400 for 640x640 (YOLOv8); YOLOv5 has 3 anchors per cell."""
    h, w = input_hw
    return sum(((h + s - 1) // s) * ((w + s - 1) // s) for s in strides)


def _truthy(v: Optional[str]) -> bool:
    return (v or "").strip().lower() in ("true", "1", "yes")


def understood() -> str:
    return "; ".join(f"{f.name} {f.shape}" for f in FORMATS.values())


def resolve_format(
    shape: Shape,
    names_count: int,
    metadata: Mapping[str, str],
    input_hw: tuple[int, int],
    forced: Optional[str] = None,
) -> Resolved:
    """Which format an output of ``shape`` is. ``names_count`` 0 = unknown class count.

    Order of evidence: an explicit ``forced`` name, the metadata (``end2end``; ``nc`` from
    ``names``), then the anchor count the input size implies (N for YOLOv8, 3N for YOLOv5).
    """
    dims = [d if isinstance(d, int) and d > 0 else None for d in shape]
    if len(dims) != 3 or dims[0] not in (1, None):
        raise ModelError(f"output shape {list(shape)} is not a detector output; understood: {understood()}")
    a, b = dims[1], dims[2]
    nc = names_count or None
    cells = anchor_count(input_hw)
    e2e_meta = _truthy(metadata.get("end2end")) or "yolov10" in metadata.get("description", "").lower()
    if forced is not None and forced not in FORMATS:
        raise ModelError(f"unknown output format {forced!r}; understood: {', '.join(FORMATS)}")

    if forced == "end2end" or (forced is None and b == 6 and (e2e_meta or (a is not None and a < cells))):
        if b != 6:
            raise ModelError(f"output shape {list(shape)} is not end2end [1, K, 6]")
        return Resolved(END2END, False, nc)
    if forced == "yolov5" or (forced is None and b is not None and b >= 6 and a == 3 * cells and nc != b - 4):
        if b is None or b < 6:
            raise ModelError(f"output shape {list(shape)} is not YOLOv5 [1, N, 5+nc]")
        return Resolved(YOLOV5, False, b - 5)
    if forced is None and nc is not None and b == 5 + nc and a != 4 + nc:
        return Resolved(YOLOV5, False, nc)
    if forced is None and b == 6 and a is None and nc not in (1, 2):
        return Resolved(END2END, False, nc)  # dynamic K rows of (x1, y1, x2, y2, score, class)
    # YOLOv8/YOLO11: [1, 4+nc, N] (the export) or [1, N, 4+nc] (transposed)
    if nc is not None:
        if a == 4 + nc:
            return Resolved(YOLOV8, True, nc)
        if b == 4 + nc:
            return Resolved(YOLOV8, False, nc)
    if a == cells and b is not None and b >= 5:
        return Resolved(YOLOV8, False, b - 4)
    if b == cells and a is not None and a >= 5:
        return Resolved(YOLOV8, True, a - 4)
    if a is not None and b is not None and min(a, b) >= 5:
        # unknown input size/anchors: the smaller dim is 4+nc (N is in the thousands)
        return Resolved(YOLOV8, a < b, (a if a < b else b) - 4)
    # a dynamic anchor axis (exports with dynamic=True): the one known axis is 4+nc
    if b is None and a is not None and a >= 5:
        return Resolved(YOLOV8, True, a - 4)
    if a is None and b is not None and b >= 5:
        return Resolved(YOLOV8, False, b - 4)
    if forced == "yolov8" and (a or 0) >= 5:
        return Resolved(YOLOV8, True, (a or 0) - 4)
    raise ModelError(
        f"output shape {list(shape)}"
        + (f" with {nc} class names" if nc else "")
        + f" is not a detector output this agent understands: {understood()}"
    )


def finish(
    cand: Candidates,
    fmt: OutputFormat,
    letterbox: Letterbox,
    iou_threshold: float = IOU_THRESHOLD,
    max_det: int = MAX_DET,
    max_candidates: int = 30000,
) -> Detections:
    """NMS (unless the model did it), cap, map back to the image, drop boxes wholly in the padding."""
    n = cand.scores.shape[0]
    if n == 0:
        return Detections.empty()
    boxes, scores, ids = cand.boxes, cand.scores, cand.class_ids
    if fmt.nms:
        if n > max_candidates:
            top = np.argsort(-scores, kind="stable")[:max_candidates]
            boxes, scores, ids = boxes[top], scores[top], ids[top]
        keep = (nms_cv2 if scores.shape[0] > 64 else nms)(boxes, scores, ids, iou_threshold)[:max_det]
    else:
        keep = np.arange(min(n, max_det), dtype=np.int64)
    out = scale_boxes(boxes[keep], letterbox)
    visible = (out[:, 2] > out[:, 0]) & (out[:, 3] > out[:, 1])
    keep = keep[visible]
    return Detections(out[visible], scores[keep].astype(np.float32), ids[keep])


def decode_output(
    output: npt.NDArray[np.generic],
    resolved: Resolved,
    letterbox: Letterbox,
    conf_threshold: float = CONF_THRESHOLD,
    iou_threshold: float = IOU_THRESHOLD,
    max_det: int = MAX_DET,
    classes: Optional[Sequence[int]] = None,
) -> tuple[Detections, float]:
    """Raw output -> (detections in image pixels, best score of any row)."""
    rows = resolved.rows(output)
    nc = resolved.num_classes if resolved.num_classes is not None else resolved.fmt.num_classes(rows.shape[1])
    cand = resolved.fmt.decode(rows, nc, conf_threshold, classes)
    return finish(cand, resolved.fmt, letterbox, iou_threshold, max_det), cand.max_score

"""Detector output formats: the one registry. Adding a format is one class here and one entry in
:data:`REGISTRY`; nothing else in the agent names a format.

Each format says whether an output shape (plus the model's class count and metadata) is its own
(:meth:`OutputFormat.matches`) and turns the raw output rows into candidates in model-input pixels
(:meth:`OutputFormat.decode`). :func:`resolve_format` asks the formats in registry order (the first
match wins, so a format with stronger evidence comes first) or checks only the one a user forced
with ``[detector] output_format`` / ``infer --output-format``. Thresholding is ``score > conf``
(strict, as Ultralytics); :func:`finish` runs class-aware NMS for the formats that need it, maps
boxes back through the letterbox and clips them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

import numpy as np
import numpy.typing as npt

from edge_agent.core.vision.defaults import CONF_THRESHOLD, IOU_THRESHOLD, MAX_DET
from edge_agent.core.vision.format_base import (
    Candidates,
    Classes,
    Evidence,
    FloatArray,
    OutputFormat,
    Resolved,
    Shape,
    best_first,
    select,
)
from edge_agent.core.vision.format_detr import RtDetr, RtDetrTopK
from edge_agent.core.vision.preprocess import Letterbox
from edge_agent.core.vision.yolo import Detections, nms, nms_cv2, scale_boxes
from edge_agent.errors import ModelError

__all__ = ["Candidates", "Evidence", "OutputFormat", "Resolved", "RtDetr", "RtDetrTopK"]
_select, _best_first = select, best_first  # the names the formats below use


class End2End(OutputFormat):
    """Rows (x1, y1, x2, y2, score, class) after the model's own NMS (YOLOv10, ``end2end`` exports).

    Boxes normalised to 0..1 (some NMS-in-graph exports) are recognised per frame: when every row
    above the threshold lies inside [0, 1] the boxes are scaled by the input size (a pixel box that
    small, in the top-left pixel, does not occur)."""

    name = "end2end"
    shape = "[1, K, 6] (x1, y1, x2, y2, score, class: YOLOv10 / end2end; pixels or 0..1)"
    nms = False

    def matches(self, e: Evidence, forced: bool) -> Optional[Resolved]:
        if e.b != 6:
            return None
        if forced or e.meta.get("end2end", "").strip().lower() in ("true", "1", "yes") or e.says("yolov10"):
            return self._ok(False, e.nc, e)
        if e.a is not None and e.a < e.cells:
            return self._ok(False, e.nc, e)
        if e.a is None and e.nc not in (1, 2):  # dynamic K rows (ONNX NonMaxSuppression)
            return self._ok(False, e.nc, e)
        return None

    def classes_in(self, width: int) -> int:
        return 0

    def decode(
        self, rows: FloatArray, nc: int, conf: float, classes: Classes, input_hw: tuple[int, int]
    ) -> Candidates:
        if rows.shape[0] == 0:
            return Candidates.none(0.0)
        scores = rows[:, 4]
        max_score = float(scores.max())
        ids = np.rint(rows[:, 5]).astype(np.int64)
        keep = scores > conf
        if classes is not None:
            keep &= np.isin(ids, np.asarray(list(classes), np.int64))
        boxes = rows[keep, :4]
        if boxes.shape[0] and float(boxes.min()) >= 0.0 and float(boxes.max()) <= 1.0 and min(input_hw) > 1:
            if bool(np.any((boxes[:, 2] < boxes[:, 0]) | (boxes[:, 3] < boxes[:, 1]))):
                raise ValueError(
                    "rows of [1, K, 6] with x2 < x1 or y2 < y1 in 0..1 are not corner boxes: this looks "
                    "like an RT-DETR export (cx, cy, w, h normalised) whose metadata is gone; set "
                    "output_format = rtdetr (infer --output-format rtdetr)"
                )
            h, w = input_hw
            boxes = boxes * np.asarray([w, h, w, h], np.float32)
        return _best_first(
            Candidates(boxes.astype(np.float32), scores[keep].astype(np.float32), ids[keep], max_score)
        )


class YoloV5(OutputFormat):
    """Rows (cx, cy, w, h, objectness, nc class scores): score = objectness x class score."""

    name = "yolov5"
    shape = "[1, N, 5+nc] (YOLOv5: objectness x class)"

    def matches(self, e: Evidence, forced: bool) -> Optional[Resolved]:
        if e.b is None or e.b < 6:
            return None
        if forced or (e.cells > 0 and e.a == 3 * e.cells and e.nc != e.b - 4):  # 3 anchors per cell
            return self._ok(False, e.b - 5, e)
        if e.nc is not None and e.b == 5 + e.nc and e.a != 4 + e.nc:
            return self._ok(False, e.nc, e)
        return None

    def classes_in(self, width: int) -> int:
        return width - 5

    def decode(
        self, rows: FloatArray, nc: int, conf: float, classes: Classes, input_hw: tuple[int, int]
    ) -> Candidates:
        return _select(rows[:, :4], rows[:, 5 : 5 + nc] * rows[:, 4:5], conf, classes)


class YoloV8(OutputFormat):
    """Rows (cx, cy, w, h, nc class scores already sigmoid): YOLOv8/YOLO11, exported as
    [1, 4+nc, N] (transposed to rows here) or already [1, N, 4+nc]."""

    name = "yolov8"
    shape = "[1, 4+nc, N] or [1, N, 4+nc] (YOLOv8/YOLO11)"

    def matches(self, e: Evidence, forced: bool) -> Optional[Resolved]:
        a, b, nc = e.a, e.b, e.nc
        if nc is not None:
            if a == 4 + nc:
                return self._ok(True, nc, e)
            if b == 4 + nc:
                return self._ok(False, nc, e)
        if e.cells > 0 and a == e.cells and b is not None and b >= 5:
            return self._ok(False, b - 4, e)
        if e.cells > 0 and b == e.cells and a is not None and a >= 5:
            return self._ok(True, a - 4, e)
        if a is not None and b is not None and min(a, b) >= 5:
            # unknown input size/anchors: the smaller dim is 4+nc (N is in the thousands)
            return self._ok(a < b, (a if a < b else b) - 4, e)
        # a dynamic anchor axis (exports with dynamic=True): the one known axis is 4+nc
        if b is None and a is not None and a >= 5:
            return self._ok(True, a - 4, e)
        if a is None and b is not None and b >= 5:
            return self._ok(False, b - 4, e)
        if forced and a is not None and a >= 5:
            return self._ok(True, a - 4, e)
        return None

    def decode(
        self, rows: FloatArray, nc: int, conf: float, classes: Classes, input_hw: tuple[int, int]
    ) -> Candidates:
        return _select(rows[:, :4], rows[:, 4 : 4 + nc], conf, classes)


# THE registry, in the order formats are tried: stronger evidence first (RT-DETR's metadata, the
# end2end flag, YOLOv5's 3 anchors per cell), YOLOv8/YOLO11 -- the commonest -- as the fallback.
REGISTRY: tuple[OutputFormat, ...] = (RtDetr(), End2End(), YoloV5(), YoloV8())
FORMATS: dict[str, OutputFormat] = {f.name: f for f in REGISTRY}
NAMES: tuple[str, ...] = tuple(FORMATS)


def understood() -> str:
    return "; ".join(f"{f.name} {f.shape}" for f in REGISTRY)


def check_name(name: str) -> str:
    """A format name as a user wrote it -> the registry's name, or one line naming the allowed ones."""
    key = name.strip().lower()
    if key not in FORMATS:
        raise ModelError(f"unknown output format {name!r}; expected one of: {', '.join(NAMES)}")
    return key


def anchor_count(input_hw: tuple[int, int], strides: Sequence[int] = (8, 16, 32)) -> int:
    """Grid cells over the usual three strides: 8400 for 640x640 (YOLOv8); YOLOv5 has 3 anchors per cell."""
    h, w = input_hw
    return sum(((h + s - 1) // s) * ((w + s - 1) // s) for s in strides)


def resolve_format(
    shape: Shape,
    names_count: int,
    metadata: Mapping[str, str],
    input_hw: tuple[int, int],
    forced: Optional[str] = None,
) -> Resolved:
    """Which format an output of ``shape`` is (``names_count`` 0 = unknown class count): the one
    ``forced`` names, else the first in :data:`REGISTRY` that matches."""
    dims = [d if isinstance(d, int) and d > 0 else None for d in shape]
    if len(dims) != 3 or dims[0] not in (1, None):
        raise ModelError(f"output shape {list(shape)} is not a detector output; understood: {understood()}")
    e = Evidence(dims[1], dims[2], names_count or None, anchor_count(input_hw), metadata, input_hw)
    if forced is not None:
        fmt = FORMATS[check_name(forced)]
        got = fmt.matches(e, forced=True)
        if got is None:
            raise ModelError(f"output shape {list(shape)} is not {fmt.name} {fmt.shape} (output_format)")
        return got
    for fmt in REGISTRY:
        got = fmt.matches(e, forced=False)
        if got is not None:
            return got
    raise ModelError(
        f"output shape {list(shape)}"
        + (f" with {names_count} class names" if names_count else "")
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
    classes: Classes = None,
) -> tuple[Detections, float]:
    """Raw output -> (detections in image pixels, best score of any row)."""
    cand = resolved.candidates(output, conf_threshold, classes)
    return finish(cand, resolved.fmt, letterbox, iou_threshold, max_det), cand.max_score

"""RT-DETR output formats (Ultralytics): [1, Q, 4+nc] and, from Ultralytics 8.4, [1, K, 6]."""

from __future__ import annotations

from typing import Optional

import numpy as np

from edge_agent.core.vision.format_base import (
    Candidates,
    Classes,
    Evidence,
    FloatArray,
    OutputFormat,
    Resolved,
    best_first,
    select,
)


class RtDetrTopK(OutputFormat):
    """Ultralytics >= 8.4 RT-DETR: [1, K, 6] rows (cx, cy, w, h normalised to 0..1, score, class)
    after the head's own top-K over queries x classes; decoded as its predictor does (score > conf,
    boxes scaled by the input size, no NMS). Reached through :class:`RtDetr` (one name)."""

    name = "rtdetr"
    shape = "[1, K, 6] (RT-DETR, Ultralytics 8.4+: cx, cy, w, h normalised, score, class)"
    nms = False
    stretch_input = True

    def classes_in(self, width: int) -> int:
        return 0

    def decode(
        self, rows: FloatArray, nc: int, conf: float, classes: Classes, input_hw: tuple[int, int]
    ) -> Candidates:
        if rows.shape[0] == 0:
            return Candidates.none(0.0)
        scores = rows[:, 4]
        ids = np.rint(rows[:, 5]).astype(np.int64)
        keep = scores > conf
        if classes is not None:
            keep &= np.isin(ids, np.asarray(list(classes), np.int64))
        h, w = input_hw
        b = rows[keep, :4] * np.asarray([w, h, w, h], np.float32)
        xyxy = np.concatenate([b[:, :2] - b[:, 2:4] / 2, b[:, :2] + b[:, 2:4] / 2], axis=1)
        c = Candidates(
            xyxy.astype(np.float32), scores[keep].astype(np.float32), ids[keep], float(scores.max())
        )
        return best_first(c)


RTDETR_TOPK = RtDetrTopK()


class RtDetr(OutputFormat):
    """Ultralytics RT-DETR: [1, Q, 4+nc], Q queries (300) of (cx, cy, w, h) *normalised to 0..1*
    and sigmoid class scores, no NMS; fed the input stretched, not letterboxed (its predictor's
    ``LetterBox(scale_fill=True)``). Decoded as pixels, its boxes would all be under 1 px.
    Ultralytics 8.4+ writes [1, K, 6] instead (:class:`RtDetrTopK`), told from end2end [1, K, 6]
    by the metadata (``head: RTDETRDecoder``, "rtdetr" in the description) or a forced name."""

    name = "rtdetr"
    shape = (
        "[1, Q, 4+nc] (RT-DETR: cx, cy, w, h normalised to 0..1, class scores) or [1, K, 6] "
        "(RT-DETR, Ultralytics 8.4+: cx, cy, w, h normalised, score, class)"
    )
    nms = False
    stretch_input = True

    def matches(self, e: Evidence, forced: bool) -> Optional[Resolved]:
        rtdetr_meta = e.says("rtdetr", "rt-detr") or e.meta.get("head", "") == "RTDETRDecoder"
        if e.b == 6 and (rtdetr_meta or (forced and e.nc != 2)):
            return Resolved(RTDETR_TOPK, False, e.nc, e.input_hw)
        if e.b is None or e.b < 5 or (e.nc is not None and e.b != 4 + e.nc):
            return None
        if forced or e.says("rtdetr", "rt-detr"):
            return self._ok(False, e.b - 4, e)
        # by shape: far fewer rows than a dense head has anchors (300 queries against 8400 cells at
        # 640; a one-stride head still has 3/4 of them), not [K, 6]; without names, also more rows
        # than columns (else [1, 84, 8400] would read as 84 queries of 8396 classes)
        few_rows = e.a is not None and 4 * e.a <= e.cells and (e.nc is not None or e.a > e.b)
        return self._ok(False, e.b - 4, e) if few_rows and e.b != 6 else None

    def decode(
        self, rows: FloatArray, nc: int, conf: float, classes: Classes, input_hw: tuple[int, int]
    ) -> Candidates:
        h, w = input_hw
        boxes = rows[:, :4] * np.asarray([w, h, w, h], np.float32)
        return best_first(select(boxes, rows[:, 4 : 4 + nc], conf, classes))

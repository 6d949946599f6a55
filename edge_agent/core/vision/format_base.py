"""What every detector output format shares: the evidence a format is decided on, the decided
reading (:class:`Resolved`), candidates before NMS, and the :class:`OutputFormat` base. The formats
are in :mod:`edge_agent.core.vision.formats` (the registry) and :mod:`edge_agent.core.vision.format_detr`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Optional, Tuple
from typing import Sequence as TSequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]
Shape = Tuple[object, ...]
Classes = Optional[TSequence[int]]  # typing's: a run-time alias must import on Python 3.8


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


@dataclass(frozen=True)
class Evidence:
    """What is known about an output when its format is decided.

    ``a``/``b``: the two last dims of a [1, a, b] output (None when dynamic); ``nc``: the class
    count from the names (None = unknown); ``cells``: anchors a dense YOLO head has at this input
    size (8400 at 640x640, 0 when the size is unknown); ``meta``: the ONNX metadata.
    """

    a: Optional[int]
    b: Optional[int]
    nc: Optional[int]
    cells: int
    meta: Mapping[str, str]
    input_hw: tuple[int, int]

    def says(self, *words: str) -> bool:
        """The metadata's description/model name mentions one of ``words`` (case-insensitive)."""
        text = " ".join(self.meta.get(k, "") for k in ("description", "model", "name")).lower()
        return any(w in text for w in words)


@dataclass(frozen=True)
class Resolved:
    """A format decided for one model: how to turn its output into rows and decode them."""

    fmt: OutputFormat
    transposed: bool  # the output is [1, C, N] and must be transposed to rows
    num_classes: Optional[int]  # None for end2end without names
    input_hw: tuple[int, int] = (0, 0)

    def rows(self, output: npt.NDArray[np.generic]) -> FloatArray:
        out = np.asarray(output)
        if out.ndim == 3:
            out = out[0]
        if out.ndim != 2:
            raise ValueError(f"detector output must be 3-D [1, ., .], got shape {list(np.shape(output))}")
        rows = out.T if self.transposed else out
        return rows if rows.dtype == np.float32 else rows.astype(np.float32)

    def candidates(self, output: npt.NDArray[np.generic], conf: float, classes: Classes) -> Candidates:
        rows = self.rows(output)
        nc = self.num_classes if self.num_classes is not None else self.fmt.classes_in(rows.shape[1])
        return self.fmt.decode(rows, nc, conf, classes, self.input_hw)


def select(boxes_cxcywh: FloatArray, cls_scores: FloatArray, conf: float, classes: Classes) -> Candidates:
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


def best_first(c: Candidates) -> Candidates:
    """NMS-free formats keep their rows best-first, so ``max_det`` keeps the best ones."""
    order = np.argsort(-c.scores, kind="stable")
    return Candidates(c.boxes[order], c.scores[order], c.class_ids[order], c.max_score)


class OutputFormat:
    """One detector output format. Subclasses set the class attributes and the two methods."""

    name: ClassVar[str]
    shape: ClassVar[str]  # as shown to users in errors and `inspect`
    nms: ClassVar[bool] = True  # False for NMS-free end-to-end exports
    stretch_input: ClassVar[bool] = False  # resized to the input without letterbox (RT-DETR)

    def matches(self, e: Evidence, forced: bool) -> Optional[Resolved]:
        """This format's reading of the output, or None. ``forced``: the user named this format,
        so only what the decoder strictly needs is checked."""
        raise NotImplementedError

    def decode(
        self, rows: FloatArray, nc: int, conf: float, classes: Classes, input_hw: tuple[int, int]
    ) -> Candidates:
        raise NotImplementedError

    def classes_in(self, width: int) -> int:
        """Number of classes a row of ``width`` values carries."""
        return width - 4

    def _ok(self, transposed: bool, nc: Optional[int], e: Evidence) -> Resolved:
        return Resolved(self, transposed, nc, e.input_hw)

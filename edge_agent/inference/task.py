"""Detector or classifier, and which output format: decided here once, for the agent, quantize,
validate and bench. (The formats themselves are the registry in :mod:`edge_agent.core.vision.formats`.)"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Optional

import numpy as np

from edge_agent.core.vision.formats import Resolved, anchor_count, resolve_format, understood
from edge_agent.errors import ModelError

if TYPE_CHECKING:
    from edge_agent.adapters.runtime.onnx_model import OnnxModel

Task = Literal["detect", "classify"]


def _split_outputs(model: OnnxModel) -> Optional[str]:
    """DETR-style exports with two outputs (boxes [1, Q, 4] + scores [1, Q, nc]): named, not guessed."""
    outs = model.info.outputs
    if len(outs) < 2:
        return None
    shapes = [list(o.shape) for o in outs[:2]]
    if all(len(s) == 3 for s in shapes) and 4 in (shapes[0][2], shapes[1][2]):
        return (
            f"{model.path}: outputs {outs[0].name} {shapes[0]} + {outs[1].name} {shapes[1]} look like "
            "separate DETR boxes + scores, which this agent does not read; export one output "
            "[1, Q, 4+nc] (Ultralytics RT-DETR export) or set output_format"
        )
    return None


SEG_COEFFS = 32  # Ultralytics Segment head: 32 mask coefficients per box + a [1, 32, h, w] prototype output
POSE_VALUES = 51  # Ultralytics Pose head: 17 keypoints x (x, y, visibility) per box


def _dims(shape: object) -> list[Optional[int]]:
    return [
        d if isinstance(d, int) and d > 0 else None
        for d in (shape if isinstance(shape, (list, tuple)) else [])
    ]


def head_refusal(model: OnnxModel) -> Optional[str]:
    """A segmentation or pose export read as a detector (its metadata stripped): one line, or None.

    Evidence: a second 4-D output of 32 channels (the mask prototypes), or an output whose channel
    count is a detector's plus 32 mask coefficients (4+nc+32 dense, 6+32 end2end) or plus 17 x 3
    keypoint values (4+nc+51 dense, 6+51 end2end; 56 = one class + keypoints when the names are gone).
    Read as a detector, mask coefficients and keypoint pixels become scores far above 1."""
    outs = model.info.outputs
    first = _dims(outs[0].shape)
    for o in outs[1:]:
        d = _dims(o.shape)
        if len(first) == 3 and len(d) == 4 and d[1] == SEG_COEFFS:
            return (
                f"{model.path}: output '{o.name}' {list(o.shape)} is a segmentation export's mask prototypes: "
                "this is a segmentation model, not a detector; export the detect variant (e.g. yolov8n.pt, not yolov8n-seg.pt)"
            )
    if len(first) != 3:
        return None
    nc = len(model.info.names) or None
    a, b = first[1], first[2]
    channels = [c for c in (a, b) if c is not None]
    cells = anchor_count(model.input_hw())  # the anchor axis of a dense head; the other is channels
    dense = b if a == cells else a if b == cells else min(channels) if channels else None
    e2e = b if b is not None and (a is None or a > b) else None
    what = None
    if nc is not None and dense == 4 + nc + SEG_COEFFS:
        what = f"segmentation (4 + {nc} classes + 32 mask coefficients)"
    elif nc in (None, 1) and dense == 4 + 1 + POSE_VALUES:
        what = "pose (4 + 1 class + 17 keypoints x 3)"
    elif nc is not None and dense == 4 + nc + POSE_VALUES:
        what = f"pose (4 + {nc} classes + 17 keypoints x 3)"
    elif e2e == 6 + SEG_COEFFS and (nc is None or nc != 6 + SEG_COEFFS - 4):
        what = "end-to-end segmentation (6 + 32 mask coefficients)"
    elif e2e == 6 + POSE_VALUES and (nc is None or nc != 6 + POSE_VALUES - 4):
        what = "end-to-end pose (6 + 17 keypoints x 3)"
    if what is None:
        return None
    return (
        f"{model.path}: output '{outs[0].name}' {list(outs[0].shape)} has the channels of "
        f"{'an' if what.startswith('end') else 'a'} {what} head, "
        "not a detector's; export the detect variant, or name the format with output_format if it is one"
    )


def score_refusal(model_path: object, fmt_name: str, best: float) -> Optional[str]:
    """Scores are probabilities: a best score outside 0..1 means the output is not read as what it is."""
    if best != best or -1e-3 <= best <= 1.0 + 1e-3:  # NaN: nothing scored (empty output)
        return None
    return (
        f"{model_path}: a score of {best:.4g} read as {fmt_name} is outside 0..1: the output is not "
        "detector class scores (a segmentation/pose head, or logits without sigmoid); "
        "export the detect variant or name the right output_format"
    )


def detector_format(model: OnnxModel, forced: Optional[str] = None) -> Resolved:
    """The output format of ``model`` (an OnnxModel), or one line naming the model, output and why."""
    out = model.info.outputs[0]
    if forced is None:
        head = head_refusal(model)
        if head:
            raise ModelError(head)
    try:
        return resolve_format(out.shape, len(model.info.names), model.info.metadata, model.input_hw(), forced)
    except ModelError as exc:
        split = _split_outputs(model) if forced is None else None
        if split:
            raise ModelError(split) from None
        task = f" (task in metadata: {model.info.task})" if model.info.task else ""
        raise ModelError(f"{model.path}: output '{out.name}': {exc}{task}") from None


def model_task(model: OnnxModel) -> Task:
    """``detect`` or ``classify`` from metadata ``task`` and the output shape (an OnnxModel)."""
    task = model.info.task
    out_shape = model.info.outputs[0].shape
    if task == "classify" or (task is None and len(out_shape) == 2):
        return "classify"
    if task in (None, "detect"):
        try:
            detector_format(model)
            return "detect"
        except ModelError:
            pass
    raise ModelError(
        f"{model.path}: output shape {list(out_shape)} (task {task!r}) is neither a classifier [N, classes] "
        f"nor a detector output understood here: {understood()}"
    )


InputKind = Literal["image", "tensor"]


def input_kind(model: OnnxModel) -> InputKind:
    """``image``: one float 4-D input of 1 or 3 channels (NCHW or NHWC), what the vision pipeline
    feeds; ``tensor``: anything else (int64 token ids + attention mask, sensor windows [1, C, T]),
    which the tools feed generated tensors (``bench``) or quantize dynamically (``quantize``)."""
    inputs = model.info.inputs
    if len(inputs) != 1:
        return "tensor"
    t = inputs[0]
    if len(t.shape) != 4 or np.dtype(t.dtype).kind != "f":
        return "tensor"
    c1, c3 = t.shape[1], t.shape[3]
    return "image" if c1 in (1, 3) or c3 in (1, 3) or not isinstance(c1, int) else "tensor"

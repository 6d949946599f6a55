"""Detector or classifier, and which output format: decided here once, for the agent, quantize,
validate and bench. (The formats themselves are the registry in :mod:`edge_agent.core.vision.formats`.)"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Optional

from edge_agent.core.vision.formats import Resolved, resolve_format, understood
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


def detector_format(model: OnnxModel, forced: Optional[str] = None) -> Resolved:
    """The output format of ``model`` (an OnnxModel), or one line naming the model, output and why."""
    out = model.info.outputs[0]
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

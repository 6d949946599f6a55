"""Detector or classifier? Decided here once, for the agent, quantize, validate and bench."""

from __future__ import annotations

from typing import Any, Literal

from edge_agent.errors import ModelError
from edge_agent.inference.formats import resolve_format, understood

Task = Literal["detect", "classify"]


def model_task(model: Any) -> Task:
    """``detect`` or ``classify`` from metadata ``task`` and the output shape (an OnnxModel)."""
    task = model.info.task
    out_shape = model.info.outputs[0].shape
    if task == "classify" or (task is None and len(out_shape) == 2):
        return "classify"
    if task in (None, "detect"):
        try:
            resolve_format(out_shape, len(model.info.names), model.info.metadata, model.input_hw())
            return "detect"
        except ModelError:
            pass
    raise ModelError(
        f"{model.path}: output shape {list(out_shape)} (task {task!r}) is neither a classifier [N, classes] "
        f"nor a detector output understood here: {understood()}"
    )

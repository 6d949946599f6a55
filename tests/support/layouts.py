"""ONNX models whose outputs are fixed arrays, in the layouts Ultralytics exports write (built with
onnx.helper: no Ultralytics, no torch). The output ignores the pixels (input x 0 + constant), so a
test states exactly what the model "saw" and checks how it is read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Union

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

Dim = Union[int, str]


def const_model(
    path: Path,
    outputs: Mapping[str, np.ndarray],
    meta: Mapping[str, str] = {},
    input_shape: Sequence[Dim] = (1, 3, 64, 64),
    output_shapes: Mapping[str, Sequence[Dim]] = {},
) -> Path:
    """A model with input ``images`` [input_shape] and each output the given constant array;
    ``output_shapes`` overrides a declared output shape (e.g. a dynamic axis)."""
    nodes = [
        helper.make_node("ReduceSum", ["images"], ["s"], keepdims=0),
        helper.make_node("Mul", ["s", "zero"], ["z"]),
    ]
    inits = [numpy_helper.from_array(np.zeros((), np.float32), "zero")]
    outs = []
    for i, (name, value) in enumerate(outputs.items()):
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32), f"c{i}"))
        nodes.append(helper.make_node("Add", [f"c{i}", "z"], [name]))
        shape = output_shapes.get(name, list(np.shape(value)))
        outs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
    graph = helper.make_graph(
        nodes,
        "layout",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, list(input_shape))],
        outs,
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    for k, v in meta.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = k, v
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def coco_names(n: int = 80) -> str:
    return repr({i: f"class{i}" for i in range(n)})

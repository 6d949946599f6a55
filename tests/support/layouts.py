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


def make_text_classifier(
    path: Path, vocab: int = 1000, hidden: int = 64, layers: int = 2, classes: int = 2, seed: int = 0
) -> Path:
    """A BERT-like text classifier: int64 ``input_ids`` + ``attention_mask`` [batch, seq] (both axes
    dynamic), a Gather embedding, ``layers`` single-head self-attention blocks (MatMul, masked Softmax,
    a ReLU feed-forward, residuals) and a mean-pooled MatMul head -> logits [batch, classes]."""
    rng = np.random.default_rng(seed)
    inits: list[onnx.TensorProto] = []

    def w(name: str, *shape: int, scale: float = 0.0) -> str:
        s = scale or 1.0 / np.sqrt(shape[0])
        inits.append(numpy_helper.from_array(rng.normal(0, s, shape).astype(np.float32), name))
        return name

    def c(name: str, value: object, dtype: type = np.float32) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    n = helper.make_node
    nodes = [
        n("Gather", [w("emb", vocab, hidden, scale=0.5), "input_ids"], ["x0"]),
        n("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT),
        n("Unsqueeze", ["maskf", c("ax1", [1], np.int64)], ["mask3"]),  # [B, 1, S]
        n("Sub", [c("one", 1.0), "mask3"], ["inv"]),
        n("Mul", ["inv", c("neg", -1e4)], ["bias"]),
    ]
    x = "x0"
    for i in range(layers):
        q, k, v, t = (f"{p}{i}" for p in ("q", "k", "v", "kt"))
        nodes += [
            n("MatMul", [x, w(f"wq{i}", hidden, hidden)], [q]),
            n("MatMul", [x, w(f"wk{i}", hidden, hidden)], [k]),
            n("MatMul", [x, w(f"wv{i}", hidden, hidden)], [v]),
            n("Transpose", [k], [t], perm=[0, 2, 1]),
            n("MatMul", [q, t], [f"att{i}"]),
            n("Mul", [f"att{i}", c(f"sc{i}", 1.0 / np.sqrt(hidden))], [f"atts{i}"]),
            n("Add", [f"atts{i}", "bias"], [f"attm{i}"]),
            n("Softmax", [f"attm{i}"], [f"p{i}"], axis=-1),
            n("MatMul", [f"p{i}", v], [f"ctx{i}"]),
            n("Add", [x, f"ctx{i}"], [f"r{i}"]),
            n("MatMul", [f"r{i}", w(f"w1_{i}", hidden, 2 * hidden)], [f"h{i}"]),
            n("Relu", [f"h{i}"], [f"hr{i}"]),
            n("MatMul", [f"hr{i}", w(f"w2_{i}", 2 * hidden, hidden)], [f"f{i}"]),
            n("Add", [f"r{i}", f"f{i}"], [f"y{i}"]),
        ]
        x = f"y{i}"
    nodes += [
        n("ReduceMean", [x], ["pooled"], axes=[1], keepdims=0),
        n("MatMul", ["pooled", w("wc", hidden, classes)], ["mm"]),
        n("Add", ["mm", c("bc", np.zeros(classes))], ["logits"]),
    ]
    ints = [
        helper.make_tensor_value_info(k, TensorProto.INT64, ["batch", "seq"])
        for k in ("input_ids", "attention_mask")
    ]
    out = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes])]
    model = helper.make_model(
        helper.make_graph(nodes, "text", ints, out, inits), opset_imports=[helper.make_opsetid("", 17)]
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def make_sensor_model(path: Path, channels: int = 6, window: Dim = 128, classes: int = 4) -> Path:
    """A sensor-window classifier: float [1, channels, window] -> Conv1d -> ReLU -> mean -> logits."""
    rng = np.random.default_rng(1)
    wconv = numpy_helper.from_array(rng.normal(0, 0.3, (16, channels, 5)).astype(np.float32), "wconv")
    wfc = numpy_helper.from_array(rng.normal(0, 0.3, (16, classes)).astype(np.float32), "wfc")
    n = helper.make_node
    nodes = [
        n("Conv", ["window", "wconv"], ["c"], pads=[2, 2]),
        n("Relu", ["c"], ["r"]),
        n("ReduceMean", ["r"], ["m"], axes=[2], keepdims=0),
        n("MatMul", ["m", "wfc"], ["scores"]),
    ]
    graph = helper.make_graph(
        nodes,
        "sensor",
        [helper.make_tensor_value_info("window", TensorProto.FLOAT, [1, channels, window])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, classes])],
        [wconv, wfc],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path

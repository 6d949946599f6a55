"""The float post-processing tail is found by graph structure, not by node names."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from support.toolchain import rename_all_nodes, toy_detector_model

from edge_agent.tools.graph import (
    ensure_node_names,
    hoist_transposed_softmax,
    postprocess_tail,
    postprocess_tail_indices,
)


def _positions(model: onnx.ModelProto) -> list[int]:
    return postprocess_tail_indices(model.graph)


@pytest.mark.arm_smoke
def test_toy_head_tail_is_everything_after_the_head_conv() -> None:
    m = toy_detector_model()
    ops = [(n.op_type, n.name) for n in postprocess_tail(m.graph)]
    assert ops == [
        ("Reshape", "head/reshape"),
        ("Split", "head/split"),
        ("Sigmoid", "head/box_sigmoid"),
        ("Mul", "head/box_scale"),
        ("Sigmoid", "head/cls_sigmoid"),
        ("Concat", "head/concat"),
    ]


@pytest.mark.arm_smoke
def test_tail_does_not_depend_on_node_names() -> None:
    m = toy_detector_model()
    before = _positions(m)
    rename_all_nodes(m, "zz")
    assert _positions(m) == before
    for n in m.graph.node:
        n.name = ""
    assert ensure_node_names(m.graph) == len(m.graph.node)
    assert _positions(m) == before
    assert len({n.name for n in m.graph.node}) == len(m.graph.node)


@pytest.mark.shared
@pytest.mark.slow
def test_yolov8n_tail_is_dfl_decode_and_concat_under_any_names(shared_dir: Path) -> None:
    m = onnx.load(str(shared_dir / "models" / "yolov8n-coco-fp32.onnx"))
    tail = postprocess_tail(m.graph)
    ops = [n.op_type for n in tail]
    # DFL (Softmax + its fixed 1x1 Conv), class Sigmoid, box decode and the final Concat stay float
    assert ops.count("Softmax") == 1 and ops.count("Conv") == 1 and ops.count("Sigmoid") == 1
    assert {"Sub", "Add", "Div", "Mul", "Slice"} <= set(ops)
    assert tail[-1].output[0] == m.graph.output[0].name and tail[-1].op_type == "Concat"
    # the learned head convs (6 of them feeding the per-level Reshapes) are *not* in the tail
    producer = {o: n for n in m.graph.node for o in n.output}
    tail_names = {n.name for n in tail}
    boundary = {producer[i].name for n in tail for i in n.input if i in producer} - tail_names
    assert len(boundary) == 6
    assert {n.op_type for n in m.graph.node if n.name in boundary} == {"Conv"}
    before = _positions(m)
    rename_all_nodes(m, "x")
    assert _positions(m) == before
    assert len(before) == 24


def test_hoisting_the_dfl_softmax_is_exact() -> None:
    x_shape = [1, 4, 8, 30]
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], "tr", perm=[0, 2, 1, 3]),
        helper.make_node("Softmax", ["t"], ["y"], "sm", axis=1),
    ]
    g = helper.make_graph(
        nodes,
        "dfl",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 4, 30])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = np.random.default_rng(0).normal(0, 3, x_shape).astype(np.float32)
    before = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )[0]
    assert hoist_transposed_softmax(m.graph) == 1
    onnx.checker.check_model(m, full_check=True)
    assert [n.op_type for n in m.graph.node] == ["Softmax", "Transpose"]
    assert m.graph.node[0].attribute[0].i == 2  # axis 1 of the transposed tensor is axis 2 before it
    after = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )[0]
    np.testing.assert_allclose(after, before, rtol=1e-6, atol=1e-7)

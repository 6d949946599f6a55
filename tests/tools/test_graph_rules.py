"""The float tail and the softmax hoist, rule by rule on small graphs (issue 19)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from edge_agent.tools.graph import (
    ensure_node_names,
    hoist_transposed_softmax,
    postprocess_tail_indices,
    postprocess_tail_names,
)


def _graph(nodes: list[Any], outputs: list[str], x_shape: list[int], inits: list[Any] | None = None) -> Any:
    return helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        inits or [],
    )


def test_unnamed_nodes_get_unique_names_that_avoid_existing_ones() -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Relu", ["a"], ["b"], name="Relu_0"),
        helper.make_node("Sigmoid", ["b"], ["c"]),
        helper.make_node("Relu", ["c"], ["d"], name="Relu_0_"),
        helper.make_node("Relu", ["d"], ["y"]),
    ]
    g = _graph(nodes, ["y"], [1])
    g.node[4].name = ""
    assert ensure_node_names(g) == 3
    names = [n.name for n in g.node]
    assert names == ["Relu_0__", "Relu_0", "Sigmoid_2", "Relu_0_", "Relu_4"]
    assert ensure_node_names(g) == 0


def _w(name: str, shape: list[int]) -> Any:
    return numpy_helper.from_array(np.ones(shape, np.float32), name)


def test_the_tail_stops_at_learned_layers_and_walks_through_a_distribution_conv() -> None:
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["f"], name="feature"),  # 0 learned
        helper.make_node("Reshape", ["f", "shape"], ["r"], name="reshape"),  # 1
        helper.make_node("Softmax", ["r"], ["s"], name="softmax", axis=1),  # 2
        helper.make_node("Conv", ["s", "dfl_w"], ["d"], name="dfl"),  # 3 DFL: fed by Softmax
        helper.make_node("Gemm", ["x2", "w2"], ["g"], name="gemm"),  # 4 learned
        helper.make_node("MatMul", ["g", "w3"], ["mm"], name="matmul"),  # 5 learned
        helper.make_node("ConvTranspose", ["x", "w4"], ["ct"], name="deconv"),  # 6 learned
        helper.make_node("Add", ["d", "mm"], ["sum"], name="add"),  # 7
        helper.make_node("Concat", ["sum", "ct"], ["y"], name="concat", axis=1),  # 8
        helper.make_node("Sigmoid", ["x2"], ["x2s"], name="unused"),  # 9 feeds nothing
    ]
    g = _graph(nodes, ["y"], [1, 4, 4, 4])
    assert postprocess_tail_indices(g) == [1, 2, 3, 7, 8]
    assert postprocess_tail_names(g) == ["reshape", "softmax", "dfl", "add", "concat"]


def test_a_conv_fed_by_a_transpose_or_reshape_is_arithmetic_but_by_a_graph_input_is_learned() -> None:
    for feeder in ("Transpose", "Reshape"):
        ins = ["x"] if feeder == "Transpose" else ["x", "shape"]
        nodes = [
            helper.make_node(feeder, ins, ["t"], name="t"),
            helper.make_node("Conv", ["t", "w"], ["y"], name="c"),
        ]
        assert postprocess_tail_indices(_graph(nodes, ["y"], [1])) == [0, 1]
    relu = [
        helper.make_node("Relu", ["x"], ["t"], name="t"),
        helper.make_node("Conv", ["t", "w"], ["y"], name="c"),
    ]
    assert postprocess_tail_indices(_graph(relu, ["y"], [1])) == []
    direct = [helper.make_node("Conv", ["x", "w"], ["y"], name="c")]
    assert postprocess_tail_indices(_graph(direct, ["y"], [1])) == []


def test_every_output_s_tail_is_found_and_shared_nodes_once() -> None:
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["f"], name="c"),
        helper.make_node("Sigmoid", ["f"], ["s"], name="sig"),
        helper.make_node("Mul", ["s", "s"], ["y1"], name="m1"),
        helper.make_node("Add", ["s", "s"], ["y2"], name="a2"),
    ]
    assert postprocess_tail_indices(_graph(nodes, ["y1", "y2", "x"], [1])) == [1, 2, 3]


def _run(m: Any, x: np.ndarray) -> np.ndarray:
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return np.asarray(s.run(None, {"x": x})[0])


def test_every_transposed_softmax_is_hoisted_exactly_with_negative_axes() -> None:
    nodes = [
        helper.make_node("Transpose", ["x"], ["t1"], "tr1", perm=[0, 3, 1, 2]),
        helper.make_node("Softmax", ["t1"], ["s1"], "sm1", axis=-1),
        helper.make_node("Relu", ["s1"], ["r"], "relu"),
        helper.make_node("Transpose", ["r"], ["t2"], "tr2", perm=[0, 2, 1, 3]),
        helper.make_node("Softmax", ["t2"], ["y"], "sm2", axis=1),
    ]
    g = _graph(nodes, ["y"], [1, 3, 4, 5])
    g.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 5, 4]))
    g.value_info.append(helper.make_tensor_value_info("t1", TensorProto.FLOAT, [1, 5, 3, 4]))
    g.value_info.append(helper.make_tensor_value_info("s1", TensorProto.FLOAT, [1, 5, 3, 4]))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = np.random.default_rng(0).normal(0, 2, (1, 3, 4, 5)).astype(np.float32)
    before = _run(m, x)
    assert hoist_transposed_softmax(m.graph) == 2
    onnx.checker.check_model(m)
    assert [n.op_type for n in m.graph.node] == ["Softmax", "Transpose", "Relu", "Softmax", "Transpose"]
    # the names stay (quantize excludes the float tail by name, after the hoist)
    assert [n.name for n in m.graph.node] == ["sm1", "tr1", "relu", "sm2", "tr2"]
    axes = [helper.get_attribute_value(n.attribute[0]) for n in m.graph.node if n.op_type == "Softmax"]
    assert axes == [2, 2]  # perm[-1 % 4] of [0, 3, 1, 2]; perm[1] of [0, 2, 1, 3]
    assert [vi.name for vi in m.graph.value_info] == ["s1"]  # t1 now has another shape: dropped
    np.testing.assert_allclose(_run(m, x), before, rtol=1e-6, atol=1e-7)
    assert hoist_transposed_softmax(m.graph) == 0


def test_a_transpose_used_elsewhere_or_as_an_output_is_not_hoisted() -> None:
    shared = [
        helper.make_node("Transpose", ["x"], ["t"], "tr", perm=[1, 0]),
        helper.make_node("Softmax", ["t"], ["y"], "sm", axis=0),
        helper.make_node("Relu", ["t"], ["z"], "other"),
    ]
    g = _graph(shared, ["y", "z"], [2, 3])
    assert hoist_transposed_softmax(g) == 0 and [n.op_type for n in g.node] == [
        "Transpose",
        "Softmax",
        "Relu",
    ]
    out = [
        helper.make_node("Transpose", ["x"], ["t"], "tr", perm=[1, 0]),
        helper.make_node("Softmax", ["t"], ["y"], "sm", axis=0),
    ]
    g2 = _graph(out, ["y", "t"], [2, 3])
    assert hoist_transposed_softmax(g2) == 0
    no_perm = [
        helper.make_node("Transpose", ["x"], ["t"], "tr"),
        helper.make_node("Softmax", ["t"], ["y"], "sm"),
    ]
    assert hoist_transposed_softmax(_graph(no_perm, ["y"], [2, 3])) == 0
    from_input = [helper.make_node("Softmax", ["x"], ["y"], "sm")]
    assert hoist_transposed_softmax(_graph(from_input, ["y"], [2, 3])) == 0
    after_relu = [
        helper.make_node("Relu", ["x"], ["r"], "r"),
        helper.make_node("Softmax", ["r"], ["y"], "sm"),
    ]
    assert hoist_transposed_softmax(_graph(after_relu, ["y"], [2, 3])) == 0


def test_a_pair_after_other_softmaxes_is_still_found_and_the_default_axis_is_the_last() -> None:
    nodes = [
        helper.make_node("Transpose", ["x"], ["rev"], "no_perm"),  # perm left to its default
        helper.make_node("Softmax", ["rev"], ["srev"], "sm_rev"),
        helper.make_node("Transpose", ["srev"], ["back"], "back"),
        helper.make_node("Softmax", ["back"], ["s0"], "plain"),
        helper.make_node("Transpose", ["s0"], ["t1"], "shared_tr", perm=[0, 2, 1]),
        helper.make_node("Softmax", ["t1"], ["s1"], "sm_shared", axis=1),
        helper.make_node("Relu", ["t1"], ["r1"], "second_user"),  # t1 has two consumers: no hoist
        helper.make_node("Add", ["s1", "r1"], ["a"], "add"),
        helper.make_node("Transpose", ["a"], ["t2"], "tr", perm=[0, 2, 1]),
        helper.make_node("Softmax", ["t2"], ["y"], "sm"),  # no axis attribute: -1
    ]
    g = _graph(nodes, ["y"], [1, 3, 5])
    g.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 5]))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = np.random.default_rng(1).normal(0, 2, (1, 3, 5)).astype(np.float32)
    before = _run(m, x)
    assert hoist_transposed_softmax(m.graph) == 1
    hoisted = next(n for n in m.graph.node if n.name == "sm")
    assert list(hoisted.input) == ["a"] and helper.get_attribute_value(hoisted.attribute[0]) == 1  # perm[2]
    np.testing.assert_allclose(_run(m, x), before, rtol=1e-6, atol=1e-7)


def test_a_gemm_after_a_softmax_is_a_learned_layer() -> None:
    nodes = [
        helper.make_node("Softmax", ["x"], ["s"], name="sm"),
        helper.make_node("Gemm", ["s", "w"], ["g"], name="gemm"),
        helper.make_node("Sigmoid", ["g"], ["y"], name="sig"),
    ]
    assert postprocess_tail_indices(_graph(nodes, ["y"], [1, 4])) == [2]

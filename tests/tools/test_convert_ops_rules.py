"""convert_ops' pieces on their own: what a schema step changed, the type check of every formal
parameter kind, and GridSample's renamed modes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edge_agent.tools.convert import ConvertError, restamp
from edge_agent.tools.convert_ops import forms, schema_change, type_refusal, value_types


@pytest.mark.parametrize(
    ("op", "version", "change"),
    [
        (
            "ReduceMean",
            18,
            "added attribute noop_with_empty_axes and removed attribute axes and changed its inputs",
        ),
        ("GridSample", 20, "changed attribute mode"),
        ("Reshape", 14, "added attribute allowzero"),
        ("LpPool", 18, "added attributes ceil_mode, dilations"),
        ("LayerNormalization", 17, "is new"),
        (
            "BatchNormalization",
            14,
            "added attribute training_mode and changed its inputs and changed its outputs",
        ),
        ("QLinearMatMul", 21, "changed its inputs"),
        ("MaxPool", 22, "only tensor types"),
    ],
)
def test_schema_change_names_what_onnx_s_schema_changed(op: str, version: int, change: str) -> None:
    assert schema_change(op, version) == change


def test_forms_lists_each_new_form_after_the_target_once() -> None:
    assert forms("MaxPool", 12, 22) == [22]
    assert forms("Reshape", 14, 22) == [19, 21]
    assert forms("Gelu", 13, 19) == []  # not defined up to 19: nothing to list
    assert forms("Conv", 11, 21) == []


def test_a_variadic_input_of_a_type_the_older_form_lacks_is_named() -> None:
    node = helper.make_node("Concat", ["a", "b", "c"], ["y"], axis=0)
    types = {"a": TensorProto.FLOAT, "b": TensorProto.FLOAT, "c": TensorProto.BFLOAT16}
    assert type_refusal(node, 4, types) == (
        "its input 'c' is bfloat16, which the opset-4 form does not take: export the model with float32 tensors"
    )
    assert type_refusal(node, 13, types) is None  # Concat 13 takes bfloat16
    assert type_refusal(node, 4, {"a": TensorProto.FLOAT}) is None  # unknown types are not guessed
    del types["a"]  # an input of unknown type is skipped, not the end of the check
    assert type_refusal(node, 4, types) is not None


def test_an_output_type_the_older_form_lacks_is_named() -> None:
    node = helper.make_node("ConstantOfShape", ["s"], ["y"])
    types = {"s": TensorProto.INT64, "y": TensorProto.BFLOAT16}
    assert type_refusal(node, 16, types) == (
        "its output 'y' is bfloat16, which the opset-9 form does not take: export the model with float32 tensors"
    )
    assert type_refusal(node, 20, types) is None


def test_value_types_come_from_shape_inference_and_the_file() -> None:
    g = helper.make_graph(
        [
            helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node("Cast", ["s"], ["y"], to=TensorProto.FLOAT),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.zeros(1, np.int8), "w")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
    assert value_types(m) == {
        "w": TensorProto.INT8,
        "x": TensorProto.FLOAT16,
        "s": TensorProto.INT64,
        "y": TensorProto.FLOAT,
    }


def _grid(mode: object, rank: int = 4) -> onnx.ModelProto:
    attrs = {} if mode is None else {"mode": mode}
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], **attrs)
    shape = [1, 2, 4, 4] if rank == 4 else [1, 2, 4, 4, 4]
    gshape = [1, 3, 3, 2] if rank == 4 else [1, 3, 3, 3, 3]
    g = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, shape),
            helper.make_tensor_value_info("grid", TensorProto.FLOAT, gshape),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])


@pytest.mark.parametrize(
    ("mode", "old"),
    [(None, b"bilinear"), ("linear", b"bilinear"), ("cubic", b"bicubic"), ("nearest", b"nearest")],
)
def test_grid_sample_modes_map_to_16_s_names(mode: object, old: bytes) -> None:
    m = _grid(mode)
    restamp(m, 16)
    assert [helper.get_attribute_value(a) for a in m.graph.node[0].attribute if a.name == "mode"] == [old]


def test_grid_sample_is_left_alone_for_a_target_with_20_s_names_and_refused_for_5_d() -> None:
    m = _grid("cubic")
    m.opset_import[0].version = 22
    restamp(m, 20)
    assert helper.get_attribute_value(m.graph.node[0].attribute[0]) == b"cubic"
    with pytest.raises(
        ConvertError, match=r"^operator GridSample \(opset-20 form\) uses a mode or input rank"
    ):
        restamp(_grid("linear", rank=5), 16)


def _scatter(op: str, reduction: str) -> onnx.ModelProto:
    data = np.zeros((2, 4), np.float32)
    if op == "ScatterND":
        idx, upd = np.array([[0], [1]], np.int64), np.ones((2, 4), np.float32)
    else:
        idx, upd = np.array([[0, 1], [2, 3]], np.int64), np.ones((2, 2), np.float32)
    node = helper.make_node(op, ["d", "i", "u"], ["y"], reduction=reduction)
    g = helper.make_graph(
        [node],
        "g",
        [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [numpy_helper.from_array(a, n) for a, n in ((data, "d"), (idx, "i"), (upd, "u"))],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize(
    ("op", "reduction", "target", "refused"),
    [
        ("ScatterND", "max", 16, True),
        ("ScatterND", "min", 16, True),
        ("ScatterElements", "min", 17, True),
        ("ScatterND", "mul", 16, False),
        ("ScatterND", "mul", 15, True),
        ("ScatterElements", "none", 13, False),
    ],
)
def test_scatter_reductions_the_target_lacks_are_refused(
    op: str, reduction: str, target: int, refused: bool
) -> None:
    m = _scatter(op, reduction)
    if not refused:
        restamp(m, target)
        assert m.opset_import[0].version == target
        return
    with pytest.raises(ConvertError, match=rf"^operator {op} \(opset-18 form\) uses reduction {reduction}: "):
        restamp(m, target)

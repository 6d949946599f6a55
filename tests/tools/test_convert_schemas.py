"""Every operator Ultralytics exports at opsets 17-22, checked by onnx's own schemas against what
onnxruntime 1.11 (Jetson Nano, opset 16) and 1.16 (JetPack 5, opset 19) read; and real opset-22
models (Conv/MaxPool 22) converted for 1.11 computing what they computed before.

The type-only table of the converter is compared with ``onnx.defs`` step by step: an entry whose
schema changed more than types would lower a node to a form with another meaning; a type-only
step missing from it refuses a model for nothing (how a real opset-22 YOLOv8n was refused).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, defs, helper, version_converter

from edge_agent.tools.convert import ConvertError, convert_model, restamp, target_limits
from edge_agent.tools.convert_ops import RULES, TYPE_ONLY, forms, schema_change

REPO = Path(__file__).resolve().parents[2]

# What Ultralytics 8.x writes, by export: detect/pose (the shared YOLOv8n's graph, and the demo
# model's Shape/Gather/Constant of a dynamic export), dynamic and static INT8 of them (onnxruntime's
# quantizer), seg (ConvTranspose upsampling the protos), cls (pooled head), dynamic=True (anchor
# grids built from shapes) and RT-DETR (transformer decoder, deformable attention's GridSample).
ULTRALYTICS = sorted(
    set(
        [
            "Add",
            "Concat",
            "Conv",
            "Div",
            "MaxPool",
            "Mul",
            "Reshape",
            "Resize",
            "Sigmoid",
            "Slice",
            "Softmax",
            "Split",
            "Sub",
            "Transpose",
            "Constant",
            "Gather",
            "Shape",
            "Unsqueeze",
            "Squeeze",
            "Cast",
            "ConvInteger",
            "DynamicQuantizeLinear",
            "MatMulInteger",
            "QuantizeLinear",
            "DequantizeLinear",
            "ConvTranspose",
            "GlobalAveragePool",
            "Flatten",
            "Gemm",
            "Range",
            "Expand",
            "ConstantOfShape",
            "Equal",
            "Where",
            "Tile",
            "MatMul",
            "LayerNormalization",
            "Gelu",
            "Erf",
            "Relu",
            "ReduceMax",
            "ReduceMean",
            "ReduceSum",
            "TopK",
            "GatherElements",
            "GridSample",
            "Clip",
            "Log",
            "Exp",
            "Neg",
            "Sqrt",
            "Pow",
            "Not",
            "And",
            "Less",
            "Greater",
            "ArgMax",
            "Einsum",
            "ScatterND",
        ]
    )
)
# the only refusals: operators with no form at all at the target opset
NEWER_THAN = {16: {"LayerNormalization", "Gelu"}, 19: {"Gelu"}}


def _history() -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for s in defs.get_all_schemas_with_history():
        if s.domain in ("", "ai.onnx"):
            out[s.name].append(int(s.since_version))
    return {k: sorted(v) for k, v in out.items()}


HISTORY = _history()


@pytest.mark.parametrize(("op", "version"), sorted(TYPE_ONLY))
def test_each_type_only_step_changed_nothing_but_types_in_onnx_s_schema(op: str, version: int) -> None:
    assert defs.get_schema(op, version).since_version == version
    assert schema_change(op, version) == "only tensor types"


def test_every_type_only_step_from_14_to_22_is_in_the_table_or_has_a_rule() -> None:
    missing = [
        (op, v)
        for op, versions in HISTORY.items()
        for v in versions
        if 14 <= v <= 22
        and v > versions[0]
        and schema_change(op, v) == "only tensor types"
        and (op, v) not in TYPE_ONLY
        and op not in RULES
        and op not in ("If", "Loop", "Scan")  # subgraphs: refused before their form matters
    ]
    assert missing == []


@pytest.mark.parametrize("ort_version", ["1.11", "1.16"])
@pytest.mark.parametrize("source", [17, 18, 19, 20, 21, 22])
def test_every_ultralytics_operator_reaches_the_runtime_or_is_one_known_refusal(
    ort_version: str, source: int
) -> None:
    target = target_limits(ort_version).opset
    assert target == {"1.11": 16, "1.16": 19}[ort_version]
    if source <= target:
        return
    refused, lowered = set(), {}
    for op in ULTRALYTICS:
        if min(HISTORY[op]) > source:  # not written at this opset (Gelu before 20)
            continue
        now = defs.get_schema(op, source).since_version
        try:
            then = defs.get_schema(op, target).since_version
        except Exception:  # noqa: BLE001 - SchemaError: no form at the target
            refused.add(op)
            continue
        steps = forms(op, then, now)
        if steps:
            lowered[op] = steps
            # a step the table does not call type-only needs a rule of the converter's own
            assert op in RULES or all((op, v) in TYPE_ONLY for v in steps), (op, steps)
    assert refused == {op for op in NEWER_THAN[target] if min(HISTORY[op]) <= source}
    if source == 22 and target == 16:  # what refused a real YOLOv8n export before
        assert lowered["Conv"] == [22] and lowered["MaxPool"] == [22] and lowered["ConvTranspose"] == [22]


def test_a_bfloat16_maxpool_is_refused_naming_the_type_not_restamped() -> None:
    """Type-only steps keep the node only when its types fit the older form."""
    node = helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2])
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [1, 1, 3, 3])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 22)])
    with pytest.raises(ConvertError) as err:
        restamp(m, 16)
    assert str(err.value) == (
        "operator MaxPool (pool): its input 'x' is bfloat16, which the opset-12 form does not take: "
        "export the model with float32 tensors"
    )


def test_grid_sample_20_modes_become_16_s_names() -> None:
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], align_corners=0)  # 20's default: linear
    g = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4]),
            helper.make_tensor_value_info("grid", TensorProto.FLOAT, [1, 3, 3, 2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3, 3])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 22)])
    m.ir_version = 8
    src = onnx.ModelProto()
    src.CopyFrom(m)
    restamp(m, 16)
    assert helper.get_attribute_value(m.graph.node[0].attribute[-1]) == b"bilinear"
    onnx.checker.check_model(m)
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.normal(size=(1, 2, 4, 4)).astype(np.float32),
        "grid": rng.uniform(-1, 1, (1, 3, 3, 2)).astype(np.float32),
    }
    np.testing.assert_allclose(_run(m, feeds), _run(src, feeds), rtol=1e-6, atol=1e-6)


def _run(m: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return [np.asarray(o) for o in s.run(None, feeds)]


def _opset22(path: Path) -> Any:
    m = version_converter.convert_version(onnx.load(str(path)), 22)
    assert {o.domain: o.version for o in m.opset_import}[""] == 22
    return m


def _forms22(m: Any) -> set[str]:
    return {n.op_type for n in m.graph.node if defs.get_schema(n.op_type, 22).since_version == 22}


def _lowered_alike(m22: Any) -> None:
    out = convert_model(m22, "1.11")
    assert out.ir_version == 8 and {o.domain: o.version for o in out.opset_import}[""] == 16
    name = m22.graph.input[0].name
    shape = [d.dim_value or 1 for d in m22.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(0).uniform(0, 1, shape).astype(np.float32)
    for a, b in zip(_run(out, {name: x}), _run(m22, {name: x})):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4)


def test_the_demo_detector_at_opset_22_converts_for_1_11_and_computes_alike() -> None:
    m22 = _opset22(REPO / "models" / "demo-detector.onnx")
    assert _forms22(m22) == {"Conv"}
    _lowered_alike(m22)


@pytest.mark.shared
@pytest.mark.slow
@pytest.mark.parametrize("name", ["yolov8n-coco-fp32.onnx", "yolov8n-coco-int8-dynamic.onnx"])
def test_a_real_yolov8n_at_opset_22_converts_for_1_11_and_computes_alike(shared_dir: Path, name: str) -> None:
    m22 = _opset22(shared_dir / "models" / name)
    assert _forms22(m22) == ({"Conv", "MaxPool"} if "fp32" in name else {"MaxPool"})  # ConvInteger: 10
    _lowered_alike(m22)


def _scatter(reduction: str) -> Any:
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction=reduction)
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [
            onnx.numpy_helper.from_array(np.array([[0, 0], [3, 1]], np.int64), "i"),
            onnx.numpy_helper.from_array(np.array([[1.5, 2.0], [-1.0, 4.0]], np.float32), "u"),
        ],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    return m


def test_scatter_18_keeps_16_s_reductions_and_refuses_max_min() -> None:
    """18 only added reduction max/min (same schema, new attribute values): add is 16's already."""
    m = _scatter("add")
    src = onnx.ModelProto()
    src.CopyFrom(m)
    restamp(m, 16)
    onnx.checker.check_model(m)
    x = {"x": np.arange(8, dtype=np.float32).reshape(2, 4)}
    np.testing.assert_array_equal(_run(m, x)[0], _run(src, x)[0])
    with pytest.raises(
        ConvertError, match=r"^operator ScatterElements \(opset-18 form\) uses reduction max: "
    ):
        restamp(_scatter("max"), 16)
    with pytest.raises(ConvertError, match=r"uses reduction add: "):
        restamp(_scatter("add"), 15)

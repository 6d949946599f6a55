from __future__ import annotations

from pathlib import Path

import pytest

from edge_agent.core.runtime.onnx_wire import WireError, summarize


@pytest.mark.parametrize("kind", ["fp32", "fp16", "qdq_int8", "qoperator_int8", "dynamic_int8"])
def test_quantization_kind_is_recognised(quant_models: dict[str, Path], kind: str) -> None:
    s = summarize(quant_models[kind].read_bytes())
    assert s.quant_kind == kind
    assert s.opsets.get("ai.onnx", 0) >= 10


def test_op_counts_and_opset_of_a_known_graph(quant_models: dict[str, Path]) -> None:
    s = summarize(quant_models["fp32"].read_bytes())
    assert s.op_counts == {"Conv": 2, "Relu": 1, "GlobalAveragePool": 1, "Flatten": 1}
    assert s.opsets == {"ai.onnx": 16} and s.ir_version == 8  # lowered for onnxruntime 1.11 (conftest)


def test_truncated_and_garbage_bytes_raise(quant_models: dict[str, Path]) -> None:
    data = quant_models["fp32"].read_bytes()
    with pytest.raises(WireError):
        summarize(data[: len(data) // 2])
    with pytest.raises(WireError):
        summarize(b"this is not a protobuf at all, just text\n" * 3)

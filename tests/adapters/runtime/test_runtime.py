"""OnnxModel: every kind of model loads and runs; bad files give one clear ModelError."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from edge_agent.adapters.runtime.board import BoardInfo
from edge_agent.adapters.runtime.onnx_model import OnnxModel, parse_names
from edge_agent.errors import ModelError

X86 = BoardInfo("generic-x86", "test", "x86_64", 2)


@pytest.mark.parametrize("kind", ["fp32", "fp16", "qdq_int8", "qoperator_int8", "dynamic_int8"])
def test_every_quantization_kind_loads_and_runs(quant_models: dict[str, Path], kind: str) -> None:
    m = OnnxModel(quant_models[kind], board=X86)
    assert m.info.quant_kind == kind
    x = np.random.default_rng(0).uniform(0, 1, (1, 3, 32, 32)).astype(m.input.dtype)
    out = m.run_single(x)[0]
    assert out.shape == (1, 4)
    ref = OnnxModel(quant_models["fp32"], board=X86).run_single(x.astype(np.float32))[0]
    # every variant approximates the float model (int8 within quantization error)
    assert np.abs(out.astype(np.float32) - ref).max() < 0.15 * (np.abs(ref).max() + 1e-3)


def test_dynamic_int8_warns_and_points_to_quantize(
    quant_models: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        OnnxModel(quant_models["dynamic_int8"], board=X86)
    assert "slower than FP32" in caplog.text and "edge-agent quantize" in caplog.text


@pytest.mark.arm_smoke
def test_metadata_and_labels_override(bright_detector: Path, tmp_path: Path) -> None:
    m = OnnxModel(bright_detector, board=X86)
    assert m.info.names == {0: "bright"} and m.info.task == "detect"
    assert m.info.imgsz == (64, 64) and m.info.stride == 8
    assert m.input_hw() == (64, 64) and m.info.providers == ["CPUExecutionProvider"]
    labels = tmp_path / "labels.txt"
    labels.write_text("light\n\n")
    assert OnnxModel(bright_detector, board=X86, labels=labels).info.names == {0: "light"}


@pytest.mark.filterwarnings("ignore:Specified provider")
def test_failed_provider_falls_back_with_a_warning(
    bright_detector: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # pretend this onnxruntime offered CUDA; the real one cannot initialise it -> CPU, no crash
    with caplog.at_level(logging.WARNING):
        m = OnnxModel(
            bright_detector,
            board=X86,
            provider="cuda",
            available_providers=["CUDAExecutionProvider", "CPUExecutionProvider"],
        )
    assert m.info.providers == ["CPUExecutionProvider"]
    assert "CUDAExecutionProvider" in caplog.text


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "not found"),
        (b"", "empty"),
        (b"hello, I am a text file\n", "not an ONNX model"),
        ("half", "truncated"),
    ],
)
def test_bad_model_files_name_the_file(
    tmp_path: Path, bright_detector: Path, content: object, expected: str
) -> None:
    p = tmp_path / "model.onnx"
    if content == "half":
        data = bright_detector.read_bytes()
        p.write_bytes(data[: len(data) - 40])
    elif isinstance(content, bytes):
        p.write_bytes(content)
    with pytest.raises(ModelError, match=expected) as ei:
        OnnxModel(p, board=X86)
    assert str(p) in str(ei.value)


def test_parse_names_forms() -> None:
    assert parse_names("{0: 'person', 1: 'bus'}") == {0: "person", 1: "bus"}
    assert parse_names('["a", "b"]') == {0: "a", 1: "b"}
    assert parse_names("garbage(") == {}

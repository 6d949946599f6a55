"""The demo sensor model: rebuilt from the committed BasicMotions CSVs byte for byte, loadable by
the Nano's onnxruntime (opset <= 15, IR <= 8), its metadata complete and its test-split accuracy."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

MODELS = Path(__file__).resolve().parents[2] / "models"


@pytest.fixture(scope="module")
def script() -> ModuleType:
    pytest.importorskip("onnx", reason="the training script writes the graph with onnx (dev extra)")
    sys.path.insert(0, str(MODELS))
    try:
        import train_sensor
    finally:
        sys.path.remove(str(MODELS))
    return train_sensor


def test_retraining_writes_the_committed_fp32_model(script: ModuleType, tmp_path: Path) -> None:
    report = script.train(tmp_path)
    committed = hashlib.sha256((MODELS / "demo-sensor.onnx").read_bytes()).hexdigest()
    assert report["demo-sensor.onnx"]["sha256"] == committed
    assert report["demo-sensor.onnx"]["test_accuracy"] >= 0.98
    assert report["demo-sensor-int8.onnx"]["test_accuracy"] >= 0.97


@pytest.mark.parametrize("name", ["demo-sensor.onnx", "int8"])
def test_the_models_load_on_onnxruntime_1_11(script: ModuleType, name: str, tmp_path: Path) -> None:
    import onnx

    if name == "int8":  # not committed (no faster than FP32, docs/models.md): made as the script makes it
        script.quantize_int8(
            MODELS / "demo-sensor.onnx",
            tmp_path / "int8.onnx",
            script.windows(*script.load_split("train"), 25)[0][:8],
        )
        path = tmp_path / "int8.onnx"
    else:
        path = MODELS / name
    model = onnx.load(str(path))
    assert model.ir_version <= 8
    assert all(op.version <= 15 for op in model.opset_import if op.domain in ("", "ai.onnx"))
    meta = {p.key: p.value for p in model.metadata_props}
    assert meta["task"] == "classify" and meta["layout"] == "[1,C,T]"
    assert json.loads(meta["channels"]) == script.CHANNELS and len(json.loads(meta["mean"])) == 6
    assert (int(meta["window"]), int(meta["hop"])) == (50, 25)


def test_the_ts_reader_reads_series_and_labels(script: ModuleType) -> None:
    text = "#c\n@problemName X\n@data\n1,2,3:4,5,6:Running\n7,8,9:1,1,1:Walking\n"
    assert script.parse_ts(text) == [
        ([["1", "2", "3"], ["4", "5", "6"]], "Running"),
        ([["7", "8", "9"], ["1", "1", "1"]], "Walking"),
    ]

"""Models without an image input (a BERT-like text classifier on int64 token ids with a dynamic
sequence axis, a sensor-window model [1, C, T]): ``bench`` times them on generated inputs,
``quantize`` makes a dynamic INT8 copy (MatMulInteger) with no calibration images, ``inspect``
says what they are. On the old code each ended in a traceback or failed inside onnxruntime."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from support.layouts import make_sensor_model, make_text_classifier
from support.runner import cli

from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.app.cli.main import main
from edge_agent.inference.task import input_kind
from edge_agent.tools.bench import synthetic_feeds


@pytest.fixture(scope="module")
def text(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_text_classifier(tmp_path_factory.mktemp("t") / "text.onnx")


@pytest.fixture(scope="module")
def sensor(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_sensor_model(tmp_path_factory.mktemp("s") / "sensor.onnx")


def test_the_input_kind_and_generated_feeds(text: Path, sensor: Path) -> None:
    m = OnnxModel(text, warmup=False)
    assert input_kind(m) == "tensor" and input_kind(OnnxModel(sensor, warmup=False)) == "tensor"
    feeds = synthetic_feeds(m, seq_len=17)
    assert feeds["input_ids"].shape == (1, 17) and feeds["input_ids"].dtype == np.int64
    assert feeds["input_ids"].min() >= 1 and feeds["input_ids"].max() < 100
    assert (feeds["attention_mask"] == 1).all()


def test_bench_times_a_token_model_and_a_sensor_model(
    text: Path, sensor: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(
        [
            "bench",
            str(text),
            str(sensor),
            "--runs",
            "3",
            "--warmup",
            "1",
            "--no-memory",
            "--json",
            "--seq-len",
            "32",
        ]
    )
    rep = json.loads(capsys.readouterr().out)
    assert rc == 0 and rep["seq_len"] == 32
    assert [r["kind"] for r in rep["models"]] == ["tensor", "tensor"]
    assert all(r["session_run_ms"]["p50"] > 0 for r in rep["models"])


def test_bench_table_says_the_inputs_are_generated(text: Path) -> None:
    r = cli("bench", str(text), "--runs", "2", "--warmup", "0", "--threads", "1")
    assert r.returncode == 0, r.stderr
    assert "generated tensors, dynamic axes 128 long" in r.stdout and "Traceback" not in r.stderr


def test_quantize_makes_a_dynamic_int8_copy_without_calibration(text: Path, tmp_path: Path) -> None:
    out = tmp_path / "text.int8.onnx"
    r = cli("quantize", str(text), "-o", str(out))
    assert r.returncode == 0, r.stderr
    ops = {n.op_type for n in onnx.load(str(out)).graph.node}
    assert "MatMulInteger" in ops
    assert "top-1 agreement" in r.stderr and "dynamic INT8" in r.stderr
    assert OnnxModel(out, warmup=False).info.quant_kind == "dynamic_int8"
    b = cli("bench", str(text), str(out), "--runs", "2", "--warmup", "0", "--no-memory", "--json")
    assert b.returncode == 0, b.stderr
    assert json.loads(b.stdout)["models"][1]["quantization"] == "dynamic_int8"


def test_an_image_model_still_needs_calib(toy_dir: Path, tmp_path: Path) -> None:
    r = cli("quantize", str(toy_dir / "toy-fp32.onnx"), "-o", str(tmp_path / "x.onnx"))
    assert r.returncode != 0
    assert (
        r.stderr.strip()
        .splitlines()[-1]
        .endswith("--calib FOLDER is required: static INT8 calibrates on images")
    )


def test_quantize_refuses_image_only_options_for_a_token_model(text: Path, tmp_path: Path) -> None:
    r = cli("quantize", str(text), "-o", str(tmp_path / "x.onnx"), "--target-ort", "1.11")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "quantized dynamically, which takes none of --target-ort" in r.stderr


def test_inspect_says_it_is_not_an_image_model(text: Path) -> None:
    r = cli("inspect", str(text))
    assert r.returncode == 0, r.stderr
    assert "not an image (input_ids tensor(int64)" in r.stdout
    assert "preprocess" not in r.stdout  # no classifier crop guessed for token ids


def test_validate_names_a_token_model_in_one_line(text: Path, tmp_path: Path) -> None:
    img = tmp_path / "imgs"
    img.mkdir()
    import cv2

    cv2.imwrite(str(img / "a.png"), np.zeros((32, 32, 3), np.uint8))
    r = cli("validate", str(text), str(text), "--images", str(img))
    assert r.returncode != 0
    assert (
        r.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "are not an image: validate compares models on images; `edge-agent quantize` compares a dynamic "
            "INT8 copy with FP32 on generated inputs"
        )
    )

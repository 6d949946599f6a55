"""``edge-agent inspect`` in process (``cli.main`` with capsys, so mutation testing credits it): the
lines a user reads for each kind of model (detector, classifier, sensor, tensor), the warnings, and a
model this onnxruntime cannot load still says what it needs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from support.layouts import coco_names, const_model, make_text_classifier

from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.app.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
DETECTOR = ROOT / "models" / "demo-detector.onnx"
CLASSIFIER = ROOT / "models" / "demo-classifier.onnx"
SENSOR = ROOT / "models" / "demo-sensor.onnx"


def inspect(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    rc = main(["inspect", *args])
    out, err = capsys.readouterr()
    return rc, out.splitlines(), err


def described(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main(["inspect", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def edited(src: Path, dst: Path, ir: int | None = None, drop: tuple[str, ...] = (), **meta: str) -> Path:
    model = onnx.load(str(src))
    props = {p.key: p.value for p in model.metadata_props if p.key not in drop}
    props.update(meta)
    del model.metadata_props[:]
    for k, v in props.items():
        model.metadata_props.add(key=k, value=v)
    if ir is not None:
        model.ir_version = ir
    onnx.save(model, str(dst))
    return dst


def test_a_detector_is_described_line_by_line(capsys: pytest.CaptureFixture[str]) -> None:
    rc, lines, err = inspect(capsys, str(DETECTOR))
    assert rc == 0 and "warning" not in err
    info = OnnxModel(str(DETECTOR)).info
    assert lines[:10] == [
        f"model        {DETECTOR}",
        f"size         1.38 MB  sha256 {info.sha256[:16]}...",
        "producer     edge-agent models/train_demo.py  opsets {'ai.onnx': 16}",
        "onnx         IR 8, opset 16: loads on onnxruntime >= 1.11",
        "task         detect  imgsz [160, 160]  stride 32",
        "quantization fp32",
        "input        images [1, 3, 160, 160] tensor(float)",
        "output       output0 [1, 7, 525] tensor(float)",
        "classes      3  0:circle, 1:square, 2:triangle",
        "operators    127 nodes: Conv x29, Mul x25, Sigmoid x23, Constant x18, Add x8, Concat x6, Reshape x5, Resize x2",
    ]
    assert lines[10] == f"providers    {', '.join(info.providers)}  ({info.provider_reason})"
    assert re.fullmatch(r"load\+warmup  \d+ ms", lines[11]), lines[11]
    assert lines[12:] == [
        "format       yolov8 [1, 4+nc, N] or [1, N, 4+nc] (YOLOv8/YOLO11), 3 classes",
        "input size   160x160 (letterboxed)",
    ]


def test_a_detectors_json_carries_how_the_agent_runs_it(capsys: pytest.CaptureFixture[str]) -> None:
    info = described(capsys, str(DETECTOR))
    assert info["task_used"] == "detect" and info["warnings"] == []
    assert info["format"] == "yolov8 [1, 4+nc, N] or [1, N, 4+nc] (YOLOv8/YOLO11), 3 classes"
    assert info["input_size"] == "160x160 (letterboxed)"
    assert (info["ir_version"], info["stamps"], info["min_onnxruntime"], info["loads_here"]) == (
        8,
        "IR 8, opset 16",
        "1.11",
        True,
    )
    assert info["names"] == {"0": "circle", "1": "square", "2": "triangle"} and info["path"] == str(DETECTOR)


def test_a_detector_that_does_its_own_nms_says_so(
    capsys: pytest.CaptureFixture[str], format_models: dict[str, Path]
) -> None:
    rc, lines, _ = inspect(capsys, str(format_models["end2end"]))
    assert rc == 0
    (fmt,) = [x for x in lines if x.startswith("format")]
    assert fmt.endswith(", 1 classes, NMS in the model")
    rc, lines, _ = inspect(capsys, str(format_models["yolov8"]))
    (fmt,) = [x for x in lines if x.startswith("format")]
    assert "NMS" not in fmt and "input size   48x96 (letterboxed)" in lines


def test_a_dynamic_hw_detector_is_letterboxed_into_a_rectangle(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = np.zeros((1, 84, 100), np.float32)
    meta = {"names": coco_names(), "imgsz": "[640, 640]", "stride": "32"}
    path = const_model(
        tmp_path / "d.onnx", {"output0": out}, meta, (1, 3, "h", "w"), {"output0": ["b", 84, "a"]}
    )
    info = described(capsys, str(path))
    assert info["input_size"] == (
        "dynamic H/W: each image letterboxed into the smallest 32-multiple rectangle inside 640x640 "
        "(as Ultralytics; e.g. 1080x810 -> 640x480); the camera loop keeps 640x640"
    )
    _, lines, _ = inspect(capsys, str(path))
    assert f"input size   {info['input_size']}" in lines
    assert (
        "classes      80  "
        + ", ".join(f"{k}:{v}" for k, v in list(OnnxModel(str(path)).info.names.items())[:12])
        + " ..."
        in lines
    )


def test_a_classifier_shows_its_preprocessing(capsys: pytest.CaptureFixture[str]) -> None:
    rc, lines, err = inspect(capsys, str(CLASSIFIER))
    assert rc == 0 and "warning" not in err
    (pre,) = [x for x in lines if x.startswith("preprocess   ")]
    assert pre.endswith(
        "(metadata): stretch 64x64, RGB, x0.00392157, mean [0.485, 0.456, 0.406], std [0.229, 0.224, 0.225], NCHW"
    )
    assert not any(x.startswith(("format", "input size", "sensor")) for x in lines)
    assert (
        "size         0.46 MB" in " ".join(lines)
        and "classes      4  0:solid, 1:striped, 2:dotted, 3:outlined" in lines
    )
    assert described(capsys, str(CLASSIFIER))["task_used"] == "classify"


def test_a_classifier_without_preprocessing_is_a_guess_warned_about_unless_given(
    capsys: pytest.CaptureFixture[str], color_classifier: Path, tmp_path: Path
) -> None:
    # no task and no preprocess in the metadata: a classifier by its [N, classes] output, recipe guessed
    color_classifier = edited(color_classifier, tmp_path / "guess.onnx", drop=("task",))
    rc, lines, err = inspect(capsys, str(color_classifier))
    assert rc == 0
    (warning,) = err.splitlines()
    assert warning.startswith(
        f"edge-agent inspect: warning: {color_classifier}: no preprocessing in the metadata; guessing "
    )
    assert warning.endswith(
        "Set --classifier-preprocess / [classifier] preprocess (ultralytics, imagenet, raw or custom)"
    )
    rc, lines, err = inspect(capsys, str(color_classifier), "--classifier-preprocess", "imagenet")
    assert rc == 0 and err == ""
    (pre,) = [x for x in lines if x.startswith("preprocess   ")]
    assert "mean [0.485, 0.456, 0.406]" in pre


def test_twelve_classes_are_listed_and_more_are_cut(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for n, tail in ((12, ""), (13, " ...")):
        labels = tmp_path / f"{n}.txt"
        labels.write_text("".join(f"c{i}\n" for i in range(n)))
        rc, lines, _ = inspect(capsys, str(CLASSIFIER), "--labels", str(labels))
        assert rc == 0
        assert f"classes      {n}  " + ", ".join(f"{i}:c{i}" for i in range(12)) + tail in lines


def test_a_sensor_model_says_its_window_and_its_size_in_kb(capsys: pytest.CaptureFixture[str]) -> None:
    rc, lines, _ = inspect(capsys, str(SENSOR))
    assert rc == 0
    assert lines[-1] == (
        "sensor       classify: window 50 readings, hop 25 at 10 Hz, input [1,6,50] (NCT), channels acc_x, acc_y, "
        "acc_z, gyr_x, gyr_y, gyr_z"
    )
    assert (
        lines[1].startswith("size         3.7 kB  sha256 ")
        and "onnx         IR 7, opset 13: loads on onnxruntime >= 1.6" in lines
    )
    info = described(capsys, str(SENSOR))
    assert info["task_used"] == "sensor classify" and info["sensor_spec"] == {
        "task": "classify",
        "channels": ["acc_x", "acc_y", "acc_z", "gyr_x", "gyr_y", "gyr_z"],
        "window": 50,
        "hop": 25,
        "rate_hz": 10.0,
        "layout": "NCT",
        "labels": ["Standing", "Running", "Walking", "Badminton"],
    }


def test_a_sensor_model_with_bad_metadata_is_a_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = edited(SENSOR, tmp_path / "bad.onnx", task="dance")
    rc, lines, err = inspect(capsys, str(bad))
    assert rc == 0 and not any(x.startswith("sensor") for x in lines)
    assert err.splitlines() == [
        f"edge-agent inspect: warning: {bad}: task 'dance': expected one of classify, score, regress (set task = ...)"
    ]
    assert described(capsys, str(bad)).get("task_used") is None


def test_a_tensor_model_is_said_not_to_be_an_image_model(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = make_text_classifier(tmp_path / "text.onnx")
    info = described(capsys, str(text))
    inputs = ", ".join(f"{t.name} {t.type} {list(t.shape)}" for t in OnnxModel(str(text)).info.inputs)
    assert info["task_used"] == "tensor" and info["input_size"] == (
        f"not an image ({inputs}): `bench` feeds generated inputs (--seq-len for dynamic axes), "
        "`quantize` makes a dynamic INT8 copy; the vision pipeline (run, infer) does not take it"
    )


def test_the_size_is_in_mb_from_100_kb(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for size, shown in ((99_999, "100.0 kB"), (100_000, "0.10 MB")):
        path, pad = tmp_path / f"{size}.onnx", 0
        while True:  # metadata padding until the file has exactly that size
            edited(SENSOR, path, pad="x" * pad)
            have = path.stat().st_size
            if have == size:
                break
            pad += size - have
        rc, lines, _ = inspect(capsys, str(path))
        assert rc == 0 and lines[1].startswith(f"size         {shown}  sha256 "), lines[1]


def test_a_model_this_onnxruntime_cannot_load_still_says_what_it_needs(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    color_classifier: Path,
) -> None:
    import onnxruntime

    future = edited(SENSOR, tmp_path / "future.onnx", ir=99)
    monkeypatch.setattr(onnxruntime, "__version__", "1.11.0")  # as on a Jetson Nano (JetPack 4.6)
    rc, lines, err = inspect(capsys, str(future))
    assert rc == 1
    assert lines == [
        f"model        {future}",
        "onnx         IR 99, opset 13",
        "needs        onnxruntime >= ?",
    ]
    assert len(err.splitlines()) == 1 and err.startswith("edge-agent inspect: error: ")
    assert described(capsys, str(DETECTOR))["loads_here"] is True  # IR 8, opset 16: what 1.11 reads
    rc, lines, err = inspect(capsys, str(color_classifier))  # IR 9, opset 18: refused by the 1.11 check
    assert rc == 1 and lines[1:] == ["onnx         IR 9, opset 18", "needs        onnxruntime >= 1.15"], lines


def test_a_file_that_is_no_model_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\xff" * 40)
    rc, lines, err = inspect(capsys, str(junk))
    assert rc == 1 and lines == [] and len(err.splitlines()) == 1 and str(junk) in err
    missing = tmp_path / "none.onnx"
    rc, lines, err = inspect(capsys, str(missing))
    assert rc == 1 and lines == [] and len(err.splitlines()) == 1 and str(missing) in err

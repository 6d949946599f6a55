"""``edge-agent quantize`` / ``validate`` on a small YOLO-like model built by the tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import onnx
import pytest

from edge_agent.app.cli.main import main
from edge_agent.app.workbench.quantize_cmd import default_output, failed_name
from edge_agent.tools.quantize import image_files, pick_samples, quantize_model


def _consumers(model: onnx.ModelProto) -> dict[str, list[onnx.NodeProto]]:
    out: dict[str, list[onnx.NodeProto]] = {}
    for n in model.graph.node:
        for i in n.input:
            out.setdefault(i, []).append(n)
    return out


@pytest.fixture(scope="module")
def toy_int8(toy_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("q") / "toy.int8.onnx"
    quantize_model(toy_dir / "toy-fp32.onnx", out, image_files(toy_dir / "calib"), progress=False)
    return out


def test_head_stays_float_and_convs_are_quantized(toy_int8: Path) -> None:
    m = onnx.load(str(toy_int8))
    producer = {o: n for n in m.graph.node for o in n.output}
    final = producer["output0"]
    assert final.op_type == "Concat" and final.name == "head/concat"
    # the Concat's inputs come from float ops, not from DequantizeLinear
    assert {producer[i].op_type for i in final.input} == {"Mul", "Sigmoid"}
    q_inputs = {
        i for n in m.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear") for i in n.input
    }
    tail_tensors = {
        o for n in m.graph.node if n.name.startswith("head/") and n.op_type != "Conv" for o in n.output
    }
    assert not (tail_tensors & q_inputs), "a tail tensor was quantized"
    convs = [n for n in m.graph.node if n.op_type == "Conv"]
    assert len(convs) == 3
    for c in convs:  # activation and weight both come through DequantizeLinear
        assert producer[c.input[0]].op_type == "DequantizeLinear"
        assert producer[c.input[1]].op_type == "DequantizeLinear"


def test_metadata_is_kept_and_records_the_quantization(toy_int8: Path) -> None:
    meta = {p.key: p.value for p in onnx.load(str(toy_int8)).metadata_props}
    assert meta["task"] == "detect" and meta["imgsz"] == "[64, 64]" and meta["stride"] == "4"
    assert "c2" in meta["names"]
    q = json.loads(meta["quantization"])
    assert q["format"] == "QDQ" and q["activation_type"] == "uint8" and q["weight_type"].startswith("int8")
    assert (
        q["samples"] == 12 and q["excluded_nodes"] == 6 and q["method"] == "minmax" and q["target"] == "x86"
    )
    assert q["edge_agent_version"]


def test_quantize_command_validates_and_passes(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "toy.int8.onnx"
    rc = main(
        [
            "quantize",
            str(toy_dir / "toy-fp32.onnx"),
            "--calib",
            str(toy_dir / "calib"),
            "-o",
            str(out),
            "--val",
            str(toy_dir / "val"),
        ]
    )
    cap = capsys.readouterr()
    assert rc == 0, cap.out + cap.err
    assert out.is_file()
    assert "PASS" in cap.out and "recall_of_reference" in cap.out
    assert "calibrating" in cap.err  # progress on stderr


def test_naive_quantization_is_refused_and_renamed(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "toy.int8.onnx"
    rc = main(
        [
            "quantize",
            str(toy_dir / "toy-fp32.onnx"),
            "--calib",
            str(toy_dir / "calib"),
            "-o",
            str(out),
            "--val",
            str(toy_dir / "val"),
            "--naive",
        ]
    )
    cap = capsys.readouterr()
    assert rc == 1
    assert not out.exists()
    assert failed_name(out).is_file()
    assert "fails validation" in cap.err and "do not ship" in cap.err


def test_validate_command_exit_codes_and_json(
    toy_dir: Path, toy_int8: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = str(toy_dir / "toy-fp32.onnx")
    assert main(["validate", ref, ref, "--images", str(toy_dir / "val"), "--json"]) == 0
    same = json.loads(capsys.readouterr().out)
    assert same["passed"] and same["metrics"]["recall_of_reference"] == 1.0
    assert same["metrics"]["raw_max_abs_diff"] == 0.0
    assert main(["validate", ref, str(toy_int8), "--images", str(toy_dir / "val"), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert 0.9 <= rep["metrics"]["recall_of_reference"] < 1.0 or rep["metrics"]["raw_max_abs_diff"] > 0
    # an impossible threshold turns the same comparison into a failure
    rc = main(["validate", ref, str(toy_int8), "--images", str(toy_dir / "val"), "--min-mean-iou", "0.9999"])
    assert rc == 1
    assert "FAIL" in capsys.readouterr().out


def test_validate_with_yolo_labels_reports_map(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # labels = the reference's own detections (conf 0.25, NMS 0.7 as in evaluation): every prediction
    # above 0.25 is then a true positive ranked above all others, so the reference scores mAP 1.0
    from edge_agent.adapters.camera.images import read_image
    from edge_agent.adapters.runtime.onnx_model import OnnxModel
    from edge_agent.inference.pipeline import Detector, DetectorParams

    ref = toy_dir / "toy-fp32.onnx"
    det = Detector(OnnxModel(ref, provider="cpu"), DetectorParams(conf_threshold=0.25, iou_threshold=0.7))
    labels = tmp_path / "labels"
    labels.mkdir()
    for f in image_files(toy_dir / "val"):
        img = read_image(f)
        h, w = img.shape[:2]
        lines = []
        for (x1, y1, x2, y2), c in zip(
            det.detect(img).detections.boxes, det.detect(img).detections.class_ids
        ):
            lines.append(f"{c} {(x1 + x2) / 2 / w} {(y1 + y2) / 2 / h} {(x2 - x1) / w} {(y2 - y1) / h}")
        (labels / f"{f.stem}.txt").write_text("\n".join(lines))
    assert (
        main(
            [
                "validate",
                str(ref),
                str(ref),
                "--images",
                str(toy_dir / "val"),
                "--labels",
                str(labels),
                "--json",
            ]
        )
        == 0
    )
    rep = json.loads(capsys.readouterr().out)
    assert rep["metrics"]["map50_reference"] == pytest.approx(1.0, abs=1e-6)
    assert rep["metrics"]["map50_95_reference"] == pytest.approx(1.0, abs=1e-6)
    assert {c["name"] for c in rep["checks"]} >= {"map50_drop", "map50_95_drop"}


def test_opset_below_13_is_upgraded(toy_dir: Path, tmp_path: Path) -> None:
    from support.toolchain import toy_detector_model

    old = toy_detector_model(opset=11)
    src = tmp_path / "old.onnx"
    onnx.save(old, str(src))
    res = quantize_model(src, tmp_path / "old.int8.onnx", image_files(toy_dir / "calib")[:4], progress=False)
    m = onnx.load(str(res.output))
    assert next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx")) >= 13
    assert len(res.excluded_nodes) == 6


def test_helpers_for_paths_and_samples(tmp_path: Path) -> None:
    assert default_output(Path("m/yolo-fp32.onnx")) == Path("m/yolo.int8.onnx")
    assert default_output(Path("det.onnx")) == Path("det.int8.onnx")
    assert failed_name(Path("a/det.int8.onnx")) == Path("a/det.int8.FAILED-VALIDATION.onnx")
    files = [Path(f"{i}.jpg") for i in range(10)]
    assert pick_samples(files, 0) == files
    assert pick_samples(files, 3) == [Path("0.jpg"), Path("4.jpg"), Path("9.jpg")]
    with pytest.raises(Exception, match="no images found"):
        image_files(tmp_path)
    shutil.rmtree(tmp_path)
    with pytest.raises(Exception, match="not a directory"):
        image_files(tmp_path)


@pytest.mark.parametrize("method", ["entropy", "percentile"])
def test_histogram_calibration_methods_also_hold_accuracy(toy_dir: Path, tmp_path: Path, method: str) -> None:
    from edge_agent.tools.validate import validate_models

    out = tmp_path / f"{method}.onnx"
    res = quantize_model(
        toy_dir / "toy-fp32.onnx", out, image_files(toy_dir / "calib"), method=method, progress=False
    )
    assert (
        json.loads({p.key: p.value for p in onnx.load(str(out)).metadata_props}["quantization"])["method"]
        == method
    )
    assert len(res.excluded_nodes) == 6
    rep = validate_models(
        toy_dir / "toy-fp32.onnx", out, image_files(toy_dir / "val"), toy_dir / "val", show_progress=False
    )
    assert rep.passed, rep.format_table()


def test_a_failed_run_leaves_no_file_under_the_output_name(
    toy_int8: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calib = tmp_path / "calib"
    calib.mkdir()
    (calib / "a.png").write_bytes(b"")
    assert main(["quantize", str(toy_int8), "--calib", str(calib), "-o", str(tmp_path / "x.onnx")]) == 1
    err = capsys.readouterr().err
    assert "a.png: empty file" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calib"]

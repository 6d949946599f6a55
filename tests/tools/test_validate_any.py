"""``validate`` compares any two detectors of one task: other layouts, input sizes, class lists."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from support import cli
from support.models import bright_scene, make_format_detector

from edge_agent.tools.validate import validate_models


@pytest.fixture(scope="module")
def det(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("fmt")
    out = {
        f: make_format_detector(d / f"{f}.onnx", f, imgsz_hw=(48, 96))
        for f in ("yolov8", "yolov8t", "yolov5")
    }
    out["top2"] = make_format_detector(d / "top2.onnx", "end2end", imgsz_hw=(48, 96), k=2)
    out["yolov5_swapped"] = make_format_detector(
        d / "v5s.onnx", "yolov5", imgsz_hw=(48, 96), swap_classes=True
    )
    out["square96"] = make_format_detector(d / "sq.onnx", "yolov8", imgsz_hw=(96, 96))
    return out


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three 192x64 scenes, each with one 32-px white square on the stride grid (4 cells of score 1)."""
    d = tmp_path_factory.mktemp("scenes")
    for i, x in enumerate((0, 64, 128)):
        cv2.imwrite(str(d / f"s{i}.png"), bright_scene(64, 192, [(x, 16, 32)]))
    return d


def _report(ref: Path, cand: Path, images: Path, labels: Path | None = None) -> dict:
    args = ["validate", str(ref), str(cand), "--images", str(images), "--json"]
    r = cli(*args, *(["--labels", str(labels)] if labels else []))
    assert "Traceback" not in r.stderr, r.stderr
    rep = json.loads(r.stdout)
    rep["rc"] = r.returncode
    return rep


def test_the_recall_gate_fails_a_candidate_that_loses_detections(det: dict[str, Path], scenes: Path) -> None:
    """An end2end export keeping its 2 best boxes finds half of the reference's 4 per image. Every box it
    finds is exact (IoU 1, same score), so only the recall gate can fail it."""
    rep = _report(det["yolov8"], det["top2"], scenes)
    checks = {c["name"]: c for c in rep["checks"]}
    assert rep["metrics"]["recall_of_reference"] == pytest.approx(0.5)
    assert checks["mean_iou"]["passed"] and checks["mean_abs_conf_delta"]["passed"]
    assert not checks["recall_of_reference"]["passed"]
    assert rep["verdict"] == "FAIL" and rep["rc"] == 1


def test_another_layout_compares_on_detections_and_passes(det: dict[str, Path], scenes: Path) -> None:
    rep = _report(det["yolov8"], det["yolov8t"], scenes)
    assert rep["verdict"] == "PASS" and rep["rc"] == 0
    assert rep["metrics"]["recall_of_reference"] == 1.0 and rep["metrics"]["mean_iou"] == pytest.approx(1.0)
    assert "raw_max_abs_diff" not in rep["metrics"]
    assert any("raw outputs differ" in n and "compared on detections only" in n for n in rep["notes"])


def test_another_class_count_is_reported_and_matched_by_name(det: dict[str, Path], scenes: Path) -> None:
    rep = _report(det["yolov8"], det["yolov5"], scenes)  # 1 class 'bright' vs 2 classes 'bright', 'dim'
    assert any("class count differs: reference 1, candidate 2" in n for n in rep["notes"])
    assert rep["verdict"] == "PASS" and rep["metrics"]["recall_of_reference"] == 1.0


def test_class_ids_that_differ_are_matched_by_name(det: dict[str, Path], scenes: Path) -> None:
    """'bright' is id 0 in the reference and id 1 in the candidate: matched by id, nothing would agree."""
    rep = _report(det["yolov8"], det["yolov5_swapped"], scenes)
    assert rep["verdict"] == "PASS" and rep["metrics"]["recall_of_reference"] == 1.0


def test_another_input_size_compares_on_detections(det: dict[str, Path], scenes: Path) -> None:
    """96x96 against 48x96 (the '320 re-export against the 640 original' case, which used to crash):
    the same gain (0.5) and other padding, so the same boxes come back in image pixels."""
    rep = _report(det["yolov8"], det["square96"], scenes)
    assert rep["verdict"] == "PASS" and rep["metrics"]["reference_detections"] == 12
    assert rep["metrics"]["recall_of_reference"] == 1.0 and rep["metrics"]["mean_iou"] == pytest.approx(1.0)
    assert any("[1, 5, 72] vs yolov8 [1, 5, 144]" in n for n in rep["notes"])


def test_no_labels_found_is_said_and_is_no_fail(det: dict[str, Path], scenes: Path, tmp_path: Path) -> None:
    labels = tmp_path / "labels"
    labels.mkdir()
    (labels / "other.txt").write_text("0 0.5 0.5 0.1 0.1\n")
    rep = _report(det["yolov8"], det["yolov8t"], scenes, labels)
    assert any(n.startswith("no labels found") for n in rep["notes"])
    assert rep["verdict"] == "PASS" and not any(c["name"].startswith("map") for c in rep["checks"])


def test_nothing_to_compare_is_no_verdict(det: dict[str, Path], tmp_path: Path) -> None:
    black = tmp_path / "black"
    black.mkdir()
    cv2.imwrite(str(black / "b.png"), np.zeros((64, 64, 3), np.uint8))
    rep = _report(det["yolov8"], det["yolov8t"], black)
    assert rep["verdict"] == "NO VERDICT" and rep["rc"] == 2 and not rep["passed"]
    r = cli("validate", str(det["yolov8"]), str(det["yolov8t"]), "--images", str(black))
    assert "NO VERDICT: the reference found no detections" in r.stdout and "FAIL" not in r.stdout


def test_models_of_different_tasks_are_one_line(det: dict[str, Path], tmp_path: Path, scenes: Path) -> None:
    from support.models import make_color_classifier

    clf = make_color_classifier(tmp_path / "c.onnx")
    r = cli("validate", str(det["yolov8"]), str(clf), "--images", str(scenes))
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 1 and len(lines) == 1 and "is a classify model but" in lines[0]


@pytest.mark.shared
def test_shared_fp32_against_dynamic_int8_in_process(shared_dir: Path) -> None:
    m = shared_dir / "models"
    rep = validate_models(
        m / "yolov8n-coco-fp32.onnx",
        m / "yolov8n-coco-int8-dynamic.onnx",
        sorted((shared_dir / "images").glob("*.jpg")),
        shared_dir / "images",
        show_progress=False,
    )
    assert rep.passed, rep.format_table()
    assert rep.metrics["reference_detections"] >= 7

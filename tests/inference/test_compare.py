"""``validate``'s comparison in-process (inference/compare.py, inference/report.py): the figures and
the verdict a user reads for two detectors or two classifiers, the label files, the report table.
The CLI runs of the same comparisons are in tests/tools/test_validate_any.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest
from support.models import bright_scene, make_color_classifier, make_format_detector, make_grid_classifier

from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.core.vision.thresholds import Thresholds
from edge_agent.errors import EdgeAgentError
from edge_agent.inference.compare import (
    class_folder_labels,
    class_map,
    detector_raw_diffs,
    read_yolo_labels,
    validate_classifier,
    validate_detector,
)
from edge_agent.inference.report import Check, ValidationReport


class Counter:
    def __init__(self) -> None:
        self.n = 0

    def update(self) -> None:
        self.n += 1


def _rename(src: Path, dst: Path, names: str) -> Path:
    m = onnx.load(str(src))
    for p in m.metadata_props:
        if p.key == "names":
            p.value = names
    onnx.save(m, str(dst))
    return dst


@pytest.fixture(scope="module")
def det(tmp_path_factory: pytest.TempPathFactory) -> dict[str, OnnxModel]:
    d = tmp_path_factory.mktemp("cmp")
    paths = {
        "ref": make_format_detector(d / "ref.onnx", "yolov8", imgsz_hw=(48, 96)),
        "dim": make_format_detector(d / "dim.onnx", "yolov8", imgsz_hw=(48, 96), score_gain=0.8),
        "t": make_format_detector(d / "t.onnx", "yolov8t", imgsz_hw=(48, 96)),
        "top2": make_format_detector(d / "top2.onnx", "end2end", imgsz_hw=(48, 96), k=2),
        "v5": make_format_detector(d / "v5.onnx", "yolov5", imgsz_hw=(48, 96)),
        "v5s": make_format_detector(d / "v5s.onnx", "yolov5", imgsz_hw=(48, 96), swap_classes=True),
    }
    paths["other"] = _rename(paths["ref"], d / "other.onnx", "{0: 'other'}")
    return {k: OnnxModel(p, warmup=False) for k, p in paths.items()}


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three 192x64 scenes, one 32-px square each: 4 detections of 16 px (score = brightness)."""
    d = tmp_path_factory.mktemp("scenes")
    out = []
    for i, x in enumerate((0, 64, 128)):
        out.append(d / f"s{i}.png")
        cv2.imwrite(str(out[-1]), bright_scene(64, 192, [(x, 16, 32)]))
    return out


def _cells(x: int) -> list[tuple[float, float, float, float]]:
    return [(x + dx, 16.0 + dy, x + dx + 16.0, 32.0 + dy) for dy in (0, 16) for dx in (0, 16)]


def test_a_model_against_itself_agrees_everywhere_and_passes(
    det: dict[str, OnnxModel], scenes: list[Path]
) -> None:
    bar = Counter()
    rep = validate_detector(det["ref"], det["ref"], scenes, None, Thresholds(), bar)
    assert bar.n == 3 and rep.images == 3 and rep.kind == "detector"
    assert rep.reference == rep.candidate == str(det["ref"].path)
    assert rep.metrics == {
        "reference_detections": 12.0,
        "candidate_detections": 12.0,
        "matched": 12.0,
        "recall_of_reference": 1.0,
        "precision_vs_reference": 1.0,
        "mean_iou": 1.0,
        "mean_abs_conf_delta": 0.0,
        "raw_max_abs_diff": 0.0,
        "raw_max_rel_diff": 0.0,
        "raw_max_score_diff": 0.0,
        "raw_max_box_diff_px_confident": 0.0,
    }
    assert [(c.name, c.limit, c.op, c.passed) for c in rep.checks] == [
        ("recall_of_reference", 0.9, ">=", True),
        ("mean_iou", 0.8, ">=", True),
        ("mean_abs_conf_delta", 0.1, "<=", True),
    ]
    assert rep.notes == [] and rep.verdict == "PASS" and rep.passed


def test_a_score_drift_fails_the_conf_delta_check_and_shows_in_the_raw_figures(
    det: dict[str, OnnxModel], scenes: list[Path]
) -> None:
    rep = validate_detector(det["ref"], det["dim"], scenes, None, Thresholds())
    m = rep.metrics
    assert m["recall_of_reference"] == 1.0 and m["mean_iou"] == 1.0
    assert m["mean_abs_conf_delta"] == pytest.approx(0.2, abs=1e-6)
    assert m["raw_max_score_diff"] == pytest.approx(0.2, abs=1e-6)
    assert m["raw_max_abs_diff"] == pytest.approx(0.2, abs=1e-6)  # the boxes are the same
    assert m["raw_max_rel_diff"] == pytest.approx(0.2 / 92, rel=1e-5)  # of the largest value, x 92
    assert m["raw_max_box_diff_px_confident"] == 0.0
    assert [c.name for c in rep.checks if not c.passed] == ["mean_abs_conf_delta"]
    assert rep.verdict == "FAIL"


def test_a_candidate_just_under_conf_keeps_the_reference_s_detections(
    det: dict[str, OnnxModel], tmp_path: Path
) -> None:
    """Grey squares: the reference scores them 0.29, the candidate (x 0.8) 0.23, under conf 0.25 but
    within its 0.05 margin: nothing is lost (recall 1), though the candidate reports none."""
    img = tmp_path / "grey.png"
    cv2.imwrite(str(img), bright_scene(64, 192, [(0, 16, 32)], (74, 74, 74)))
    rep = validate_detector(det["ref"], det["dim"], [img], None, Thresholds())
    assert rep.metrics["reference_detections"] == 4 and rep.metrics["candidate_detections"] == 0
    assert rep.metrics["recall_of_reference"] == 1.0
    strict = validate_detector(det["ref"], det["dim"], [img], None, Thresholds(conf_margin=0.0))
    assert strict.metrics["recall_of_reference"] == 0.0 and strict.verdict == "FAIL"


def test_other_layouts_are_compared_on_detections_only(det: dict[str, OnnxModel], scenes: list[Path]) -> None:
    rep = validate_detector(det["ref"], det["t"], scenes, None, Thresholds())
    assert rep.notes == [
        "raw outputs differ (yolov8 [1, 5, 72] vs yolov8 [1, 72, 5]): compared on detections only"
    ]
    assert "raw_max_abs_diff" not in rep.metrics and rep.verdict == "PASS"


def test_classes_are_matched_by_name(det: dict[str, OnnxModel], scenes: list[Path]) -> None:
    rep = validate_detector(det["ref"], det["v5s"], scenes, None, Thresholds())
    assert rep.metrics["matched"] == 12 and rep.verdict == "PASS"
    # its 'dim' detections (class 0 there, half the score) have no counterpart: not compared
    assert rep.metrics["candidate_detections"] == 12
    assert (
        rep.notes[0]
        == "class count differs: reference 1, candidate 2; compared on the 1 class name(s) both have"
    )
    # and the other way round: the reference's 'dim' class is not compared (no candidate has it)
    back = validate_detector(det["v5s"], det["v5"], scenes, None, Thresholds())
    assert back.metrics["reference_detections"] == 12 and back.metrics["recall_of_reference"] == 1.0
    assert "class ids differ between the models: matched by name" in back.notes


def test_no_class_name_in_common_is_one_error(det: dict[str, OnnxModel], scenes: list[Path]) -> None:
    with pytest.raises(EdgeAgentError) as exc:
        validate_detector(det["ref"], det["other"], scenes, None, Thresholds())
    assert str(exc.value) == (
        f"{det['other'].path} and {det['ref'].path} have no class names in common (1 vs 1 classes): nothing to compare"
    )


def test_the_asked_conf_decides_what_the_reference_detects(det: dict[str, OnnxModel], tmp_path: Path) -> None:
    """Grey squares score 0.29: detections at conf 0.25, none at conf 0.5 (no verdict)."""
    img = tmp_path / "grey.png"
    cv2.imwrite(str(img), bright_scene(64, 192, [(0, 16, 32)], (74, 74, 74)))
    assert (
        validate_detector(det["ref"], det["ref"], [img], None, Thresholds()).metrics["reference_detections"]
        == 4
    )
    high = validate_detector(det["ref"], det["ref"], [img], None, Thresholds(conf=0.5))
    assert high.metrics["reference_detections"] == 0 and high.verdict == "NO VERDICT"
    cand_high = validate_detector(det["dim"], det["ref"], [img], None, Thresholds(conf=0.27))
    assert cand_high.metrics["candidate_detections"] == 4 and cand_high.metrics["reference_detections"] == 0


def test_no_reference_detection_is_no_verdict(det: dict[str, OnnxModel], tmp_path: Path) -> None:
    black = tmp_path / "b.png"
    cv2.imwrite(str(black), np.zeros((64, 64, 3), np.uint8))
    rep = validate_detector(det["ref"], det["ref"], [black], None, Thresholds(conf=0.3))
    assert rep.no_verdict == (
        "the reference found no detections at conf 0.3 on 1 image(s): nothing to compare against "
        "(use images with objects the reference detects)"
    )
    assert rep.checks == [] and rep.verdict == "NO VERDICT" and not rep.passed


def test_labels_give_map_for_both_models_and_the_drop_is_checked(
    det: dict[str, OnnxModel], scenes: list[Path], tmp_path: Path
) -> None:
    labels = tmp_path / "labels"
    labels.mkdir()
    for i, x in enumerate((0, 64)):  # the third scene has no label file: it counts as empty
        rows = [
            f"0 {(a + c) / 2 / 192} {(b + d) / 2 / 64} {(c - a) / 192} {(d - b) / 64}"
            for a, b, c, d in _cells(x)
        ]
        (labels / f"s{i}.txt").write_text("\n".join(rows) + "\n")
    rep = validate_detector(det["ref"], det["top2"], scenes, labels, Thresholds())
    assert rep.notes[-1] == "labels for 2 of 3 image(s); the rest count as empty"
    m = rep.metrics
    assert m["map50_candidate"] < m["map50_reference"] - 0.1  # it keeps 2 of the 4 cells
    assert m["map50_95_reference"] == pytest.approx(m["map50_reference"])  # exact boxes: IoU 1
    drops = {c.name: c for c in rep.checks if c.name.endswith("_drop")}
    assert drops["map50_drop"].value == pytest.approx(m["map50_reference"] - m["map50_candidate"])
    assert drops["map50_95_drop"].value == pytest.approx(m["map50_95_reference"] - m["map50_95_candidate"])
    assert not drops["map50_drop"].passed and drops["map50_drop"].limit == 0.015
    same = validate_detector(det["ref"], det["ref"], scenes, labels, Thresholds())
    assert [c.passed for c in same.checks] == [True] * 5 and same.verdict == "PASS"


def test_a_labels_dir_without_any_label_is_said(
    det: dict[str, OnnxModel], scenes: list[Path], tmp_path: Path
) -> None:
    rep = validate_detector(det["ref"], det["ref"], scenes, tmp_path, Thresholds())
    assert rep.notes == [
        f"no labels found: none of the 3 image(s) has a <stem>.txt in {tmp_path}; mAP not measured"
    ]
    assert not any(k.startswith("map") for k in rep.metrics) and len(rep.checks) == 3


def test_yolo_labels_are_pixel_boxes_of_a_non_square_image(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_text("3 0.5 0.25 0.2 0.5\n\n  \n1 0.1 0.9 0.2 0.2 0.77\n")
    b = read_yolo_labels(f, 200, 100)
    assert b.class_ids.tolist() == [3, 1] and b.class_ids.dtype == np.int64
    assert b.xyxy.tolist() == [[80.0, 0.0, 120.0, 50.0], pytest.approx([0.0, 80.0, 40.0, 100.0])]
    assert b.scores.tolist() == [1.0, 1.0]
    empty = read_yolo_labels(tmp_path / "missing.txt", 200, 100)
    assert len(empty) == 0 and empty.xyxy.shape == (0, 4)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("0 0.5 0.5 0.1", "{f}:2: expected 'cls cx cy w h', got '0 0.5 0.5 0.1'"),
        ("car 0.5 0.5 0.1 0.1", "{f}:2: not numbers: 'car 0.5 0.5 0.1 0.1'"),
        ("0 0.5 x 0.1 0.1", "{f}:2: not numbers: '0 0.5 x 0.1 0.1'"),
    ],
)
def test_a_bad_label_line_is_named(tmp_path: Path, line: str, message: str) -> None:
    f = tmp_path / "a.txt"
    f.write_text(f"0 0.5 0.5 0.1 0.1\n {line} \n")
    with pytest.raises(EdgeAgentError) as exc:
        read_yolo_labels(f, 10, 10)
    assert str(exc.value) == message.format(f=f)


def test_raw_diffs_split_scores_from_the_boxes_the_reference_is_sure_of() -> None:
    """[1, 4+nc, N]: the score difference over every anchor, the box difference only over anchors
    whose best score is above conf (empty anchors' boxes are noise nobody sees)."""
    r = np.zeros((1, 6, 8), np.float32)  # 2 classes, 8 anchors: only the first 3 hold anything
    r[0, :4, :3] = [[10, 20, 30], [10, 20, 30], [5, 5, 5], [5, 5, 5]]
    r[0, 4:, :3] = [[0.9, 0.1, 0.5], [0.0, 0.2, 0.0]]
    c = r.copy()
    c[0, 0, :3] += [1.0, 40.0, 2.0]  # anchor 1 (unsure) moves far, anchors 0 and 2 a little
    c[0, 5, 1] = 0.6  # a score moves by 0.4
    assert detector_raw_diffs(r, c, 0.5) == (pytest.approx(0.4), 1.0)  # anchor 2 is at 0.5, not above
    assert detector_raw_diffs(r, c, 0.4) == (pytest.approx(0.4), 2.0)
    assert detector_raw_diffs(r, c, 0.4, True) == (pytest.approx(0.4), 2.0)  # as the format says
    rt, ct = np.transpose(r, (0, 2, 1)), np.transpose(c, (0, 2, 1))  # [1, N, 4+nc]
    assert detector_raw_diffs(rt, ct, 0.4) == (pytest.approx(0.4), 2.0)
    assert detector_raw_diffs(rt, ct, 0.4, False) == (pytest.approx(0.4), 2.0)
    s, b = detector_raw_diffs(r, c, 0.95)  # nothing confident: no box figure
    assert s == pytest.approx(0.4) and math.isnan(b)
    boxes_only = np.zeros((1, 4, 8), np.float32)
    s, b = detector_raw_diffs(boxes_only, boxes_only + 1, 0.1, True)
    assert s == 0.0 and math.isnan(b)


def test_class_map_notes() -> None:
    assert class_map({0: "a", 1: "b"}, {0: "a", 1: "b"}) == ({0: 0, 1: 1}, [])
    assert class_map({0: "a", 1: "b"}, {0: "b", 1: "a"}) == (
        {0: 1, 1: 0},
        ["class ids differ between the models: matched by name"],
    )
    assert class_map({0: "a"}, {0: "x"}) == ({}, [])
    assert class_map({0: "a", 1: "b"}, {5: "b"}) == (
        {5: 1},
        ["class count differs: reference 2, candidate 1; compared on the 1 class name(s) both have"],
    )


def test_class_folders_give_labels_only_when_every_image_is_in_one(tmp_path: Path) -> None:
    names = {0: "red", 1: "blue"}
    files = [tmp_path / "blue" / "a.png", tmp_path / "red" / "b.png"]
    assert class_folder_labels(files, tmp_path, names) == [1, 0]
    assert class_folder_labels([*files, tmp_path / "c.png"], tmp_path, names) is None
    assert class_folder_labels([*files, tmp_path / "green" / "c.png"], tmp_path, names) is None


@pytest.fixture(scope="module")
def colours(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("colours")
    bgr = {"red": (0, 0, 220), "green": (0, 220, 0), "blue": (220, 0, 0)}
    for name, c in bgr.items():
        (root / name).mkdir()
        for i in range(2):
            img = np.zeros((32, 32, 3), np.uint8)
            img[:] = c
            img[: 8 * (i + 1)] = (40, 40, 40)
            cv2.imwrite(str(root / name / f"{i}.png"), img)
    return root


def test_classifiers_against_themselves_agree_with_full_accuracy(colours: Path, tmp_path: Path) -> None:
    m = OnnxModel(make_color_classifier(tmp_path / "c.onnx"), warmup=False)
    files = sorted(colours.rglob("*.png"))
    bar = Counter()
    rep = validate_classifier(m, m, files, colours, Thresholds(), bar)
    assert bar.n == 6 and rep.kind == "classifier" and rep.images == 6
    assert rep.reference == rep.candidate == str(m.path)
    assert rep.metrics == {
        "top1_agreement": 1.0,
        "top5_overlap": 1.0,
        "max_abs_prob_delta": 0.0,
        "raw_max_abs_diff": 0.0,
        "raw_max_rel_diff": 0.0,
        "top1_accuracy_reference": 1.0,
        "top1_accuracy_candidate": 1.0,
    }
    assert [(c.name, c.value, c.limit, c.op) for c in rep.checks] == [
        ("top1_agreement", 1.0, 0.95, ">="),
        ("top1_accuracy_drop", 0.0, 0.02, "<="),
    ]
    assert rep.notes == []
    assert rep.verdict == "PASS"


def test_a_classifier_with_its_classes_renamed_is_compared_by_name(colours: Path, tmp_path: Path) -> None:
    """The candidate calls its red column 'blue' and its blue column 'red': matched by name, it
    disagrees on red and blue and its accuracy drops by two thirds."""
    ref_path = make_color_classifier(tmp_path / "c.onnx")
    cand = OnnxModel(
        _rename(ref_path, tmp_path / "swapped.onnx", "{0: 'blue', 1: 'green', 2: 'red'}"), warmup=False
    )
    ref = OnnxModel(ref_path, warmup=False)
    rep = validate_classifier(ref, cand, sorted(colours.rglob("*.png")), colours, Thresholds())
    m = rep.metrics
    assert m["top1_agreement"] == pytest.approx(1 / 3) and m["top1_accuracy_candidate"] == pytest.approx(
        1 / 3
    )
    assert "raw_max_abs_diff" not in m  # other class lists: raw outputs are not comparable
    assert "class ids differ between the models: matched by name" in rep.notes
    assert {c.name: c.passed for c in rep.checks} == {"top1_agreement": False, "top1_accuracy_drop": False}
    flat = validate_classifier(
        ref, ref, sorted((colours / "red").glob("*.png")), colours / "red", Thresholds()
    )
    assert (
        flat.notes[-1]
        == "no labels found (no class-per-folder layout under the images dir): accuracy not measured"
    )
    assert [c.name for c in flat.checks] == ["top1_agreement"]


def test_raw_outputs_of_classifiers_with_the_same_classes_are_compared(tmp_path: Path, colours: Path) -> None:
    """Logits against the same network ending in a softmax: the same top-1, far apart raw outputs."""
    ref = OnnxModel(make_color_classifier(tmp_path / "logits.onnx"), warmup=False)
    cand = OnnxModel(make_color_classifier(tmp_path / "probs.onnx", probs=True), warmup=False)
    rep = validate_classifier(ref, cand, sorted(colours.rglob("*.png")), colours, Thresholds())
    assert rep.metrics["top1_agreement"] == 1.0 and rep.metrics["max_abs_prob_delta"] < 1e-6
    assert rep.metrics["raw_max_abs_diff"] > 5.0 and 0.5 < rep.metrics["raw_max_rel_diff"] <= 1.0


def test_a_guessed_preprocessing_is_said_for_each_model(tmp_path: Path, colours: Path) -> None:
    names = {"names": "{0: 'red', 1: 'green', 2: 'blue'}"}
    ref = OnnxModel(make_grid_classifier(tmp_path / "g.onnx", size=32, classes=3, meta=names), warmup=False)
    cand_path = make_grid_classifier(
        tmp_path / "h.onnx",
        size=32,
        classes=3,
        order=[2, 1, 0],
        meta={"names": "{0: 'blue', 1: 'green', 2: 'red'}"},
    )
    rep = validate_classifier(
        ref, OnnxModel(cand_path, warmup=False), sorted(colours.rglob("*.png")), colours, Thresholds()
    )
    guess = "ultralytics (guess): shorter side to 32 + centre crop 32x32"
    assert [n.split(" (", 1)[0] for n in rep.notes] == [
        "g.onnx: preprocessing guessed",
        "h.onnx: preprocessing guessed",
        "class ids differ between the models: matched by name",
    ]
    assert guess in rep.notes[0] and guess in rep.notes[1]
    assert rep.metrics["top1_agreement"] == 1.0  # the same network, its columns renamed


def test_classifiers_without_a_common_class_are_one_error(colours: Path, tmp_path: Path) -> None:
    ref_path = make_color_classifier(tmp_path / "c.onnx")
    other = _rename(ref_path, tmp_path / "o.onnx", "{0: 'cat', 1: 'dog', 2: 'cow'}")
    with pytest.raises(EdgeAgentError) as exc:
        validate_classifier(OnnxModel(ref_path), OnnxModel(other), [], colours, Thresholds())
    assert str(exc.value) == f"{other} and {ref_path} have no class names in common: nothing to compare"


def test_check_and_verdict_rules() -> None:
    assert Check("a", 0.9, 0.9, ">=").passed and not Check("a", 0.89, 0.9, ">=").passed
    assert Check("a", 0.1, 0.1, "<=").passed and not Check("a", 0.11, 0.1, "<=").passed
    assert not Check("a", float("nan"), 0.1, "<=").passed and not Check("a", float("nan"), 0.1, ">=").passed
    rep = ValidationReport("detector", "/m/ref.onnx", "/m/cand.onnx", 2)
    assert not rep.passed and rep.verdict == "FAIL"  # no check: no pass
    rep.checks.append(Check("x", 1.0, 0.5, ">="))
    assert rep.passed and rep.verdict == "PASS"
    rep.no_verdict = "why"
    assert not rep.passed and rep.verdict == "NO VERDICT"


def test_the_report_as_json_and_as_a_table() -> None:
    rep = ValidationReport("detector", "/m/ref.onnx", "/m/cand.onnx", 2)
    rep.metrics = {
        "one": 1.0,
        "matched": 12.0,
        "mean_iou": 0.123456789,
        "gone": float("nan"),
        "tiny": 0.5,
        "neg": -3.0,
    }
    rep.checks = [Check("mean_iou", 0.123456789, 0.8, ">="), Check("gone", float("nan"), 0.1, "<=")]
    rep.notes = ["a note"]
    j = json.loads(json.dumps(rep.to_json()))
    assert j == {
        "kind": "detector",
        "reference": "/m/ref.onnx",
        "candidate": "/m/cand.onnx",
        "images": 2,
        "passed": False,
        "verdict": "FAIL",
        "metrics": {
            "one": 1.0,
            "matched": 12.0,
            "mean_iou": 0.123457,
            "gone": None,
            "tiny": 0.5,
            "neg": -3.0,
        },
        "checks": [
            {"name": "mean_iou", "value": 0.123457, "limit": 0.8, "op": ">=", "passed": False},
            {"name": "gone", "value": None, "limit": 0.1, "op": "<=", "passed": False},
        ],
        "notes": ["a note"],
    }
    assert rep.format_table().splitlines() == [
        "validate detector: cand.onnx against ref.onnx on 2 images",
        "  metric                            value",
        "  one                                   1",
        "  matched                              12",
        "  mean_iou                         0.1235",
        "  gone                                n/a",
        "  tiny                             0.5000",
        "  neg                                  -3",
        "  check                             value       limit  result",
        "  mean_iou                         0.1235  >= 0.8      FAIL",
        "  gone                                n/a  <= 0.1      FAIL",
        "  note: a note",
        "FAIL: the candidate model does not hold the reference's accuracy",
    ]
    rep.checks = [Check("mean_iou", 0.9, 0.8, ">=")]
    assert rep.format_table().splitlines()[-3:] == [
        "  mean_iou                         0.9000  >= 0.8      ok",
        "  note: a note",
        "PASS",
    ]
    rep.no_verdict = "no detections"
    assert rep.format_table().splitlines()[-1] == "NO VERDICT: no detections"
    assert "FAIL" not in rep.format_table() and "PASS" not in rep.format_table()
    assert (
        ValidationReport("x", "a", "b", 0, metrics={"z": 0.0})
        .format_table()
        .splitlines()[2]
        .endswith(" 0.0000")
    )


def test_a_candidate_under_the_asked_conf_reports_nothing_at_it(
    det: dict[str, OnnxModel], tmp_path: Path
) -> None:
    """Grey 90: the reference scores 0.35, the candidate (x 0.8) 0.28: at conf 0.3 the candidate
    reports none (0.28 is still within the margin, so nothing counts as lost)."""
    img = tmp_path / "grey.png"
    cv2.imwrite(str(img), bright_scene(64, 192, [(0, 16, 32)], (90, 90, 90)))
    rep = validate_detector(det["ref"], det["dim"], [img], None, Thresholds(conf=0.3))
    assert rep.metrics["reference_detections"] == 4 and rep.metrics["candidate_detections"] == 0
    assert rep.metrics["recall_of_reference"] == 1.0


def test_map_is_measured_on_the_classes_both_models_have(
    det: dict[str, OnnxModel], scenes: list[Path], tmp_path: Path
) -> None:
    """The reference knows 'dim' (id 0) and 'bright' (id 1), the candidate only 'bright': a 'dim'
    label is not held against either; every scene labelled: no partial-labels note."""
    labels = tmp_path / "labels"
    labels.mkdir()
    for i, x in enumerate((0, 64, 128)):
        rows = [
            f"1 {(a + c) / 2 / 192} {(b + d) / 2 / 64} {(c - a) / 192} {(d - b) / 64}"
            for a, b, c, d in _cells(x)
        ]
        rows.append("0 0.9 0.9 0.05 0.05")
        (labels / f"s{i}.txt").write_text("\n".join(rows) + "\n")
    rep = validate_detector(det["v5s"], det["ref"], scenes, labels, Thresholds())
    assert rep.metrics["map50_reference"] == pytest.approx(1.0) and rep.metrics[
        "map50_candidate"
    ] == pytest.approx(1.0)
    assert not any(n.startswith("labels for") for n in rep.notes) and rep.verdict == "PASS"

"""The update gate (app/updates/gate.py) in process on the demo models: each test names what an
operator relies on (the detector and classifier thresholds, the classifier judged on the crops the
running detector makes, the broken-model guard, the configured provider and threads, the labels
that come with a package). `python .ci/mutation.py model-gate` runs these per mutant."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from support.updates import FP32, INT8, SAMPLES, make_zero_score

from edge_agent.adapters.camera.images import read_image
from edge_agent.adapters.runtime import onnx_model as runtime
from edge_agent.app.updates import gate as model_gate
from edge_agent.app.updates.gate import run_gate
from edge_agent.core.vision.thresholds import Thresholds
from edge_agent.errors import EdgeAgentError
from edge_agent.inference.pipeline import Detector, DetectorParams, crop_boxes

CLS, CLS8 = FP32.parent / "demo-classifier.onnx", FP32.parent / "demo-classifier-int8.onnx"
if not (INT8.is_file() and CLS8.is_file()):  # pragma: no cover - the demo models are in the repository
    pytest.skip("demo models missing", allow_module_level=True)

TWO = sorted(SAMPLES.glob("*.jpg"))[:2]
CASCADE = ({"detector": FP32, "classifier": CLS}, {"detector": INT8, "classifier": CLS8})


def _boxes_of(model: Path, img: np.ndarray, conf: float) -> np.ndarray:
    det = Detector(runtime.OnnxModel(model, warmup=False), DetectorParams(conf_threshold=conf))
    return det.detect(img).detections.boxes


def test_the_gate_refuses_without_images_and_names_the_way_out(tmp_path: Path) -> None:
    t0 = time.perf_counter()
    res = model_gate.run_gate({"detector": FP32}, {"detector": INT8}, [], "none", Thresholds())
    took = time.perf_counter() - t0
    assert res.passed is False and res.images == 0 and res.source == "none"
    assert res.reasons == [
        "no verdict: no gate images (the frame ring is empty or off, the package has no probe images, "
        "and the bundled samples fit only the demo detector): turn the ring on ([model_update] "
        "ring_frames) or pack with --probe DIR"
    ]
    assert 0.0 <= res.seconds <= took  # the time it took to refuse, not a clock reading
    assert res.summary().startswith("gate on 0 none images (0.0s): REFUSED: no verdict")
    js = res.to_json()
    assert js["passed"] is False and js["images"] == 0 and js["reasons"] == res.reasons
    assert js["detector"] == {} and js["classifier"] is None and js["candidate_max_score"] is None


def test_the_gate_passes_the_int8_on_the_samples_with_its_numbers(tmp_path: Path) -> None:
    files = sorted(SAMPLES.glob("*.jpg"))
    t0 = time.perf_counter()
    res = model_gate.run_gate({"detector": FP32}, {"detector": INT8}, files, "probe", Thresholds())
    took = time.perf_counter() - t0
    assert res.passed is True and res.reasons == [] and res.images == len(files) == 6
    assert 0.0 < res.seconds <= took  # the gate's duration, shown in its summary line
    assert res.candidate_max_score is not None and 0.25 < res.candidate_max_score <= 1.0
    assert res.seconds > 0 and res.summary().endswith(": passed")
    js = res.to_json()
    assert js["seconds"] == round(res.seconds, 3) and js["source"] == "probe"
    names = {c["name"]: c for c in js["detector"]["checks"]}
    assert set(names) >= {"recall_of_reference", "mean_iou", "mean_abs_conf_delta"}
    strict = model_gate.run_gate(
        {"detector": FP32}, {"detector": INT8}, files, "probe", Thresholds(max_conf_delta=0.0)
    )
    assert strict.passed is False and len(strict.reasons) == 1
    assert (
        strict.reasons[0].startswith("detector mean_abs_conf_delta 0.")
        and "(needs <= 0)" in strict.reasons[0]
    )


def test_failed_checks_print_nan_as_na() -> None:
    class C:
        def __init__(self, name: str, value: float, passed: bool) -> None:
            self.name, self.value, self.passed, self.op, self.limit = name, value, passed, ">=", 0.5

    class R:
        kind = "detector"

        def __init__(self) -> None:
            self.checks = [C("a", math.nan, False), C("b", 0.25, False), C("c", 0.9, True)]

    assert model_gate._failed_checks(R()) == [
        "detector a n/a (needs >= 0.5)",
        "detector b 0.2500 (needs >= 0.5)",
    ]


def test_the_classifier_is_judged_on_the_crops_the_running_detector_makes(tmp_path: Path) -> None:
    th = Thresholds(conf=0.5)
    want = sum(len(_boxes_of(FP32, read_image(f), 0.5)) for f in TWO)
    assert want > 0
    res = run_gate(*CASCADE, TWO, "probe", th)
    assert res.passed is True, res.reasons
    assert res.classifier is not None and res.classifier["kind"] == "classifier"
    assert res.classifier["images"] == want  # one crop per detection of the *current* detector
    assert res.classifier["reference"] == str(CLS) and res.classifier["candidate"] == str(CLS8)
    assert res.to_json()["classifier"] == res.classifier
    # fewer detections at a higher detection threshold: fewer crops
    high = sum(len(_boxes_of(FP32, read_image(f), 0.9)) for f in TWO)
    assert high < want
    res = run_gate(*CASCADE, TWO, "probe", Thresholds(conf=0.9))
    assert res.classifier is not None and res.classifier["images"] == high


def test_the_classifier_threshold_is_honoured_and_named(tmp_path: Path) -> None:
    res = run_gate(*CASCADE, TWO, "probe", Thresholds(min_top1_agreement=1.5))
    assert res.passed is False and res.classifier is not None
    assert res.reasons == ["classifier top1_agreement 1.0000 (needs >= 1.5)"], res.reasons
    assert "REFUSED: classifier top1_agreement" in res.summary()


def test_a_detector_that_fails_is_not_hidden_by_a_classifier_that_passes(tmp_path: Path) -> None:
    res = run_gate(*CASCADE, TWO, "probe", Thresholds(max_conf_delta=0.0))
    assert res.passed is False and res.classifier is not None, res.reasons
    assert len(res.reasons) == 1 and res.reasons[0].startswith("detector mean_abs_conf_delta "), res.reasons


def test_a_classifier_on_one_side_only_is_not_compared(tmp_path: Path) -> None:
    for cur, cand in (
        ({"detector": FP32, "classifier": CLS}, {"detector": INT8}),
        ({"detector": FP32}, CASCADE[1]),
    ):
        res = run_gate(cur, cand, TWO, "probe", Thresholds())
        assert res.passed is True and res.classifier is None, res.reasons


def test_no_detections_no_crops_and_no_verdict(tmp_path: Path) -> None:
    blank = tmp_path / "blank.png"
    cv2.imwrite(str(blank), np.full((240, 320, 3), 127, np.uint8))
    res = run_gate(*CASCADE, [blank], "ring", Thresholds())
    assert res.passed is False and res.classifier is None  # nothing to classify: not a verdict either
    assert len(res.reasons) == 1 and res.reasons[0].startswith("the reference found no detections")
    assert res.reasons[0].endswith(" (turn the frame ring on, or ship probe images with the package)")


def test_crops_are_the_padded_boxes_each_in_its_own_file(tmp_path: Path) -> None:
    ref = runtime.OnnxModel(FP32, warmup=False)
    for padding in (0.0, 0.3):
        out = tmp_path / f"p{padding}"
        out.mkdir()
        paths = model_gate._crops(ref, TWO, out, padding, 0.5)
        want = [
            c.shape
            for f in TWO
            for c in crop_boxes(read_image(f), _boxes_of(FP32, read_image(f), 0.5), padding)
        ]
        assert len(paths) == len(want) > 2
        assert sorted(out.iterdir()) == sorted(paths)  # one file each, none overwritten
        assert [cv2.imread(str(p)).shape for p in paths] == want


def test_crops_stop_at_max_crops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_gate, "MAX_CROPS", 3)
    ref = runtime.OnnxModel(FP32, warmup=False)
    assert len(model_gate._crops(ref, TWO, tmp_path, 0.1, 0.25)) == 3
    assert len(list(tmp_path.iterdir())) == 3


def test_a_candidate_that_lost_its_scores_is_refused_by_the_guard(tmp_path: Path) -> None:
    broken = make_zero_score(INT8, tmp_path / "zero.onnx")
    res = run_gate({"detector": FP32}, {"detector": broken}, TWO, "probe", Thresholds())
    assert res.passed is False and res.candidate_max_score == 0.0
    guard = [r for r in res.reasons if r.startswith("broken-model guard: ")]
    assert len(guard) >= 1 and any("recall_of_reference" in r for r in res.reasons), res.reasons
    # every reason in the one summary line the journal and `model status` show
    assert res.summary().endswith("): REFUSED: " + "; ".join(res.reasons)) and len(res.reasons) >= 2
    assert res.to_json()["candidate_max_score"] == 0.0


def test_the_gate_runs_the_configured_provider_and_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Any] = []

    class Recorded(runtime.OnnxModel):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            made.append(self)

    monkeypatch.setattr(runtime, "OnnxModel", Recorded)
    res = run_gate(*CASCADE, TWO, "probe", Thresholds(), provider="cpu", threads=1)
    assert res.passed is True
    assert len(made) == 4 and [m.session.get_session_options().intra_op_num_threads for m in made] == [1] * 4
    with pytest.raises(EdgeAgentError, match="unknown provider 'bogus'"):
        run_gate({"detector": FP32}, {"detector": INT8}, TWO, "probe", Thresholds(), provider="bogus")


def test_the_labels_that_come_with_each_model_are_used(tmp_path: Path) -> None:
    names = ["circle", "square", "triangle"]
    shuffled = tmp_path / "labels.json"
    shuffled.write_text(json.dumps(names[::-1]))

    def notes(cur: dict[str, Path], cand: dict[str, Path]) -> list[str]:
        res = run_gate(cur, cand, TWO, "probe", Thresholds())
        return list(res.detector["notes"])

    plain = notes({"detector": FP32}, {"detector": INT8})
    assert not any("class ids differ" in n for n in plain)
    # a labels file in another order renames the classes: the gate matches them by name
    for cur, cand in (
        ({"detector": FP32}, {"detector": INT8, "detector_labels": shuffled}),
        ({"detector": FP32, "detector_labels": shuffled}, {"detector": INT8}),
    ):
        assert "class ids differ between the models: matched by name" in notes(cur, cand)
    kinds = tmp_path / "kinds.json"
    kinds.write_text(json.dumps(["outlined", "dotted", "striped", "solid"]))
    for cur, cand in (
        ({**CASCADE[0], "classifier_labels": kinds}, CASCADE[1]),
        (CASCADE[0], {**CASCADE[1], "classifier_labels": kinds}),
    ):
        res = run_gate(cur, cand, TWO, "probe", Thresholds())
        assert res.classifier is not None
        assert "class ids differ between the models: matched by name" in res.classifier["notes"]

"""``edge-agent validate`` in process (``cli.main`` with capsys, so mutation testing credits it):
every threshold flag is the limit its check uses, ``--max-images`` bounds the images, both models
get the provider and threads asked for, and the defaults are the documented ones."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from edge_agent.adapters.runtime import onnx_model as runtime
from edge_agent.app.cli.main import main
from edge_agent.core.vision.thresholds import Thresholds

REPO = Path(__file__).resolve().parents[3]
MODELS = REPO / "models"
CLS_IMAGES = MODELS / "data" / "heldout-cls"


def validate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    rc = main(["validate", *args, "--json"])
    return rc, json.loads(capsys.readouterr().out)


def limits(rep: dict[str, Any]) -> dict[str, float]:
    return {c["name"]: c["limit"] for c in rep["checks"]}


def test_every_classifier_threshold_flag_is_its_checks_limit(capsys: pytest.CaptureFixture[str]) -> None:
    ref, cand = MODELS / "demo-classifier.onnx", MODELS / "demo-classifier-int8.onnx"
    rc, rep = validate(
        capsys, str(ref), str(cand), "--images", str(CLS_IMAGES), "--max-images", "12",
        "--min-top1-agreement", "0.61", "--max-top1-drop", "0.37",
    )  # fmt: skip
    assert rep["kind"] == "classifier" and rep["images"] == 12
    assert limits(rep) == {"top1_agreement": 0.61, "top1_accuracy_drop": 0.37}
    assert rc == {"PASS": 0, "FAIL": 1}.get(rep["verdict"], 2)


def test_every_detector_threshold_flag_is_its_checks_limit(capsys: pytest.CaptureFixture[str]) -> None:
    ref, cand = MODELS / "demo-detector.onnx", MODELS / "demo-detector-int8.onnx"
    images = MODELS / "data" / "heldout"
    rc, rep = validate(
        capsys, str(ref), str(cand), "--images", str(images), "--labels", str(images / "labels"),
        "--max-images", "5", "--min-recall", "0.51", "--min-mean-iou", "0.52",
        "--max-conf-delta", "0.53", "--max-map-drop", "0.54",
    )  # fmt: skip
    assert rep["kind"] == "detector" and rep["images"] == 5
    assert limits(rep) == {
        "recall_of_reference": 0.51,
        "mean_iou": 0.52,
        "mean_abs_conf_delta": 0.53,
        "map50_drop": 0.54,
        "map50_95_drop": 0.54,
    }
    assert rc == {"PASS": 0, "FAIL": 1}.get(rep["verdict"], 2)


def test_without_max_images_every_image_is_compared(capsys: pytest.CaptureFixture[str]) -> None:
    ref = MODELS / "demo-classifier.onnx"
    _, rep = validate(capsys, str(ref), str(ref), "--images", str(CLS_IMAGES))
    assert rep["images"] == len(list(CLS_IMAGES.rglob("*.jpg"))) > 12
    assert rep["verdict"] == "PASS" and rep["metrics"]["top1_agreement"] == 1.0


def test_both_models_get_the_provider_and_threads_asked_for(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, Any, Any]] = []
    real = runtime.OnnxModel

    class Recording(real):  # type: ignore[misc, valid-type]
        def __init__(self, path: Any, *a: Any, **kw: Any) -> None:
            seen.append((Path(path).name, kw.get("provider"), kw.get("threads")))
            super().__init__(path, *a, **kw)

    monkeypatch.setattr(runtime, "OnnxModel", Recording)
    ref, cand = MODELS / "demo-classifier.onnx", MODELS / "demo-classifier-int8.onnx"
    validate(capsys, str(ref), str(cand), "--images", str(CLS_IMAGES), "--max-images", "2",
             "--provider", "cpu", "--threads", "1")  # fmt: skip
    assert sorted(seen) == [("demo-classifier-int8.onnx", "cpu", 1), ("demo-classifier.onnx", "cpu", 1)]


def test_the_default_thresholds_are_the_documented_ones() -> None:
    """docs/model-tools.md shows the usage line a user reads; the limits must be those."""
    doc = (REPO / "docs" / "model-tools.md").read_text(encoding="utf-8")
    shown = {
        k.replace("-", "_"): float(v) for k, v in re.findall(r"\[--((?:min|max)-[a-z0-9-]+) ([0-9.]+)\]", doc)
    }
    d = Thresholds()
    assert shown == {
        "min_recall": d.min_recall,
        "min_mean_iou": d.min_mean_iou,
        "max_conf_delta": d.max_conf_delta,
        "max_map_drop": d.max_map_drop,
        "min_top1_agreement": d.min_top1_agreement,
        "max_top1_drop": d.max_top1_drop,
    }

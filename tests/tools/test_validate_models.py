"""``validate_models`` in process (tools/validate.py): which comparison runs, the thresholds it is
given, the progress bar, and the one-line refusals. The CLI tests (test_validate_any.py) run it
in a subprocess, which mutation testing cannot see (issue 36, area tools-validate)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import pytest
from support.layouts import make_sensor_model, make_text_classifier
from support.models import bright_scene, make_color_classifier, make_format_detector

from edge_agent.core.vision.thresholds import Thresholds
from edge_agent.errors import EdgeAgentError
from edge_agent.tools import validate
from edge_agent.tools.validate import validate_models


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("models")
    return {
        "v8": make_format_detector(d / "v8.onnx", "yolov8", imgsz_hw=(48, 96)),
        "v8t": make_format_detector(d / "v8t.onnx", "yolov8t", imgsz_hw=(48, 96)),
        "clf": make_color_classifier(d / "clf.onnx"),
        "sensor": make_sensor_model(d / "sensor.onnx"),
    }


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("scenes")
    for i, x in enumerate((0, 64)):
        cv2.imwrite(str(d / f"s{i}.png"), bright_scene(64, 192, [(x, 16, 32)]))
    return sorted(d.glob("*.png"))


def test_two_layouts_of_one_detector_pass_and_the_bar_shows_on_stderr(
    models: dict[str, Path], images: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    rep = validate_models(models["v8"], models["v8t"], images, images[0].parent)
    assert rep.kind == "detector" and rep.passed and rep.metrics["reference_detections"] >= 2
    err = capsys.readouterr().err
    assert "validating: 2/2 (100%)" in err


def test_the_thresholds_given_are_the_ones_applied(models: dict[str, Path], images: list[Path]) -> None:
    rep = validate_models(
        models["v8"],
        models["v8t"],
        images,
        images[0].parent,
        thresholds=Thresholds(min_recall=1.01),
        show_progress=False,
    )
    assert rep.verdict == "FAIL"  # recall 1.0 < 1.01: the default 0.9 would pass


def test_labels_given_add_the_map_of_both_models(
    models: dict[str, Path], images: list[Path], tmp_path: Path
) -> None:
    for i, x in enumerate((0, 64)):  # the scenes' squares, as YOLO label lines
        (tmp_path / f"s{i}.txt").write_text(f"0 {(x + 16) / 192} 0.5 {32 / 192} 0.5\n")
    rep = validate_models(
        models["v8"], models["v8t"], images, images[0].parent, labels_dir=tmp_path, show_progress=False
    )
    assert {"map50_reference", "map50_candidate", "map50_95_reference"} <= set(rep.metrics)
    assert rep.metrics["map50_reference"] == rep.metrics["map50_candidate"]  # one detector, two layouts


def test_a_classifier_comparison_shows_the_bar_too(
    models: dict[str, Path], images: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    validate_models(models["clf"], models["clf"], images, images[0].parent)
    assert "validating: 2/2 (100%)" in capsys.readouterr().err


def test_no_bar_when_asked(
    models: dict[str, Path], images: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    validate_models(models["clf"], models["clf"], images, images[0].parent, show_progress=False)
    assert capsys.readouterr().err == ""


def test_two_classifiers_are_compared_as_classifiers(models: dict[str, Path], images: list[Path]) -> None:
    rep = validate_models(models["clf"], models["clf"], images, images[0].parent, show_progress=False)
    assert rep.kind == "classifier" and rep.passed


def test_a_model_without_an_image_input_is_one_line_naming_its_inputs(
    models: dict[str, Path], images: list[Path]
) -> None:
    for ref, cand in (("sensor", "v8"), ("v8", "sensor")):
        with pytest.raises(EdgeAgentError) as exc:
            validate_models(models[ref], models[cand], images, images[0].parent, show_progress=False)
        msg = str(exc.value)
        assert msg.startswith(f"{models['sensor']}: inputs ") and "are not an image" in msg
        assert "`edge-agent quantize`" in msg and "\n" not in msg


def test_models_of_two_tasks_are_one_line_naming_both(models: dict[str, Path], images: list[Path]) -> None:
    with pytest.raises(EdgeAgentError) as exc:
        validate_models(models["v8"], models["clf"], images, images[0].parent, show_progress=False)
    assert str(exc.value) == f"{models['clf']} is a classify model but {models['v8']} is a detect model"


@pytest.mark.parametrize("error", [ValueError, IndexError, KeyError])
def test_a_comparison_that_breaks_is_one_line_and_the_bar_is_closed(
    models: dict[str, Path], images: list[Path], monkeypatch: pytest.MonkeyPatch, error: type[Exception]
) -> None:
    closed: list[int] = []

    def breaks(*args: object) -> None:
        bar = args[-1]
        monkeypatch.setattr(bar, "close", lambda: closed.append(1))
        raise error("shape (3,) vs (4,)")

    monkeypatch.setattr(validate, "validate_detector", breaks)
    with pytest.raises(EdgeAgentError) as exc:
        validate_models(models["v8"], models["v8t"], images, images[0].parent)
    assert str(exc.value).startswith(
        f"cannot compare {models['v8t']} with {models['v8']}: {error.__name__}: "
    )
    assert closed == [1]


def test_a_token_model_is_refused_naming_each_input_its_type_and_shape(
    tmp_path: Path, images: list[Path]
) -> None:
    text = make_text_classifier(tmp_path / "text.onnx", hidden=16, layers=1)
    with pytest.raises(EdgeAgentError) as exc:
        validate_models(text, text, images, images[0].parent, show_progress=False)
    assert str(exc.value).startswith(
        f"{text}: inputs input_ids tensor(int64) ['batch', 'seq'], attention_mask tensor(int64) ['batch', 'seq'] "
        "are not an image: validate compares models on images; "
    )


def test_provider_and_threads_open_both_models(
    models: dict[str, Path], images: list[Path], opened_models: list[Any]
) -> None:
    """`validate --provider cpu --threads 1`: INT8 results differ per provider, and --threads bounds
    the CPU taken beside a running agent; both models get both, not only the reference."""
    validate_models(
        models["v8"], models["v8t"], images, images[0].parent, provider="cpu", threads=1, show_progress=False
    )
    assert [m.path for m in opened_models] == [models["v8"], models["v8t"]]
    for m in opened_models:
        assert m.info.provider_reason == "override: cpu"
        assert m.session.get_session_options().intra_op_num_threads == 1
    opened_models.clear()
    validate_models(models["v8"], models["v8t"], images, images[0].parent, show_progress=False)
    for m in opened_models:  # the host's own plan without them
        assert m.info.provider_reason != "override: cpu"
        assert m.session.get_session_options().intra_op_num_threads == 0

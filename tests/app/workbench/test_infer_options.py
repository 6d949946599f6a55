"""``edge-agent infer``'s options in process (issue 36, survivors of the app-infer run): each option
a user sets reaches the model, the classifier or the output it is about, the text table shows each
detection's box and class, and ``--save`` never writes into an input's folder.
tests/app/workbench/test_infer_cli.py runs some of the same as a subprocess (no mutation credit)."""

from __future__ import annotations

import json
import logging
import os
import re
import stat
from pathlib import Path

import cv2
import pytest
from support.models import bright_scene, make_format_detector

from edge_agent.app.cli.main import main

Out = tuple[int, list[dict[str, object]], str]


@pytest.fixture
def scene(tmp_path: Path) -> Path:
    """One red 32 px square at (160, 64) on a 256 x 128 picture: one 'bright' box, classified red."""
    d = tmp_path / "imgs"
    d.mkdir()
    cv2.imwrite(str(d / "a.png"), bright_scene(128, 256, [(160, 64, 32)], color=(0, 0, 255)))
    return d / "a.png"


def infer(capsys: pytest.CaptureFixture[str], *args: str) -> Out:
    rc = main(["infer", "--json", "--conf", "0.6", *args])
    out, err = capsys.readouterr()
    return rc, [json.loads(line) for line in out.splitlines()], err


def only_detection(results: list[dict[str, object]]) -> dict[str, object]:
    (result,) = results
    (det,) = result["detections"]  # type: ignore[misc]
    return det  # type: ignore[no-any-return]


def test_the_table_shows_each_detection_its_box_and_its_classification(
    capsys: pytest.CaptureFixture[str], bright_detector: Path, color_classifier: Path, scene: Path
) -> None:
    cv2.imwrite(str(scene.with_name("b-empty.png")), bright_scene(100, 100, []))
    rc = main(
        [
            "infer",
            str(scene.parent),
            "-m",
            str(bright_detector),
            "--conf",
            "0.6",
            "--classifier",
            str(color_classifier),
        ]
    )
    out, _ = capsys.readouterr()
    assert rc == 0
    head, columns, row, empty = out.splitlines()
    assert re.fullmatch(
        rf"{re.escape(str(scene))}  256x128  1 detections  \(pre \d+\.\d infer \d+\.\d post \d+\.\d classify \d+\.\d ms\)",
        head,
    ), head
    assert columns == "  label             conf       x1      y1      x2      y2  classification"
    assert row == "  bright            1.00    160.0    64.0   192.0    96.0  red 1.00"
    # an image without detections is its one line, without the column header
    assert re.fullmatch(
        rf"{re.escape(str(scene.with_name('b-empty.png')))}  100x100  0 detections  \(.* ms\)", empty
    )
    rc = main(["infer", str(scene), "-m", str(bright_detector), "--conf", "0.6"])
    out, _ = capsys.readouterr()
    assert rc == 0 and out.splitlines()[2] == "  bright            1.00    160.0    64.0   192.0    96.0  "


def test_the_json_has_each_stage_timing_and_the_classification(
    capsys: pytest.CaptureFixture[str], bright_detector: Path, color_classifier: Path, scene: Path
) -> None:
    rc, results, _ = infer(capsys, str(scene), "-m", str(bright_detector))
    assert rc == 0 and set(results[0]["timings_ms"]) == {"pre", "infer", "post"}  # type: ignore[arg-type]
    assert "classification" not in only_detection(results)
    rc, results, _ = infer(
        capsys, str(scene), "-m", str(bright_detector), "--classifier", str(color_classifier)
    )
    assert rc == 0 and set(results[0]["timings_ms"]) == {"pre", "infer", "post", "classify"}  # type: ignore[arg-type]
    assert only_detection(results)["classification"]["label"] == "red"  # type: ignore[index]


def test_labels_files_rename_the_detector_and_classifier_classes(
    capsys: pytest.CaptureFixture[str],
    bright_detector: Path,
    color_classifier: Path,
    scene: Path,
    tmp_path: Path,
) -> None:
    (tmp_path / "det.txt").write_text("shiny\n")
    (tmp_path / "cls.txt").write_text("rouge\nvert\nbleu\n")
    rc, results, _ = infer(
        capsys,
        str(scene),
        "-m",
        str(bright_detector),
        "--labels",
        str(tmp_path / "det.txt"),
        "--classifier",
        str(color_classifier),
        "--classifier-labels",
        str(tmp_path / "cls.txt"),
    )
    det = only_detection(results)
    assert rc == 0 and det["label"] == "shiny" and det["classification"]["label"] == "rouge"  # type: ignore[index]


def test_the_crop_padding_and_the_preprocessing_reach_the_classifier(
    capsys: pytest.CaptureFixture[str], bright_detector: Path, color_classifier: Path, scene: Path
) -> None:
    def confidence(*extra: str) -> float:
        rc, results, err = infer(
            capsys, str(scene), "-m", str(bright_detector), "--classifier", str(color_classifier), *extra
        )
        assert rc == 0, err
        return float(only_detection(results)["classification"]["confidence"])  # type: ignore[index]

    # black padding around the red square dilutes its mean colour: less sure the wider the padding
    tight, default, wide = confidence("--crop-padding", "0"), confidence(), confidence("--crop-padding", "1")
    assert tight > default > wide
    assert confidence("--crop-padding", "0", "--classifier-preprocess", "imagenet") != tight
    rc, _, err = infer(
        capsys,
        str(scene),
        "-m",
        str(bright_detector),
        "--classifier",
        str(color_classifier),
        "--classifier-preprocess",
        "bogus",
    )
    assert rc == 1 and "bogus" in err and len(err.splitlines()) == 1


def test_classify_classes_picks_the_crops_and_names_a_class_the_detector_lacks(
    capsys: pytest.CaptureFixture[str], bright_detector: Path, color_classifier: Path, scene: Path
) -> None:
    with_cls = ("-m", str(bright_detector), "--classifier", str(color_classifier))
    rc, results, _ = infer(capsys, str(scene), *with_cls, "--classify-classes", " bright , ,")
    assert rc == 0 and only_detection(results)["classification"]["label"] == "red"  # type: ignore[index]
    rc, results, err = infer(capsys, str(scene), *with_cls, "--classify-classes", "bright,nope")
    assert rc == 1 and results == []
    assert (
        err
        == f"edge-agent infer: error: {bright_detector}: unknown class 'nope' (model classes: bright...)\n"
    )


def test_the_classes_list_is_split_on_commas_with_blanks_ignored(
    capsys: pytest.CaptureFixture[str], bright_detector: Path, scene: Path
) -> None:
    rc, results, _ = infer(capsys, str(scene), "-m", str(bright_detector), "--classes", " bright , ,")
    assert rc == 0 and only_detection(results)["label"] == "bright"


def test_the_provider_and_the_output_format_reach_the_detector(
    capsys: pytest.CaptureFixture[str], bright_detector: Path, scene: Path
) -> None:
    rc, results, err = infer(
        capsys, str(scene), "-m", str(bright_detector), "--provider", "cpu", "--threads", "1"
    )
    assert rc == 0 and only_detection(results)["label"] == "bright"
    rc, results, err = infer(capsys, str(scene), "-m", str(bright_detector), "--provider", "xnnpack")
    # this onnxruntime has no XNNPACK: asking for it is an error, not a silent CPU run
    assert rc == 1 and results == [] and "XnnpackExecutionProvider" in err
    rc, results, err = infer(capsys, str(scene), "-m", str(bright_detector), "--output-format", "end2end")
    assert rc == 1 and results == [] and "is not end2end" in err


def test_a_detector_that_cannot_score_still_runs_but_exits_1(
    capsys: pytest.CaptureFixture[str], scene: Path, tmp_path: Path
) -> None:
    zero = make_format_detector(tmp_path / "zero.onnx", score_gain=0.0)
    for extra in ([], ["--track"]):
        rc, results, err = infer(capsys, str(scene), "-m", str(zero), *extra)
        assert rc == 1 and len(results) == 1, extra
        (line,) = err.splitlines()
        assert line.startswith(f"edge-agent infer: error: {zero}: cannot produce detection scores: ")
        assert line.endswith("(the images are run anyway, to show what it outputs; exit status 1)")


@pytest.mark.parametrize("given", ["folder", "file"])
def test_save_into_an_inputs_folder_is_refused_before_the_model_loads(
    capsys: pytest.CaptureFixture[str], scene: Path, given: str
) -> None:
    image = str(scene.parent if given == "folder" else scene)
    # the model does not exist: the refusal comes first
    rc, results, err = infer(capsys, image, "-m", "/nonexistent/m.onnx", "--save", str(scene.parent))
    assert rc == 1 and results == []
    assert err == (
        f"edge-agent infer: error: --save {scene.parent}: is the folder of the input {image}; the annotated "
        "images would become inputs of the next run there: save to another folder (e.g. --save runs/infer)\n"
    )
    assert [p.name for p in scene.parent.iterdir()] == ["a.png"]


def test_save_makes_nested_folders_reuses_one_and_names_the_one_it_cannot_make(
    capsys: pytest.CaptureFixture[str], bright_detector: Path, scene: Path, tmp_path: Path
) -> None:
    out = tmp_path / "runs" / "infer"
    for _ in range(2):  # the second run saves into the folder the first made
        rc, _, err = infer(capsys, str(scene), "-m", str(bright_detector), "--save", str(out))
        assert rc == 0 and err == ""
        assert [p.name for p in out.iterdir()] == ["a.jpg"]
    (tmp_path / "afile").write_text("x")
    rc, results, err = infer(
        capsys, str(scene), "-m", str(bright_detector), "--save", str(tmp_path / "afile" / "sub")
    )
    assert rc == 1 and results == []
    assert (
        err
        == f"edge-agent infer: error: --save {tmp_path / 'afile' / 'sub'}: cannot create the folder: Not a directory\n"
    )


REPO = Path(__file__).resolve().parents[3]
SAMPLES = REPO / "models" / "samples"


def test_the_bundled_int8_detector_runs_on_the_bundled_samples_by_default(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="edge_agent.adapters.runtime.onnx_model"):
        rc = main(["infer", "--json"])
    out, _ = capsys.readouterr()
    assert rc == 0 and [Path(json.loads(x)["image"]).name for x in out.splitlines()] == [
        f"sample_{i}.jpg" for i in range(6)
    ]
    (loaded,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("loaded ")]
    assert loaded.startswith("loaded demo-detector-int8.onnx ")  # the INT8 one while it is there


def test_classify_classes_classifies_only_the_crops_of_those_classes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, results, _ = infer(
        capsys, str(SAMPLES), "--conf", "0.25", "--classifier", str(REPO / "models" / "demo-classifier.onnx")
    )
    dets = [d for r in results for d in r["detections"]]  # type: ignore[attr-defined]
    assert rc == 0 and {d["label"] for d in dets} == {"circle", "square", "triangle"}
    assert all("classification" in d for d in dets)
    rc, results, _ = infer(
        capsys,
        str(SAMPLES),
        "--conf",
        "0.25",
        "--classifier",
        str(REPO / "models" / "demo-classifier.onnx"),
        "--classify-classes",
        "circle",
    )
    dets = [d for r in results for d in r["detections"]]  # type: ignore[attr-defined]
    assert rc == 0 and {d["label"] for d in dets if "classification" in d} == {"circle"}
    assert {d["label"] for d in dets} == {"circle", "square", "triangle"}


def test_the_provider_and_the_threads_reach_both_models(
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    bright_detector: Path,
    color_classifier: Path,
    scene: Path,
) -> None:
    from edge_agent.adapters.runtime.onnx_model import OnnxModel

    made: list[OnnxModel] = []
    real_init = OnnxModel.__init__

    def init(self: OnnxModel, *a: object, **k: object) -> None:
        real_init(self, *a, **k)  # type: ignore[arg-type]
        made.append(self)

    monkeypatch.setattr(OnnxModel, "__init__", init)
    with caplog.at_level(logging.INFO, logger="edge_agent.adapters.runtime.onnx_model"):
        rc, _, _ = infer(
            capsys,
            str(scene),
            *("-m", str(bright_detector), "--classifier", str(color_classifier)),
            *("--provider", "cpu", "--threads", "2"),
        )
    assert rc == 0
    loads = [r.getMessage() for r in caplog.records if r.getMessage().startswith("loaded ")]
    assert len(loads) == 2 and all("[override: cpu]" in m for m in loads), loads  # not the board's pick
    assert [m.session.get_session_options().intra_op_num_threads for m in made] == [2, 2]


def test_the_mot_file_is_readable_by_the_tools_it_is_handed_to(
    capsys: pytest.CaptureFixture[str], bright_detector: Path, scene: Path, tmp_path: Path
) -> None:
    old = os.umask(0o077)
    try:
        rc, _, _ = infer(capsys, str(scene), "-m", str(bright_detector), "--mot", str(tmp_path / "det.txt"))
    finally:
        os.umask(old)
    assert rc == 0 and stat.S_IMODE((tmp_path / "det.txt").stat().st_mode) == 0o644
    assert (tmp_path / "det.txt").read_text().startswith("1,-1,160.00,64.00,32.00,32.00,")


def test_the_error_lines_of_mot_with_track_a_save_file_and_no_images(
    capsys: pytest.CaptureFixture[str], bright_detector: Path, scene: Path, tmp_path: Path
) -> None:
    rc, _, err = infer(
        capsys, str(scene), "-m", str(bright_detector), "--mot", str(tmp_path / "d.txt"), "--track"
    )
    assert rc == 1 and err == (
        "edge-agent infer: error: --mot writes detections for `edge-agent track`; with --track the events "
        "are the output\n"
    )
    (tmp_path / "afile").write_text("x")
    rc, _, err = infer(capsys, str(scene), "-m", str(bright_detector), "--save", str(tmp_path / "afile"))
    assert rc == 1 and err == (
        f"edge-agent infer: error: --save {tmp_path / 'afile'}: is a file, expected a folder for the "
        "annotated images (it is never written over)\n"
    )
    (tmp_path / "e1").mkdir()
    (tmp_path / "e2").mkdir()
    rc, _, err = infer(capsys, str(tmp_path / "e1"), str(tmp_path / "e2"), "-m", str(bright_detector))
    assert (
        rc == 1
        and err == f"edge-agent infer: error: no images found in {tmp_path / 'e1'}, {tmp_path / 'e2'}\n"
    )


def test_track_says_the_classifier_is_not_used(
    capsys: pytest.CaptureFixture[str], bright_detector: Path, color_classifier: Path, scene: Path
) -> None:
    rc = main(
        [
            "infer",
            "--track",
            "--json",
            str(scene),
            "-m",
            str(bright_detector),
            "--classifier",
            str(color_classifier),
        ]
    )
    _, err = capsys.readouterr()
    assert rc == 0 and err.startswith("edge-agent infer: warning: --classifier is not used with --track")


@pytest.mark.parametrize(("option", "value"), [("--conf", "2"), ("--iou", "-1"), ("--iou", "x")])
def test_a_threshold_out_of_zero_to_one_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    with pytest.raises(SystemExit) as ei:
        main(["infer", option, value])
    assert ei.value.code == 2 and f"argument {option}: " in capsys.readouterr().err

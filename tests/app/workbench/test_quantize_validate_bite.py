"""`quantize` and `validate` on images, in process through main(argv) (issue 36, area
app-quantize-validate): every threshold flag and its default reach the comparison, the exit codes,
the refusals in one line, and the lines a user reads on stderr (what was quantized, the warnings,
the failed model's new name)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import onnx
import pytest
from support.layouts import make_text_classifier
from support.toolchain import toy_classifier_model, write_colour_folders

from edge_agent.adapters.runtime.board import int8_saturates
from edge_agent.app.cli.main import main
from edge_agent.app.workbench.quantize_cmd import default_output, failed_name
from edge_agent.core.vision.thresholds import Thresholds

FLAGS = {  # flag -> (check, value given)
    "--min-recall": ("recall_of_reference", 0.31),
    "--min-mean-iou": ("mean_iou", 0.32),
    "--max-conf-delta": ("mean_abs_conf_delta", 0.33),
}


def limits(out: str) -> dict[str, float]:
    return {c["name"]: c["limit"] for c in json.loads(out)["checks"]}


def test_each_detector_threshold_flag_sets_its_own_check_and_the_defaults_are_the_library_s(
    toy_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = str(toy_dir / "toy-fp32.onnx")
    base = ["validate", ref, ref, "--images", str(toy_dir / "val"), "--json"]
    assert main(base) == 0
    d = Thresholds()
    assert limits(capsys.readouterr().out) == {
        "recall_of_reference": d.min_recall,
        "mean_iou": d.min_mean_iou,
        "mean_abs_conf_delta": d.max_conf_delta,
    }
    given = [x for flag, (_, v) in FLAGS.items() for x in (flag, str(v))]
    assert main([*base, *given]) == 0
    assert limits(capsys.readouterr().out) == {check: v for check, v in FLAGS.values()}


@pytest.fixture(scope="module")
def cls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("cls")
    onnx.save(toy_classifier_model(), str(d / "cls.onnx"))
    write_colour_folders(d / "val", 2, seed=2)
    return d


def test_the_classifier_threshold_flags_and_their_defaults(
    cls_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = str(cls_dir / "cls.onnx")
    base = ["validate", m, m, "--images", str(cls_dir / "val"), "--json"]
    assert main(base) == 0
    d = Thresholds()
    assert limits(capsys.readouterr().out) == {
        "top1_agreement": d.min_top1_agreement,
        "top1_accuracy_drop": d.max_top1_drop,
    }
    assert main([*base, "--min-top1-agreement", "0.41", "--max-top1-drop", "0.42"]) == 0
    assert limits(capsys.readouterr().out) == {"top1_agreement": 0.41, "top1_accuracy_drop": 0.42}
    # and the table, not JSON, without --json
    assert main(base[:-1]) == 0
    out = capsys.readouterr().out
    assert "top1_agreement" in out and not out.lstrip().startswith("{")


def test_max_images_takes_that_many_and_zero_takes_all(
    toy_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = str(toy_dir / "toy-fp32.onnx")
    base = ["validate", ref, ref, "--images", str(toy_dir / "val"), "--json"]
    assert main([*base, "--max-images", "3"]) == 0
    assert json.loads(capsys.readouterr().out)["images"] == 3
    assert main(base) == 0
    assert json.loads(capsys.readouterr().out)["images"] == 8


def test_images_with_nothing_to_compare_exit_2(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import cv2
    import numpy as np

    blank = tmp_path / "blank"
    blank.mkdir()
    cv2.imwrite(str(blank / "a.png"), np.zeros((96, 128, 3), np.uint8))
    ref = str(Path(__file__).resolve().parents[3] / "models" / "demo-detector.onnx")  # sees nothing in black
    assert main(["validate", ref, ref, "--images", str(blank)]) == 2
    assert "PASS" not in capsys.readouterr().out


def test_images_and_sensor_together_or_neither_is_one_line(
    toy_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = str(toy_dir / "toy-fp32.onnx")
    for extra in ([], ["--images", str(toy_dir / "val"), "--sensor", str(toy_dir / "x.csv")]):
        assert main(["validate", ref, ref, *extra]) == 1
        err = capsys.readouterr().err
        assert err == (
            "edge-agent validate: error: give --images DIR (detectors, classifiers) or --sensor FILE "
            "(sensor models), not both\n"
        )


def test_the_int8_warning_names_the_cpu_only_for_a_quantized_candidate(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = str(toy_dir / "toy-fp32.onnx")
    q = tmp_path / "q.onnx"
    argv = [
        "quantize",
        ref,
        "--calib",
        str(toy_dir / "calib"),
        "-o",
        str(q),
        "--no-validate",
        "--samples",
        "4",
    ]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["validate", ref, ref, "--images", str(toy_dir / "val")]) == 0
    assert "VNNI" not in capsys.readouterr().err
    assert main(["validate", ref, str(q), "--images", str(toy_dir / "val")]) in (0, 1)
    err = capsys.readouterr().err
    line = (
        "edge-agent validate: warning: this CPU (x86-64 without VNNI) adds INT8 products in saturating "
        "16-bit pairs, so the INT8 accuracy measured here can be lower than on an ARM board or a VNNI CPU; "
        "if only this host fails, try `quantize --reduce-range` or validate on the board"
    )
    assert (line in err.splitlines()) == int8_saturates()
    # a float16 candidate runs as float: no warning either
    from onnxruntime.transformers.float16 import convert_float_to_float16

    fp16 = tmp_path / "fp16.onnx"
    onnx.save(convert_float_to_float16(onnx.load(ref), keep_io_types=False), str(fp16))
    assert main(["validate", ref, str(fp16), "--images", str(toy_dir / "val")]) == 0
    assert "VNNI" not in capsys.readouterr().err
    # a candidate that cannot be read: no warning, the validation names the file
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    assert main(["validate", ref, str(bad), "--images", str(toy_dir / "val")]) == 1
    err = capsys.readouterr().err
    assert "VNNI" not in err and str(bad) in err


def test_default_output_names_drop_the_float_tag() -> None:
    assert default_output(Path("m/det-fp16.onnx")) == Path("m/det.int8.onnx")
    assert default_output(Path("m/det.fp32.onnx")) == Path("m/det.int8.onnx")
    assert default_output(Path("m/det.fp16.onnx")) == Path("m/det.int8.onnx")
    assert default_output(Path("m/det-fp32")) == Path("m/det.int8.onnx")
    assert default_output(Path("m/fp32det.onnx")) == Path("m/fp32det.int8.onnx")
    assert default_output(Path("m/model")) == Path("m/model.int8.onnx")
    assert failed_name(Path("a/det")) == Path("a/det.FAILED-VALIDATION.onnx")


def test_quantize_without_an_output_writes_next_to_the_model(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "toy-fp32.onnx"
    src.write_bytes((toy_dir / "toy-fp32.onnx").read_bytes())
    assert main(["quantize", str(src), "--calib", str(toy_dir / "calib"), "--no-validate"]) == 0
    assert (tmp_path / "toy.int8.onnx").is_file()
    err = capsys.readouterr().err
    assert f"quantized toy-fp32.onnx -> {tmp_path / 'toy.int8.onnx'} (" in err


def test_a_missing_model_and_a_missing_calib_are_one_line(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.onnx"
    assert main(["quantize", str(missing), "--calib", str(toy_dir / "calib")]) == 1
    assert f"{missing}: model file not found" in capsys.readouterr().err
    src = str(toy_dir / "toy-fp32.onnx")
    assert main(["quantize", src, "-o", str(tmp_path / "q.onnx")]) == 1
    err = capsys.readouterr().err
    assert f"{src}: --calib FOLDER is required: static INT8 calibrates on images" in err
    assert not (tmp_path / "q.onnx").exists()


def test_the_quantized_line_and_the_few_images_warning(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = str(toy_dir / "toy-fp32.onnx")
    out = tmp_path / "q.onnx"
    base = ["quantize", src, "--calib", str(toy_dir / "calib"), "-o", str(out), "--no-validate"]
    assert main([*base, "--samples", "7"]) == 0
    err = capsys.readouterr().err
    assert (
        f"quantized toy-fp32.onnx -> {out} (uint8 activations, int8 per-channel weights, minmax, 7 samples, "
        "6 post-processing nodes kept float)"
    ) in err.splitlines()
    assert (
        f"edge-agent quantize: warning: 7 calibration image(s) in {toy_dir / 'calib'}: INT8 ranges from "
        "fewer than 8 are unreliable; use 50-300 images like the camera's"
    ) in err.splitlines()
    assert "validation skipped (--no-validate): run `edge-agent validate` before shipping" in err.splitlines()
    assert main([*base, "--samples", "1"]) == 0  # one image is fewer than 8 too
    assert "edge-agent quantize: warning: 1 calibration image(s) in" in capsys.readouterr().err
    assert main([*base, "--samples", "8", "--method", "entropy"]) == 0
    err = capsys.readouterr().err
    assert "entropy, 8 samples" in err and "unreliable" not in err


def test_validating_on_the_calibration_images_warns_and_a_float16_source_is_compared_as_fp32(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from onnxruntime.transformers.float16 import convert_float_to_float16

    fp16 = tmp_path / "toy-fp16.onnx"
    onnx.save(
        convert_float_to_float16(onnx.load(str(toy_dir / "toy-fp32.onnx")), keep_io_types=False), str(fp16)
    )
    out = tmp_path / "q.onnx"
    assert main(["quantize", str(fp16), "--calib", str(toy_dir / "calib"), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "toy-fp16.onnx: " in err and "converted to FP32 first" in err  # the source note
    assert "validating against the FP32 copy of toy-fp16.onnx (what was quantized)" in err.splitlines()
    assert "validating on the calibration images themselves" in err
    assert main(["quantize", str(toy_dir / "toy-fp32.onnx"), "--calib", str(toy_dir / "calib"), "-o", str(out),
                 "--val", str(toy_dir / "val")]) == 0  # fmt: skip
    err = capsys.readouterr().err
    assert "calibration images themselves" not in err and "FP32 copy" not in err


def test_a_failed_validation_names_the_failed_checks_and_the_kept_file(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "q.onnx"
    argv = ["quantize", str(toy_dir / "toy-fp32.onnx"), "--calib", str(toy_dir / "calib"), "-o", str(out)]
    assert main([*argv, "--val", str(toy_dir / "val"), "--min-recall", "1.0", "--min-mean-iou", "1.0"]) == 1
    cap = capsys.readouterr()
    bad = tmp_path / "q.FAILED-VALIDATION.onnx"
    assert bad.is_file() and not out.exists() and "FAIL" in cap.out
    assert (
        "edge-agent quantize: error: the INT8 model fails validation (mean_iou); kept as "
        f"{bad} for inspection - do not ship it"
    ) in cap.err.splitlines() or (
        "edge-agent quantize: error: the INT8 model fails validation (recall_of_reference, mean_iou); "
        f"kept as {bad} for inspection - do not ship it"
    ) in cap.err.splitlines()
    assert "--naive" not in cap.err


def test_a_token_model_is_quantized_dynamically_and_refuses_the_image_flags(
    tmp_path: Path, toy_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = make_text_classifier(tmp_path / "text.onnx", hidden=8, layers=1)
    out = tmp_path / "text.int8.onnx"
    inputs = "input_ids tensor(int64) ['batch', 'seq'], attention_mask tensor(int64) ['batch', 'seq']"
    for flag in (["--target-ort", "1.11"], ["--naive"], ["--val", "v"], ["--val-labels", "l"]):
        assert main(["quantize", str(src), "-o", str(out), *flag]) == 1
        err = capsys.readouterr().err
        assert (
            f"{src}: inputs {inputs} are not an image: it is quantized dynamically, which takes "
            "none of --target-ort/--naive/--val/--val-labels"
        ) in err
        assert not out.exists()
    assert main(["quantize", str(src), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert out.is_file() and "--calib is not used" not in err
    assert f"text.onnx: inputs {inputs}: " in err
    out.unlink()
    assert main(["quantize", str(src), "-o", str(out), "--calib", str(toy_dir / "calib")]) == 0
    err = capsys.readouterr().err
    assert f"text.onnx: inputs {inputs} are not an image: --calib is not used" in err.splitlines()


def test_validate_prints_indented_json_or_the_table(
    toy_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = str(toy_dir / "toy-fp32.onnx")
    assert main(["validate", ref, ref, "--images", str(toy_dir / "val"), "--json"]) == 0
    out = capsys.readouterr().out
    assert out == json.dumps(json.loads(out), indent=2) + "\n"  # one key a line, as the docs show it
    assert main(["validate", ref, ref, "--images", str(toy_dir / "val")]) == 0
    out = capsys.readouterr().out
    assert out.endswith("\n") and out.splitlines()[-1].strip() == "PASS"


def test_the_map_drop_flag_sets_both_map_checks(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labels = tmp_path / "labels"
    labels.mkdir()
    for f in sorted((toy_dir / "val").iterdir()):
        (labels / f"{f.stem}.txt").write_text("0 0.5 0.5 0.25 0.25\n")
    ref = str(toy_dir / "toy-fp32.onnx")
    base = ["validate", ref, ref, "--images", str(toy_dir / "val"), "--labels", str(labels), "--json"]
    assert main(base) == 0
    got = limits(capsys.readouterr().out)
    assert (got["map50_drop"], got["map50_95_drop"]) == (Thresholds().max_map_drop,) * 2
    assert main([*base, "--max-map-drop", "0.34"]) == 0
    got = limits(capsys.readouterr().out)
    assert (got["map50_drop"], got["map50_95_drop"]) == (0.34, 0.34)


def test_provider_and_threads_reach_both_models_of_validate_and_of_quantize_s_check(
    toy_dir: Path, tmp_path: Path, opened_models: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    ref = str(toy_dir / "toy-fp32.onnx")
    flags = ["--provider", "cpu", "--threads", "1"]
    assert main(["validate", ref, ref, "--images", str(toy_dir / "val"), *flags]) == 0
    out = tmp_path / "q.onnx"
    argv = ["quantize", ref, "--calib", str(toy_dir / "calib"), "-o", str(out), "--val", str(toy_dir / "val")]
    assert main([*argv, *flags]) == 0
    capsys.readouterr()
    # validate's two, then quantize's validation: the last two it opens (FP32 and its INT8 result)
    assert opened_models[-1].path == out and len(opened_models) > 4
    for m in [*opened_models[:2], *opened_models[-2:]]:
        assert m.info.provider_reason == "override: cpu"
        assert m.session.get_session_options().intra_op_num_threads == 1

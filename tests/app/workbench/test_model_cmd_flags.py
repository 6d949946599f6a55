"""Every flag of `quantize` and `model convert` reaches the result, in process on the toy
detector: read back from the written model's metadata and stamps and from the report, not from
what the command says it did. A flag silently ignored is the bug users meet first."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from support.toolchain import toy_detector_model

from edge_agent.app.cli.main import main


def meta(path: Path) -> dict[str, str]:
    return {p.key: p.value for p in onnx.load(str(path)).metadata_props}


def stamps(path: Path) -> tuple[int, dict[str, int]]:
    m = onnx.load(str(path))
    return m.ir_version, {o.domain: o.version for o in m.opset_import}


def test_quantize_flags_reach_the_model(toy_dir: Path, tmp_path: Path) -> None:
    src = tmp_path / "toy20.onnx"
    onnx.save(toy_detector_model(opset=20), str(src))
    out = tmp_path / "q.onnx"
    argv = ["quantize", str(src), "--calib", str(toy_dir / "calib"), "-o", str(out), "--no-validate"]
    assert main([*argv, "--samples", "5", "--reduce-range", "--target-ort", "1.11"]) == 0
    q = json.loads(meta(out)["quantization"])
    assert (q["samples"], q["reduce_range"], q["target_ort"]) == (5, True, "1.11")
    ir, opsets = stamps(out)
    assert ir <= 8 and max(v for d, v in opsets.items() if d in ("", "ai.onnx")) <= 16


def test_quantize_validates_on_val_max_images_of_val(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "q.onnx"
    argv = ["quantize", str(toy_dir / "toy-fp32.onnx"), "--calib", str(toy_dir / "calib"), "-o", str(out)]
    assert main([*argv, "--val", str(toy_dir / "val"), "--val-max-images", "3"]) == 0
    assert "on 3 images" in capsys.readouterr().out  # of the 8 in val (12 in calib)


def test_quantize_defaults_take_every_calibration_image_up_to_128_and_the_full_range(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "q.onnx"
    rc = main(
        [
            "quantize",
            str(toy_dir / "toy-fp32.onnx"),
            "--calib",
            str(toy_dir / "calib"),
            "-o",
            str(out),
            "--no-validate",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 0 and "validation skipped (--no-validate)" in err
    q = json.loads(meta(out)["quantization"])
    assert (q["samples"], q["reduce_range"], "target_ort" in q) == (12, False, False)


@pytest.mark.parametrize("command", ["quantize", "convert"])
def test_an_output_that_is_the_input_is_refused_and_the_input_kept(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    src = tmp_path / "toy.onnx"
    onnx.save(toy_detector_model(opset=20), str(src))
    before = src.read_bytes()
    same = str(tmp_path / "." / "toy.onnx")  # another spelling of the same file
    if command == "quantize":
        argv = ["quantize", str(src), "--calib", str(toy_dir / "calib"), "-o", same]
    else:
        argv = ["model", "convert", str(src), "--target-ort", "1.11", "-o", same]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "overwrite the input" in err and src.read_bytes() == before


def test_convert_validates_on_max_images_and_skips_it_when_asked(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "toy20.onnx"
    onnx.save(toy_detector_model(opset=20), str(src))
    base = ["model", "convert", str(src), "--target-ort", "1.11", "--images", str(toy_dir / "val")]
    assert main([*base, "-o", str(tmp_path / "a.onnx"), "--max-images", "2"]) == 0
    assert "on 2 images" in capsys.readouterr().out
    assert main([*base, "-o", str(tmp_path / "b.onnx")]) == 0
    assert "on 8 images" in capsys.readouterr().out  # default 8, all of val
    assert main([*base, "-o", str(tmp_path / "c.onnx"), "--no-validate"]) == 0
    out = capsys.readouterr().out
    assert "loads on onnxruntime >= 1.11" in out and "images" not in out
    assert stamps(tmp_path / "c.onnx")[0] == 8


def test_convert_on_images_without_objects_is_no_verdict_exit_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """2, not 1: the converted model is not known bad, the images could not judge it (as validate);
    but a model that was not checked is not left at -o for the next command to pick up."""
    from PIL import Image

    blank = tmp_path / "blank"
    blank.mkdir()
    for i in range(2):
        Image.new("RGB", (64, 64)).save(blank / f"b{i}.jpg")
    src = Path(__file__).resolve().parents[3] / "models" / "demo-detector.onnx"  # sees nothing in black
    out = tmp_path / "c.onnx"
    assert (
        main(["model", "convert", str(src), "--target-ort", "1.11", "-o", str(out), "--images", str(blank)])
        == 2
    )
    cap = capsys.readouterr()
    assert "NO VERDICT" in cap.out and cap.err == (
        f"edge-agent model convert: {out} not written: {src} finds no object in the 2 image(s) of {blank}, "
        "so the conversion could not be checked; pass --images with photos of what it detects "
        "(or --no-validate to write it unchecked)\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blank"]  # no output, no leftover temp folder


def test_convert_of_a_model_that_cannot_score_says_so_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The user passed real photos: the message blames the model (the guard's cause), not the photos."""
    from support.updates import FP32, SAMPLES, make_zero_score

    src = make_zero_score(FP32, tmp_path / "zero.onnx")
    out = tmp_path / "out" / "c.onnx"
    argv = ["model", "convert", str(src), "--target-ort", "1.11", "-o", str(out), "--images", str(SAMPLES)]
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"edge-agent model convert: {out} not written: the input cannot be checked against: {src}: "
        "cannot produce detection scores: output "
    )
    assert "photos" not in err[0] and "fix: re-quantize" in err[0]
    assert list((tmp_path / "out").iterdir()) == []


def test_convert_whose_comparison_fails_exits_1_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The comparison ran on the converted copy in a private folder; FAIL leaves -o absent."""
    from edge_agent.inference.report import Check, ValidationReport
    from edge_agent.tools import validate

    seen: list[Path] = []

    def failing(ref: Path, cand: Path, *_a: object, **_k: object) -> ValidationReport:
        seen.append(cand)
        assert cand.is_file() and cand.name == "c.onnx" and cand.parent != tmp_path
        return ValidationReport(
            "detect", str(ref), str(cand), 1, checks=[Check("recall_of_reference", 0.5, 0.9, ">=")]
        )

    monkeypatch.setattr(validate, "validate_models", failing)
    src = tmp_path / "toy20.onnx"
    onnx.save(toy_detector_model(opset=20), str(src))
    out = tmp_path / "c.onnx"
    assert main(["model", "convert", str(src), "--target-ort", "1.11", "-o", str(out)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == (
        f"edge-agent model convert: {out} not written: the converted model does not find what {src} finds "
        "(the table above)"
    )
    assert len(seen) == 1 and not seen[0].exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["toy20.onnx"]

"""`quantize` on images and `validate`, in process (issue 36, area app-quantize-validate): the
lines the first mutation run found unread (2026-12-04): the INT8 warning under each command's own
name, every failed check named and the report at debug, the warning about validating on the
calibration images whole, and --val-labels reaching quantize's validation."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from edge_agent.app.cli.main import main
from edge_agent.app.workbench.quantize_cmd import failed_name


def test_on_a_cpu_that_saturates_int8_both_commands_warn_under_their_own_name(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host check itself is tested with the board probe; here it says yes (an x86-64 without
    VNNI) and the warning names the command that measured the INT8 model, once."""
    from edge_agent.adapters.runtime import board

    monkeypatch.setattr(board, "int8_saturates", lambda: True)
    ref = str(toy_dir / "toy-fp32.onnx")
    out = tmp_path / "q.onnx"
    argv = ["quantize", ref, "--calib", str(toy_dir / "calib"), "-o", str(out), "--val", str(toy_dir / "val")]
    assert main(argv) in (0, 1)
    tail = "this CPU (x86-64 without VNNI) adds INT8 products in saturating 16-bit pairs"
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if tail in line] == [
        f"edge-agent quantize: warning: {tail}, so the INT8 accuracy measured here can be lower than on an ARM "
        "board or a VNNI CPU; if only this host fails, try `quantize --reduce-range` or validate on the board"
    ]
    assert main(["validate", ref, ref, "--images", str(toy_dir / "val")]) == 0  # a float candidate
    assert tail not in capsys.readouterr().err
    from onnxruntime.transformers.float16 import convert_float_to_float16

    fp16 = tmp_path / "fp16.onnx"  # a float16 candidate runs as float too
    onnx.save(convert_float_to_float16(onnx.load(ref), keep_io_types=False), str(fp16))
    assert main(["validate", ref, str(fp16), "--images", str(toy_dir / "val")]) == 0
    assert tail not in capsys.readouterr().err
    q = out if out.exists() else failed_name(out)
    assert main(["validate", ref, str(q), "--images", str(toy_dir / "val")]) in (0, 1)
    assert [line for line in capsys.readouterr().err.splitlines() if tail in line] == [
        f"edge-agent validate: warning: {tail}, so the INT8 accuracy measured here can be lower than on an ARM "
        "board or a VNNI CPU; if only this host fails, try `quantize --reduce-range` or validate on the board"
    ]


def test_a_failed_validation_names_each_failed_check_and_logs_the_whole_report_at_debug(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "q.onnx"
    argv = ["quantize", str(toy_dir / "toy-fp32.onnx"), "--calib", str(toy_dir / "calib"), "-o", str(out)]
    with caplog.at_level("DEBUG", logger="edge_agent.app.workbench.quantize_cmd"):
        assert (
            main([*argv, "--val", str(toy_dir / "val"), "--min-mean-iou", "1", "--max-conf-delta", "0"]) == 1
        )
    bad = tmp_path / "q.FAILED-VALIDATION.onnx"
    assert (
        "edge-agent quantize: error: the INT8 model fails validation (mean_iou, mean_abs_conf_delta); kept as "
        f"{bad} for inspection - do not ship it"
    ) in capsys.readouterr().err.splitlines()
    logged = [r.getMessage() for r in caplog.records if r.name == "edge_agent.app.workbench.quantize_cmd"]
    assert len(logged) == 1 and logged[0].startswith("validation report: {")
    report = json.loads(logged[0].removeprefix("validation report: "))
    passed = {c["name"]: c["passed"] for c in report["checks"]}
    assert (passed["mean_iou"], passed["mean_abs_conf_delta"]) == (False, False)


def test_validating_on_the_calibration_images_says_why_and_what_to_pass(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["quantize", str(toy_dir / "toy-fp32.onnx"), "--calib", str(toy_dir / "calib")]
    assert main([*argv, "-o", str(tmp_path / "q.onnx")]) == 0
    assert (
        "edge-agent quantize: warning: validating on the calibration images themselves: the check is "
        "optimistic; pass --val DIR with other images"
    ) in capsys.readouterr().err.splitlines()


def test_val_labels_add_the_map_checks_to_quantize_s_validation(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labels = tmp_path / "labels"
    labels.mkdir()
    for f in sorted((toy_dir / "val").iterdir()):
        (labels / f"{f.stem}.txt").write_text("0 0.5 0.5 0.25 0.25\n")
    argv = ["quantize", str(toy_dir / "toy-fp32.onnx"), "--calib", str(toy_dir / "calib")]
    argv += ["-o", str(tmp_path / "q.onnx"), "--val", str(toy_dir / "val"), "--max-map-drop", "1"]
    assert main(argv) == 0
    assert "map50_drop" not in capsys.readouterr().out
    assert main([*argv, "--val-labels", str(labels)]) == 0
    table = capsys.readouterr().out
    assert "map50_drop" in table and "map50_95_drop" in table
    assert table.endswith("\n") and table.splitlines()[-1].strip() == "PASS"  # the table, then the verdict


def test_a_naive_model_that_fails_says_naive_quantizes_the_tail(
    toy_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "q.onnx"
    argv = ["quantize", str(toy_dir / "toy-fp32.onnx"), "--calib", str(toy_dir / "calib"), "-o", str(out)]
    assert main([*argv, "--val", str(toy_dir / "val"), "--naive"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("edge-agent quantize: error: the INT8 model fails validation (")
    assert err[-1].endswith(
        f"kept as {failed_name(out)} for inspection - do not ship it (--naive quantizes the post-processing too)"
    )


def test_a_token_model_s_last_line_is_its_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from support.layouts import make_text_classifier

    src = make_text_classifier(tmp_path / "text.onnx", hidden=8, layers=1)
    assert main(["quantize", str(src), "-o", str(tmp_path / "text.int8.onnx")]) == 0
    err = capsys.readouterr().err
    assert err.endswith("\n") and err.splitlines()[-1].startswith("text.onnx: inputs input_ids tensor(int64)")

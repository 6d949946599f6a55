"""``quantize`` says when its own check is weak: ranges from fewer than 8 calibration images, and a
validation run on the calibration images themselves (no ``--val``), and a host CPU whose INT8 sums
saturate (x86 without VNNI: the accuracy measured here is not the board's)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("onnx", reason="quantize needs the [models] extra (onnx)")

from support.toolchain import build_toy_detector, write_scenes

from edge_agent.adapters.runtime import board
from edge_agent.app.cli.main import main

FEW = "calibration image(s) in"
SAME = "validating on the calibration images themselves"


def test_four_calibration_images_and_no_val_are_two_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_toy_detector(tmp_path / "toy.onnx")
    write_scenes(tmp_path / "calib", 4, seed=0)
    main(
        [
            "quantize",
            str(tmp_path / "toy.onnx"),
            "--calib",
            str(tmp_path / "calib"),
            "-o",
            str(tmp_path / "q.onnx"),
        ]
    )
    err = capsys.readouterr().err
    assert f"edge-agent quantize: warning: 4 {FEW} {tmp_path / 'calib'}: INT8 ranges from fewer than 8" in err
    assert f"edge-agent quantize: warning: {SAME}" in err


@pytest.mark.parametrize("saturates", [False, True])
def test_enough_images_and_a_val_folder_warn_only_of_a_saturating_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, saturates: bool
) -> None:
    monkeypatch.setattr(board, "int8_saturates", lambda *a: saturates)
    build_toy_detector(tmp_path / "toy.onnx")
    write_scenes(tmp_path / "calib", 8, seed=0)
    write_scenes(tmp_path / "val", 4, seed=100)
    main(["quantize", str(tmp_path / "toy.onnx"), "--calib", str(tmp_path / "calib"), "--val", str(tmp_path / "val"),
          "-o", str(tmp_path / "q.onnx")])  # fmt: skip
    err = capsys.readouterr().err
    assert FEW not in err and SAME not in err
    host = "edge-agent quantize: warning: this CPU (x86-64 without VNNI) adds INT8 products in saturating"
    assert (host in err, err.count("warning")) == ((True, 1) if saturates else (False, 0))

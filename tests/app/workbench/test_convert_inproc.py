"""``edge-agent model convert`` in process, the parts tests/app/workbench/test_model_cmd_flags.py
does not read: the line saying what changed, an -o in folders that do not exist yet, and an input
that is missing or no model is one line naming it (before onnx parses anything)."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from support.toolchain import toy_detector_model

from edge_agent.app.cli.main import main


def convert(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["model", "convert", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_the_stamps_before_and_after_and_a_new_folder_for_the_output(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    src = tmp_path / "toy20.onnx"
    onnx.save(toy_detector_model(opset=20), str(src))
    out = tmp_path / "a" / "b" / "toy.onnx"
    rc, text, err = convert(capsys, str(src), "--target-ort", "1.11", "-o", str(out), "--no-validate")
    assert rc == 0, err
    assert text.splitlines() == [f"{out}: IR 9, opset 20 -> IR 8, opset 16; loads on onnxruntime >= 1.11"]
    assert out.is_file() and onnx.load(str(out)).ir_version == 8
    assert sorted(p.name for p in out.parent.iterdir()) == ["toy.onnx"]  # no temp folder left


def test_a_missing_input_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src, out = tmp_path / "none.onnx", tmp_path / "o.onnx"
    rc, text, err = convert(capsys, str(src), "--target-ort", "1.11", "-o", str(out))
    assert rc == 1 and text == "" and not out.exists()
    assert err.splitlines() == [
        f"edge-agent model: error: {src}: cannot read model: No such file or directory"
    ]


def test_a_truncated_input_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    good = toy_detector_model(opset=20).SerializeToString()
    src, out = tmp_path / "cut.onnx", tmp_path / "o.onnx"
    src.write_bytes(good[: len(good) // 2])
    rc, _, err = convert(capsys, str(src), "--target-ort", "1.11", "-o", str(out))
    assert rc == 1 and not out.exists() and len(err.splitlines()) == 1
    assert err.startswith(f"edge-agent model: error: {src}: not an ONNX model or truncated (")

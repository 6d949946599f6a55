"""Progress bar output and the missing-``onnx`` message."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from edge_agent.app.cli.main import main
from edge_agent.tools import ToolingDependencyError, require_onnx
from edge_agent.tools.progress import Progress


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_in_a_pipe_writes_one_line_per_tenth() -> None:
    s = io.StringIO()
    p = Progress(100, "calibrating", stream=s)
    for _ in range(100):
        p.update()
    p.close()
    lines = s.getvalue().splitlines()
    assert len(lines) == 11  # 0 %.. is never printed before the first update; 1 %, 10 %, ..., 100 %
    assert lines[-1] == "calibrating: 100/100 (100%)"


def test_progress_on_a_terminal_redraws_one_line() -> None:
    s = FakeTty()
    p = Progress(4, "bench", stream=s, width=8)
    for _ in range(4):
        p.update()
    p.close()
    out = s.getvalue()
    assert out.count("\r") == 4 and out.endswith("\n")
    assert "[########] 4/4" in out


def test_missing_onnx_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "onnx", None)  # makes ``import onnx`` raise ImportError
    with pytest.raises(ToolingDependencyError, match=r"edge-agent\[models\]"):
        require_onnx()
    model = tmp_path / "m.onnx"
    model.write_bytes(b"x")
    (tmp_path / "calib").mkdir()
    (tmp_path / "calib" / "a.jpg").write_bytes(b"x")
    assert main(["quantize", str(model), "--calib", str(tmp_path / "calib")]) == 1
    assert "onnx-edge-agent[models]" in capsys.readouterr().err

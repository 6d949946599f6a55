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


# ---- issue 36: what mutation testing (tools-progress) found loose ---------------------------------
def test_a_terminal_bar_fills_in_proportion_and_says_eta_until_done() -> None:
    s = FakeTty()
    p = Progress(4, "bench", stream=s, width=8)
    p.update()
    first = s.getvalue()
    assert first.startswith("\rbench [##------] 1/4 eta ") and first.endswith("s")
    p.update(3)
    last = s.getvalue()[len(first) :]
    assert last.startswith("\rbench [########] 4/4 ") and "eta" not in last and last.endswith("s")


def test_counts_never_pass_the_total_and_an_empty_total_is_one() -> None:
    s = io.StringIO()
    p = Progress(0, "nothing", stream=s)
    p.update(5)
    assert p.total == 1 and p.done == 1
    assert s.getvalue() == "nothing: 1/1 (100%)\n"


def test_a_pipe_gets_a_line_only_when_a_tenth_is_passed() -> None:
    s = io.StringIO()
    p = Progress(20, "x", stream=s)
    for _ in range(3):
        p.update()
    p.close()  # no newline of its own in a pipe
    assert s.getvalue().splitlines() == ["x: 1/20 (5%)", "x: 2/20 (10%)"]


def test_the_bar_goes_to_stderr_by_default_28_wide(capsys: pytest.CaptureFixture[str]) -> None:
    p = Progress(2, "default")
    assert p.width == 28
    p.update(2)
    p.close()
    cap = capsys.readouterr()
    assert cap.out == "" and "default: 2/2 (100%)" in cap.err


class Clock:
    """A stand-in for time.perf_counter: each call returns the next of ``times``."""

    def __init__(self, *times: float) -> None:
        self.times = list(times)

    def __call__(self) -> float:
        return self.times.pop(0)


def test_the_eta_is_the_time_left_at_the_rate_so_far(monkeypatch: pytest.MonkeyPatch) -> None:
    from edge_agent.tools import progress

    # start at 100 s; nothing done at 101 s, a quarter at 102 s, all at 108 s
    monkeypatch.setattr(progress.time, "perf_counter", Clock(100.0, 101.0, 102.0, 108.0))
    s = FakeTty()
    p = Progress(4, "bench", stream=s, width=4)
    p.update(0)
    p.update(1)
    p.update(3)
    assert s.getvalue().split("\r")[1:] == [
        "bench [----] 0/4   1.0s",
        "bench [#---] 1/4 eta   6.0s",  # 2 s for a quarter: 6 s more
        "bench [####] 4/4   8.0s",
    ]


def test_a_stream_without_isatty_is_a_pipe_and_the_first_tenth_is_written() -> None:
    class Plain:
        def __init__(self) -> None:
            self.text = ""

        def write(self, s: str) -> int:
            self.text += s
            return len(s)

        def flush(self) -> None:
            pass

    out = Plain()
    p = Progress(10, "calib", stream=out)  # type: ignore[arg-type]
    for _ in range(10):
        p.update()
    assert out.text.splitlines()[:2] == ["calib: 1/10 (10%)", "calib: 2/10 (20%)"]
    assert len(out.text.splitlines()) == 10 and "\r" not in out.text

"""``edge-agent track``'s ms/frame figure (issue 36, survivors of the app-track run): the figure an
operator compares trackers by is the run's time over its frames, in milliseconds. The clock is a
stand-in that answers fixed readings, so nothing here is timed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from edge_agent.app.cli.main import main
from edge_agent.app.workbench import track_cmd


class _Clock:
    """``time`` as track_cmd uses it: two perf_counter readings, start and end."""

    def __init__(self, *readings: float) -> None:
        self._it: Iterator[float] = iter(readings)

    def perf_counter(self) -> float:
        return next(self._it)


@pytest.mark.parametrize(
    ("frames", "end", "figure"),
    [
        (1, 100.25, "1 frames, 1 tracks, 250.000 ms/frame"),  # 0.25 s over one frame
        (4, 100.5, "4 frames, 1 tracks, 125.000 ms/frame"),  # 0.5 s over four frames
    ],
)
def test_the_ms_per_frame_figure_is_the_run_time_over_the_frames(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    frames: int,
    end: float,
    figure: str,
) -> None:
    det = tmp_path / "det.txt"
    det.write_text("".join(f"{f},-1,100,50,40,80,0.9\n" for f in range(1, frames + 1)))
    monkeypatch.setattr(track_cmd, "time", _Clock(100.0, end))
    assert main(["track", "-d", str(det), "-o", str(tmp_path / "t.txt")]) == 0
    assert capsys.readouterr().err == f"{figure} -> {tmp_path / 't.txt'}\n"

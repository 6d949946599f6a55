"""core.messages.cameras, the edges its mutation run left (issue 36): every figure of a camera row
as `fleet status --cameras` shows it, "unknown" for a state nobody reported, no error shown as the
text None, and the bounds of the figures (0 is a figure)."""

from __future__ import annotations

from typing import Any

import pytest

from edge_agent.core.messages.cameras import CameraRow, camera_rows


def test_every_figure_of_a_camera_row() -> None:
    gate = {
        "state": "streaming",
        "fps_in": 10.0,
        "fps": 5.5,
        "processed": 100,
        "frame_age_ms": 80.0,
        "reconnects": 2,
    }
    door = {"state": "reconnecting", "fps": 0, "processed": 0, "reconnects": 0, "last_error": "timeout"}
    rows, left = camera_rows("d", "running", {"gate": gate, "door": door})
    assert left == 0 and rows == [
        CameraRow("d", "door", "reconnecting", None, 0.0, 0, None, 0, "timeout"),
        CameraRow("d", "gate", "streaming", 10.0, 5.5, 100, 80.0, 2, None),
    ]


def test_a_state_nobody_reported_is_unknown() -> None:
    rows, _ = camera_rows("d", "running", {"a": {"state": None}, "b": {}})
    assert [r.state for r in rows] == ["unknown", "unknown"]
    rows, _ = camera_rows("d", None, {"a": {"state": "streaming"}})  # a device without state
    assert rows[0].state == "unknown"


def test_states_and_errors_are_cut() -> None:
    rows, _ = camera_rows("d", "running", {"a": {"state": "s" * 100, "last_error": "e" * 1000}})
    assert (rows[0].state, rows[0].last_error) == ("s" * 32, "e" * 200)
    rows, _ = camera_rows("d", "o" * 100, {"a": {"state": "streaming"}})
    assert rows[0].state == "o" * 32


@pytest.mark.parametrize(
    ("figure", "shown"),
    [(0, 0), (2**63 - 1, 2**63 - 1), (2**63, None), (-1, None), (True, None), (1.0, None)],
)
def test_the_bounds_of_a_count(figure: Any, shown: Any) -> None:
    rows, _ = camera_rows("d", "running", {"a": {"processed": figure, "reconnects": figure}})
    assert (rows[0].processed, rows[0].reconnects) == (shown, shown)


@pytest.mark.parametrize(("figure", "shown"), [(1e15 - 1, 1e15 - 1), (1e15, None), (-1e15, None)])
def test_the_bounds_of_a_rate(figure: float, shown: Any) -> None:
    rows, _ = camera_rows("d", "running", {"a": {"fps": figure, "frame_age_ms": figure}})
    assert (rows[0].fps, rows[0].frame_age_ms) == (shown, shown)

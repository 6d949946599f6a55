"""core.messages.health_history, the edges its mutation run left (issue 36): the bounds of the
fields (a 0 fps is reported, not missing), the `fleet history` table cell by cell, and times in
UTC whatever the local zone of the machine that runs `fleet history`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from edge_agent.core.messages.health_history import COLUMNS, Row, health, model_of, parse_since, table, thin

DEC_1 = 1796083200.0  # 2026-12-01T00:00:00Z


def test_zero_and_the_largest_figures_are_reported() -> None:
    # a stalled camera reports fps 0: that is a figure, not "not reported"
    h = health({"fps": 0, "errors": 2**62, "queue": {"oldest_unconfirmed_s": 1e15, "pending": 0}})
    assert (h.fps, h.errors, h.oldest_unconfirmed_s, h.backlog) == (0.0, 2**62, 1e15, 0)
    h = health({"fps": 0.5, "errors": 2**62 + 1, "queue": {"oldest_unconfirmed_s": 1e15 + 1}})
    assert (h.fps, h.errors, h.oldest_unconfirmed_s) == (0.5, None, None)


def test_a_version_without_an_installed_id_is_not_shown() -> None:
    body = {
        "model_update": {"current": {"id": None, "version": "1.2.0"}},
        "models": {"detector": {"id": "yolo"}},
    }
    assert model_of(body) == ("yolo", "")


def test_text_fields_are_cut_to_their_bounds() -> None:
    last = {"outcome": "o" * 100, "detail": "d" * 1000}
    h = health({"broker": {"state": "s" * 100}, "model_update": {"last": last}})
    assert (h.broker, h.update_outcome, h.update_detail) == ("s" * 32, "o" * 32, "d" * 300)


def test_thinning_keeps_the_newest_row_whatever_the_order_of_the_batch() -> None:
    # rows come by id; a device whose clock stepped back wrote an older time after a newer one
    rows = [Row(1, "a", 200, "running", None), Row(2, "a", 100, "running", None)]
    assert thin(rows, 300, complete=True) == ([2], [1])


def cells(lines: list[str]) -> list[list[str]]:
    """Each line cut at the columns where the header's names start (so every cell must be
    left-aligned under its header)."""
    starts = [lines[0].index(name) for name in COLUMNS]
    return [[ln[a:b].strip() for a, b in zip(starts, [*starts[1:], None])] for ln in lines]


def test_the_history_table_cell_by_cell() -> None:
    rows: list[dict[str, Any]] = [
        {
            "time": DEC_1,
            "state": "running",
            "fps": 0.0,
            "backlog": 0,
            "oldest_unconfirmed_s": 12.4,
            "disk_free_bytes": 5 * 2**20,
            "crashes": 0,
            "errors": 7,
            "model_id": "yolo-int8",
            "model_version": "1.2.0",
        },
        {"time": DEC_1 + 60},  # nothing reported
        {"time": DEC_1 + 120, "state": "running", "disk_free_bytes": 1536, "model_id": "m"},
        {"time": DEC_1 + 180, "disk_free_bytes": 1024, "update_outcome": "rolled_back", "update_at": 9.0},
        {
            "time": DEC_1 + 240,
            "disk_free_bytes": 1023,
            "update_outcome": "refused",
            "update_at": 10.0,
            "update_detail": "gate",
        },
    ]
    lines = table(rows)
    assert all(ln == ln.rstrip() for ln in lines)
    assert cells(lines) == [
        list(COLUMNS),
        ["2026-12-01 00:00:00", "running", "0.0", "0", "12s", "5.0M", "0", "7", "yolo-int8 1.2.0", ""],
        ["2026-12-01 00:01:00", "-", "-", "-", "-", "-", "-", "-", "-", ""],
        ["2026-12-01 00:02:00", "running", "-", "-", "-", "1.5k", "-", "-", "m", ""],
        ["2026-12-01 00:03:00", "-", "-", "-", "-", "1.0k", "-", "-", "-", "rolled_back"],
        ["2026-12-01 00:04:00", "-", "-", "-", "-", "1023", "-", "-", "-", "refused: gate"],
    ]


def test_long_models_and_verdicts_are_cut_in_the_table() -> None:
    row = {
        "time": DEC_1,
        "model_id": "m" * 40,
        "update_outcome": "refused",
        "update_at": 1.0,
        "update_detail": "d" * 99,
    }
    got = cells(table([row]))[1]
    assert got[-2:] == ["m" * 32, ("refused: " + "d" * 99)[:60]]


@pytest.fixture
def berlin(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if not hasattr(time, "tzset"):
        pytest.skip("time.tzset is POSIX only")
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    try:
        yield
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.usefixtures("berlin")
def test_times_are_utc_whatever_the_local_zone() -> None:
    assert time.localtime(DEC_1).tm_hour == 1  # the zone did change
    assert parse_since("2026-12-01", 0.0) == DEC_1
    assert parse_since("2026-12-01T08:00:00", 0.0) == DEC_1 + 8 * 3600
    assert table([{"time": DEC_1}])[1].startswith("2026-12-01 00:00:00")

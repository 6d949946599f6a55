"""Readings -> windows (core/sensor/window.py): positions, holes, late readings, accounting."""

from __future__ import annotations

from typing import Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_agent.core.sensor.window import Window, Windower, fill_column


def _feed(w: Windower, values: list[Optional[float]], rate: float = 10.0) -> list[Window]:
    out: list[Window] = []
    for i, v in enumerate(values):
        reading: dict[str, object] = {"a": v, "b": -v} if v is not None else {"a": "nan?", "b": None}
        out += w.push(reading, i / rate)
    return out


def test_windows_start_when_full_then_every_hop() -> None:
    w = Windower(["a", "b"], window=4, hop=2)
    wins = _feed(w, [float(i) for i in range(10)])
    assert [win.index for win in wins] == [0, 1, 2, 3]
    assert [win.rows[0][0] for win in wins] == [0.0, 2.0, 4.0, 6.0]
    assert wins[0].rows == ((0.0, -0.0), (1.0, -1.0), (2.0, -2.0), (3.0, -3.0))
    assert w.due == 4 and w.emitted == 4 and not w.dropped


def test_hold_interpolate_and_drop_a_hole() -> None:
    vals: list[Optional[float]] = [0.0, 1.0, None, 3.0]
    held = _feed(Windower(["a", "b"], window=4, hop=4, missing="hold"), vals)
    assert [r[0] for r in held[0].rows] == [0.0, 1.0, 1.0, 3.0] and held[0].filled == 2
    lin = _feed(Windower(["a", "b"], window=4, hop=4, missing="interpolate"), vals)
    assert [r[0] for r in lin[0].rows] == [0.0, 1.0, 2.0, 3.0]
    dw = Windower(["a", "b"], window=4, hop=4, missing="drop")
    assert _feed(dw, vals) == [] and dw.dropped == {"missing": 1} and dw.due == 1


def test_too_many_holes_is_a_gap_whatever_the_policy() -> None:
    w = Windower(["a", "b"], window=4, hop=4, missing="hold", max_missing=1)
    assert _feed(w, [0.0, None, None, 3.0]) == [] and w.dropped == {"gap": 1}


def test_a_late_reading_stands_for_the_lost_ones() -> None:
    w = Windower(["a"], window=4, hop=1, missing="interpolate", rate_hz=10.0, max_missing=2)
    out: list[Window] = []
    for t, v in [(0.0, 0.0), (0.1, 1.0), (0.2, 2.0), (0.5, 5.0)]:  # 0.3 and 0.4 lost
        out += w.push({"a": v}, t)
    assert w.late == 2
    assert [r[0] for r in out[-1].rows] == [2.0, 3.0, 4.0, 5.0]


def test_a_long_disconnect_drops_its_windows_as_gap_and_counts_them_all() -> None:
    w = Windower(["a"], window=10, hop=5, rate_hz=10.0)
    for i in range(20):
        w.push({"a": float(i)}, i / 10)
    before = w.due
    w.push({"a": 1.0}, 1.9 + 100.0)  # 1000 readings lost
    assert w.late == 999
    assert w.due - before == (1000 // 5) and w.dropped["gap"] == w.due - before
    assert w.due == w.emitted + sum(w.dropped.values())


def test_other_sensors_lines_are_ignored_not_holes() -> None:
    w = Windower(["a"], window=2, hop=1)
    assert w.push({"pir": 1}, 0.0) == [] and w.ignored == 1 and w.readings == 0


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="missing = 'zero'"):
        Windower(["a"], window=4, hop=2, missing="zero")
    with pytest.raises(ValueError, match="window = 1"):
        Windower(["a"], window=1, hop=1)
    with pytest.raises(ValueError, match="channel"):
        Windower([], window=4, hop=1)


@settings(max_examples=150, deadline=None)
@given(
    window=st.integers(2, 12),
    hop=st.integers(1, 15),
    missing=st.sampled_from(["hold", "interpolate", "drop"]),
    steps=st.lists(
        st.tuples(st.one_of(st.none(), st.floats(-1e6, 1e6)), st.floats(0.0, 3.0)), min_size=0, max_size=80
    ),
)
def test_every_due_window_is_accounted_and_complete(
    window: int, hop: int, missing: str, steps: list[tuple[Optional[float], float]]
) -> None:
    w = Windower(["a", "b"], window=window, hop=hop, missing=missing, rate_hz=10.0)
    t = 0.0
    wins: list[Window] = []
    for v, dt in steps:
        t += dt
        wins += w.push({"a": v, "b": 1.0}, t)
    assert w.due == w.emitted + sum(w.dropped.values()) == len(wins) + sum(w.dropped.values())
    rows = w.readings + w.late
    assert w.due == (0 if rows < window else (rows - window) // hop + 1)
    assert [x.index for x in wins] == sorted({x.index for x in wins})
    for x in wins:
        assert len(x.rows) == window and all(
            len(r) == 2 and all(isinstance(c, float) for c in r) for r in x.rows
        )
        assert missing != "drop" or x.filled == 0


@settings(max_examples=200, deadline=None)
@given(
    col=st.lists(st.one_of(st.none(), st.floats(-100, 100)), min_size=1, max_size=20).filter(
        lambda c: any(v is not None for v in c)
    ),
    interpolate=st.booleans(),
)
def test_filled_values_stay_between_their_neighbours(col: list[Optional[float]], interpolate: bool) -> None:
    known = [v for v in col if v is not None]
    out = list(col)
    fill_column(out, None, interpolate)
    assert all(v is not None for v in out)
    assert [v for v, c in zip(out, col) if c is not None] == known
    lo, hi = min(known), max(known)
    assert all(lo - 1e-9 <= v <= hi + 1e-9 for v in out if v is not None)


# ---- issue 36: what mutation testing (core-sensor-window) found loose ------------------------------
def test_a_non_finite_value_is_a_hole_held_from_the_last_good_one() -> None:
    w = Windower(["a"], window=3, hop=3, max_missing=2)
    out: list[Window] = []
    for i, v in enumerate([1.0, float("nan"), float("inf")]):
        out += w.push({"a": v}, i / 10)
    assert [r[0] for r in out[0].rows] == [1.0, 1.0, 1.0] and out[0].filled == 2


def test_bad_settings_name_what_is_expected() -> None:
    with pytest.raises(ValueError, match="expected one of hold, interpolate, drop"):
        Windower(["a"], window=4, hop=2, missing="zero")
    with pytest.raises(ValueError, match="at least one channel"):
        Windower([], window=4, hop=1)


def test_every_other_sensors_line_is_counted_and_stats_say_it_all() -> None:
    w = Windower(["a"], window=2, hop=1, rate_hz=10.0)
    w.push({"pir": 1}, 0.0)
    w.push({"pir": 0}, 0.05)
    for t, v in [(0.0, 1.0), (0.1, 2.0), (0.3, 4.0)]:  # 0.2 lost
        w.push({"a": v}, t)
    assert w.stats() == {
        "readings": 3,
        "ignored": 2,
        "late": 1,
        "windows_due": 3,
        "windows": 1,
        "dropped": {"gap": 2},  # [2, hole] and [hole, 4]: 1 > max_missing 0 (a quarter of 2) holes
    }


def test_one_lost_reading_is_late_and_exactly_one_and_a_half_periods_is_not() -> None:
    w = Windower(["a"], window=3, hop=1, missing="interpolate", rate_hz=10.0, max_missing=1)
    out: list[Window] = []
    for t, v in [(100.0, 0.0), (100.1, 1.0), (100.3, 3.0)]:  # 100.2 lost
        out += w.push({"a": v}, t)
    assert w.late == 1 and [r[0] for r in out[-1].rows] == [1.0, 2.0, 3.0]
    w = Windower(["a"], window=2, hop=1, rate_hz=2.0)  # any origin: 1000 s, then 0.75 s later
    w.push({"a": 1.0}, 1000.0)
    assert w.push({"a": 2.0}, 1000.75)[0].rows == ((1.0,), (2.0,)) and w.late == 0


def test_the_first_gap_of_a_long_disconnect_is_counted_once() -> None:
    """Due at rows 4, 14, 24...: 12 lost after row 4 are rows 5-16, of which only 14 is due."""
    w = Windower(["a"], window=4, hop=10, rate_hz=10.0)
    for i in range(4):
        w.push({"a": float(i)}, i / 10)
    w.push({"a": 9.0}, 0.3 + 1.3)  # 12 lost
    assert w.late == 12 and w.due == 2 and w.emitted == 1 and w.dropped == {"gap": 1}


def test_a_hole_in_the_second_channel_is_filled_when_the_first_has_none() -> None:
    w = Windower(["a", "b"], window=2, hop=2, max_missing=1)
    w.push({"a": 1.0, "b": 5.0}, 0.0)
    out = w.push({"a": 2.0, "b": None}, 0.1)
    assert out[0].rows == ((1.0, 5.0), (2.0, 5.0)) and out[0].filled == 1


def test_a_channel_is_held_across_windows_and_one_never_seen_drops_the_window() -> None:
    w = Windower(["a", "b"], window=2, hop=2, max_missing=2)
    w.push({"a": 1.0, "b": 7.0}, 0.0)
    w.push({"a": 2.0, "b": 8.0}, 0.1)
    w.push({"a": None, "b": None, "c": 0}, 0.2)  # a leading hole: held from the last window
    out = w.push({"a": 4.0}, 0.3)  # b missing for the whole window: held too
    assert out[0].rows == ((2.0, 8.0), (4.0, 8.0)) and out[0].filled == 3
    never = Windower(["a", "b"], window=2, hop=2, max_missing=2)
    never.push({"a": 1.0}, 0.0)
    assert never.push({"a": 2.0}, 0.1) == [] and never.dropped == {"missing": 1}


def test_leading_holes_take_the_value_before_the_window() -> None:
    col: list[Optional[float]] = [None, None, 3.0]
    fill_column(col, 1.0, interpolate=True)
    assert col == [1.0, 1.0, 3.0]

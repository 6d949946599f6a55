"""Zone exit hysteresis, update by update (issue 36): an object has left only after
``zone_exit_frames`` *consecutive* updates outside, a flicker out and back continues the same stay
(no second "entered", the dwell counted from the first entry to the last update inside), and the
``[tracker]`` keys read from a config file (``anchor``, ``zone_exit_frames``) are the ones the
object events use, not their defaults."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from edge_agent.core.config.schema import parse_config
from edge_agent.core.objects.lifecycle import ObjectEvents
from edge_agent.core.objects.tracker import Track
from edge_agent.core.objects.zones import ZoneState, zone_end, zone_step


def steps(
    inside: list[bool], exit_frames: int, min_dwell_s: float = 0.0
) -> list[Optional[tuple[str, float]]]:
    st = ZoneState()
    return [zone_step(st, v, float(k), min_dwell_s, exit_frames) for k, v in enumerate(inside)]


@pytest.mark.parametrize("exit_frames", [1, 2, 3, 5])
def test_left_exactly_on_the_exit_frames_th_consecutive_update_outside(exit_frames: int) -> None:
    got = steps([True, True] + [False] * (exit_frames + 2), exit_frames)
    assert got[0] == ("entered", 0.0)
    left = [k for k, e in enumerate(got) if e is not None and e[0] == "left"]
    assert left == [1 + exit_frames]  # updates 2 .. 1 + exit_frames are outside
    assert got[1 + exit_frames] == ("left", 1.0)  # dwell: first inside (0) to last inside (1)


def test_a_flicker_out_and_back_is_the_same_stay_and_the_count_of_outside_starts_again() -> None:
    # in, 2 out, in, 2 out, in, then 3 out: with exit_frames 3 only the last run leaves
    pattern = [True, False, False, True, False, False, True, False, False, False]
    got = steps(pattern, 3)
    assert got == [("entered", 0.0), None, None, None, None, None, None, None, None, ("left", 6.0)]


def test_the_dwell_ends_at_the_last_update_inside_not_at_the_exit() -> None:
    got = steps([True] * 4 + [False] * 4, 4)
    assert got[-1] == ("left", 3.0)  # inside at 0..3; the 4 updates outside are not dwell


def test_a_flicker_before_min_dwell_keeps_the_stay_that_began_first() -> None:
    # inside from 0, out at 1 (one frame, below exit_frames 2), inside again 2..3: entered at 3.0
    # after 3 s (min_dwell 3), counted from 0, not from the return at 2
    got = steps([True, False, True, True], 2, min_dwell_s=3.0)
    assert got == [None, None, None, ("entered", 3.0)]


def test_the_stay_ended_with_the_track_leaves_once_and_a_never_entered_one_not_at_all() -> None:
    st = ZoneState()
    assert zone_step(st, True, 0.0, 0.0, 3) == ("entered", 0.0)
    assert zone_step(st, True, 2.5, 0.0, 3) is None
    assert zone_step(st, False, 3.0, 0.0, 3) is None
    assert zone_end(st) == ("left", 2.5)
    assert zone_end(st) is None
    short = ZoneState()
    assert zone_step(short, True, 0.0, 10.0, 3) is None
    assert zone_end(short) is None


ZONE_TOML = """[output]
mode = "objects"
[tracker]
min_hits = 1
{keys}
[[zones]]
name = "bay"
polygon = [[0.2, 0.2], [0.8, 0.2], [0.8, 0.55], [0.2, 0.55]]
"""


def events(keys: str, xs_ys: list[tuple[float, float]]) -> list[tuple[int, str, Any]]:
    """A 100x100 box per update with its centre at (x, y) of a 1000x1000 frame, then the track ends."""
    cfg = parse_config(ZONE_TOML.format(keys=keys))
    ev = ObjectEvents(cfg.tracker, cfg.zones, cfg.lines, 60, 0.0)
    out = []
    last = None
    for k, (x, y) in enumerate(xs_ys):
        last = Track(1, (x - 50, y - 50, x + 50, y + 50), 0.9, 0, k, k, hits=k + 1)
        for e in ev.update(float(k), [last], [], (1000, 1000), lambda c: "car"):
            out.append((k, e["event"], e.get("dwell_s")))
    assert last is not None
    for e in ev.end_all([last], float(len(xs_ys))):
        out.append((len(xs_ys), e["event"], e.get("dwell_s")))
    return out


def test_the_anchor_key_decides_which_point_of_the_box_is_in_the_zone() -> None:
    # centre at y 500: inside (the zone ends at 550); bottom at y 550+: outside
    path = [(500.0, 500.0)] * 3
    centre = events('anchor = "center"', path)
    bottom = events('anchor = "bottom_center"', path)
    assert [e for e in centre if e[1].startswith("zone")] == [(0, "zone_entered", 0.0), (3, "zone_left", 2.0)]
    assert [e for e in bottom if e[1].startswith("zone")] == []


@pytest.mark.parametrize("exit_frames", [1, 5])
def test_the_zone_exit_frames_key_is_the_one_the_zone_events_use(exit_frames: int) -> None:
    path = [(500.0, 300.0)] * 2 + [(500.0, 900.0)] * 6
    got = events(f'anchor = "center"\nzone_exit_frames = {exit_frames}', path)
    assert [e for e in got if e[1].startswith("zone")] == [
        (0, "zone_entered", 0.0),
        (1 + exit_frames, "zone_left", 1.0),
    ]


def test_a_scene_change_keeps_the_stay_in_a_zone_kept_and_restarts_it_in_a_zone_moved() -> None:
    cfg = parse_config(ZONE_TOML.format(keys='anchor = "center"'))
    ev = ObjectEvents(cfg.tracker, cfg.zones, cfg.lines, 60, 0.0)
    inside = Track(1, (450.0, 250.0, 550.0, 350.0), 0.9, 0, 0, 0, hits=1)
    first = ev.update(0.0, [inside], [], (1000, 1000), lambda c: "car")
    assert [e["event"] for e in first] == ["appeared", "zone_entered"]
    ev.set_scene(cfg.zones, cfg.lines)  # the same zone: the stay goes on, no second "entered"
    assert ev.update(1.0, [inside], [], (1000, 1000), lambda c: "car") == []
    moved = cfg.zones[0].model_copy(update={"polygon": [(0.1, 0.1), (0.9, 0.1), (0.9, 0.6), (0.1, 0.6)]})
    ev.set_scene([moved], cfg.lines)  # moved: the object's stay starts afresh
    again = ev.update(2.0, [inside], [], (1000, 1000), lambda c: "car")
    assert [(e["event"], e["dwell_s"]) for e in again] == [("zone_entered", 0.0)]

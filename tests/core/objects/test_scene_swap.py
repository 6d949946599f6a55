"""ObjectEvents.set_scene (the page editor's live apply): totals of kept names go on, new names
start at 0, removed ones go, and a line that moved is not crossed by moving it."""

from __future__ import annotations

from typing import Any

from edge_agent.core.config.schema import LineConfig, TrackerConfig, ZoneConfig
from edge_agent.core.objects.lifecycle import ObjectEvents
from edge_agent.core.objects.tracker import Track

GATE = LineConfig(name="gate", points=[(0.5, 0.0), (0.5, 1.0)])  # in: x < 0.5
BAY = ZoneConfig(name="bay", polygon=[(0.0, 0.0), (0.4, 0.0), (0.4, 1.0), (0.0, 1.0)])


def _track(tid: int, x: float) -> Track:
    return Track(tid, (x * 1000 - 50, 500.0, x * 1000 + 50, 600.0), 0.8, 0, 0, 0, hits=5)


def _step(ev: ObjectEvents, ts: float, *xs: float) -> list[dict[str, Any]]:
    return ev.update(ts, [_track(i + 1, x) for i, x in enumerate(xs)], [], (1000, 1000), lambda c: "person")


def test_kept_names_keep_their_totals_new_ones_start_at_zero_removed_ones_go() -> None:
    ev = ObjectEvents(TrackerConfig(min_hits=1, zone_exit_frames=1), [BAY], [GATE], 60, 0.0)
    _step(ev, 0.0, 0.8)
    _step(ev, 1.0, 0.2)  # in through the gate, into the bay
    assert ev.totals["lines"]["gate"] == {"in": 1, "out": 0}
    assert ev.totals["zones"]["bay"] == {"entered": 1}
    door = LineConfig(name="door", points=[(0.7, 0.0), (0.7, 1.0)])
    ev.set_scene([], [GATE, door])
    assert ev.totals == {"lines": {"gate": {"in": 1, "out": 0}, "door": {"in": 0, "out": 0}}, "zones": {}}
    assert ev.interval["lines"]["gate"] == {"in": 1, "out": 0}  # the running interval too
    assert ev.occupancy() == {}
    got = [(e["line"], e["direction"]) for e in _step(ev, 2.0, 0.6) if e["event"] == "line_crossed"]
    got += [(e["line"], e["direction"]) for e in _step(ev, 3.0, 0.9) if e["event"] == "line_crossed"]
    assert got == [("gate", "out"), ("door", "out")]  # both count from here on
    assert ev.totals["lines"]["gate"] == {"in": 1, "out": 1}
    body = ev.take_counts(4.0)
    assert set(body["lines"]) == {"gate", "door"} and body["lines"]["gate"]["total_in"] == 1


def test_moving_a_line_over_an_object_is_not_a_crossing() -> None:
    ev = ObjectEvents(TrackerConfig(min_hits=1), [], [GATE], 60, 0.0)
    _step(ev, 0.0, 0.3)
    _step(ev, 1.0, 0.3)  # standing left of the gate (inside)
    moved = LineConfig(name="gate", points=[(0.2, 0.0), (0.2, 1.0)])
    ev.set_scene([], [moved])
    assert [e for e in _step(ev, 2.0, 0.3) if e["event"] == "line_crossed"] == []
    got = [e["direction"] for e in _step(ev, 3.0, 0.1) if e["event"] == "line_crossed"]
    assert got == ["in"]  # a real crossing of the moved line counts

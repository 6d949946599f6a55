"""ObjectEvents driven frame by frame with hand-made tracks: every event's exact body, the counts
and occupancy, class filters, the best crop, and the checkpoint's refusals."""

from __future__ import annotations

from typing import Any

from edge_agent.core.config.schema import LineConfig, TrackerConfig, ZoneConfig
from edge_agent.core.objects.lifecycle import MAX_COUNT, ObjectEvents
from edge_agent.core.objects.tracker import Track

LABELS = {0: "person", 2: "car"}
GATE = LineConfig(name="gate", points=[(0.5, 0.0), (0.5, 1.0)])  # in: right of top->bottom = x < 0.5
ZONE = ZoneConfig(name="left", polygon=[(0.0, 0.0), (0.4, 0.0), (0.4, 1.0), (0.0, 1.0)])


def _track(tid: int, x: float, score: float = 0.8, cls: int = 0, hits: int = 5) -> Track:
    # a 100x100 box whose bottom centre is at (x * 1000, 600) on a 1000x1000 frame
    return Track(tid, (x * 1000 - 50, 500.0, x * 1000 + 50, 600.0), score, cls, 0, 0, hits=hits)


def _events(
    ev: ObjectEvents, ts: float, tracks: list[Track], removed: tuple[Track, ...] = (), **kw: Any
) -> list[dict[str, Any]]:
    return ev.update(ts, tracks, list(removed), (1000, 1000), LABELS.__getitem__, **kw)


def test_an_object_walking_in_through_the_gate_and_into_the_zone_then_ending() -> None:
    ev = ObjectEvents(TrackerConfig(min_hits=2, zone_exit_frames=2), [ZONE], [GATE], 60, 0.0)
    assert _events(ev, 1.0, [_track(7, 0.8, hits=1)]) == []  # one sighting: not reported yet
    assert _events(ev, 2.0, [_track(7, 0.7, score=0.9, hits=2)]) == [
        {
            "event": "appeared",
            "object_id": 7,
            "label": "person",
            "confidence": 0.9,
            "box": [650.0, 500.0, 750.0, 600.0],
            "ts": 2.0,
        }
    ]
    crossed = _events(ev, 3.0, [_track(7, 0.45, score=0.85)])
    assert crossed == [
        {
            "event": "line_crossed",
            "object_id": 7,
            "label": "person",
            "confidence": 0.85,
            "box": [400.0, 500.0, 500.0, 600.0],
            "ts": 3.0,
            "line": "gate",
            "direction": "in",
        }
    ]
    entered = _events(ev, 4.0, [_track(7, 0.2, score=0.5)])
    assert entered == [
        {
            "event": "zone_entered",
            "object_id": 7,
            "label": "person",
            "confidence": 0.5,
            "box": [150.0, 500.0, 250.0, 600.0],
            "ts": 4.0,
            "zone": "left",
            "dwell_s": 0.0,
        }
    ]
    assert ev.occupancy() == {"left": 1}
    assert _events(ev, 5.5, [_track(7, 0.2, score=0.6)]) == []
    gone = _track(7, 0.2)
    ended = _events(ev, 7.0, [], removed=(gone,))
    assert ended == [
        {
            "event": "zone_left",
            "object_id": 7,
            "label": "person",
            "confidence": 0.8,
            "box": [150.0, 500.0, 250.0, 600.0],
            "ts": 5.5,
            "zone": "left",
            "dwell_s": 1.5,
        },
        {
            "event": "ended",
            "object_id": 7,
            "label": "person",
            "confidence": 0.8,
            "box": [150.0, 500.0, 250.0, 600.0],
            "ts": 7.0,
            "duration_s": 4.5,
            "first_seen": 1.0,
            "last_seen": 5.5,
            "classes": {"person": 5},
            "best_confidence": 0.9,
            "best_box": [650.0, 500.0, 750.0, 600.0],
        },
    ]
    assert ev.occupancy() == {"left": 0} and ev.objects == {}
    assert ev.counts_due(59.9) is None
    assert ev.counts_due(60.0) == {
        "from": 0.0,
        "to": 60.0,
        "lines": {"gate": {"in": 1, "out": 0, "total_in": 1, "total_out": 0}},
        "zones": {"left": {"entered": 1, "total_entered": 1, "occupancy": 0}},
    }
    again = ev.take_counts(61.0)  # a new interval: its counts start at 0, the totals stay
    assert again["lines"]["gate"] == {"in": 0, "out": 0, "total_in": 1, "total_out": 0}
    assert (
        again["zones"]["left"] == {"entered": 0, "total_entered": 1, "occupancy": 0} and again["from"] == 60.0
    )


def test_walking_out_counts_out_and_class_filters_hold() -> None:
    cars_only = LineConfig(name="cars", points=[(0.5, 0.0), (0.5, 1.0)], classes=["car"], in_side="left")
    ev = ObjectEvents(TrackerConfig(min_hits=1), [], [GATE, cars_only], 60, 0.0)
    _events(ev, 0.0, [_track(1, 0.2), _track(2, 0.2, cls=2)])
    got = [
        (e["object_id"], e["line"], e["direction"])
        for e in _events(ev, 1.0, [_track(1, 0.8), _track(2, 0.8, cls=2)])
    ]
    assert got == [(1, "gate", "out"), (2, "gate", "out"), (2, "cars", "in")]
    assert ev.totals["lines"] == {"gate": {"in": 0, "out": 2}, "cars": {"in": 1, "out": 0}}


def test_a_zone_for_cars_ignores_people_and_occupancy_counts_only_entered_objects() -> None:
    cars = ZoneConfig(name="bay", polygon=ZONE.polygon, classes=["car"], min_dwell_s=2.0)
    ev = ObjectEvents(TrackerConfig(min_hits=1), [cars], [], 60, 0.0)
    assert [e["event"] for e in _events(ev, 0.0, [_track(1, 0.2), _track(2, 0.2, cls=2)])] == [
        "appeared",
        "appeared",
    ]
    assert ev.occupancy() == {"bay": 0}  # inside, but not for min_dwell_s yet
    assert _events(ev, 1.9, [_track(1, 0.2), _track(2, 0.2, cls=2)]) == []
    got = _events(ev, 2.0, [_track(1, 0.2), _track(2, 0.2, cls=2)])
    assert [(e["object_id"], e["event"], e["dwell_s"]) for e in got] == [(2, "zone_entered", 2.0)]
    assert ev.occupancy() == {"bay": 1}


def test_the_best_crop_follows_the_best_score_and_an_unreported_track_ends_silently() -> None:
    ev = ObjectEvents(TrackerConfig(min_hits=2), [], [], 60, 0.0)
    crops: list[tuple[float, ...]] = []

    def crop(box: tuple[float, float, float, float]) -> str:
        crops.append(box)
        return f"crop{len(crops)}"

    _events(ev, 0.0, [_track(1, 0.5, score=0.5, hits=2)], crop=crop)
    _events(ev, 1.0, [_track(1, 0.6, score=0.9, hits=3)], crop=crop)
    _events(ev, 2.0, [_track(1, 0.7, score=0.7, hits=4)], crop=crop)  # lower: no new crop
    assert len(crops) == 2
    (ended,) = ev.end_all([_track(1, 0.7)], 3.0)
    assert ended["_best_image"] == "crop2" and ended["best_confidence"] == 0.9
    _events(ev, 4.0, [_track(2, 0.5, hits=1)])
    assert ev.end_all([_track(2, 0.5)], 5.0) == [] and ev.objects == {}  # never appeared: nothing


def test_counts_are_not_due_without_lines_or_zones_and_a_checkpoint_is_checked() -> None:
    assert ObjectEvents(TrackerConfig(), [], [], 1, 0.0).counts_due(1000.0) is None
    assert ObjectEvents(TrackerConfig(), [], [GATE], 1, 0.0).counts_due(1.0) is not None  # lines only
    ev = ObjectEvents(TrackerConfig(), [ZONE], [GATE], 60, 0.0)
    state = ev.count_state()
    assert state == {
        "interval_start": 0.0,
        "interval": {"lines": {"gate": {"in": 0, "out": 0}}, "zones": {"left": {"entered": 0}}},
        "totals": {"lines": {"gate": {"in": 0, "out": 0}}, "zones": {"left": {"entered": 0}}},
    }
    bad = {
        "interval_start": 1.0,
        "interval": {"lines": {}, "zones": {}},
        "totals": {"lines": {"gate": {"in": MAX_COUNT + 1}}, "zones": {}},
    }
    assert ev.restore_counts(bad) == f"totals.lines.gate.in = {MAX_COUNT + 1} is not a count"
    bad["totals"] = {"lines": {"gate": {"out": True}}, "zones": {}}
    assert ev.restore_counts(bad) == "totals.lines.gate.out = True is not a count"
    bad["totals"] = {"lines": {}, "zones": {"left": {"entered": -1}}}
    assert ev.restore_counts(bad) == "totals.zones.left.entered = -1 is not a count"
    assert ev.restore_counts({"interval_start": float("inf")}) == "interval_start is not finite"
    assert ev.restore_counts({}) == "not a count checkpoint (KeyError: 'interval_start')"
    assert ev.count_state() == state  # nothing restored from a refused checkpoint
    ok = {
        "interval_start": 30.0,
        "interval": {"lines": {"gate": {"in": MAX_COUNT}}, "zones": {}},
        "totals": {"lines": {"old": {"in": 3}}, "zones": {"left": {"entered": 4}}},
    }
    assert ev.restore_counts(ok) is None
    assert ev.count_state() == {
        "interval_start": 30.0,
        "interval": {"lines": {"gate": {"in": MAX_COUNT, "out": 0}}, "zones": {"left": {"entered": 0}}},
        "totals": {"lines": {"gate": {"in": 0, "out": 0}}, "zones": {"left": {"entered": 4}}},
    }


def test_line_margin_is_the_band_where_the_side_is_undecided() -> None:
    """``tracker.line_margin``: a wobble within the band around the line is no crossing; the
    default band (0.02) counts the same walk, and a band of 0.1 counts it once the object is out."""

    def walk(margin: float, xs: list[float]) -> list[str]:
        ev = ObjectEvents(TrackerConfig(min_hits=1, line_margin=margin), [], [GATE], 60, 0.0)
        out = []
        for i, x in enumerate(xs):
            out += [
                e["direction"] for e in _events(ev, float(i), [_track(7, x)]) if e["event"] == "line_crossed"
            ]
        return out

    wobble = [0.6, 0.54, 0.46, 0.54, 0.46]  # 4 % either side of the gate at x = 0.5
    assert walk(0.02, wobble) == ["in", "out", "in"]
    assert walk(0.1, wobble) == []  # inside the band all along: undecided
    assert walk(0.1, [0.7, 0.55, 0.45, 0.3]) == ["in"]  # decided once it leaves the band

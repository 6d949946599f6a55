"""core.objects.count_keys: the counters as named integers round-trip through the operations the
outbox stores (any counts, any names), events add exactly their counters, a refused one is taken
back, and names that are not ours are ignored."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from edge_agent.adapters.outbox import tallies
from edge_agent.core.config.schema import LineConfig, TrackerConfig, ZoneConfig
from edge_agent.core.objects import count_keys
from edge_agent.core.objects.lifecycle import ObjectEvents

NAMES = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=64)


def events(line: str, zone: str) -> ObjectEvents:
    return ObjectEvents(
        TrackerConfig(),
        [ZoneConfig(name=zone, polygon=[(0.0, 0.0), (0.4, 0.0), (0.4, 1.0)])],
        [LineConfig(name=line, points=[(0.5, 0.0), (0.5, 1.0)])],
        60,
        1_700_000_000.25,
    )


@given(NAMES, NAMES, st.lists(st.integers(0, 10**9), min_size=5, max_size=5))
def test_seeded_counters_come_back_whatever_the_names(line: str, zone: str, v: list[int]) -> None:
    ev = events(line, zone)
    ev.totals["lines"][line] = {"in": v[0], "out": v[1]}
    ev.totals["zones"][zone] = {"entered": v[2]}
    ev.interval["lines"][line] = {"in": v[3], "out": v[4]}
    stored: dict[str, int] = {}
    tallies.apply(stored, tallies.fold([tallies.checked(count_keys.seed_ops(ev))]))
    again = events(line, zone)
    state = count_keys.state_from(stored, 0.0)
    assert state is not None and again.restore_counts(state) is None
    assert (again.totals, again.interval) == (ev.totals, ev.interval)
    assert again.interval_start == 1_700_000_000.25


def test_an_event_adds_its_counters_and_a_refused_one_is_taken_back() -> None:
    ev = events("gate", "bay")
    crossed = {"event": "line_crossed", "line": "gate", "direction": "out"}
    assert count_keys.event_ops(crossed) == [
        ("add", '["totals","lines","gate","out"]', 1),
        ("add", '["interval","lines","gate","out"]', 1),
    ]
    assert count_keys.event_ops({"event": "zone_entered", "zone": "bay"}) == [
        ("add", '["totals","zones","bay","entered"]', 1),
        ("add", '["interval","zones","bay","entered"]', 1),
    ]
    assert count_keys.event_ops({"event": "appeared"}) == []
    ev.totals["lines"]["gate"]["out"] = ev.interval["lines"]["gate"]["out"] = 1
    count_keys.uncount(ev, crossed)
    assert ev.totals["lines"]["gate"] == ev.interval["lines"]["gate"] == {"in": 0, "out": 0}
    count_keys.uncount(ev, crossed)  # never below zero
    assert ev.totals["lines"]["gate"]["out"] == 0
    count_keys.uncount(ev, {"event": "line_crossed", "line": "gone", "direction": "in"})  # unknown: nothing


def test_no_counters_is_none_and_foreign_names_are_ignored() -> None:
    assert count_keys.state_from({}, 5.0) is None
    assert count_keys.state_from({"not json": 1, '["a"]': 2, '["x","lines","g","in"]': 3}, 5.0) is None
    state = count_keys.state_from({'["totals","lines","g","in"]': 4}, 5.0)
    assert state == {
        "interval": {"lines": {}, "zones": {}},
        "totals": {"lines": {"g": {"in": 4}}, "zones": {}},
        "interval_start": 5.0,  # none stored: now
    }


def test_reset_sets_every_interval_counter_and_the_start() -> None:
    ev = events("gate", "bay")
    ops = count_keys.reset_ops(ev)
    assert ops[0] == ("set", count_keys.START, 1_700_000_000_250)
    assert sorted(ops[1:]) == [
        ("set", '["interval","lines","gate","in"]', 0),
        ("set", '["interval","lines","gate","out"]', 0),
        ("set", '["interval","zones","bay","entered"]', 0),
    ]


@given(st.sampled_from(["gate", "yard", "x.1"]), st.lists(st.integers(0, 10**6), min_size=4, max_size=4))
def test_each_named_camera_keeps_its_own_counters_beside_the_single_cameras(cam: str, v: list[int]) -> None:
    """Two cameras with a "door" line (and the single [camera]'s, stored before) never add up."""
    stored: dict[str, int] = {}
    mine, other, legacy = events("door", "bay"), events("door", "bay"), events("door", "bay")
    mine.totals["lines"]["door"] = {"in": v[0], "out": v[1]}
    other.totals["lines"]["door"] = {"in": v[2], "out": 0}
    legacy.totals["lines"]["door"] = {"in": v[3], "out": 0}
    for ev, camera in ((mine, cam), (other, "other"), (legacy, None)):
        tallies.apply(stored, tallies.fold([tallies.checked(count_keys.seed_ops(ev, camera))]))
    for camera, expected in ((cam, mine), ("other", other), (None, legacy)):
        state = count_keys.state_from(stored, 0.0, camera)
        again = events("door", "bay")
        assert state is not None and again.restore_counts(state) is None
        assert again.totals == expected.totals, camera
    assert count_keys.state_from(stored, 0.0, "never-seen") is None
    crossed = {"event": "line_crossed", "line": "door", "direction": "in"}
    assert {op[1] for op in count_keys.event_ops(crossed, cam)}.isdisjoint(
        op[1] for op in count_keys.event_ops(crossed)
    )

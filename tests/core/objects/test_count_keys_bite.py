"""core.objects.count_keys, the edges its mutation run left (issue 36): the stored names are the
ones earlier versions wrote (an upgraded agent finds its counters), a named camera's interval and
interval start are its own, a clock that is no unix time is stored as 0, and a foreign name does
not hide ours."""

from __future__ import annotations

import pytest

from edge_agent.adapters.outbox import tallies
from edge_agent.core.config.schema import LineConfig, TrackerConfig, ZoneConfig
from edge_agent.core.objects import count_keys
from edge_agent.core.objects.lifecycle import ObjectEvents


def events(start: float = 1_700_000_000.25) -> ObjectEvents:
    return ObjectEvents(
        TrackerConfig(),
        [ZoneConfig(name="bay", polygon=[(0.0, 0.0), (0.4, 0.0), (0.4, 1.0)])],
        [LineConfig(name="Tür", points=[(0.5, 0.0), (0.5, 1.0)])],
        60,
        start,
    )


def test_the_stored_names_are_the_ones_earlier_versions_wrote() -> None:
    # the outbox's tallies table is keyed by these texts: a change of spelling would start every
    # counter of an upgraded agent again from 0 beside the old rows
    assert count_keys.key("totals", "lines", "Tür", "in") == '["totals","lines","Tür","in"]'
    assert (
        count_keys.key("interval", "zones", "bay", "entered", "gate")
        == '["gate","interval","zones","bay","entered"]'
    )
    assert count_keys.START == '["interval_start_ms"]'
    assert count_keys.start_key("gate") == '["interval_start_ms", "gate"]'


def test_a_named_cameras_interval_and_its_start_are_its_own() -> None:
    stored: dict[str, int] = {}
    gate, single = events(1_700_000_100.0), events(1_700_000_000.0)
    gate.interval["lines"]["Tür"] = {"in": 3, "out": 1}
    single.interval["lines"]["Tür"] = {"in": 7, "out": 0}
    for ev, camera in ((gate, "gate"), (single, None)):
        tallies.apply(stored, tallies.fold([tallies.checked(count_keys.seed_ops(ev, camera))]))
    for ev, camera in ((gate, "gate"), (single, None)):
        state = count_keys.state_from(stored, 0.0, camera)
        assert state is not None
        assert state["interval"]["lines"]["Tür"] == ev.interval["lines"]["Tür"]
        assert state["interval_start"] == ev.interval_start
    # a counts message of the camera resets only its own interval
    ops = count_keys.reset_ops(gate, "gate")
    assert all(name.startswith('["gate",') or name == count_keys.start_key("gate") for _, name, _ in ops)
    assert ops[0] == ("set", count_keys.start_key("gate"), 1_700_000_100_000)


@pytest.mark.parametrize("start", [float("nan"), float("inf"), -5.0, 1e13])
def test_an_interval_start_that_is_no_unix_time_is_stored_as_0(start: float) -> None:
    assert count_keys.reset_ops(events(start))[0] == ("set", count_keys.START, 0)


def test_only_a_start_stored_is_a_state_and_a_foreign_name_does_not_hide_ours() -> None:
    assert count_keys.state_from({count_keys.START: 1_234_000}, 5.0) == {
        "interval": {"lines": {}, "zones": {}},
        "totals": {"lines": {}, "zones": {}},
        "interval_start": 1234.0,
    }
    flat = {"not json": 1, '["totals","lines","Tür","in"]': 4}  # a foreign name first
    state = count_keys.state_from(flat, 5.0)
    assert state is not None and state["totals"]["lines"] == {"Tür": {"in": 4}}

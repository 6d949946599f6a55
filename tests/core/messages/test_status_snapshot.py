"""The one status snapshot field by field, in process: the exact body (names, rounding, defaults)
that the status file, MQTT and ``edge-agent status`` all carry, and the Prometheus gauges made
from it. Subprocess tests see these too, but mutation testing only credits in-process calls
(docs/testing.md), and a renamed field or a lost rounding must fail here, at once."""

from __future__ import annotations

import math
from typing import Any

import pytest

from edge_agent.core.messages.builders import SCHEMA_VERSION
from edge_agent.core.messages.status import STATES, build_status, prometheus_values


def full(state: str = "running", **over: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "device_id": "cam-1",
        "version": "1.2.3",
        "state": state,
        "ts": 1_800_000_000.123456,
        "started_at": 1_799_996_400.98765,
        "uptime_s": 3599.1666,
        "ready_s": 1.23456,
        "pid": 4242,
        "counters": {"frames": 10, "results": 4, "errors": 2, "reloads": 1, "reload_failures": 3},
        "fps": 9.8765,
        "latency_ms": {"total": 52.256, "infer": 40.004},
        "queue": {"pending": 3, "disk_full": False},
        "broker": {"state": "connected", "acked": 7},
        "camera": {"state": "streaming", "dropped": 1},
        "sensor": {"state": "reading", "readings": 5},
        "provider": "CPUExecutionProvider",
        "models": {"detector": {"id": "m"}},
        "clock_synced": True,
        "warnings": ("w1",),
        "model_update": {"version": "v2"},
    }
    args.update(over)
    return build_status(**args)


def test_the_snapshot_has_every_field_named_and_rounded() -> None:
    assert full() == {
        "schema": SCHEMA_VERSION,
        "device_id": "cam-1",
        "version": "1.2.3",
        "state": "running",
        "ts": 1_800_000_000.123,
        "started_at": 1_799_996_400.988,
        "uptime_s": 3599.2,
        "ready_s": 1.235,
        "pid": 4242,
        "frames": 10,
        "results": 4,
        "errors": 2,
        "reloads": 1,
        "reload_failures": 3,
        "fps": 9.88,
        "latency_ms": {"infer": 40.0, "total": 52.26},
        "queue": {"pending": 3, "disk_full": False},
        "broker": {"state": "connected", "acked": 7},
        "camera": {"state": "streaming", "dropped": 1},
        "sensor": {"state": "reading", "readings": 5},
        "provider": "CPUExecutionProvider",
        "models": {"detector": {"id": "m"}},
        "clock_synced": True,
        "warnings": ["w1"],
        "model_update": {"version": "v2"},
    }
    assert list(full()["latency_ms"]) == ["infer", "total"]  # sorted: a stable body


def test_missing_parts_have_their_defaults() -> None:
    snap = full(
        counters={},
        ready_s=None,
        broker=None,
        camera=None,
        sensor=None,
        models=None,
        model_update=None,
        provider=None,
        clock_synced=None,
        warnings=(),
    )
    assert [snap[k] for k in ("frames", "results", "errors", "reloads", "reload_failures")] == [0] * 5
    assert snap["ready_s"] is None and snap["broker"] == {"state": "disabled"}
    assert snap["camera"] is None and snap["sensor"] is None and snap["models"] is None
    assert snap["model_update"] is None and snap["provider"] is None and snap["clock_synced"] is None
    assert snap["warnings"] == []
    assert full(ready_s=0.0)["ready_s"] == 0.0  # ready at once is not "never ready"


def test_the_snapshot_copies_its_parts() -> None:
    """The agent keeps mutating its stats dicts; a stopped snapshot must not rewrite the agent's."""
    camera, sensor = {"state": "streaming"}, {"state": "reading"}
    snap = full("stopped", camera=camera, sensor=sensor)
    assert snap["camera"]["state"] == snap["sensor"]["state"] == "stopped"
    assert camera == {"state": "streaming"} and sensor == {"state": "reading"}


@pytest.mark.parametrize("state", STATES)
def test_parts_are_live_only_while_running_or_draining(state: str) -> None:
    snap = full(state)
    live = state in ("running", "draining")
    assert snap["camera"]["state"] == ("streaming" if live else "stopped")
    assert snap["sensor"]["state"] == ("reading" if live else "stopped")
    assert snap["state"] == state


def test_an_unknown_state_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"status state 'paused' not one of \('running', 'stopped'"):
        full("paused")


def test_prometheus_gauges_are_every_number_by_its_path() -> None:
    snap = {
        "schema": 1,
        "pid": 9,
        "ts": 5.0,
        "started_at": 1.0,
        "state": "running",
        "frames": 10,
        "fps": 2.5,
        "clock_synced": False,
        "provider": "CPU",
        "latency_ms": {"total": 3.5, "bad": math.nan},
        "queue": {"pending": 3, "disk_full": True, "oldest": "2026-01-01T00:00:00Z"},
        "broker": {"state": "connected", "acked": 7, "last_error": None},
        "camera": {"state": "streaming", "x-y.z": 1},
        "models": {"detector": {"conf": 0.5}},
    }
    assert prometheus_values(snap) == {
        "frames": 10.0,
        "fps": 2.5,
        "clock_synced": 0.0,
        "latency_ms_total": 3.5,
        "queue_pending": 3.0,
        "queue_disk_full": 1.0,
        "broker_acked": 7.0,
        "camera_x_y_z": 1.0,
        "models_detector_conf": 0.5,
        "broker_connected": 1.0,
        "up": 1.0,
    }


@pytest.mark.parametrize(
    ("state", "broker", "up", "connected"),
    [
        ("running", {"state": "connecting"}, 1.0, 0.0),
        ("draining", {"state": "connected"}, 0.0, 1.0),
        ("stopped", None, 0.0, 0.0),
    ],
)
def test_up_and_broker_connected(state: str, broker: Any, up: float, connected: float) -> None:
    got = prometheus_values({"state": state, "broker": broker})
    assert got == {"up": up, "broker_connected": connected}


def test_gauges_of_a_real_snapshot_keep_ints_and_drop_ids() -> None:
    got = prometheus_values(full())
    assert got["frames"] == 10.0 and got["reload_failures"] == 3.0 and got["sensor_readings"] == 5.0
    assert got["uptime_s"] == 3599.2 and got["ready_s"] == 1.235
    assert not {"schema", "pid", "ts", "started_at"} & set(got)

"""Messages captured from a REAL run (the agent as a subprocess, a pty sensor, a real mosquitto)
validated against the JSON Schemas shipped in edge_agent/schemas/."""

from __future__ import annotations

import json
import signal
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from support import cli
from support.mqtt import Broker, Collector
from support.world import PtySensor, agent_config, make_world, start_agent

from edge_agent.app.agent.agent import STATUS_EVERY_S

jsonschema = pytest.importorskip("jsonschema", reason="dev extra: pip install -e '.[dev]'")

pytestmark = pytest.mark.slow


def schema(name: str) -> dict[str, Any]:
    text = resources.files("edge_agent").joinpath("schemas", f"{name}.json").read_text(encoding="utf-8")
    return json.loads(text)  # type: ignore[no-any-return]


def test_real_messages_match_the_schemas_and_status_has_one_shape(tmp_path: Path, broker: Broker) -> None:
    w = make_world(tmp_path)
    sensor = PtySensor(tmp_path / "ttyUSB0")
    col = Collector(broker.port, "edge/#", client_id="schema-collector")
    try:
        cfg = agent_config(
            w,
            port=broker.port,
            extra=f'[sensor]\nport = "{tmp_path / "ttyUSB0"}"\nprotocol = "kv"\npublish = true\n',
        )
        proc = start_agent(cfg)
        try:
            col.wait_until(
                lambda c: len(c.on_topic("/status")) >= 4 and len(c.on_topic("/sensors")) >= 3,
                60,
                'len(c.on_topic("/status")) >= 4 and len(c.on_topic("/sensors")) >= 3',
            )
            snap_file = json.loads((w["state"] / "status.json").read_text())
            cli_snap = json.loads(cli("status", "--file", str(w["state"] / "status.json"), "--json").stdout)
            n_before = len(col.on_topic("/status"))
            col.wait_until(
                lambda c: len(c.on_topic("/status")) >= n_before + 3,
                30,
                'len(c.on_topic("/status")) >= n_before + 3',
            )
            window = col.on_topic("/status")[n_before:]
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0, proc.stderr.read() if proc.stderr else ""
        col.wait_until(
            lambda c: c.on_topic("/status")[-1]["state"] == "offline",
            10,
            'c.on_topic("/status")[-1]["state"] == "offline"',
        )
        results, statuses, readings = (
            col.on_topic("/detections"),
            col.on_topic("/status"),
            col.on_topic("/sensors"),
        )
    finally:
        col.close()
        sensor.close()
    assert results and readings and statuses
    check = {name: jsonschema.Draft202012Validator(schema(name)) for name in ("result", "sensor", "status")}
    for body in results:
        check["result"].validate(body)
    for body in readings:
        check["sensor"].validate(body)
    for body in [*statuses, snap_file, {k: v for k, v in cli_snap.items() if k != "age_s"}]:
        check["status"].validate(body)
    # one builder, one timer: every status body has the same keys, file and MQTT alike, but the
    # two the sync stamps on what it publishes (the collector orders statuses by them)
    stamps = {"link", "status_seq"}
    assert all(stamps <= set(s) for s in statuses)
    assert {tuple(sorted(set(s) - stamps)) for s in statuses} == {tuple(sorted(snap_file))}
    # one timer (2 s ticks; MQTT at most every status_interval_s = 1): consecutive running
    # snapshots are a tick apart by the agent's own clock, not two timers' worth (however slow
    # this machine is). Taken after the first 4: the connect message may be a fresh snapshot
    # built before the first tick, or repeat the latest one (same ts)
    ticks = sorted({s["ts"] for s in window if s["state"] == "running"})
    assert len(ticks) >= 3
    assert min(b - a for a, b in zip(ticks, ticks[1:])) >= STATUS_EVERY_S - 0.01
    # results and readings share the device sequence: one outbox, no number used twice
    seqs = [m["seq"] for m in results + readings]
    assert len(seqs) == len(set(seqs))
    assert {m["boot"] for m in results + readings} == {1}


def test_the_schemas_reject_what_they_should() -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"schema": 1, "state": "running"}, schema("status"))
    good = {
        "schema": 1,
        "id": "a" * 32,
        "seq": 1,
        "boot": 1,
        "device_id": "d",
        "ts": 1.0,
        "clock_synced": None,
        "reading": {"t": 1},
    }
    jsonschema.validate(good, schema("sensor"))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**good, "seq": 0}, schema("sensor"))

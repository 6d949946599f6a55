"""The agent's MQTT and sensor parts as the loop drives them, in process (so mutation testing
credits app/agent/agent.py): the final push of what is left is bounded by how the agent was stopped, the
broker is told the device went offline, and a sensor reading the queue refuses is counted."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from support import wait_until
from support.mqtt import Broker, Collector
from support.world import PtySensor, make_world, offline_config, run_agent

from edge_agent.adapters.mqtt.sync import MqttSync
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.app.agent.agent import Agent
from edge_agent.errors import QueueError


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_world(tmp_path_factory.mktemp("world"))


def pending(cfg: Any) -> int:
    box = Outbox.from_config(cfg.queue)
    try:
        return len(box.claim(1000))
    finally:
        box.close()


@pytest.mark.parametrize(("how", "bound"), [("end of the source", 10.0), ("stop signal", 3.0)])
def test_the_final_push_is_bounded_by_how_the_agent_stopped_and_the_broker_hears_offline(
    tmp_path: Path,
    world: dict[str, Path],
    broker: Broker,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    bound: float,
) -> None:
    """At the end of a file/folder source the agent pushes what is left for up to 10 s; after
    SIGTERM for up to 3 s (systemd's stop timeout is 30 s, the rest stays queued on disk). Either
    way the broker's retained status ends as "offline": the latest snapshot, so marked. While it
    runs, the periodic status (every 2 s) reaches the broker with the figures of the moment."""
    drains: list[float] = []
    real_drain = MqttSync.drain

    def drain(self: MqttSync, timeout_s: float) -> bool:
        drains.append(timeout_s)
        return real_drain(self, timeout_s)

    monkeypatch.setattr(MqttSync, "drain", drain)
    cfg = offline_config(
        tmp_path / "state",
        world["camera"],
        world["det"],
        camera="loop = true\ninterval_s = 0.1" if how == "stop signal" else "",
        mqtt_port=broker.port,
    )
    col = Collector(broker.port, "site7/cam-9/status", client_id="status-collector")
    try:

        def on_result(_body: dict[str, Any]) -> None:
            if agent.emitted == 0:  # the first result: the sync is connected before the loop goes on
                wait_until(lambda: agent.current_status(fresh=True)["broker"]["state"] == "connected", 10)
            if how == "stop signal" and any(
                m["state"] == "running" and m["frames"] > 0 for m in col.on_topic("/status")
            ):
                agent.stop_event.set()  # what the SIGTERM handler does, once a periodic status arrived

        agent = Agent(cfg, on_result=on_result)
        assert run_agent(agent, 20) == 0  # a loop, a connect, a 2 s status period, a drain
        assert drains == [bound]
        if how == "end of the source":
            assert agent.frames == 4 and pending(cfg) == 0  # everything delivered before run() returned
        col.wait_until(
            lambda c: bool(c.on_topic("/status")) and c.on_topic("/status")[-1]["state"] == "offline",
            10,
            "the retained status to say offline",
        )
        last = col.on_topic("/status")[-1]
        assert last["device_id"] == "cam-9" and "frames" in last  # the last snapshot, marked offline
    finally:
        col.close()


def test_no_final_push_without_a_broker_connection(
    tmp_path: Path, world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker that is not there: the agent does not wait for it at the end (results stay queued)."""
    from support import free_port

    drains: list[float] = []
    monkeypatch.setattr(MqttSync, "drain", lambda self, t: drains.append(t) or False)
    cfg = offline_config(tmp_path / "state", world["camera"], world["det"], mqtt_port=free_port())
    agent = Agent(cfg)
    assert run_agent(agent) == 0
    assert drains == [] and agent.emitted == 4 and pending(cfg) == 4


def test_a_sensor_reading_the_queue_refuses_is_counted_and_inference_goes_on(
    tmp_path: Path, world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    real_put = Outbox.put
    refused = threading.Event()

    def put(self: Outbox, topic: str, payload: dict[str, Any], tally: Any = None) -> str:
        if topic.endswith("/sensors"):
            refused.set()
            raise QueueError("disk error: test")
        return real_put(self, topic, payload, tally)

    monkeypatch.setattr(Outbox, "put", put)
    pty = PtySensor(tmp_path / "tty")
    cfg = offline_config(
        tmp_path / "state",
        world["camera"],
        world["det"],
        extra=f'[sensor]\nport = "{pty.link}"\nprotocol = "kv"\npublish = true\n',
    )

    def on_result(_body: dict[str, Any]) -> None:
        if agent.emitted == 0:
            wait_until(refused.is_set, 30, "a sensor reading to be refused")

    agent = Agent(cfg, on_result=on_result)
    try:
        assert run_agent(agent) == 0
    finally:
        pty.close()
    assert agent.errors >= 1 and agent.emitted == 4
    on_disk = json.loads((tmp_path / "state" / "status.json").read_text())
    assert on_disk["errors"] == agent.errors


def test_a_disk_that_fills_under_reject_new_still_ends_in_a_clean_stop(
    tmp_path: Path, world: dict[str, Path]
) -> None:
    """``reject_new`` on a disk that fills while the agent runs: the final flush meets the full
    disk (the outbox refuses what it held and counts it at close), and the agent still stops
    cleanly: exit 0 and a "stopped" status, not a traceback."""
    from support.tmpfs import fill, tmpfs

    with tmpfs(tmp_path / "fs", size="4m") as disk:
        cfg = offline_config(
            tmp_path / "state",
            world["camera"],
            world["det"],
            camera="loop = true",
            queue=f'path = "{disk}/q.db"\npolicy = "reject_new"',
        )

        def on_result(_body: dict[str, Any]) -> None:
            if agent.emitted == 1:
                fill(disk)

        agent = Agent(cfg, max_frames=12, on_result=on_result)
        assert run_agent(agent) == 0
    assert agent.emitted + agent.rejected == 12 and agent.errors == 0
    on_disk = json.loads((tmp_path / "state" / "status.json").read_text())
    assert on_disk["state"] == "stopped" and on_disk["queue"]["disk_full"] is True

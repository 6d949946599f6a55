"""The agent's parts beside the loop, in process: where a status snapshot goes (systemd STATUS,
the status file with its failure logged once per streak, the retained MQTT status at most every
``status_interval_s``), the MQTT and sensor parts (one that cannot start is counted, readings
published when asked), and the result step's fields (sizes, names, sensor, snapshot)."""

from __future__ import annotations

import base64
import json
import logging
import socket
import time
import types
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pytest
from support import wait_until
from support.world import PtySensor, agent_toml

from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.app.agent import health
from edge_agent.app.agent import parts as agent_parts
from edge_agent.app.agent import steps as frame_steps
from edge_agent.app.agent.health import StatusOutputs
from edge_agent.app.agent.parts import start_sensor, start_sync
from edge_agent.app.agent.steps import feed_model_updates, result_body
from edge_agent.core.camera.source_spec import Frame
from edge_agent.core.config.schema import Config, parse_config
from edge_agent.core.vision.results import Detection
from edge_agent.errors import QueueError


def cfg_with(tmp_path: Path, extra: str = "") -> Config:
    """No camera or detector: the parts alone, a broker that is not there (port 1)."""
    return parse_config(
        agent_toml(
            tmp_path,
            None,
            None,
            port=1,
            extra=extra,
            device={"id": "cam-5"},
            mqtt={
                "topic_prefix": "plant",
                "status_interval_s": 10,
                "reconnect_min_s": None,
                "reconnect_max_s": None,
            },
            queue={"path": str(tmp_path / "q.db")},
            output=None,
        )
    )


STATUS = {
    "fps": 1.5,
    "queue": {"pending": 3},
    "broker": {"state": "connected"},
    "camera": {"state": "streaming"},
    "frames": 7,
}


class FakeSync:
    """Records the retained statuses it is asked to publish; ``accept`` says if the broker took it."""

    def __init__(self, accept: bool = True) -> None:
        self.accept = accept
        self.published: list[dict[str, Any]] = []

    def publish_status(self, status: dict[str, Any]) -> bool:
        self.published.append(status)
        return self.accept


class Clock:
    """health's ``time`` module with a monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.time = time.time

    def monotonic(self) -> float:
        return self.now


def test_the_mqtt_status_goes_out_at_most_every_interval_and_never_in_the_final_tick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr(health, "time", clock)
    out = StatusOutputs(cfg_with(tmp_path))
    sync = FakeSync()
    out.send(STATUS, sync, final=False)
    assert sync.published == [STATUS]
    clock.now += 9.99
    out.send(STATUS, sync, final=False)
    assert len(sync.published) == 1  # within status_interval_s = 10
    clock.now += 0.01
    out.send(STATUS, sync, final=False)
    assert len(sync.published) == 2  # exactly the interval later
    clock.now += 100
    out.send(STATUS, sync, final=True)
    assert len(sync.published) == 2  # the final one: the sync publishes "offline" itself
    out.send(STATUS, None, final=False)  # no sync: the file and systemd only


def test_a_status_the_broker_did_not_take_is_tried_again_at_the_next_tick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr(health, "time", clock)
    out = StatusOutputs(cfg_with(tmp_path))
    sync = FakeSync(accept=False)
    out.send(STATUS, sync, final=False)
    clock.now += 1
    out.send(STATUS, sync, final=False)
    assert len(sync.published) == 2
    sync.accept = True
    clock.now += 1
    out.send(STATUS, sync, final=False)
    clock.now += 1
    out.send(STATUS, sync, final=False)
    assert len(sync.published) == 3


def test_the_status_file_and_the_systemd_status_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "n.sock"))
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "n.sock"))
    try:
        out = StatusOutputs(cfg_with(tmp_path))
        out.send(STATUS, None, final=False)
        line = sock.recv(4096).decode()
        out.send({**STATUS, "camera": None}, None, final=False)
        line2 = sock.recv(4096).decode()
    finally:
        sock.close()
    assert line == "STATUS=1.5 fps, queue 3, broker connected, camera streaming"
    assert line2 == "STATUS=1.5 fps, queue 3, broker connected, camera None"
    assert json.loads((tmp_path / "status.json").read_text())["frames"] == 7


def test_a_status_file_failure_is_a_warning_once_per_streak(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "file").write_text("")
    cfg = cfg_with(tmp_path)
    good = cfg.health.status_file
    cfg.health.status_file = str(tmp_path / "file" / "status.json")  # under a file: cannot be written
    out = StatusOutputs(cfg)

    def levels() -> list[int]:
        got = [r.levelno for r in caplog.records if "not written" in r.getMessage()]
        caplog.clear()
        return got

    with caplog.at_level(logging.DEBUG, logger="edge_agent.app.agent.health"):
        for _ in range(3):
            out.send(STATUS, None, final=False)
        assert levels() == [logging.WARNING, logging.DEBUG, logging.DEBUG]
        cfg.health.status_file = good
        out.send(STATUS, None, final=False)
        assert levels() == []
        cfg.health.status_file = str(tmp_path / "file" / "status.json")
        out.send(STATUS, None, final=False)
        (msg,) = [r.getMessage() for r in caplog.records]
        assert levels() == [logging.WARNING]  # a new streak
    # the journal line names the file and the cause
    assert (
        msg
        == f"status file {tmp_path}/file/status.json not written: [Errno 17] File exists: '{tmp_path}/file'"
    )


class Stats:
    def __init__(self, **figures: Any) -> None:
        self.figures = figures

    def stats(self) -> dict[str, Any]:
        return dict(self.figures)


class RunningModels:
    provider = "CPUExecutionProvider"

    def describe(self) -> dict[str, Any]:
        return {"detector": {"id": "m"}}


def fake_agent(tmp_path: Path, **kw: Any) -> Any:
    figures: dict[str, Any] = dict(
        cfg=cfg_with(tmp_path),
        models=RunningModels(),
        started_wall=1_700_000_000.25,
        started_mono=time.monotonic() - 100.0,
        ready_s=2.5,
        frames=10,
        emitted=4,
        errors=3,
        reloads=2,
        reload_failures=1,
        fps=lambda: 5.0,
        latency_ms=lambda: {"total": 12.0},
        warnings=lambda: ["detector never scores"],
        updates=types.SimpleNamespace(status=lambda: {"current": "v2"}),
    )
    figures.update(kw)
    return types.SimpleNamespace(**figures)


def test_the_snapshot_carries_every_figure_of_the_agent_and_its_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from edge_agent import __version__

    monkeypatch.setattr(health, "clock_synchronised", lambda: True)
    camera, box = Stats(state="streaming", frames=10), Stats(pending=3)
    st = health.snapshot(fake_agent(tmp_path), camera, box, Stats(state="connected"), Stats(state="reading"))  # type: ignore[arg-type]
    assert (st["device_id"], st["version"], st["state"]) == ("cam-5", __version__, "running")
    assert st["started_at"] == 1_700_000_000.25 and 99.0 <= st["uptime_s"] <= 160.0 and st["ready_s"] == 2.5
    assert abs(st["ts"] - time.time()) < 60
    counters = {k: st[k] for k in ("frames", "results", "errors", "reloads", "reload_failures")}
    assert counters == {"frames": 10, "results": 4, "errors": 3, "reloads": 2, "reload_failures": 1}
    assert (st["fps"], st["latency_ms"], st["warnings"]) == (5.0, {"total": 12.0}, ["detector never scores"])
    assert st["queue"] == {"pending": 3} and st["broker"] == {"state": "connected"}
    assert st["camera"] == {"state": "streaming", "frames": 10} and st["sensor"] == {"state": "reading"}
    assert (st["provider"], st["models"]) == ("CPUExecutionProvider", {"detector": {"id": "m"}})
    assert st["clock_synced"] is True and st["model_update"] == {"current": "v2"}
    # a stopping agent: its parts are reported stopped
    st = health.snapshot(fake_agent(tmp_path), camera, box, None, Stats(state="reading"), state="stopped")  # type: ignore[arg-type]
    assert st["state"] == "stopped" and st["camera"]["state"] == st["sensor"]["state"] == "stopped"


def test_a_snapshot_before_the_models_load_and_without_optional_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(health, "clock_synchronised", lambda: False)
    agent = fake_agent(tmp_path, models=None, updates=None, ready_s=None)
    st = health.snapshot(agent, Stats(state="connecting"), Stats(pending=0), None, None)  # type: ignore[arg-type]
    assert st["broker"] == {"state": "disabled"} and st["sensor"] is None and st["model_update"] is None
    assert st["provider"] is None and st["models"] is None and st["ready_s"] is None
    assert st["clock_synced"] is False and st["camera"] == {"state": "connecting"}


def test_prometheus_serves_the_fresh_snapshot_with_the_device_label(tmp_path: Path) -> None:
    import urllib.request

    from support.ports import free_port

    port = free_port()
    asked: list[bool] = []

    def current_status(fresh: bool) -> dict[str, Any]:
        asked.append(fresh)
        return {"frames": 7, "queue": {"pending": 3}}

    cfg = cfg_with(tmp_path, f"prometheus_port = {port}")
    agent = types.SimpleNamespace(cfg=cfg, errors=0, current_status=current_status)
    server = health.start_metrics(agent)  # type: ignore[arg-type]
    assert server is not None
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            page = r.read().decode()
    finally:
        server.stop()
    assert asked == [True] and agent.errors == 0
    lines = page.splitlines()
    assert 'edge_agent_frames_total{device="cam-5"} 7' in lines, page
    assert 'edge_agent_queue_pending{device="cam-5"} 3' in lines, page


def test_a_prometheus_port_in_use_is_counted_and_logged_with_its_cause(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        agent = types.SimpleNamespace(cfg=cfg_with(tmp_path, f"prometheus_port = {port}"), errors=5)
        with caplog.at_level(logging.ERROR, logger="edge_agent.app.agent.health"):
            assert health.start_metrics(agent) is None  # type: ignore[arg-type]
    assert agent.errors == 6  # one more error, on top of those before
    (msg,) = [r.getMessage() for r in caplog.records]
    assert msg.startswith(f"prometheus endpoint on 127.0.0.1:{port} not started: ") and "in use" in msg, msg


def test_prometheus_off_loopback_asks_the_token_of_its_file_and_an_empty_file_is_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import urllib.error
    import urllib.request

    from support.ports import free_port

    port = free_port()
    token = tmp_path / "metrics.token"
    token.write_text("tok-123\n")
    extra = f'prometheus_port = {port}\nprometheus_bind = "0.0.0.0"\nprometheus_token_file = "{token}"'
    agent = types.SimpleNamespace(
        cfg=cfg_with(tmp_path, extra), errors=0, current_status=lambda fresh: {"frames": 2}
    )
    server = health.start_metrics(agent)  # type: ignore[arg-type]
    assert server is not None and server.server.server_address[0] == "0.0.0.0"
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(url, timeout=10)
        req = urllib.request.Request(url, headers={"Authorization": "Bearer tok-123"})
        assert b"edge_agent_frames_total" in urllib.request.urlopen(req, timeout=10).read()
    finally:
        server.stop()
    token.write_text("\n")
    with caplog.at_level(logging.ERROR, logger="edge_agent.app.agent.health"):
        assert health.start_metrics(agent) is None  # type: ignore[arg-type]
    assert agent.errors == 1 and "is empty" in caplog.records[-1].getMessage()


def test_no_prometheus_port_no_server(tmp_path: Path) -> None:
    agent = types.SimpleNamespace(cfg=cfg_with(tmp_path), errors=0)
    assert health.start_metrics(agent) is None  # type: ignore[arg-type]
    assert agent.errors == 0


# ---- MQTT and sensor parts ----------------------------------------------------------------------


def test_the_sync_part_off_unusable_or_started(tmp_path: Path) -> None:
    errors: list[int] = []
    box = Outbox.from_config(cfg_with(tmp_path).queue)
    try:
        off = cfg_with(tmp_path, "")
        off.mqtt.enabled = False
        assert start_sync(off, box, dict, lambda: errors.append(1)) is None
        assert errors == []
        bad = cfg_with(tmp_path)
        bad.mqtt.username = "u"
        bad.mqtt.password_file = str(tmp_path / "missing")
        assert start_sync(bad, box, dict, lambda: errors.append(1)) is None
        assert errors == [1]
        sync = start_sync(cfg_with(tmp_path), box, dict, lambda: errors.append(1))
        assert sync is not None and sync.status_topic == "plant/cam-5/status"
        try:
            wait_until(lambda: sync.stats()["connect_attempts"] >= 1, 30, "a connect attempt")
        finally:
            sync.stop()
        assert errors == [1]
    finally:
        box.close()


def test_an_mqtt_part_that_cannot_start_says_why_in_the_journal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bad = cfg_with(tmp_path)
    bad.mqtt.username = "u"
    bad.mqtt.password_file = str(tmp_path / "missing")
    box = Outbox.from_config(bad.queue)
    try:
        with caplog.at_level(logging.ERROR, logger="edge_agent.app.agent.agent"):
            assert start_sync(bad, box, dict, lambda: None) is None
    finally:
        box.close()
    (msg,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert msg.startswith("MQTT sync disabled: ") and str(tmp_path / "missing") in msg, msg


def test_the_started_sync_ships_the_outbox_and_the_agents_status(tmp_path: Path, broker: Any) -> None:
    from support.mqtt import Collector

    cfg = cfg_with(tmp_path)
    cfg.mqtt.port = broker.port
    box = Outbox.from_config(cfg.queue)
    box.put("plant/cam-5/detections", {"id": "r1"})
    seen = Collector(broker.port, "plant/cam-5/status", client_id="parts-status")
    sync = start_sync(cfg, box, lambda: {**STATUS, "state": "running"}, lambda: None)
    try:
        assert sync is not None
        wait_until(lambda: box.stats()["pending"] == 0, 30, "the queued result acknowledged by the broker")
        # the agent's own snapshot, retained on connect (not an empty or default body)
        seen.wait_until(lambda c: c.on_topic("/status"), 30, "the retained status")
        assert seen.on_topic("/status")[0]["queue"] == {"pending": 3}
    finally:
        sync.stop()
        seen.close()
        box.close()


def test_no_sensor_section_no_sensor(tmp_path: Path) -> None:
    box = Outbox.from_config(cfg_with(tmp_path).queue)
    try:
        assert start_sensor(cfg_with(tmp_path), box, lambda: None) is None
    finally:
        box.close()


@pytest.mark.parametrize("publish", [True, False])
def test_sensor_readings_are_queued_on_their_topic_only_when_published(
    tmp_path: Path, publish: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agent_parts, "clock_synchronised", lambda: True)  # what the device says
    pty = PtySensor(tmp_path / "tty")
    cfg = cfg_with(
        tmp_path, f'[sensor]\nport = "{pty.link}"\nprotocol = "kv"\npublish = {str(publish).lower()}\n'
    )
    box = Outbox.from_config(cfg_with(tmp_path).queue)
    sensor = start_sensor(cfg, box, lambda: None)
    try:
        assert sensor is not None
        wait_until(lambda: sensor.stats()["readings"] >= 2, 30, "two readings")
    finally:
        sensor.stop()
        pty.close()
    box.flush()
    rows = [(m.topic, json.loads(m.payload)) for m in box.claim(100)]
    box.close()
    if not publish:
        assert rows == [] and sensor.stats()["callback_errors"] == 0  # no callback at all
        return
    assert len(rows) >= 2
    for topic, body in rows:
        assert topic == "plant/cam-5/sensors"
        assert body["device_id"] == "cam-5" and body["reading"] == {"temp": 21.5, "hum": 40}
        assert abs(body["ts"] - time.time()) < 60 and body["clock_synced"] is True


def test_a_sensor_reading_that_cannot_be_queued_is_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken:
        def put(self, topic: str, body: dict[str, Any]) -> str:
            raise QueueError("disk error: test")

    pty = PtySensor(tmp_path / "tty")
    cfg = cfg_with(tmp_path, f'[sensor]\nport = "{pty.link}"\nprotocol = "kv"\npublish = true\n')
    errors: list[int] = []
    with caplog.at_level(logging.ERROR, logger="edge_agent.app.agent.agent"):
        sensor = start_sensor(cfg, Broken(), lambda: errors.append(1))  # type: ignore[arg-type]
        try:
            wait_until(lambda: len(errors) >= 2, 30, "two counted failures")
        finally:
            sensor.stop()
            pty.close()
    msgs = [r.getMessage() for r in caplog.records if r.name == "edge_agent.app.agent.agent"]
    # every failure counted; logged once, then every 250th with the count (a reading a second on a
    # broken disk logged a line each)
    assert msgs == ["sensor reading not queued: disk error: test"], msgs


# ---- the result step ------------------------------------------------------------------------------


class Models:
    def describe(self) -> dict[str, Any]:
        return {"detector": {"id": "m", "sha256": "ab", "quantization": "fp32"}}


class Sensor:
    def __init__(self, latest: Optional[dict[str, Any]]) -> None:
        self._latest = latest

    def latest(self) -> Optional[dict[str, Any]]:
        return self._latest


def frame(**kw: Any) -> Frame:
    img = np.full((60, 80, 3), 90, np.uint8)
    return Frame(image=img, ts_mono=12.3456789, ts_wall=1_700_000_000.5, seq=42, source="rtsp://cam", **kw)


DET = Detection(box=(1.0, 2.0, 30.0, 40.0), label="car", class_id=2, confidence=0.9)


def test_the_result_body_of_a_stream_frame(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frame_steps, "clock_synchronised", lambda: True)
    body = result_body(cfg_with(tmp_path), frame(), [DET], {"total": 5.0}, Models(), "change", None)  # type: ignore[arg-type]
    assert (body["image"], body["width"], body["height"]) == ("rtsp://cam#42", 80, 60)
    assert (body["frame"], body["ts_mono"], body["captured_at"]) == (42, 12.345679, 1_700_000_000.5)
    assert body["event"] == "change" and body["device_id"] == "cam-5"
    assert body["models"] == Models().describe() and body["timings_ms"] == {"total": 5.0}
    assert [d["label"] for d in body["detections"]] == ["car"]
    assert abs(body["ts"] - time.time()) < 60 and body["clock_synced"] is True
    assert "sensor" not in body and "snapshot_jpeg_b64" not in body


def test_a_frame_decoded_small_reports_the_size_the_camera_sent(tmp_path: Path) -> None:
    body = result_body(
        cfg_with(tmp_path),
        frame(name="a.jpg", full_size=(320, 240)),
        [],
        {},
        Models(),  # type: ignore[arg-type]
        None,
        None,
    )
    assert (body["image"], body["width"], body["height"]) == ("a.jpg", 320, 240)


@pytest.mark.parametrize(
    ("attach", "latest", "want"),
    [("true", {"t": 1}, {"t": 1}), ("true", None, None), ("false", {"t": 1}, "absent")],
)
def test_the_sensor_reading_rides_along_when_attach_to_results(
    tmp_path: Path, attach: str, latest: Optional[dict[str, Any]], want: object
) -> None:
    cfg = cfg_with(tmp_path, f'[sensor]\nport = "/dev/null"\nattach_to_results = {attach}\n')
    body = result_body(cfg, frame(), [], {}, Models(), None, Sensor(latest))  # type: ignore[arg-type]
    assert body.get("sensor", "absent") == want
    # a configured sensor that did not start (None): nothing attached
    assert "sensor" not in result_body(cfg, frame(), [], {}, Models(), None, None)  # type: ignore[arg-type]


def test_the_snapshot_fits_snapshot_max_bytes(tmp_path: Path) -> None:
    cfg = cfg_with(tmp_path, "[output]\nsnapshot = true\nsnapshot_max_bytes = 2000\n")
    noisy = np.random.default_rng(1).integers(0, 255, (240, 320, 3), dtype=np.uint8)
    f = Frame(image=noisy, ts_mono=1.0, ts_wall=2.0, seq=1, source="s")
    jpeg = base64.b64decode(result_body(cfg, f, [], {}, Models(), None, None)["snapshot_jpeg_b64"])  # type: ignore[arg-type]
    assert jpeg[:2] == b"\xff\xd8" and len(jpeg) <= 2000


def test_the_model_update_step_offers_the_frame_and_its_detection_count() -> None:
    seen: list[object] = []
    updates = types.SimpleNamespace(
        ring=types.SimpleNamespace(offer=lambda img: seen.append(("offer", img.shape))),
        on_frame=lambda n: seen.append(("count", n)),
    )
    feed_model_updates(updates, frame(), 3)  # type: ignore[arg-type]
    assert seen == [("offer", (60, 80, 3)), ("count", 3)]

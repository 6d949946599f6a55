"""[[cameras]] at the far end, for real: an enrolled mosquitto, the real `edge-agent collect` (a
child process, logged in as its enrolled collector, `enrolled_file` as its allow list) and an
enrolled device publishing for two cameras on <p>/<device>/<camera>/<kind>, in a batch, and as a
legacy single camera. Stored with their camera (SQLite and PostgreSQL); a body whose camera is
not the topic's, a camera topic without one and a camera that is not an id are refused, counted
and kept in `rejected`; `edge-agent fleet status` shows the cameras of the status's map."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import free_port, wait_until
from support.collector import CollectorProc, fleet, metrics
from support.enrolled import Peer, enrolled_broker, secret
from support.mqtt import Broker

from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.core.messages.batch import pack

NOW = 1796000000.0


@pytest.fixture
def enrolled(tmp_path: Path) -> Iterator[tuple[Broker, Path]]:
    broker = enrolled_broker(tmp_path, "cam-a", "--collector", "coll", "--operator", "ops")
    broker.start()
    try:
        yield broker, tmp_path / "enroll"
    finally:
        broker.stop()


def msg(seq: int, camera: Any = None, **kw: Any) -> bytes:
    body: dict[str, Any] = {"schema": 1, "id": f"m{seq}", "seq": seq, "boot": 1, "device_id": "cam-a"}
    if camera is not None:
        body["camera"] = camera
    body.update(ts=NOW + seq, **kw)
    return json.dumps(body).encode()


GOOD = [
    ("edge/cam-a/gate/detections", msg(1, "gate", detections=[])),
    ("edge/cam-a/gate/objects", msg(2, "gate", event="appeared", object_id=1)),
    ("edge/cam-a/yard/counts", msg(3, "yard", lines={}, zones={})),
    ("edge/cam-a/yard/detections", msg(4, "yard", detections=[])),
    ("edge/cam-a/detections", msg(5, detections=[])),  # the single [camera]: no camera anywhere
    (
        "edge/cam-a/batch.zlib",
        pack([("objects", msg(6, "gate")), ("counts", msg(7, "yard"))], 1 << 20).payload,
    ),
]
BAD = [
    ("edge/cam-a/gate/objects", msg(8, "yard"), "camera 'yard' is not the topic's camera 'gate'"),
    ("edge/cam-a/yard/detections", msg(9), "body names no camera, the topic's is 'yard'"),
    (
        "edge/cam-a/batch.zlib",
        pack([("objects", msg(10, "gate")), ("objects", msg(11, "no/t"))], 1 << 20).payload,
        "line 2: camera 'no/t' is not 1-64 of A-Za-z0-9_.-",
    ),
    ("edge/cam-a/gate/counts", msg(12, 5), "camera 5 is not 1-64 of A-Za-z0-9_.-"),
]
STORED = [
    (1, "detections", "gate"),
    (2, "objects", "gate"),
    (3, "counts", "yard"),
    (4, "detections", "yard"),
    (5, "detections", None),
    (6, "objects", "gate"),
    (7, "counts", "yard"),
]
CAMERAS = {
    "gate": {"source": "rtsp://gate", "kind": "rtsp", "state": "streaming", "fps_in": 10.0, "fps": 5.0,
             "processed": 1200, "skipped_motion": 30, "dropped_stale": 2, "frame_age_ms": 85.0,
             "motion_ratio": 0.4, "reconnects": 0, "last_error": None, "weight": 1},
    "yard": {"source": "rtsp://yard", "kind": "rtsp", "state": "reconnecting", "fps_in": 0.0, "fps": 0.0,
             "processed": 300, "skipped_motion": 0, "dropped_stale": 0, "frame_age_ms": None,
             "motion_ratio": None, "reconnects": 3, "last_error": "connection refused", "weight": 1},
}  # fmt: skip


def stored(db: CollectorDb) -> tuple[list[tuple[int, str, Any]], list[str]]:
    rows = db._x("SELECT seq, kind, camera FROM messages ORDER BY seq").fetchall()
    reasons = [str(r) for (r,) in db._x("SELECT reason FROM rejected ORDER BY id").fetchall()]
    return [(int(s), k, c) for s, k, c in rows], reasons


def test_two_cameras_are_stored_with_their_camera_and_every_mismatch_is_refused(
    tmp_path: Path, enrolled: tuple[Broker, Path], url: str
) -> None:
    broker, d = enrolled
    conf = tmp_path / "collector.toml"
    conf.write_text(
        f'[collector]\nusername = "coll"\npassword_file = "{d}/secrets/coll.password"\n'
        f'enrolled_file = "{d}/enrolled.json"\n'
    )
    port = free_port()
    col = CollectorProc(broker.port, url, tmp_path / "col.log", "coll", metrics_port=port)
    col.args += ["--config", str(conf)]
    col.start()
    dev = Peer(broker.port, "cam-a", secret(d, "cam-a"))
    try:
        wait_until(
            lambda: "collector: subscribed to" in col.text(), 30, lambda: col.text()[-2000:], every=0.1
        )
        assert dev.connect() == "Success"
        for topic, payload in GOOD:
            dev.publish(topic, payload)
        for topic, payload, _ in BAD:
            dev.publish(topic, payload)
        status = {"schema": 1, "device_id": "cam-a", "state": "running", "ts": NOW, "queue": {"pending": 0}}
        dev.publish("edge/cam-a/status", json.dumps({**status, "cameras": CAMERAS}).encode())

        def both() -> bool:
            db = CollectorDb(url)
            try:
                if not db.schema_version():
                    return False
                rows, reasons = stored(db)
                return len(rows) >= len(STORED) and len(reasons) >= len(BAD) and bool(db.devices())
            finally:
                db.close()

        wait_until(both, 30, lambda: col.text()[-2000:], every=0.2)
        wait_until(
            lambda: metrics(port).get("edge_agent_collector_rejected_total") == len(BAD),
            10,
            lambda: str(metrics(port)),
        )
    finally:
        dev.close()
        assert col.stop() == 0
    db = CollectorDb(url)
    try:
        rows, reasons = stored(db)
        (device,) = db.devices()
    finally:
        db.close()
    assert rows == STORED  # seq 8..12 are nowhere: a batch with one bad line is refused whole
    assert len(reasons) == len(BAD)
    for (topic, _, why), reason in zip(BAD, reasons):
        assert reason.startswith(topic) and reason.endswith(why), (reason, why)
    assert device["cameras"] == CAMERAS and device["gaps"] == 0
    assert "Denied PUBLISH" not in broker.log_text()  # every camera topic is in the device's ACL

    table = fleet("status", "--db", url)
    assert table.returncode == 0, table.stderr
    head, line = table.stdout.splitlines()
    assert head.split()[-1] == "CAMERAS" and line.endswith("2 (1 down)")
    per = fleet("status", "--cameras", "--db", url)
    assert per.returncode == 0, per.stderr
    lines = per.stdout.splitlines()
    assert lines[0].split()[:3] == ["DEVICE", "CAMERA", "STATE"]
    assert lines[1].split() == ["cam-a", "gate", "streaming", "10.0", "5.0", "1200", "85", "ms", "0", "-"]
    assert lines[2].split()[:8] == ["cam-a", "yard", "reconnecting", "0.0", "0.0", "300", "-", "3"]
    assert lines[2].endswith("connection refused")
    as_json = json.loads(fleet("status", "--cameras", "--json", "--db", url).stdout)
    assert [(c["device"], c["camera"], c["reconnects"]) for c in as_json["cameras"]] == [
        ("cam-a", "gate", 0),
        ("cam-a", "yard", 3),
    ]
    assert json.loads(fleet("status", "--json", "--db", url).stdout)["devices"][0]["cameras"] == CAMERAS
    if url.startswith("sqlite"):  # the rows a dashboard asks for, straight from the file
        path = url[len("sqlite:///") :]
        con = sqlite3.connect(path)
        try:
            q = "SELECT seq FROM messages WHERE device = 'cam-a' AND camera = 'gate' ORDER BY time"
            assert [s for (s,) in con.execute(q)] == [1, 2, 6]
        finally:
            con.close()

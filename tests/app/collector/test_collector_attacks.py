"""The attacks found as an anonymous client, replayed against a real mosquitto and a real
`edge-agent collect` process (SQLite and PostgreSQL): each must leave the collector alive, the bad
message rejected and acknowledged, and later good messages stored."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from support import cli, wait_until
from support.collector import CollectorProc, Postgres, find_pg_bin
from support.mqtt import Broker, require_mosquitto

from edge_agent.adapters.collector.db import CollectorDb

pytestmark = pytest.mark.slow
# 90 bytes: passes json.loads; a driver's UTF-8 encode of it raised and crash-looped the collector
SURROGATE = b'{"id":"x1","seq":1,"boot":1,"device_id":"cam-1","ts":1796000000,"label":"\\ud800"}'


def result(seq: int) -> bytes:
    body = {"id": f"r{seq}", "seq": seq, "boot": 1, "device_id": "cam-1", "ts": 1796000000.0 + seq}
    return json.dumps(body).encode()


def publish(port: int, items: list[tuple[str, bytes]]) -> None:
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="attacker", protocol=mqtt.MQTTv5)
    c.connect("127.0.0.1", port)
    c.loop_start()
    try:
        sent = [c.publish(topic, payload, qos=1) for topic, payload in items]
        for info in sent:
            info.wait_for_publish(60)
    finally:
        c.disconnect()
        c.loop_stop()


def query(url: str, sql: str) -> list[tuple[object, ...]]:
    db = CollectorDb(url)
    try:
        return [tuple(r) for r in db._x(sql).fetchall()]
    except Exception:  # noqa: BLE001 -- no schema yet
        if db.dialect == "postgresql":
            db.conn.rollback()
        return []
    finally:
        db.close()


def subscribed(col: CollectorProc) -> None:
    wait_until(lambda: "collector: subscribed to" in col.text(), 30, col.text, every=0.1)


def test_a_lone_surrogate_is_rejected_and_the_collector_lives_through_a_restart(
    broker: Broker, url: str, tmp_path: Path
) -> None:
    col = CollectorProc(broker.port, url, tmp_path / "c.log", "coll-1")
    col.start()
    try:
        subscribed(col)
        publish(broker.port, [("edge/cam-1/detections", SURROGATE)])
        wait_until(lambda: query(url, "SELECT reason FROM rejected"), 30, col.text, every=0.2)
        assert col.proc is not None and col.proc.poll() is None, col.text()
        col.stop()
        col.start()  # the same client id: the broker hands it whatever was not acknowledged
        subscribed(col)
        publish(broker.port, [("edge/cam-1/detections", result(s)) for s in (2, 3)])
        wait_until(lambda: len(query(url, "SELECT seq FROM messages")) == 2, 30, col.text, every=0.2)
        time.sleep(0.5)  # a redelivered poison message would have ended it by now
        assert col.proc is not None and col.proc.poll() is None, col.text()
    finally:
        col.stop()
    (reason,), *more = query(url, "SELECT reason FROM rejected")
    assert more == [] and "lone UTF-16 surrogate" in str(reason)
    assert sorted(s for (s,) in query(url, "SELECT seq FROM messages")) == [2, 3]
    assert "Traceback" not in col.text()


def vm_hwm_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_thirty_messages_of_10_mb_keep_the_collector_under_300_mb(tmp_path: Path) -> None:
    require_mosquitto()
    broker = Broker(tmp_path / "broker", extra_conf=["message_size_limit 20971520"])
    broker.start()
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    col = CollectorProc(broker.port, url, tmp_path / "c.log", "coll-rss")
    try:
        col.start()
        subscribed(col)
        # the writer held up (the database locked by another writer) while the 30 arrive: before
        # the byte-bounded inbox, paho read them all into memory
        lock = sqlite3.connect(tmp_path / "fleet.db", isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")
        try:
            junk = b"x" * (10 * 1024 * 1024)  # not JSON: every one is rejected
            publish(broker.port, [(f"edge/cam-{i}/detections", junk) for i in range(30)])
            time.sleep(8.0)
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        wait_until(lambda: len(query(url, "SELECT id FROM rejected")) == 30, 120, col.text, every=0.5)
        assert col.proc is not None
        peak = vm_hwm_kib(col.proc.pid)
        print(f"collector VmHWM after 30 x 10 MB: {peak / 1024:.0f} MiB")
        assert peak < 300 * 1024, f"VmHWM {peak} KiB"
        col.stop()
        # every one was acknowledged: a restart with the same client id gets nothing again
        col.start()
        subscribed(col)
        time.sleep(2.0)
        assert len(query(url, "SELECT id FROM rejected")) == 30
    finally:
        col.stop()
        broker.stop()


def test_a_message_over_message_max_is_rejected_without_being_kept(broker: Broker, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    col = CollectorProc(
        broker.port, url, tmp_path / "c.log", "coll-big", extra=("--config", str(tmp_path / "c.toml"))
    )
    (tmp_path / "c.toml").write_text("[collector]\nmessage_max_kib = 64\n")
    col.start()
    try:
        subscribed(col)
        publish(
            broker.port,
            [("edge/cam-1/detections", b" " * (65 * 1024) + result(1)), ("edge/cam-1/detections", result(2))],
        )
        wait_until(lambda: query(url, "SELECT seq FROM messages"), 30, col.text, every=0.2)
    finally:
        col.stop()
    (reason,), *more = query(url, "SELECT reason FROM rejected")
    assert more == [] and f"{65 * 1024 + len(result(1))} bytes, at most 65536 taken" in str(reason)


@pytest.fixture
def pg_with_password() -> object:
    if find_pg_bin() is None:
        pytest.skip("PostgreSQL not installed (initdb/pg_ctl: Debian package 'postgresql'); CI installs it")
    pytest.importorskip("psycopg", reason="psycopg 3 absent: pip install 'onnx-edge-agent[collector]'")
    pg = Postgres(password="s3cret-Pw-7f1")
    pg.start()
    try:
        yield pg
    finally:
        pg.cleanup()


def test_the_database_password_comes_from_a_file_and_never_shows_in_ps(
    broker: Broker, pg_with_password: Postgres, tmp_path: Path
) -> None:
    pg = pg_with_password
    secret = pg.password
    assert secret is not None
    # the URL with the password is refused, in one line that does not echo it
    bad = cli("collect", "--db", pg.url.replace("postgres@", f"postgres:{secret}@"), quiet=False, timeout=60)
    assert bad.returncode == 1 and secret not in bad.stderr and "password" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    # without the password the server refuses: this cluster does check it
    nopw = cli(
        "collect", "--db", pg.url, "--broker", f"mqtt://127.0.0.1:{broker.port}", quiet=False, timeout=60
    )
    assert nopw.returncode == 1 and "password" in nopw.stderr.lower()
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "db-password").write_text(secret + "\n")
    os.environ["CREDENTIALS_DIRECTORY"] = str(creds)  # relative paths resolve here, like systemd's
    try:
        col = CollectorProc(
            broker.port, pg.url, tmp_path / "c.log", "coll-pw", extra=("--db-password-file", "db-password")
        )
        col.start()
    finally:
        del os.environ["CREDENTIALS_DIRECTORY"]
    try:
        subscribed(col)
        assert col.proc is not None
        cmdline = Path(f"/proc/{col.proc.pid}/cmdline").read_bytes()
        assert secret.encode() not in cmdline and b"db-password" in cmdline
        publish(broker.port, [("edge/cam-1/detections", result(1))])
        pw_url = pg.url.replace("postgres@", f"postgres:{secret}@")
        wait_until(lambda: query(pw_url, "SELECT seq FROM messages") == [(1,)], 30, col.text, every=0.2)
    finally:
        col.stop()
    assert secret not in col.text()


def test_two_hundred_forged_results_of_a_live_device_lose_none_of_its_real_ones(
    broker: Broker, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    col = CollectorProc(broker.port, url, tmp_path / "c.log", "coll-forge")
    col.start()
    try:
        subscribed(col)
        topic = "edge/cam-1/detections"
        publish(broker.port, [(topic, result(s)) for s in range(1, 130)])
        forged = [dict(json.loads(result(s)), id=f"forged-{s}", score=0.99) for s in range(130, 330)]
        publish(broker.port, [(topic, json.dumps(b).encode()) for b in forged])  # first: wins the key
        wait_until(lambda: len(query(url, "SELECT seq FROM messages")) == 329, 60, col.text, every=0.2)
        publish(broker.port, [(topic, result(s)) for s in range(130, 330)])
        wait_until(lambda: len(query(url, "SELECT id FROM conflicts")) == 200, 60, col.text, every=0.2)
    finally:
        col.stop()
    real_ids = {f"r{s}" for s in range(1, 330)}
    stored = {json.loads(str(b))["id"] for (b,) in query(url, "SELECT body FROM messages")}
    stored |= {json.loads(str(b))["id"] for (b,) in query(url, "SELECT body FROM conflicts")}
    assert real_ids <= stored  # none lost: in messages or in conflicts
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    out = cli("fleet", "status", "--json", "--db", url, quiet=False, env=env)
    (dev,) = json.loads(out.stdout)["devices"]
    assert (dev["device"], dev["conflicts"], dev["messages"], dev["gaps"]) == ("cam-1", 200, 329, 0)
    gaps = cli("fleet", "gaps", "cam-1", "--db", url, quiet=False, env=env)
    assert "cam-1: 200 conflicts" in gaps.stdout and "boot 1 seq 130 id r130:" in gaps.stdout
    # logged once for the device, not 200 times
    assert col.text().count("kept in conflicts") == 1

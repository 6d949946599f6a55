"""`edge-agent collect` as a process: one-line config errors, the ack only after the commit (proved
by a database the collector cannot commit to, a kill -9 and a restart), Prometheus metrics."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from support import cli, free_port, wait_until
from support.collector import CollectorProc, metrics, sqlite_url
from support.fleetrun import count
from support.mqtt import Broker

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "args, toml, why",
    [
        (["--db", "mysql://x"], None, "db = 'mysql://x'"),
        (["--broker", "http://x"], None, "expected mqtt://HOST[:PORT]"),
        (["--group", "a/b"], None, "group = 'a/b'"),
        (["--prefix", "$SYS"], None, "prefix = '$SYS'"),
        ([], "[collector]\nbrokr = 'mqtt://x'\n", "unknown key 'brokr'"),
        ([], "[mqtt]\nhost = 'x'\n", "unknown section [mqtt]"),
        ([], "[collector\n", "not valid TOML"),
    ],
)
def test_bad_settings_are_one_line_and_exit_1(tmp_path: Path, args: list[str], toml: str, why: str) -> None:
    if toml is not None:
        (tmp_path / "c.toml").write_text(toml)
        args = [*args, "--config", str(tmp_path / "c.toml")]
    out = cli("collect", *args, quiet=False, timeout=60)
    assert out.returncode == 1, out.stderr
    assert why in out.stderr and "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def result(seq: int) -> bytes:
    return json.dumps(
        {"id": f"r{seq}", "seq": seq, "boot": 1, "device_id": "cam-1", "ts": 1796000000.0}
    ).encode()


def publish(port: int, msgs: list[tuple[str, bytes]]) -> None:
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="test-pub")
    c.connect("127.0.0.1", port)
    c.loop_start()
    for topic, payload in msgs:
        c.publish(topic, payload, qos=1).wait_for_publish(10)
    c.disconnect()
    c.loop_stop()


def test_acks_only_after_the_commit_and_metrics(tmp_path: Path, broker: Broker) -> None:
    db_path = tmp_path / "fleet.db"
    url = sqlite_url(db_path)
    mport = free_port()
    col = CollectorProc(broker.port, url, tmp_path / "col.log", "col-ack", metrics_port=mport)
    col.start()
    try:
        wait_until(
            lambda: "subscribing" in col.text(),
            30,
            lambda: '"subscribing" in col.text()' + "; " + str(col.text()),
            every=0.2,
        )
        publish(
            broker.port,
            [("edge/cam-1/detections", result(s)) for s in (1, 2, 3, 2)] + [("edge/cam-1/detections", b"{")],
        )
        wait_until(
            lambda: count(url) == 3 and metrics(mport)["edge_agent_collector_rejected_total"] == 1,
            30,
            'count(url) == 3 and metrics(mport)["edge_agent_collector_rejected_total"] == 1',
            every=0.2,
        )
        m = metrics(mport)
        assert m["edge_agent_collector_records_total"] == 3
        assert m["edge_agent_collector_duplicates_dropped_total"] == 1
        assert m["edge_agent_collector_broker_connected"] == 1
        status = {"device_id": "cam-1", "state": "running", "ts": 1796000000.0, "queue": {"pending": 0}}
        publish(broker.port, [("edge/cam-1/status", json.dumps(status).encode())])
        wait_until(
            lambda: metrics(mport)["edge_agent_collector_devices_online"] == 1,
            30,
            'metrics(mport)["edge_agent_collector_devices_online"] == 1',
            every=0.2,
        )

        # the database cannot commit (another writer holds it): the collector must not ack
        lock = sqlite3.connect(db_path, isolation_level=None)
        lock.execute("BEGIN EXCLUSIVE")
        publish(broker.port, [("edge/cam-1/detections", result(s)) for s in range(4, 11)])

        def stuck() -> bool:  # all 7 arrived (6 before), a round of them taken and stuck in its commit
            m = metrics(mport)
            return (
                m["edge_agent_collector_taken_total"] > 6
                and m["edge_agent_collector_taken_total"] + m["edge_agent_collector_inbox"] == 13
            )

        wait_until(stuck, 10, "stuck", every=0.2)
        assert metrics(mport)["edge_agent_collector_messages_total"] == 6
        col.kill9()
        lock.execute("ROLLBACK")
        lock.close()
        col.start()  # same client id: the broker sends the un-acked messages again
        wait_until(
            lambda: count(url) == 10,
            30,
            lambda: "count(url) == 10" + "; " + str(col.text()[-2000:]),
            every=0.2,
        )
    finally:
        col.stop()

"""``edge-agent collect --leave``: a member of a shared-subscription group retired for good, on a
real mosquitto. A stopped member stays in the group and the broker queues its share in its
session (docs/collector.md); leaving must store that share and end the session, so that every
later message goes to the members still running and nothing waits for the retired one."""

from __future__ import annotations

import time
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from support import cli, wait_until
from support.collector import REPO, CollectorProc, Publisher, seqs, sqlite_url, start_group
from support.mqtt import Broker

pytestmark = pytest.mark.slow


def session_present(port: int, client_id: str) -> bool:
    """Does the broker still hold a session for ``client_id``? (connect without a clean start,
    read the CONNACK's flag, and leave the session as it was)."""
    got: list[bool] = []
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5)
    c.on_connect = lambda cl, u, flags, rc, p: got.append(bool(flags.session_present))
    c.connect("127.0.0.1", port, clean_start=False)
    c.loop_start()
    try:
        wait_until(lambda: bool(got), 10, "bool(got)", every=0.2)
    finally:
        c.disconnect()
        c.loop_stop()
    return got[0]


def test_leave_stores_the_queued_share_and_ends_the_session(tmp_path: Path, broker: Broker) -> None:
    db_a, db_b = tmp_path / "a.db", tmp_path / "b.db"
    a = CollectorProc(broker.port, sqlite_url(db_a), tmp_path / "a.log", "col-a", group="g")
    b = CollectorProc(broker.port, sqlite_url(db_b), tmp_path / "b.log", "col-b", group="g")
    pub = None
    try:
        start_group(a, b, db_a, db_b)
        assert a.stop() == 0  # stopped cleanly: still a member, its share now queues in its session
        pub = Publisher(broker.port)
        pub.send(1, 100)
        wait_until(lambda: len(seqs(db_b)) >= 30, 30, "len(seqs(db_b)) >= 30", every=0.2)
        time.sleep(1.0)  # not a synchronisation: a's share must NOT reach b in this window
        queued = set(range(1, 101)) - seqs(db_b)
        assert 20 <= len(queued) <= 80, len(queued)  # a's share waits for it in its session

        out = cli(
            "collect", "--broker", f"mqtt://127.0.0.1:{broker.port}", "--db", sqlite_url(db_a),
            "--client-id", "col-a", "--group", "g", "--leave", "--quiet-s", "1",
            quiet=False, env={"PYTHONPATH": str(REPO)}, timeout=90,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[-2000:]
        assert f"collector col-a left group 'g': {len(queued)} queued messages stored" in out.stdout
        assert seqs(db_a) >= queued  # the share it had queued is stored
        assert not session_present(broker.port, "col-a")  # and its session is gone

        pub.send(101, 200)  # every later message goes to the member still running
        wait_until(
            lambda: seqs(db_b) >= set(range(101, 201)),
            30,
            lambda: "seqs(db_b) >= set(range(101, 201))" + "; " + str(b.text()[-2000:]),
            every=0.2,
        )
        got_a, got_b = seqs(db_a), seqs(db_b)
        assert got_a | got_b == set(range(1, 201)) and not (got_a & got_b)
    finally:
        if pub is not None:
            pub.close()
        a.stop()
        b.stop()


def test_leave_without_a_group_is_refused_in_one_line(tmp_path: Path) -> None:
    out = cli(
        "collect",
        "--db",
        sqlite_url(tmp_path / "x.db"),
        "--leave",
        timeout=60,
        quiet=False,
        env={"PYTHONPATH": str(REPO)},
    )
    assert out.returncode == 1
    assert "--leave needs the collector's group" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    bad = cli(
        "collect",
        "--group",
        "g",
        "--leave",
        "--quiet-s",
        "0",
        timeout=60,
        quiet=False,
        env={"PYTHONPATH": str(REPO)},
    )
    assert bad.returncode == 2 and "from 0.5 to 3600" in bad.stderr


def test_a_leave_stopped_before_it_drained_says_so_and_exits_1(tmp_path: Path, broker: Broker) -> None:
    """SIGTERM while leaving (the quiet time not reached): the session stays on the broker and
    keeps collecting this member's share, so the operator must hear that the leave did not happen."""
    col = CollectorProc(broker.port, sqlite_url(tmp_path / "a.db"), tmp_path / "a.log", "col-a", group="g")
    col.args += ["--leave", "--quiet-s", "3600"]
    col.start()
    try:
        wait_until(lambda: "leaving the group: unsubscribing from" in col.text(), 30, "the leave's connect")
    finally:
        rc = col.stop()
    assert rc == 1, col.text()[-2000:]
    assert "collector col-a: stopped before it left group 'g'" in col.text()
    assert session_present(broker.port, "col-a")

"""What a real mosquitto does with a shared subscription when one member dies holding un-acked
messages, and what the collector guarantees then (docs/collector.md, "Shared subscriptions").

Two ``edge-agent collect`` in one group, each with its OWN SQLite file so the test can hold one of
them inside its commit (another writer holds the file) while the other stores freely:

1. messages are split between the members; the stuck member (A) holds its half un-acked;
2. A is ``kill -9``'d; more messages are published while it is down;
3. A comes back with the same client id; the test publishes steadily across its reconnect.

Every message must end in exactly one of the two files (the union is all, the intersection
empty) and the un-acked ones must come back to A, not go to the survivor (mosquitto keeps them
in A's persistent session). Both files are the real collector's; nothing here is faked.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest
from support import free_port, wait_until
from support.collector import CollectorProc, Publisher, metrics, seqs, sqlite_url, start_group
from support.mqtt import Broker

pytestmark = pytest.mark.slow


def test_a_killed_group_member_gets_its_unacked_messages_back(tmp_path: Path, broker: Broker) -> None:
    db_a, db_b = tmp_path / "a.db", tmp_path / "b.db"
    mport = free_port()
    a = CollectorProc(
        broker.port, sqlite_url(db_a), tmp_path / "a.log", "col-a", group="g", metrics_port=mport
    )
    b = CollectorProc(broker.port, sqlite_url(db_b), tmp_path / "b.log", "col-b", group="g")
    pub = None
    lock = None
    try:
        start_group(a, b, db_a, db_b)
        lock = sqlite3.connect(db_a, isolation_level=None)
        lock.execute("BEGIN EXCLUSIVE")  # A can receive but never commit: it holds its half un-acked
        pub = Publisher(broker.port)

        # 1. split between the members: mosquitto 2 goes round-robin over the group
        pub.send(1, 40)
        wait_until(
            lambda: len(seqs(db_b)) >= 15,
            30,
            lambda: "len(seqs(db_b)) >= 15" + "; " + str(b.text()[-2000:]),
            every=0.2,
        )

        def a_holds() -> bool:
            m = metrics(mport)
            return (
                m["edge_agent_collector_taken_total"] + m["edge_agent_collector_inbox"] + len(seqs(db_b))
                == 40
            )

        wait_until(a_holds, 30, lambda: "a_holds" + "; " + str((metrics(mport), len(seqs(db_b)))), every=0.2)
        held = set(range(1, 41)) - seqs(db_b)
        assert 10 <= len(held) <= 30, held  # A really holds a share of them

        # 2. A dies holding them; the survivor does NOT get them (they stay in A's session)
        a.kill9()
        pub.send(41, 80)
        time.sleep(2.0)  # not a synchronisation: the window in which a wrong hand-over would show
        got_b = seqs(db_b)
        assert not (held & got_b), (
            f"the survivor received messages in flight to the dead member: {held & got_b}"
        )
        queued_for_a = set(range(41, 81)) - got_b
        # mosquitto keeps A in the round-robin while its session lives: about half go to A's queue
        assert queued_for_a, "mosquitto sent every message to the survivor while A was down"

        # 3. A comes back (same client id, persistent session) while messages keep coming
        lock.execute("ROLLBACK")
        lock.close()
        lock = None
        during = threading.Thread(target=pub.send, args=(81, 400, 0.005))
        during.start()
        time.sleep(0.2)  # the scenario: A comes back while messages are arriving
        a.start()
        during.join(60)
        assert not during.is_alive()
        want = set(range(1, 401))
        wait_until(
            lambda: seqs(db_a) | seqs(db_b) >= want,
            30,
            lambda: "seqs(db_a) | seqs(db_b) >= want" + "; " + str(sorted(want - seqs(db_a) - seqs(db_b))),
            every=0.2,
        )
        got_a, got_b = seqs(db_a), seqs(db_b)
        assert held | queued_for_a <= got_a, sorted((held | queued_for_a) - got_a)
        assert not (got_a & got_b), sorted(got_a & got_b)
        assert got_a | got_b == want
    finally:
        if lock is not None:
            lock.close()
        if pub is not None:
            pub.close()
        a.stop()
        b.stop()

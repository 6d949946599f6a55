"""The ends of a sync session (issue 17): PUBACKs that arrive late or early, a restarted sync
thread, backoff after every drop. Real mosquitto; only the moment a session ends is steered."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from support import wait_until
from support.mqtt import Broker, Collector
from support.outbox import big_limits

from edge_agent.adapters.mqtt.session import SyncSession
from edge_agent.adapters.mqtt.sync import MqttSync, next_failures
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.core.config.schema import MqttConfig

DEVICE = "dev-1"


def fast_cfg(port: int, **kw: object) -> MqttConfig:
    return MqttConfig(port=port, reconnect_min_s=0.2, reconnect_max_s=2.0, **kw)  # type: ignore[arg-type]


def fill(ob: Outbox, n: int) -> list[str]:
    ids = [ob.put(f"edge/{DEVICE}/detections", {"n": i}) for i in range(n)]
    ob.flush()
    return ids


def test_pubacks_received_as_the_session_ends_are_applied_not_resent(tmp_path: Path, broker: Broker) -> None:
    """The session ends with every PUBACK received but not yet applied: the rows must be deleted
    (today's risk: released, so the next session sends them again as duplicates)."""
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        fill(ob, 20)
        sync = MqttSync(fast_cfg(broker.port), DEVICE, ob)
        seen: dict[str, int] = {}

        def pump_then_end(client: Any, session: SyncSession) -> None:
            seen["sent"] = sync._send(client, session, 20)
            wait_until(
                lambda: len(session.acks) >= seen["sent"], 10, "every sent row acked"
            )  # acked by the broker, not applied
            seen["unapplied"] = len(session.unacked())
            sync._stop.set()  # the session ends here, as at a stop or a drop

        sync._pump = pump_then_end  # type: ignore[method-assign]
        sync.start()
        wait_until(
            lambda: sync._thread is not None and not sync._thread.is_alive(), 10, "the sync thread ended"
        )
        sync.stop()
        assert seen == {"sent": 20, "unapplied": 20}
        assert sync.acked == 20
        assert ob.stats()["pending"] == 0
        assert ob.claim(100) == []


def test_a_puback_handled_before_publish_returned_is_matched_when_the_mid_is_known() -> None:
    session = SyncSession(threading.Event())
    session.on_publish(None, None, 7, None, None)  # paho's thread: the PUBACK for mid 7 ...
    assert session.take_acks() == []  # ... before publish() gave the sync thread mid 7
    assert session.register(7, [42]) is True
    assert session.take_acks() == [42] and session.unacked() == []
    # a status publish acked early is set aside, and never acks a later data row with its mid
    session.on_publish(None, None, 9, None, None)
    assert session.take_acks() == []
    assert session.register(9, None) is True
    assert session.register(9, [43]) is False
    assert session.take_acks() == [] and session.unacked() == [43]
    # a status publish registered first, acked later: nothing for the rows
    assert session.register(11, None) is False
    session.on_publish(None, None, 11, None, None)
    assert session.take_acks() == [] and session.status_mids == set() and session.early == set()


def test_a_batch_mid_carries_all_its_rows_and_counts_as_one_batch_in_flight() -> None:
    session = SyncSession(threading.Event())
    assert session.register(3, [10, 11, 12], batch=True) is False
    assert session.register(4, [13]) is False
    assert session.in_flight() == (2, 1)
    assert sorted(session.unacked()) == [10, 11, 12, 13]
    session.on_publish(None, None, 3, None, None)
    assert session.take_acks() == [10, 11, 12]  # the whole batch on its one PUBACK
    assert session.in_flight() == (1, 0) and session.unacked() == [13]


def test_a_restarted_sync_thread_releases_the_rows_it_had_in_flight(tmp_path: Path, broker: Broker) -> None:
    """The sync path fails after claiming rows it never published: the supervisor must return them
    to pending, or they stay "in flight" forever and the queue never drains."""
    collector = Collector(broker.port)
    with Outbox(tmp_path / "q.db", big_limits()) as ob:
        ids = fill(ob, 30)
        real_claim = ob.claim
        calls = {"n": 0}

        def claim_then_fail(n: int, newest_first: bool = False) -> list[Any]:
            msgs = real_claim(n, newest_first)
            calls["n"] += 1
            if calls["n"] == 1 and msgs:
                raise RuntimeError("injected after the claim")
            return msgs

        ob.claim = claim_then_fail  # type: ignore[method-assign]
        sync = MqttSync(fast_cfg(broker.port), DEVICE, ob)
        sync.start()
        try:
            assert sync.drain(20)
            restarts = sync.stats()["thread_restarts"]
        finally:
            sync.stop()
    assert restarts == 1
    collector.wait_until(lambda c: set(c.ids()) >= set(ids), 10, "set(c.ids()) >= set(ids)")
    collector.close()


def test_backoff_grows_while_a_broker_keeps_dropping_us(tmp_path: Path, broker: Broker) -> None:
    """Two devices configured with the same id: mosquitto drops the older connection each time the
    other connects. Each drop must be followed by a growing delay, not a reconnect every
    reconnect_min_s forever (today: ~15 connects each in 3 s)."""
    a = Outbox(tmp_path / "a.db", big_limits())
    b = Outbox(tmp_path / "b.db", big_limits())
    syncs = [MqttSync(fast_cfg(broker.port), DEVICE, ob) for ob in (a, b)]
    try:
        for s in syncs:
            s.start()
        time.sleep(3.0)  # a window to count in, not a synchronisation
        attempts = [s.connect_attempts for s in syncs]
    finally:
        for s in syncs:
            s.stop()
        a.close()
        b.close()
    # delays of at least 0.1, 0.2, 0.4, 0.8, 1.0 s (equal jitter): at most ~6 connects in 3 s
    assert max(attempts) <= 7, attempts
    assert min(attempts) >= 2, attempts  # they did fight


def test_every_drop_is_followed_by_a_delay_and_only_a_stable_connection_resets_it() -> None:
    assert next_failures(0, 100.0, 2.0) == 1  # even after a long good connection: one delay first
    assert next_failures(3, 100.0, 2.0) == 1
    assert next_failures(3, 0.5, 2.0) == 4  # dropped soon after connecting: keep backing off
    assert next_failures(3, None, 2.0) == 4  # refused or failed to connect
    assert next_failures(3, 2.0, 2.0) == 1

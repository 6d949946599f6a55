"""The enrolled broker, for real: mosquitto started with exactly the passwd, acl and config
snippet `edge-agent fleet enroll` wrote. Who can connect, who can publish or read what, and that
nobody can take the collector's session (issue: an anonymous client with the collector's client id
and clean_start erased 500 queued results).

A denied publish is invisible to its sender (mosquitto acknowledges it and drops it), so every
"cannot" here is checked by a reader that can see the topic, after a later allowed message from
the same sender has arrived (mosquitto keeps one sender's order): the denied one would have come first.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support import wait_until
from support.enrolled import Peer, enrolled_broker, result_body, secret
from support.mqtt import Broker

DEVICES = ("cam-a", "cam-b")


@pytest.fixture
def enrolled(tmp_path: Path) -> Iterator[tuple[Broker, Path]]:
    broker = enrolled_broker(tmp_path, "cam-a", "--group", "ga", "--collector", "coll-1", "--operator", "ops")
    d = tmp_path / "enroll"
    from support.enrolled import enroll

    enroll(d, "cam-b", "--group", "gb")  # a second run: cam-a keeps its password and groups
    broker.start()
    try:
        yield broker, d
    finally:
        broker.stop()


def peer(broker: Broker, d: Path, user: str, owner: str = "", **kw: object) -> Peer:
    p = Peer(broker.port, user, secret(d, owner or user), **kw)  # type: ignore[arg-type]
    assert p.connect() == "Success", (user, broker.log_text()[-2000:])
    return p


def refused(broker: Broker, user: object, password: object, client_id: str = "") -> str:
    p = Peer(broker.port, user, password, client_id=client_id)  # type: ignore[arg-type]
    try:
        return p.connect()
    finally:
        p.close()


def test_only_enrolled_credentials_connect(enrolled: tuple[Broker, Path]) -> None:
    broker, d = enrolled
    # a forger without a credential: no anonymous client, whatever client id it claims
    assert refused(broker, None, None, client_id="coll-1") == "Not authorized"
    assert refused(broker, "cam-a", "not-the-password") == "Not authorized"
    assert refused(broker, "cam-a", secret(d, "cam-b")) == "Not authorized"
    assert refused(broker, "nobody", secret(d, "cam-a")) == "Not authorized"
    # the Python-made $7$ lines are what mosquitto checks: every role of every identity logs in
    for user, owner in [
        ("cam-a", "cam-a"),
        ("cam-a-model", "cam-a"),
        ("cam-a-doctor", "cam-a"),
        ("cam-b", "cam-b"),
        ("coll-1", "coll-1"),
        ("ops", "ops"),
        ("ops-watch", "ops"),
    ]:
        peer(broker, d, user, owner).close()


def test_a_device_publishes_only_its_own_kinds(enrolled: tuple[Broker, Path]) -> None:
    broker, d = enrolled
    col = peer(broker, d, "coll-1")
    col.subscribe("edge/+/+", "edge/#")  # edge/# too: nothing deeper may get through either
    a = peer(broker, d, "cam-a")
    try:
        a.publish("edge/cam-b/detections", result_body("cam-b", 1))  # another device's results
        a.publish("edge/cam-b/status", b'{"state": "offline"}')  # ... or its status
        a.publish("edge/cam-a/confirm", b"{}")  # its own confirmation: the collector's to write
        a.publish("edge/cam-a/model/begin", b"{}")  # model topics are the operator's
        a.publish("edge/groups/ga/model/begin", b"{}")
        a.publish("edge/cam-a/made-up-kind", b"{}")
        a.publish("edge/cam-a/detections", result_body("cam-a", 1))  # the one that may pass
        wait_until(lambda: "edge/cam-a/detections" in col.topics(), 10, "cam-a's own result")
        assert col.topics() == ["edge/cam-a/detections"]  # one copy for overlapping filters
        assert "Denied PUBLISH from cam-a" in broker.log_text()
    finally:
        a.close()
        col.close()


def test_a_device_reads_only_its_own_confirm_and_model_topics(enrolled: tuple[Broker, Path]) -> None:
    broker, d = enrolled
    a_sync = peer(broker, d, "cam-a")
    a_model = peer(broker, d, "cam-a-model", "cam-a")
    ops = peer(broker, d, "ops")
    col = peer(broker, d, "coll-1")
    try:
        a_sync.subscribe("edge/cam-b/confirm", "edge/cam-a/confirm", "edge/+/detections")
        a_model.subscribe(
            "edge/cam-b/model/#", "edge/groups/gb/model/#", "edge/cam-a/model/#", "edge/groups/ga/model/#"
        )
        b = peer(broker, d, "cam-b")
        b.publish("edge/cam-b/detections", result_body("cam-b", 1))  # a's sync may not read it
        b.close()
        col.publish("edge/cam-b/confirm", b'{"seq": 1}')
        col.publish("edge/cam-a/confirm", b'{"seq": 1}')
        ops.publish("edge/cam-b/model/begin", b"{}")
        ops.publish("edge/groups/gb/model/begin", b"{}")
        ops.publish("edge/cam-a/model/begin", b"{}")
        ops.publish("edge/groups/ga/model/begin", b"{}")
        wait_until(lambda: "edge/cam-a/confirm" in a_sync.topics(), 10, "cam-a's confirm")
        wait_until(lambda: "edge/groups/ga/model/begin" in a_model.topics(), 10, "cam-a's group push")
        assert a_sync.topics() == ["edge/cam-a/confirm"]
        assert a_model.topics() == ["edge/cam-a/model/begin", "edge/groups/ga/model/begin"]
    finally:
        for p in (a_sync, a_model, ops, col):
            p.close()


def test_the_collector_reads_results_writes_confirms_only(enrolled: tuple[Broker, Path]) -> None:
    broker, d = enrolled
    b_sync = peer(broker, d, "cam-b")
    col = peer(broker, d, "coll-1")
    try:
        b_sync.subscribe("edge/cam-b/confirm", "edge/cam-b/model/#")
        col.publish("edge/cam-b/detections", result_body("cam-b", 9))  # a forged result
        col.publish("edge/cam-b/model/begin", b"{}")  # a forged model push
        col.publish("edge/cam-b/confirm", b'{"seq": 9}')
        wait_until(lambda: b_sync.topics(), 10, "the confirm")
        assert b_sync.topics() == ["edge/cam-b/confirm"]
        ops = peer(broker, d, "ops")
        ops.publish("edge/cam-b/detections", result_body("cam-b", 10))  # nor may the operator
        ops.publish("edge/cam-b/confirm", b"{}")
        ops.close()
        watcher = peer(broker, d, "ops-watch", "ops")
        watcher.subscribe("edge/+/status", "edge/+/detections")
        col.subscribe("edge/+/+")
        b = peer(broker, d, "cam-b-doctor", "cam-b")  # the probe connects and may do nothing else
        b.publish("edge/cam-b/detections", result_body("cam-b", 11))
        b.close()
        b_sync.publish("edge/cam-b/detections", result_body("cam-b", 12))
        b_sync.publish("edge/cam-b/status", b'{"state": "running"}')
        wait_until(lambda: "edge/cam-b/status" in watcher.topics(), 10, "cam-b's status to the watcher")
        wait_until(lambda: "edge/cam-b/status" in col.topics(), 10, "cam-b's status to the collector")
        assert watcher.topics() == ["edge/cam-b/status"]  # the watcher sees verdicts, not results
        assert [t for t, _ in col.got if t.endswith("/detections")] == ["edge/cam-b/detections"]
        assert col.got[0] == ("edge/cam-b/detections", result_body("cam-b", 12))
        watcher.close()
    finally:
        b_sync.close()
        col.close()


def _queue_then_hijack(
    broker: Broker, user: object, pw: object, dev_pw: object, thief: tuple[object, object]
) -> list[bytes]:
    """The collector's persistent session queues 20 results while it is away; then ``thief``
    (user, password) connects with the collector's client id and a clean start; what the
    collector gets when it comes back, up to a 21st result sent after its return (queued
    messages come before it, so whatever is missing then is gone)."""

    def collector() -> Peer:
        p = Peer(broker.port, user, pw, client_id="coll-1", clean_start=False, session_expiry=3600)  # type: ignore[arg-type]
        assert p.connect() == "Success"
        return p

    def device() -> Peer:
        p = Peer(broker.port, "cam-a" if dev_pw else None, dev_pw, client_id="cam-a")  # type: ignore[arg-type]
        assert p.connect() == "Success"
        return p

    col = collector()
    col.subscribe("edge/+/+")
    col.close()
    dev = device()
    for seq in range(1, 21):
        dev.publish("edge/cam-a/detections", result_body("cam-a", seq))
    dev.close()
    t = Peer(broker.port, thief[0], thief[1], client_id="coll-1", clean_start=True)  # type: ignore[arg-type]
    assert t.connect() == "Success"
    t.close()
    back = collector()
    try:
        back.subscribe("edge/+/+")  # a kept session has it already; an erased one needs it
        dev = device()
        dev.publish("edge/cam-a/detections", result_body("cam-a", 21))
        dev.close()
        last = result_body("cam-a", 21)
        wait_until(lambda: last in [p for _, p in back.got], 10, "the 21st result")
        return [p for _, p in back.got]
    finally:
        back.close()


def test_an_enrolled_device_cannot_take_the_collectors_session(enrolled: tuple[Broker, Path]) -> None:
    broker, d = enrolled
    got = _queue_then_hijack(
        broker, "coll-1", secret(d, "coll-1"), secret(d, "cam-a"), ("cam-b", secret(d, "cam-b"))
    )
    # the thief's client id became "cam-b": the collector's session lived, with its queue
    assert got == [result_body("cam-a", seq) for seq in range(1, 22)]


def test_without_enrollment_the_same_hijack_erases_the_queue(broker: Broker) -> None:
    # the control: on an anonymous broker the attack above works, so the test above can fail
    assert _queue_then_hijack(broker, None, None, None, (None, None)) == [result_body("cam-a", 21)]


def test_a_collector_of_a_shared_group_reads_through_its_share(enrolled: tuple[Broker, Path]) -> None:
    broker, d = enrolled
    col = peer(broker, d, "coll-1")
    col.subscribe("$share/g1/edge/+/+")
    a = peer(broker, d, "cam-a")
    try:
        a.publish("edge/cam-a/detections", result_body("cam-a", 1))
        wait_until(lambda: col.topics(), 10, "the result through the shared subscription")
        assert col.topics() == ["edge/cam-a/detections"]
    finally:
        a.close()
        col.close()


def test_a_devices_cameras_publish_one_level_deeper_under_its_own_id_only(
    enrolled: tuple[Broker, Path],
) -> None:
    """[[cameras]]: <p>/<device>/<camera>/<kind> for the kinds a camera makes, read by the collector
    plain and through its share; not under another device, not for other kinds, not by others."""
    broker, d = enrolled
    col = peer(broker, d, "coll-1")
    col.subscribe("edge/#")  # everything it may read, whatever the filter
    watcher = peer(broker, d, "ops-watch", "ops")
    watcher.subscribe("edge/#")  # the operator's watcher reads statuses, no camera's results
    a = peer(broker, d, "cam-a")
    ops = peer(broker, d, "ops")
    try:
        col.publish("edge/cam-a/gate/objects", b"forged by the collector")
        ops.publish("edge/cam-a/gate/detections", b"forged by the operator")
        ops.publish("edge/cam-a/model/begin", b"{}")  # 4 levels too: the collector may not read it
        a.publish("edge/cam-b/gate/objects", b"cam-a under cam-b")  # another device's camera
        a.publish("edge/cam-a/gate/status", b"{}")  # a status, a batch, a confirm: not under a camera
        a.publish("edge/cam-a/gate/batch.zlib", b"x")
        a.publish("edge/cam-a/gate/confirm", b"{}")
        a.publish("edge/cam-a/gate/extra/objects", b"{}")  # nor deeper
        for kind in ("detections", "objects", "counts"):
            a.publish(f"edge/cam-a/gate/{kind}", f"gate {kind}".encode())
        a.publish("edge/cam-a/yard/objects", b"yard objects")
        wait_until(lambda: "edge/cam-a/yard/objects" in col.topics(), 10, "cam-a's last camera message")
        assert col.got == [
            ("edge/cam-a/gate/detections", b"gate detections"),
            ("edge/cam-a/gate/objects", b"gate objects"),
            ("edge/cam-a/gate/counts", b"gate counts"),
            ("edge/cam-a/yard/objects", b"yard objects"),
        ]
        assert watcher.got == []
        log = broker.log_text()
        for user, topic in [
            ("cam-a", "edge/cam-b/gate/objects"),
            ("cam-a", "edge/cam-a/gate/status"),
            ("coll-1", "edge/cam-a/gate/objects"),
        ]:
            assert f"Denied PUBLISH from {user}" in log and topic in log, (user, topic)
        col.close()  # one user, one client id: the group member is the same identity
        shared = peer(broker, d, "coll-1")
        shared.subscribe("$share/g1/edge/+/+/objects")
        a.publish("edge/cam-a/gate/objects", b"through the share")
        wait_until(lambda: shared.got, 10, "the camera's objects through the shared subscription")
        assert shared.got == [("edge/cam-a/gate/objects", b"through the share")]
        shared.close()
    finally:
        for p in (a, ops, watcher, col):
            p.close()

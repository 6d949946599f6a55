"""The MQTT model receiver's rules, fed directly (no broker) and checked to the byte: what lands in
the inbox and with which modes, what a refusal says, the done list, what a restart keeps or drops,
paho's callbacks. Fast, in process: `python .ci/mutation.py model-receiver` runs them per mutant."""

from __future__ import annotations

import json
import logging
import math
import os
import stat
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import pytest
from support.updates import inbox_body, make_begin, with_keys, write_config

from edge_agent.adapters.updates import intake as model_mqtt
from edge_agent.adapters.updates.intake import DONE_KEEP
from edge_agent.adapters.updates.receiver import ModelReceiver, model_topics
from edge_agent.adapters.updates.transfers import remove_path
from edge_agent.app.cli.configfile import load_config

BASE = "edge/cam-1/model"


@pytest.fixture
def make(tmp_path: Path) -> Callable[..., tuple[ModelReceiver, Path, list[Any]]]:
    def build(extra: str = "", load: bool = True) -> tuple[ModelReceiver, Path, list[Any]]:
        cfg = load_config(write_config(tmp_path, extra=with_keys(extra)))
        root = Path(cfg.device.state_dir)
        events: list[Any] = []
        rec = ModelReceiver(cfg, root / "transfers", root / "inbox", events.append)
        if load:
            rec.load()
        return rec, root, events

    return build


def _begin(data: bytes, tid: str = "t1", chunk: int = 1024, **manifest: Any) -> bytes:
    """A begin signed by the trusted test key, its plan covering ``data`` in ``chunk``-byte chunks
    (``size=N``: N zero bytes instead, for the tests of caps that never send the chunks)."""
    if "size" in manifest:
        data = bytes(manifest.pop("size"))
        manifest.pop("chunks", None)
    return make_begin(data, tid, chunk, **manifest)


def _send(rec: ModelReceiver, data: bytes, tid: str = "t1", chunk: int = 1024, **over: Any) -> None:
    rec.handle(f"{BASE}/begin", _begin(data, tid, chunk, **over))
    for i in range(math.ceil(len(data) / chunk)):
        rec.handle(f"{BASE}/chunk/{tid}/{i}", data[i * chunk : (i + 1) * chunk])


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_topics_per_device_and_group() -> None:
    assert model_topics("/edge/", "cam-1", ["a", "b"]) == [
        "edge/cam-1/model",
        "edge/groups/a/model",
        "edge/groups/b/model",
    ]


def test_a_complete_transfer_lands_in_the_inbox_private_verified_and_announced(
    make: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    rec, root, events = make()
    data = os.urandom(2500)
    caplog.set_level(logging.INFO, logger="edge_agent.model_mqtt")
    _send(rec, data)
    pkg, req = root / "inbox" / "t1.pkg", root / "inbox" / "t1.request.json"
    assert inbox_body(pkg, data) and _mode(pkg) == 0o600
    assert json.loads(req.read_text()) == {"origin": "mqtt:t1"} and _mode(req) == 0o600
    assert rec.completed == ["t1"]
    assert json.loads((root / "transfers" / "done.json").read_text()) == ["t1"]
    assert _mode(root / "transfers" / "done.json") == 0o600
    assert sorted(p.name for p in (root / "transfers").iterdir()) == ["done.json"]  # no package.pkg left
    assert events[-1] == {"transfer_id": "t1", "received": 3, "chunks": 3, "complete": True}
    assert (events[0]["received"], events[0]["missing"]) == (0, [[0, 2]])  # the begin is announced
    assert (events[1]["received"], events[1]["missing"]) == (1, [[1, 2]])  # and the first chunk
    assert events[0]["bytes"] == 2500 and events[0]["chunks"] == 3 and events[0]["transfer_id"] == "t1"
    assert "model transfer t1 complete (3 chunks, each sha256 ok): handed to the inbox" in caplog.messages
    assert rec.counts == {"messages": 4, **dict.fromkeys(rec.counts.keys() - {"messages"}, 0)}
    assert {"unsigned", "not_for_device", "rolled_back", "unknown_transfer", "bad_chunk", "low_space"} < set(
        rec.counts
    )
    # a redelivered begin or chunk of a finished transfer is acknowledged and ignored
    rec.handle(f"{BASE}/begin", _begin(data))
    rec.handle(f"{BASE}/chunk/t1/0", data[:1024])
    assert sorted(p.name for p in (root / "transfers").iterdir()) == ["done.json"]
    assert rec.counts["refused"] == 0 and rec.completed == ["t1"]


def test_a_group_transfer_is_received_too(make: Callable[..., Any]) -> None:
    rec, root, _ = make('[model_update]\ngroups = ["fleet"]')
    data = os.urandom(1500)
    rec.handle("edge/groups/fleet/model/begin", _begin(data, "g1", for_devices=[], for_groups=["fleet"]))
    rec.handle("edge/groups/fleet/model/chunk/g1/0", data[:1024])
    rec.handle("edge/groups/fleet/model/chunk/g1/1", data[1024:])
    assert inbox_body(root / "inbox" / "g1.pkg", data)
    rec.handle("edge/groups/other/model/begin", _begin(data, "g2"))
    assert rec.counts["refused"] == 1 and rec.last_error is not None
    assert "not a model-transfer topic" in rec.last_error


def test_a_chunk_whose_sha256_is_not_the_signed_one_is_refused_and_not_stored(
    make: Callable[..., Any],
) -> None:
    rec, root, _ = make()
    data = os.urandom(2048)
    rec.handle(f"{BASE}/begin", _begin(data))
    forged = bytes([data[0] ^ 1]) + data[1:1024]  # the right length, one bit off
    rec.handle(f"{BASE}/chunk/t1/0", forged)
    assert rec.counts["refused"] == 1 and rec.counts["bad_chunk"] == 1
    assert rec.last_error is not None and "chunk 0 does not match its signed sha256" in rec.last_error
    assert list((root / "transfers" / "t1" / "chunks").iterdir()) == []
    rec.handle(f"{BASE}/chunk/t1/0", data[:1024])  # the true chunk is still taken
    rec.handle(f"{BASE}/chunk/t1/1", data[1024:])
    assert inbox_body(root / "inbox" / "t1.pkg", data) and rec.counts["refused"] == 1


def test_the_done_list_keeps_the_last_ones(make: Callable[..., Any]) -> None:
    rec, root, _ = make()
    for i in range(DONE_KEEP + 3):
        _send(rec, bytes([i]) * 10, tid=f"d{i}")
    done = json.loads((root / "transfers" / "done.json").read_text())
    assert done == [f"d{i}" for i in range(3, DONE_KEEP + 3)]
    rec.handle(f"{BASE}/chunk/d0/0", bytes([0]) * 10)  # forgotten: a chunk without its begin
    rec.handle(f"{BASE}/chunk/d3/0", bytes([3]) * 10)  # remembered: ignored
    assert rec.counts["refused"] == 1 and rec.counts["unknown_transfer"] == 1


def test_a_begin_refused_tells_the_sender_once_a_second(make: Callable[..., Any]) -> None:
    rec, _, events = make()
    # the unsigned begin of the old format (today's push before package format 2)
    bad = json.dumps({"transfer_id": "bad1", "size": 10, "sha256": "a" * 64, "chunks": 1, "chunk_size": 1024})
    rec.handle(f"{BASE}/begin", bad.encode())
    rec.handle(f"{BASE}/begin", bad.encode())
    assert len(events) == 1 and events[0]["transfer_id"] == "bad1"
    assert "begin carries no signed manifest" in events[0]["refused"]
    assert rec.counts["refused"] == 2
    rec._last_refusal -= model_mqtt.PROGRESS_EVERY_S
    rec.handle(f"{BASE}/begin", b"{not json")
    assert events[-1]["transfer_id"] is None and len(events) == 2


def test_chunk_topics_are_parsed_strictly(make: Callable[..., Any]) -> None:
    rec, root, _ = make()
    data = os.urandom(2048)
    rec.handle(f"{BASE}/begin", _begin(data))
    for topic in (
        f"{BASE}/chunk/t1",
        f"{BASE}/chunk/t1/0/x",
        f"{BASE}/chunk/t1/-1",
        f"{BASE}/chunk/t1/1234567890",
        f"{BASE}/chunk/t1/\u00b9",  # a superscript one: str.isdigit() says yes, int() fails
        f"{BASE}/chunk/t1/\u0663",  # an Arabic-Indic three: int() would take it as 3
    ):
        rec.handle(topic, data[:1024])
        assert rec.last_error is not None and "expected .../chunk/<transfer id>/<index>" in rec.last_error
    rec.handle(f"{BASE}/chunk/..%2f/0", data[:1024])
    assert rec.counts["refused"] == 7
    rec.handle(f"{BASE}/chunk/t1/000000001", data[1024:])  # nine digits: index 1
    rec.handle(f"{BASE}/chunk/t1/0", data[:1024])
    assert inbox_body(root / "inbox" / "t1.pkg", data)


def test_a_chunk_over_the_protocol_maximum_is_refused_before_anything(
    make: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    rec, _, _ = make()
    monkeypatch.setattr(model_mqtt, "MAX_CHUNK", 1024)
    rec.handle(f"{BASE}/chunk/t1/0", b"x" * 1025)
    assert rec.last_error is not None and "chunk of 1025 bytes > 1024" in rec.last_error


# ---- restart: what is kept, what is dropped ----------------------------------------------------
def _state_dir(root: Path, tid: str, begin: bytes) -> Path:
    d = root / "transfers" / tid
    (d / "chunks").mkdir(parents=True)
    (d / "begin.json").write_bytes(begin)
    return d


def test_a_restart_keeps_only_chunks_that_can_belong(make: Callable[..., Any]) -> None:
    _, root, _ = make(load=False)
    data = os.urandom(3 * 1024)
    d = _state_dir(root, "t1", _begin(data))
    (d / "chunks" / "0").write_bytes(data[:1024])
    (d / "chunks" / "01").write_bytes(data[1024:2048])  # not a name we write ("1" is)
    (d / "chunks" / "3").write_bytes(b"y" * 1024)  # index == chunks: outside
    (d / "chunks" / "2").write_bytes(b"short")  # wrong size
    rec, _, events = make()
    assert sorted(p.name for p in (d / "chunks").iterdir()) == ["0"]
    assert rec.snapshot()["transfers"] == 1 and rec.counts["discarded_at_start"] == 0
    rec.handle(f"{BASE}/chunk/t1/1", data[1024:2048])
    assert events[-1]["received"] == 2 and events[-1]["missing"] == [[2, 2]]
    rec.handle(f"{BASE}/chunk/t1/0", b"z" * 1024)  # already on disk: the first copy stays
    rec.handle(f"{BASE}/chunk/t1/2", data[2048:])
    assert inbox_body(root / "inbox" / "t1.pkg", data)


def test_a_restarted_transfer_without_chunks_yet_is_kept_and_its_age_is_its_begin(
    make: Callable[..., Any],
) -> None:
    _, root, _ = make(load=False)
    d = root / "transfers" / "t1"
    d.mkdir(parents=True)
    (d / "begin.json").write_bytes(_begin(os.urandom(2048)))
    rec, _, _ = make()
    assert rec.snapshot()["transfers"] == 1 and rec.counts["discarded_at_start"] == 0
    old = time.time() - model_mqtt.TRANSFER_MAX_AGE_S - 60
    os.utime(d / "begin.json", (old, old))
    rec2, _, _ = make()
    assert rec2.snapshot()["transfers"] == 0 and not d.exists()


def test_state_that_cannot_be_a_transfer_is_discarded_with_its_reason(
    make: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    _, root, _ = make(load=False)
    tdir = root / "transfers"
    _state_dir(root, "named", _begin(b"x" * 10, "other"))  # begin.json of another transfer
    _state_dir(root, "padded", b" " * (1 << 20) + _begin(b"x" * 10, "padded"))  # > 1 MiB: not read whole
    (tdir / "afile").write_bytes(b"x")
    target = root / "elsewhere"
    _state_dir(root, "elsewhere-src", _begin(b"x" * 10, "link")).rename(target)
    (tdir / "link").symlink_to(target)
    caplog.set_level(logging.ERROR, logger="edge_agent.model_mqtt")
    rec, _, _ = make()
    assert rec.counts["discarded_at_start"] == 4 and rec.snapshot()["transfers"] == 0
    assert sorted(p.name for p in tdir.iterdir()) == []
    assert (target / "begin.json").exists()  # a symlink is removed, never followed
    text = "\n".join(caplog.messages)
    assert "begin.json names transfer 'other'" in text
    assert f"model transfer state {tdir / 'afile'} discarded: not a transfer directory" in caplog.messages


def test_a_transfer_complete_on_disk_is_finished_at_start(make: Callable[..., Any], tmp_path: Path) -> None:
    from support import free_port

    _, root, _ = make(load=False)
    data = os.urandom(1500)
    d = _state_dir(root, "t1", _begin(data))
    (d / "chunks" / "0").write_bytes(data[:1024])
    (d / "chunks" / "1").write_bytes(data[1024:])
    cfg = load_config(
        write_config(tmp_path, port=free_port(), extra=with_keys())
    )  # nothing listens: start() does not wait
    rec = ModelReceiver(cfg, root / "transfers", root / "inbox", lambda info: None)
    rec.start()
    try:
        assert inbox_body(root / "inbox" / "t1.pkg", data)
        assert rec.counts["messages"] == 1 and rec.alive()
    finally:
        rec.stop()
    assert not rec.alive() and rec._client is None


# ---- paho callbacks ---------------------------------------------------------------------------
class _Client:
    def __init__(self) -> None:
        self.subscribed: list[Any] = []

    def subscribe(self, topics: Any) -> None:
        self.subscribed.append(topics)


def _reason(failure: bool, value: int = 1) -> Any:
    """A paho ReasonCode's two fields the receiver reads (value: the granted QoS, or 0x80)."""
    return SimpleNamespace(is_failure=failure, value=0x80 if failure else value)


def test_subscriptions_on_connect_and_the_suback_event(make: Callable[..., Any]) -> None:
    rec, _, _ = make('[model_update]\ngroups = ["g"]')
    c = _Client()
    rec._on_connect(c, None, None, _reason(True), None)
    assert c.subscribed == [] and not rec.subscribed.is_set()
    rec._on_connect(c, None, None, _reason(False), None)
    assert c.subscribed == [[("edge/cam-1/model/#", 1), ("edge/groups/g/model/#", 1)]]
    rec._on_subscribe(c, None, 1, [_reason(False), _reason(True)], None)
    assert not rec.subscribed.is_set()  # one refused: a push to the group would be lost
    rec._on_subscribe(c, None, 1, [_reason(False), _reason(False)], None)
    assert rec.subscribed.is_set()
    rec.last_error = None
    rec._on_subscribe(c, None, 1, [_reason(False, 1), _reason(False, 0)], None)  # the group's cut to 0
    assert rec.last_error is not None and rec.last_error.startswith(
        "broker granted only QoS 0 for edge/groups/g/model/#: "
    )
    rec._on_connect(c, None, None, _reason(False), None)  # a reconnect: wait for the new SUBACK
    assert not rec.subscribed.is_set()


def test_a_message_from_paho_is_handled(make: Callable[..., Any]) -> None:
    rec, root, _ = make()
    data = os.urandom(100)
    rec._on_message(None, None, SimpleNamespace(topic=f"{BASE}/begin", payload=_begin(data)))
    rec._on_message(None, None, SimpleNamespace(topic=f"{BASE}/chunk/t1/0", payload=data))
    assert inbox_body(root / "inbox" / "t1.pkg", data) and rec.counts["messages"] == 2


# ---- supervision and the connection (survivors of the first mutation run) -----------------------
def test_ensure_alive_restarts_a_dead_thread_counts_it_and_not_after_stop(
    make: Callable[..., Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from support import free_port

    _, root, _ = make(load=False)
    cfg = load_config(
        write_config(tmp_path, port=free_port(), extra=with_keys())
    )  # nothing listens: paho keeps retrying
    rec = ModelReceiver(cfg, root / "transfers", root / "inbox", lambda info: None)
    assert rec.ensure_alive() is False  # not started: nothing to supervise
    rec.start()
    caplog.set_level(logging.ERROR, logger="edge_agent.model_mqtt")
    try:
        assert rec.ensure_alive() is False and rec.counts["restarts"] == 0  # alive: left alone
        for n in (1, 2):
            rec._client.loop_stop()
            assert not rec.alive()
            assert rec.ensure_alive() is True and rec.alive() and rec.counts["restarts"] == n
        assert caplog.messages == ["model receiver: its MQTT thread ended; restarting it"] * 2
        client = rec._client
        real_stop = client.loop_stop
        during: list[bool] = []

        def loop_stop_then_supervise() -> None:  # the update worker checks while stop() runs
            real_stop()
            during.append(rec.ensure_alive())

        client.loop_stop = loop_stop_then_supervise
    finally:
        rec.stop()
    assert during == [False] and rec.counts["restarts"] == 2 and not rec.alive()


def test_a_persistent_authenticated_session_gets_what_was_sent_while_off(
    make: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """clean_session=False with a fixed client id: the broker queues the QoS 1 transfer for a
    device that is off, and hands it over at the next connect (with its username and password)."""
    import paho.mqtt.client as mqtt
    from support import wait_until
    from support.mqtt import Broker, require_mosquitto

    require_mosquitto()
    monkeypatch.setenv("EDGE_TEST_PW", "s3cret")
    with Broker(tmp_path / "auth-broker", users={"dev": "s3cret", "pusher": "p"}) as broker:
        _, root, _ = make(load=False)
        cfg = load_config(write_config(tmp_path, port=broker.port, extra=with_keys()))
        cfg.mqtt = cfg.mqtt.model_copy(
            update={
                "username": "dev",
                "password_env": "EDGE_TEST_PW",
                "reconnect_min_s": 1,
                "reconnect_max_s": 3,
            }
        )
        rec = ModelReceiver(cfg, root / "transfers", root / "inbox", lambda info: None)
        rec.start()
        try:
            wait_until(rec.subscribed.is_set, timeout=15, what="SUBACK")
            assert (rec._client._reconnect_min_delay, rec._client._reconnect_max_delay) == (1, 3)
        finally:
            rec.stop()
        data = os.urandom(1500)
        pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="pusher")
        pub.username_pw_set("pusher", "p")
        pub.connect("127.0.0.1", broker.port)
        pub.loop_start()
        try:
            pub.publish(f"{BASE}/begin", _begin(data), qos=1).wait_for_publish(5)
            pub.publish(f"{BASE}/chunk/t1/0", data[:1024], qos=1).wait_for_publish(5)
            pub.publish(f"{BASE}/chunk/t1/1", data[1024:], qos=1).wait_for_publish(5)
        finally:
            pub.disconnect()
            pub.loop_stop()
        again = ModelReceiver(cfg, root / "transfers", root / "inbox", lambda info: None)
        again.start()
        try:
            wait_until(
                (root / "inbox" / "t1.pkg").exists, timeout=15, what="the queued transfer in the inbox"
            )
            assert inbox_body(root / "inbox" / "t1.pkg", data)
        finally:
            again.stop()


def test_the_receiver_speaks_tls_when_configured(
    make: Callable[..., Any], tmp_path: Path, tls_broker: Any, tls_files: Any
) -> None:
    from support import wait_until

    _, root, _ = make(load=False)
    cfg = load_config(write_config(tmp_path, port=tls_broker.tls_port))
    cfg.mqtt = cfg.mqtt.model_copy(
        update={
            "tls_ca": str(tls_files.ca),
            "tls_cert": str(tls_files.client_cert),
            "tls_key": str(tls_files.client_key),
        }
    )
    rec = ModelReceiver(cfg, root / "transfers", root / "inbox", lambda info: None)
    rec.start()
    try:
        wait_until(rec.subscribed.is_set, timeout=15, what="SUBACK over TLS")
    finally:
        rec.stop()


def test_callback_refusals_are_logged_with_the_reason(
    make: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    rec, _, _ = make()
    caplog.set_level(logging.WARNING, logger="edge_agent.model_mqtt")
    rec._on_connect(_Client(), None, None, _Named("Not authorized", True), None)
    rec._on_subscribe(_Client(), None, 1, [_Named("Not authorized", True, 135)], None)
    assert caplog.messages[0] == "model receiver: broker refused: Not authorized"
    assert rec.last_error == f"broker refused the subscription to {BASE}/# (Not authorized)"
    assert caplog.messages[1] == f"model receiver: {rec.last_error}"
    assert not rec.subscribed.is_set()


class _Named:
    def __init__(self, text: str, failure: bool, value: int = 0) -> None:
        self.text, self.is_failure, self.value = text, failure, value

    def __str__(self) -> str:
        return self.text

    __repr__ = __str__


def test_a_failure_finishing_a_transfer_at_start_names_it(
    make: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from support import free_port

    _, root, _ = make(load=False)
    data = os.urandom(100)
    d = _state_dir(root, "t1", _begin(data))
    (d / "chunks" / "0").write_bytes(data)

    def boom(*a: Any) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(ModelReceiver, "_assemble", boom)
    cfg = load_config(write_config(tmp_path, port=free_port(), extra=with_keys()))
    rec = ModelReceiver(cfg, root / "transfers", root / "inbox", lambda info: None)
    rec.start()
    rec.stop()
    assert rec.counts["failed"] == 1 and rec.last_error == "transfer t1: OSError: disk gone"


def test_a_re_push_refreshes_the_transfer_and_finishes_it_when_complete(
    make: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    _, root, _ = make(load=False)
    data = os.urandom(1500)
    d = _state_dir(root, "t1", _begin(data))
    (d / "chunks" / "0").write_bytes(data[:1024])
    (d / "chunks" / "1").write_bytes(data[1024:])  # complete on disk, not finished (cut before)
    rec, _, _ = make()
    rec.handle(f"{BASE}/begin", _begin(data))  # the operator re-pushes: finished at once
    assert inbox_body(root / "inbox" / "t1.pkg", data)
    rec.handle(f"{BASE}/begin", _begin(data[:1200], "t2"))
    rec._transfers["t2"].active_at = time.time() - model_mqtt.TRANSFER_MAX_AGE_S + 5  # nearly expired
    rec.handle(f"{BASE}/begin", _begin(data[:1200], "t2"))  # re-push: active again
    rec.handle(f"{BASE}/begin", _begin(data[:1300], "t3"))  # expiry runs here
    assert rec.counts["failed"] == 0 and sorted(rec._transfers) == ["t2", "t3"]
    caplog.set_level(logging.WARNING, logger="edge_agent.model_mqtt")
    rec.handle(f"{BASE}/begin", _begin(data[:1250], "t2"))  # same id, other content
    assert "model transfer t2 dropped: a new begin with other content replaced it" in caplog.messages


def test_refusal_reports_are_spaced_by_exactly_the_interval(
    make: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    rec, _, events = make()
    now = [1000.0]
    monkeypatch.setattr(model_mqtt, "time", SimpleNamespace(monotonic=lambda: now[0], time=time.time))
    bad = _begin(b"x" * 10, "b1", for_devices=["cam-9"])  # signed, for another device
    rec.handle(f"{BASE}/begin", bad)
    now[0] += model_mqtt.PROGRESS_EVERY_S - 0.001
    rec.handle(f"{BASE}/begin", bad)
    now[0] += 0.001  # exactly one interval after the first report
    rec.handle(f"{BASE}/begin", bad)
    assert len(events) == 2 and rec.counts["refused"] == 3


def test_an_inbox_on_another_filesystem_gets_a_private_copy(tmp_path: Path) -> None:
    """The inbox may be elsewhere ([model_update] inbox on another mount): the rename becomes a
    durable copy, which must keep the package private (0600) like the rename does."""
    from support.tmpfs import tmpfs

    with tmpfs(tmp_path / "mnt") as mnt:
        cfg = load_config(write_config(tmp_path, extra=with_keys()))
        root = Path(cfg.device.state_dir)
        rec = ModelReceiver(cfg, root / "transfers", mnt / "inbox", lambda info: None)
        rec.load()
        data = os.urandom(1500)
        _send(rec, data)
        pkg = mnt / "inbox" / "t1.pkg"
        assert inbox_body(pkg, data) and _mode(pkg) == 0o600
        assert rec.counts["failed"] == 0


def test_the_size_cap_is_max_package_mb_in_decimal_megabytes_to_the_byte(make: Callable[..., Any]) -> None:
    rec, root, _ = make("[model_update]\nmax_package_mb = 1")
    rec.handle(f"{BASE}/begin", _begin(b"", "over", chunk=1 << 16, size=1_000_001, chunks=16))
    assert rec.counts["refused"] == 1 and not (root / "transfers" / "over").exists()
    rec.handle(f"{BASE}/begin", _begin(b"", "edge", chunk=1 << 16, size=1_000_000, chunks=16))
    assert rec.counts["refused"] == 1 and (root / "transfers" / "edge").is_dir()


def test_the_topic_prefix_loses_only_its_slashes() -> None:
    assert model_topics("XY/", "d", ["g"]) == ["XY/d/model", "XY/groups/g/model"]


def test_transfers_on_disk_hold_two_packages_worth_then_the_oldest_goes(make: Callable[..., Any]) -> None:
    rec, root, _ = make("[model_update]\nmax_package_mb = 0.01")  # cap 10 000 bytes, storage 20 000
    assert rec.snapshot()["last_error"] is None and rec.storage_cap == 20_000
    for tid in ("t1", "t2"):
        rec.handle(f"{BASE}/begin", _begin(b"", tid, chunk=1 << 12, size=10_000, chunks=3))
        rec._transfers[tid].active_at -= 10 if tid == "t1" else 5  # t1 is the least recently active
    assert sorted(p.name for p in (root / "transfers").iterdir()) == ["t1", "t2"]
    rec.handle(f"{BASE}/begin", _begin(b"", "t3", chunk=1 << 12, size=10_000, chunks=3))
    assert sorted(p.name for p in (root / "transfers").iterdir()) == ["t2", "t3"]


# ---- second round of survivors -----------------------------------------------------------------
def test_everything_on_disk_is_private_whatever_the_umask(make: Callable[..., Any]) -> None:
    old = os.umask(0)
    try:
        rec, root, _ = make()
        data = os.urandom(3000)
        rec.handle(f"{BASE}/begin", _begin(data))
        rec.handle(f"{BASE}/chunk/t1/0", data[:1024])
    finally:
        os.umask(old)
    t = root / "transfers"
    assert [_mode(p) for p in (t, root / "inbox", t / "t1", t / "t1" / "chunks")] == [0o700] * 4
    assert _mode(t / "t1" / "begin.json") == 0o600 and _mode(t / "t1" / "chunks" / "0") == 0o600


def test_error_lines_name_the_topic_and_the_reason_and_are_bounded(
    make: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    rec, _, _ = make()
    caplog.set_level(logging.ERROR, logger="edge_agent.model_mqtt")
    rec.handle("elsewhere/x", b"")
    assert rec.last_error == "message on 'elsewhere/x': not a model-transfer topic"
    assert (
        caplog.messages[-1] == "model transfer: refused message on 'elsewhere/x': not a model-transfer topic"
    )
    long = "x" * 500
    rec.handle(long, b"")
    assert rec.last_error is not None and rec.last_error.startswith(f"message on '{'x' * 120}':")
    rec._count("failed", "y" * 400)
    assert rec.last_error == "y" * 300 and caplog.messages[-1] == "model transfer: failed " + "y" * 300
    rec._count("refused", "z")  # the third refusal of its kind: counted, not logged (LogThrottle)
    assert rec.last_error == "z" and caplog.messages[-1] == "model transfer: failed " + "y" * 300
    rec.handle(f"{BASE}/begin", b"{broken")
    assert rec.last_error is not None and rec.last_error.startswith(f"message on '{BASE}/begin': ")
    assert len(rec.last_error) > len(f"message on '{BASE}/begin': ") + 10 and "None" not in rec.last_error
    rec.handle(f"{BASE}/chunk/bad id/0", b"z")
    assert rec.last_error is not None and "None" not in rec.last_error and "bad id" in rec.last_error


def test_chunk_refusals_say_what_the_begin_expects(
    make: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    rec, _, _ = make()
    rec.handle(f"{BASE}/chunk/t9/0", b"z")
    assert (
        rec.last_error
        == f"message on '{BASE}/chunk/t9/0': chunk 0 of transfer t9, which has no verified begin: dropped"
    )
    rec.handle(f"{BASE}/begin", _begin(os.urandom(2500)))
    rec.handle(f"{BASE}/chunk/t1/5", b"z" * 10)
    assert rec.last_error is not None and rec.last_error.endswith(
        "transfer t1: chunk 5 of 10 bytes; the signed plan has 3 chunks, this one of 452 bytes"
    )
    monkeypatch.setattr(model_mqtt, "MAX_CHUNK", 10)
    rec.handle(
        f"{BASE}/chunk/t1/2", b"z" * 10
    )  # exactly the maximum: judged by the begin, not refused as too big
    assert rec.last_error is not None and "of 10 bytes; the signed plan has" in rec.last_error


def test_the_oldest_transfer_by_activity_goes_first_and_at_most_four_are_kept(
    make: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    rec, root, _ = make()
    caplog.set_level(logging.WARNING, logger="edge_agent.model_mqtt")
    for i, tid in enumerate(("a1", "b2", "c3", "d4")):
        rec.handle(f"{BASE}/begin", _begin(b"x" * 10, tid))
        rec._transfers[tid].active_at = time.time() - 100 + (10 if tid == "a1" else i)  # a1: the most recent
    rec.handle(f"{BASE}/begin", _begin(b"x" * 10, "e5"))
    assert sorted(rec._transfers) == ["a1", "c3", "d4", "e5"]  # b2, least recently active, went
    assert sorted(p.name for p in (root / "transfers").iterdir()) == ["a1", "c3", "d4", "e5"]
    cap = rec.storage_cap
    assert (
        f"model transfer b2 dropped: room for a new transfer (4 transfers / {cap} bytes)" in caplog.messages
    )


def test_a_transfer_expires_after_exactly_a_day(
    make: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    rec, _, _ = make()
    now = [2e9]
    monkeypatch.setattr(model_mqtt, "time", SimpleNamespace(time=lambda: now[0], monotonic=time.monotonic))
    caplog.set_level(logging.WARNING, logger="edge_agent.model_mqtt")
    rec.handle(f"{BASE}/begin", _begin(b"x" * 10, "old"))
    now[0] += model_mqtt.TRANSFER_MAX_AGE_S
    rec.handle(f"{BASE}/begin", _begin(b"x" * 10, "new1"))
    assert "old" in rec._transfers  # exactly a day: kept
    now[0] += 1
    rec.handle(f"{BASE}/begin", _begin(b"x" * 10, "new2"))
    assert "old" not in rec._transfers
    assert "model transfer old dropped: no chunk for 24 h" in caplog.messages


def test_the_done_list_is_read_only_as_a_small_list(make: Callable[..., Any]) -> None:
    rec, root, _ = make()
    done = root / "transfers" / "done.json"
    done.write_text('{"t1": 1}')  # not a list: nothing is done
    rec.handle(f"{BASE}/chunk/t1/0", b"z")
    done.write_text(" " * (1 << 16) + '["t1"]')  # over 64 KiB: not ours, not read past the bound
    rec.handle(f"{BASE}/chunk/t1/0", b"z")
    assert rec.counts["refused"] == 2
    done.write_text('["t1"]')
    rec.handle(f"{BASE}/chunk/t1/0", b"z")
    assert rec.counts["refused"] == 2


def test_progress_is_announced_at_most_once_a_second_with_the_name(
    make: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    rec, _, events = make()
    now = [5000.0]
    monkeypatch.setattr(model_mqtt, "time", SimpleNamespace(monotonic=lambda: now[0], time=time.time))
    data = os.urandom(5 * 1024)
    rec.handle(f"{BASE}/begin", _begin(data, name="yolo-v9", version="9.0"))
    rec.handle(f"{BASE}/chunk/t1/0", data[:1024])  # the first chunk: always announced
    rec.handle(f"{BASE}/chunk/t1/1", data[1024:2048])  # same instant: not announced
    assert [e["received"] for e in events] == [0, 1] and events[0]["name"] == "yolo-v9-9.0"
    now[0] += model_mqtt.PROGRESS_EVERY_S  # exactly one interval later
    rec.handle(f"{BASE}/chunk/t1/2", data[2048:3072])
    assert [e["received"] for e in events] == [0, 1, 3]
    rec.handle(f"{BASE}/chunk/t1/3", data[3072:4096])
    rec.handle(f"{BASE}/chunk/t1/4", data[4096:])
    assert events[-1]["complete"] is True and len(events) == 4
    assert rec.snapshot()["transfers"] == 0  # finished: forgotten


def test_a_stuck_file_never_makes_a_drop_fail(
    make: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    rec, root, _ = make()
    rec.handle(f"{BASE}/begin", _begin(b"x" * 3000))
    rec.handle(f"{BASE}/chunk/t1/0", b"x" * 1024)
    (root / "transfers" / "stray").write_bytes(b"x")
    real_unlink = os.unlink

    def unlink(path: Any, *a: Any, **kw: Any) -> None:
        if os.path.basename(str(path)) in ("0", "stray"):
            raise PermissionError(1, "Operation not permitted", str(path))
        real_unlink(path, *a, **kw)

    monkeypatch.setattr(os, "unlink", unlink)
    monkeypatch.setattr(shutil.os, "unlink", unlink)
    rec.handle(f"{BASE}/begin", _begin(b"y" * 3000))  # same id, other content: drop t1
    remove_path(root / "transfers" / "stray")
    assert rec.counts["failed"] == 0 and rec.counts["refused"] == 0
    assert (root / "transfers" / "t1" / "begin.json").exists()  # the new begin, written


def test_a_begin_of_a_rolled_back_or_older_version_is_refused_before_anything_is_written(
    make: Callable[..., Any],
) -> None:
    from edge_agent.adapters.updates.store import ModelStore
    from edge_agent.core.updates.store_state import Highest, RolledBack

    rec, root, _ = make()
    store = ModelStore(str(root))
    state = store.state()
    state.highest = Highest(version="5.0", vid="demo-5.0-aaaaaaaa")
    state.remember_rollback(RolledBack(version="6.0", vid="demo-6.0-bbbbbbbb", reason="collapsed", at=1.0))
    store.save(state)
    data = os.urandom(1500)
    rec.handle(f"{BASE}/begin", _begin(data, "old", version="4.0"))
    assert rec.last_error is not None and "version 4.0 is not newer than 5.0" in rec.last_error
    rec.handle(f"{BASE}/begin", _begin(data, "back", version="6.0"))
    assert (
        rec.last_error is not None
        and "version 6.0 was rolled back on this device (collapsed)" in rec.last_error
    )
    assert rec.counts["rolled_back"] == 2 and rec.counts["refused"] == 2
    assert list((root / "transfers").iterdir()) == []
    rec.handle(f"{BASE}/begin", _begin(data, "new", version="6.1"))  # newer than both: taken
    assert (root / "transfers" / "new" / "begin.json").exists() and rec.counts["refused"] == 2


def test_a_begin_for_another_board_or_a_newer_agent_is_refused(make: Callable[..., Any]) -> None:
    rec, root, _ = make()
    other = "rpi4" if _board() != "rpi4" else "jetson"
    rec.handle(f"{BASE}/begin", _begin(b"x" * 10, "b", boards=[other]))
    assert f"is for boards ['{other}'], this device is '{_board()}'" in str(rec.last_error)
    rec.handle(f"{BASE}/begin", _begin(b"x" * 10, "v", min_agent_version="99.0"))
    assert "needs edge-agent >= 99.0" in str(rec.last_error)
    rec.handle(f"{BASE}/begin", _begin(b"x" * 10, "g", for_devices=[], for_groups=["elsewhere"]))
    assert rec.counts["not_for_device"] == 3 and list((root / "transfers").iterdir()) == []
    rec.handle(f"{BASE}/begin", _begin(b"x" * 10, "ok", boards=[_board()]))
    assert (root / "transfers" / "ok").is_dir()


def _board() -> str:
    from edge_agent.adapters.runtime.board import detect_board

    return str(detect_board().kind)

"""The sending side of the MQTT model transfer (app.model_push) against a real mosquitto, in process:
what each device's topics receive (begin, every chunk, only the re-sent ones), whom a push reaches,
and which verdicts the watcher takes from the devices' retained status."""

from __future__ import annotations

import base64
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support import free_port, wait_until
from support.mqtt import Broker, Collector, require_mosquitto
from support.updates import trusted_key, write_config

from edge_agent.adapters.updates.package_file import transfer_parts
from edge_agent.app.cli.configfile import load_config
from edge_agent.app.updates import push as model_push
from edge_agent.app.updates.push import OutcomeWatcher, push_package
from edge_agent.errors import SyncError

CHUNK = 1024


def package(tmp_path: Path, size: int, chunk: int = CHUNK) -> Path:
    """A signed package whose "detector" is ``size`` random bytes (push never loads it), planned
    in ``chunk``-byte chunks."""
    from edge_agent.adapters.updates import signing
    from edge_agent.adapters.updates.package_file import describe_file, write_package
    from edge_agent.core.updates.package import Manifest

    det = tmp_path / "det.bin"
    det.write_bytes(os.urandom(size))
    m = Manifest(
        name="demo",
        version="2.0",
        created_at="2026-11-30T00:00:00Z",
        files={"detector": describe_file(det, "detector.onnx")},
        for_devices=["cam-1", "cam-2"],
        for_groups=["north"],
    )
    out = tmp_path / "demo-2.0.pkg"
    key = trusted_key()[0]
    write_package(out, m, {"detector.onnx": det}, signer=lambda d: signing.sign(d, key), chunk_size=chunk)
    return out


def body(pkg: Path) -> bytes:
    """What the chunks carry: the package up to its manifest (the signed plan's size)."""
    return pkg.read_bytes()[: transfer_parts(pkg)[0].size]


def cfg_for(tmp_path: Path, port: int, extra: str = "") -> Any:
    return load_config(write_config(tmp_path, port=port, extra=extra))


def chunks_on(c: Collector, base: str, tid: str) -> dict[int, bytes]:
    with c.lock:
        msgs = list(c.messages)
    prefix = f"{base}/chunk/{tid}/"
    return {int(t[len(prefix) :]): p for t, p, _ in msgs if t.startswith(prefix)}


def test_every_chunk_reaches_each_named_device_and_the_group(tmp_path: Path, broker: Broker) -> None:
    """70 chunks (more than the 64 awaited at once) to two devices and a group: each topic gets
    the signed begin and the whole body, in order, and nothing goes to a device not named."""
    pkg = package(tmp_path, 68 * CHUNK - 100)  # + its pax and tar headers: 70 chunks, the last short
    data = body(pkg)
    plan, manifest, sig = transfer_parts(pkg)
    assert plan.count == 70 and plan.chunk_size == CHUNK
    c = Collector(broker.port, "edge/#", client_id="watch-all")
    cfg = cfg_for(tmp_path, broker.port)
    tid = push_package(cfg, pkg, ["cam-1", "cam-2"], "north")
    bases = ["edge/cam-1/model", "edge/cam-2/model", "edge/groups/north/model"]
    c.wait_until(lambda col: all(len(chunks_on(col, b, tid)) == 70 for b in bases), 20, "70 chunks per topic")
    c.close()
    assert len(tid) == 16 and all(ch in "0123456789abcdef" for ch in tid)
    begins = {t: json.loads(p) for t, p, _ in c.messages if t.endswith("/begin")}
    assert sorted(begins) == [f"{b}/begin" for b in sorted(bases)]
    for begin in begins.values():
        assert begin == {
            "transfer_id": tid,
            "manifest": base64.b64encode(manifest).decode(),
            "signature": base64.b64encode(sig).decode(),
        }
    for b in bases:
        got = chunks_on(c, b, tid)
        assert b"".join(got[i] for i in range(70)) == data
        assert len(got[69]) == plan.chunk_len(69) < CHUNK
    assert {t.split("/")[1] for t, _, _ in c.messages} == {"cam-1", "cam-2", "groups"}


def test_only_resends_just_those_chunks_under_the_same_transfer(tmp_path: Path, broker: Broker) -> None:
    pkg = package(tmp_path, 10 * CHUNK)
    c = Collector(broker.port, "edge/#", client_id="watch-resend")
    cfg = cfg_for(tmp_path, broker.port)
    tid = push_package(cfg, pkg, ["cam-1"], None, transfer_id="t-resend", only=[7, 2, 7])
    assert tid == "t-resend"
    c.wait_until(lambda col: len(chunks_on(col, "edge/cam-1/model", tid)) == 2, 10, "the two chunks")
    time.sleep(0.2)  # not a synchronisation: a chunk not asked for must not follow
    c.close()
    got = chunks_on(c, "edge/cam-1/model", tid)
    data = body(pkg)
    assert got == {2: data[2 * CHUNK : 3 * CHUNK], 7: data[7 * CHUNK : 8 * CHUNK]}
    begin = json.loads(next(p for t, p, _ in c.messages if t.endswith("/begin")))
    assert begin["transfer_id"] == tid and "manifest" in begin  # the whole transfer's begin again
    assert [t for t, _, _ in c.messages if "/chunk/" in t] == [
        f"edge/cam-1/model/chunk/{tid}/2",
        f"edge/cam-1/model/chunk/{tid}/7",
    ]  # in index order, each once


def test_a_small_package_is_one_chunk_and_the_topic_prefix_is_honoured(
    tmp_path: Path, broker: Broker
) -> None:
    pkg = package(tmp_path, 10, chunk=4096)
    c = Collector(broker.port, "#", client_id="watch-prefix")
    cfg = cfg_for(tmp_path, broker.port)
    cfg = cfg.model_copy(update={"mqtt": cfg.mqtt.model_copy(update={"topic_prefix": "/site9/"})})
    tid = push_package(cfg, pkg, ["cam-1"], None)
    c.wait_until(lambda col: len(col.messages) >= 2, 10, "begin and one chunk")
    c.close()
    assert [t for t, _, _ in c.messages] == ["site9/cam-1/model/begin", f"site9/cam-1/model/chunk/{tid}/0"]
    assert json.loads(c.messages[0][1])["transfer_id"] == tid and c.messages[1][1] == body(pkg)


def test_no_broker_is_a_sync_error_naming_host_and_port(tmp_path: Path) -> None:
    port = free_port()
    cfg = cfg_for(tmp_path, port)
    with pytest.raises(SyncError, match=rf"^cannot connect to 127\.0\.0\.1:{port}: "):
        push_package(cfg, package(tmp_path, 10), ["cam-1"], None)


def test_a_broker_that_never_acknowledges_is_an_error_not_a_hang(
    tmp_path: Path, broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(model_push, "PUBACK_TIMEOUT_S", 0.5)
    cfg = cfg_for(tmp_path, broker.port)
    client = model_push._connect(cfg)
    client.disconnect()
    client.loop_stop()
    assert broker.proc is not None
    pkg = package(tmp_path, 3 * CHUNK)
    orig = model_push._connect

    def connect_then_pause(c: Any) -> Any:
        cl = orig(c)
        wait_until(cl.is_connected, 10, "the CONNACK")  # then the broker freezes
        broker.proc.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
        return cl

    monkeypatch.setattr(model_push, "_connect", connect_then_pause)
    try:
        with pytest.raises(SyncError, match=r"^the broker did not acknowledge a chunk within 0.5 s$"):
            push_package(cfg, pkg, ["cam-1"], None)
    finally:
        broker.proc.send_signal(signal.SIGCONT)


def test_a_push_with_credentials_logs_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_mosquitto()
    monkeypatch.setenv("EDGE_PUSH_PW", "pw-1")
    with Broker(tmp_path / "auth", users={"op": "pw-1"}) as b:
        import paho.mqtt.client as mqtt

        watch = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="auth-watch")
        watch.username_pw_set("op", "pw-1")
        got: list[str] = []
        watch.on_message = lambda cl, u, m: got.append(m.topic)
        subscribed = threading.Event()
        watch.on_subscribe = lambda *a: subscribed.set()
        watch.connect("127.0.0.1", b.port)
        watch.subscribe("edge/#", qos=1)
        watch.loop_start()
        assert subscribed.wait(10), "the watcher's subscription"
        cfg = cfg_for(tmp_path, b.port)
        cfg = cfg.model_copy(
            update={"mqtt": cfg.mqtt.model_copy(update={"username": "op", "password_env": "EDGE_PUSH_PW"})}
        )
        tid = push_package(cfg, package(tmp_path, 100, chunk=4096), ["cam-1"], None)  # one chunk
        deadline = time.monotonic() + 10
        while len(got) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        watch.disconnect()
        watch.loop_stop()
    assert got == ["edge/cam-1/model/begin", f"edge/cam-1/model/chunk/{tid}/0"]


def publish_status(port: int, device: str, body: Any, raw: bytes | None = None) -> None:
    pub = Collector(port, "none/here", client_id=f"fake-{device}")
    payload = raw if raw is not None else json.dumps(body).encode()
    pub.client.publish(f"edge/{device}/status", payload, qos=1, retain=True).wait_for_publish(5)
    pub.close()


def verdict(device: str, origin: str, outcome: str) -> dict[str, Any]:
    return {
        "device_id": device,
        "model_update": {"last": {"origin": origin, "outcome": outcome, "detail": "d"}},
    }


def test_the_watcher_takes_only_this_transfers_verdicts(tmp_path: Path, broker: Broker) -> None:
    cfg = cfg_for(tmp_path, broker.port)
    w = OutcomeWatcher(cfg, "t-1")
    publish_status(broker.port, "cam-1", verdict("cam-1", "mqtt:t-1", "switched"))
    publish_status(broker.port, "cam-2", verdict("cam-2", "mqtt:t-0", "switched"))  # another transfer
    publish_status(broker.port, "cam-3", verdict("cam-3", "mqtt:t-1", "unchanged"))  # not a verdict yet
    publish_status(broker.port, "cam-4", None, raw=b"\xff\xfe not utf-8")
    publish_status(broker.port, "cam-5", None, raw=b"{not json")
    publish_status(broker.port, "cam-6", {"device_id": "cam-6", "model_update": None})
    publish_status(broker.port, "cam-7", verdict("cam-7", "mqtt:t-1", "refused"))
    t0 = time.monotonic()
    got = w.wait(20, ["cam-1", "cam-7"], 0)
    assert time.monotonic() - t0 < 10  # returns once both named devices answered
    assert sorted(got) == ["cam-1", "cam-7"]
    assert got["cam-1"]["outcome"] == "switched" and got["cam-7"]["outcome"] == "refused"


def test_the_watcher_counts_a_group_and_gives_up_at_its_deadline(tmp_path: Path, broker: Broker) -> None:
    cfg = cfg_for(tmp_path, broker.port)
    for dev in ("a", "b", "c"):
        publish_status(broker.port, dev, verdict(dev, "mqtt:g-1", "switched"))  # retained: seen later too
    w = OutcomeWatcher(cfg, "g-1")
    t0 = time.monotonic()
    assert sorted(w.wait(20, [], 2)) in (["a", "b"], ["a", "c"], ["b", "c"], ["a", "b", "c"])
    assert time.monotonic() - t0 < 10  # two verdicts are enough for --expect 2
    w = OutcomeWatcher(cfg, "g-1")
    t0 = time.monotonic()
    got = w.wait(1.0, [], 5)  # five expected, three exist: the deadline ends the wait
    took = time.monotonic() - t0
    assert sorted(got) == ["a", "b", "c"] and 0.9 <= took < 5
    w = OutcomeWatcher(cfg, "g-1")
    t0 = time.monotonic()
    got = w.wait(1.0, ["a", "zz"], 0)  # zz never answers
    assert sorted(got) == ["a", "b", "c"] and time.monotonic() - t0 >= 0.9


def test_a_device_offline_during_the_push_gets_every_chunk_when_it_returns(
    tmp_path: Path, broker: Broker
) -> None:
    """QoS 1 end to end: the broker keeps the package for a device's persistent session (QoS 0
    would be dropped for an offline device) and delivers each part at QoS 1, never 2."""
    import paho.mqtt.client as mqtt

    first = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="cam-1-device", clean_session=False)
    subscribed = threading.Event()
    first.on_subscribe = lambda *a: subscribed.set()
    first.connect("127.0.0.1", broker.port)
    first.subscribe("edge/cam-1/model/#", qos=2)  # at QoS 2: what arrives shows the QoS it was sent at
    first.loop_start()
    assert subscribed.wait(10), "the device's subscription"
    first.disconnect()  # offline, its session kept
    first.loop_stop()
    pkg = package(tmp_path, 5 * CHUNK)
    tid = push_package(cfg_for(tmp_path, broker.port), pkg, ["cam-1"], None)
    got: list[tuple[str, int]] = []
    back = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="cam-1-device", clean_session=False)
    back.on_message = lambda c, u, m: got.append((m.topic, m.qos))
    back.connect("127.0.0.1", broker.port)
    back.loop_start()
    try:
        deadline = time.monotonic() + 10
        n = transfer_parts(pkg)[0].count  # 5 KiB + the tar headers: 7 chunks
        while len(got) < 1 + n and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        back.disconnect()
        back.loop_stop()
    base = "edge/cam-1/model"
    assert n == 7 and got == [(f"{base}/begin", 1)] + [(f"{base}/chunk/{tid}/{i}", 1) for i in range(n)]


@pytest.mark.parametrize(("prefix", "topic"), [("/site9/", "site9"), ("X/plantX", "X/plantX")])
def test_the_watcher_listens_under_the_configured_topic_prefix(
    tmp_path: Path, broker: Broker, prefix: str, topic: str
) -> None:
    """Only the slashes around the prefix go (a prefix may start or end with any other letter)."""
    cfg = cfg_for(tmp_path, broker.port)
    cfg = cfg.model_copy(update={"mqtt": cfg.mqtt.model_copy(update={"topic_prefix": prefix})})
    pub = Collector(broker.port, "none/here", client_id="fake-site9")
    body = json.dumps(verdict("cam-1", "mqtt:t-9", "switched"))
    pub.client.publish(f"{topic}/cam-1/status", body, qos=1, retain=True).wait_for_publish(5)
    pub.close()
    t0 = time.monotonic()
    got = OutcomeWatcher(cfg, "t-9").wait(20, ["cam-1"], 0)
    assert list(got) == ["cam-1"] and time.monotonic() - t0 < 10


def test_a_push_to_a_tls_broker_uses_the_configured_certificates(
    tmp_path: Path, tls_broker: Broker, tls_files: Any
) -> None:
    """The operator's [mqtt] TLS settings (CA, client certificate) hold for `model push` too: the
    TLS port refuses a plain connection, so every chunk arriving proves the handshake."""
    pkg = package(tmp_path, 3 * CHUNK)
    c = Collector(tls_broker.port, "edge/#", client_id="watch-tls")  # the broker's plain port
    cfg = cfg_for(tmp_path, tls_broker.port)
    tls = {
        "port": tls_broker.tls_port,
        "tls_ca": str(tls_files.ca),
        "tls_cert": str(tls_files.client_cert),
        "tls_key": str(tls_files.client_key),
    }
    cfg = cfg.model_copy(update={"mqtt": cfg.mqtt.model_copy(update=tls)})
    tid = push_package(cfg, pkg, ["cam-1"], None)
    n = transfer_parts(pkg)[0].count
    c.wait_until(lambda col: len(chunks_on(col, "edge/cam-1/model", tid)) == n, 20, f"{n} chunks over TLS")
    c.close()
    assert b"".join(chunks_on(c, "edge/cam-1/model", tid)[i] for i in range(n)) == body(pkg)

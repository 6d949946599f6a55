"""The replay and flood attacks on model updates, on a running agent over a real mosquitto: a
recorded group push replayed on another device's topic, a rolled-back package replayed under a new
transfer id, 100 MiB of chunks after an unsigned begin on a 64 MiB state disk. Each failed on the
code before package format 2 (the group package was installed, the rolled-back one came back 12 s
later, the outbox dropped results); each checks what stops it now."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any, Callable

import paho.mqtt.client as mqtt
import pytest
from support import cli, wait_until
from support.fixtures_updates import pack
from support.mqtt import Broker, Collector
from support.tmpfs import tmpfs
from support.updates import INT8, AgentProc, keys

from edge_agent.app.cli.configfile import load_config
from edge_agent.app.updates.push import push_package

pytestmark = pytest.mark.slow


def receiver(a: AgentProc) -> dict[str, Any]:
    return dict(((a.status() or {}).get("model_update") or {}).get("receiver") or {})


def _client(port: int, cid: str) -> mqtt.Client:
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=cid)
    c.max_inflight_messages_set(64)
    c.connect("127.0.0.1", port)
    c.loop_start()
    return c


def replay(port: int, messages: list[tuple[str, bytes]]) -> None:
    """Publish recorded messages as they are (QoS 1, each acknowledged): the attacker's part."""
    c = _client(port, "attacker")
    try:
        infos = [c.publish(t, p, qos=1) for t, p in messages]
        for info in infos:
            info.wait_for_publish(30)
    finally:
        c.disconnect()
        c.loop_stop()


def record(port: int, base: str, push: Callable[[], str]) -> tuple[str, bytes, list[bytes]]:
    """What ``push`` put on ``base``: its transfer id, begin and chunks in index order."""
    col = Collector(port, f"{base}/#", client_id=f"recorder-{os.getpid()}")
    try:
        tid = push()
        wait_until(lambda: col.on_topic("/begin"), 10, "the begin recorded")
        n = chunk_count(col.messages[0][1])
        prefix = f"{base}/chunk/{tid}/"
        col.wait_until(lambda c: sum(t.startswith(prefix) for t, _, _ in c.messages) == n, 30, f"{n} chunks")
    finally:
        col.close()
    got = {int(t[len(prefix) :]): p for t, p, _ in col.messages if t.startswith(prefix)}
    return tid, col.messages[0][1], [got[i] for i in range(n)]


def chunk_count(begin: bytes) -> int:
    raw = json.loads(begin)
    if "manifest" in raw:  # the signed begin: the count is in the signed plan
        return len(json.loads(base64.b64decode(raw["manifest"]))["transfer"]["chunks"])
    return int(raw["chunks"])


def as_transfer(base: str, tid: str, begin: bytes, chunks: list[bytes]) -> list[tuple[str, bytes]]:
    """The recording re-addressed: on ``base``, under transfer id ``tid`` (the begin's JSON too)."""
    raw = json.loads(begin)
    raw["transfer_id"] = tid
    return [(f"{base}/begin", json.dumps(raw).encode())] + [
        (f"{base}/chunk/{tid}/{i}", c) for i, c in enumerate(chunks)
    ]


def subscribed(a: AgentProc, port: int, base: str) -> None:
    """Its receiver's subscription is in place: a probe chunk of no transfer is counted as refused."""
    replay(port, [(f"{base}/chunk/probe/0", b"p")])
    wait_until(lambda: receiver(a).get("refused", 0) >= 1, 30, lambda: f"the probe refused\n{a.log_text()}")


def transfer_bytes(a: AgentProc) -> int:
    d = a.state / "models" / "transfers"
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file() and p.name != "done.json")


def test_a_group_package_replayed_on_a_device_outside_the_group_is_refused(
    broker: Broker, agents: list[AgentProc], packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    """Signed for group shop-floor; recorded on the group topic and replayed on cam-9's own topic.
    Before: installed there (with its signed force). Now: the signed targets do not name cam-9."""
    pkg = pack(
        INT8,
        packages["key"].parent / "shop-floor.pkg",
        "7.0",
        *("--for-group", "shop-floor", "--sign", str(packages["key"]), "--force"),
    )
    pusher = load_config(make_config(port=broker.port))
    tid, begin, chunks = record(
        broker.port, "edge/groups/shop-floor/model", lambda: push_package(pusher, pkg, [], "shop-floor")
    )
    extra = keys(packages) + '\ngroups = ["line-9"]'
    a = AgentProc(make_config(port=broker.port, device="cam-9", extra=extra))
    agents.append(a.start())
    subscribed(a, broker.port, "edge/cam-9/model")
    sha = a.detector_sha()
    replay(broker.port, as_transfer("edge/cam-9/model", tid, begin, chunks))
    n = len(chunks)
    snap = wait_until(
        lambda: (r := receiver(a)).get("refused", 0) >= 2 + n and r,
        60,
        lambda: f"the begin and {n} chunks refused\n{receiver(a)}\n{a.log_text()}",
    )
    assert snap["not_for_device"] == 1 and snap["unknown_transfer"] == n + 1 and snap["failed"] == 0
    assert "is for devices [] and groups ['shop-floor'], not for device 'cam-9'" in snap["last_error"] or (
        snap["last_error"].endswith("which has no verified begin: dropped")
    )
    assert a.last() == {} and a.detector_sha() == sha  # model unchanged, nothing installed
    assert transfer_bytes(a) == 0
    lines = [ln for ln in a.log_text().splitlines() if "ERROR edge_agent.model_mqtt" in ln]
    assert len(lines) == 2, lines  # n + 2 refusals, one line per kind (LogThrottle)
    assert "not for device 'cam-9'" in "\n".join(lines)


def test_a_rolled_back_package_replayed_under_a_new_transfer_id_is_refused(
    broker: Broker, agents: list[AgentProc], packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    """Pushed, switched, `model rollback`; then the recording under a new id. Before: reinstalled
    12 s later (the package that set the anti-rollback mark may come back). Now refused at its
    begin, also after a restart (the rolled-back set is in active.json)."""
    pkg = pack(INT8, packages["key"].parent / "v8.pkg", "8.0", "--sign", str(packages["key"]))
    cfg = make_config(port=broker.port, extra=keys(packages))
    a = AgentProc(cfg)
    agents.append(a.start())
    fp32 = a.detector_sha()
    subscribed(a, broker.port, "edge/cam-1/model")
    pusher = load_config(cfg)
    _, begin, chunks = record(
        broker.port, "edge/cam-1/model", lambda: push_package(pusher, pkg, ["cam-1"], None)
    )
    wait_until(lambda: a.last().get("outcome") == "switched", 120, lambda: f"switched\n{a.log_text()}")
    r = cli("model", "rollback", "-c", str(cfg), quiet=False)
    assert r.returncode == 0, r.stderr
    wait_until(lambda: a.detector_sha() == fp32, 60, "the agent back on its config model")
    assert [
        e["version"] for e in json.loads((a.state / "models" / "active.json").read_text())["rolled_back"]
    ] == ["8.0"]
    n = len(chunks)
    for round_, new_id in enumerate(("replay-1", "replay-2")):
        if round_:  # the refusal survives a restart: it is read from active.json
            a.stop()
            a.start()
            subscribed(a, broker.port, "edge/cam-1/model")
        replay(broker.port, as_transfer("edge/cam-1/model", new_id, begin, chunks))
        snap = wait_until(
            lambda: (
                (s := receiver(a)).get("rolled_back", 0) == 1 and s.get("unknown_transfer", 0) == n + 1 and s
            ),
            60,
            lambda: f"the replayed begin and its {n} chunks refused\n{receiver(a)}\n{a.log_text()}",
        )
        assert "version 8.0 was rolled back on this device" in a.log_text()
        assert snap["failed"] == 0 and a.last()["outcome"] == "rolled_back" and a.detector_sha() == fp32
        assert transfer_bytes(a) == 0


def test_chunks_after_an_unsigned_begin_never_fill_the_disk_the_outbox_needs(
    broker: Broker,
    agents: list[AgentProc],
    packages: dict[str, Path],
    make_config: Callable[..., Path],
    tmp_path: Path,
) -> None:
    """100 MiB of chunks after an unsigned begin, the agent's state and outbox on one 64 MiB tmpfs
    while it puts a result per frame and sends one a second (a backlog grows). Before: 65 MB of
    chunks stored until the disk was full, and the outbox dropped 544 of 678 results (measured on
    the code before format 2). Now: 0 bytes stored, 0 results dropped."""
    with tmpfs(tmp_path / "state-cam-1", size="64m"):
        # results with snapshots, sent at 1 a second: a backlog grows in the outbox meanwhile
        slow = "\n[mqtt]\nrate_limit_per_s = 1.0\n[output]\nsnapshot = true\nsnapshot_max_bytes = 8192\n"
        a = AgentProc(make_config(port=broker.port, extra=keys(packages) + slow))
        assert Path(a.cfg.queue.path).parent == a.state  # the outbox on the same tmpfs
        agents.append(a.start())
        subscribed(a, broker.port, "edge/cam-1/model")
        before = (a.status() or {})["results"]
        chunk = 256 << 10
        begin = {
            "transfer_id": "flood",
            "size": 400 * chunk,
            "sha256": "0" * 64,
            "chunks": 400,
            "chunk_size": chunk,
        }
        data = os.urandom(chunk)
        flood = [("edge/cam-1/model/begin", json.dumps(begin).encode())]
        flood += [(f"edge/cam-1/model/chunk/flood/{i}", data) for i in range(400)]
        replay(broker.port, flood)
        snap = wait_until(
            lambda: (s := receiver(a)).get("refused", 0) >= 402 and s,
            120,
            lambda: f"the begin and 400 chunks refused\n{receiver(a)}\n{a.log_text()[-3000:]}",
        )
        assert snap["unsigned"] == 1 and snap["unknown_transfer"] == 401 and snap["failed"] == 0
        assert transfer_bytes(a) == 0
        # results kept being put all along, and the outbox dropped none
        st = wait_until(
            lambda: (s := a.status() or {}).get("results", 0) > before + 50 and s, 60, "more results"
        )
        assert st["queue"]["dropped"] == 0 and st["queue"]["disk_full"] is False, st["queue"]
        assert st["queue"]["pending"] > 20  # a backlog on the disk: the outbox really needed the room
        q = st["queue"]
        print(
            f"results put during the flood: {st['results'] - before}, pending {q['pending']}, dropped {q['dropped']}"
        )
        a.stop()

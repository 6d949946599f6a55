"""rollout_run's promises that the mutation runs of issue 36 found no test holding (in process, so
mutmut credits them; the other whole rollouts are in test_model_rollout_inproc.py): the refusal of
a package naming too few of the members lists at most five of them, a broker that never
acknowledges the status subscription in time is one error line naming the wait, the statuses are
read under a topic prefix written with slashes, a stage of several devices is pushed to all of them
in one line, and record goes on past the statuses it skips."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import wait_until
from support.rollout_sim import SimDevice, new_db, start_sims
from support.updates import packed, write_config

from edge_agent.adapters.collector import rollouts
from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.app.cli.main import main
from edge_agent.app.updates import rollout_run
from edge_agent.core.updates.rollout import CanarySpec
from edge_agent.errors import ModelError, SyncError


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Packed in process, signed by a fresh key: a package for group fleet-a, and one for the
    devices cam-1 and cam-9 only (no group)."""
    pkgs, pub = packed(
        tmp_path_factory.mktemp("rollout-bite-pkg"),
        {"fleet-a": ["--for-group", "fleet-a"], "solo": ["--for-device", "cam-1", "--for-device", "cam-9"]},
    )
    return {"pkg": pkgs["fleet-a"], "solo": pkgs["solo"], "pub": pub}


@pytest.fixture
def solo(signed: dict[str, Any]) -> Path:
    return Path(signed["solo"])


@pytest.fixture
def db(tmp_path: Path) -> Iterator[CollectorDb]:
    d = CollectorDb(new_db(tmp_path))
    yield d
    d.close()


def test_a_refusal_names_the_first_five_members_the_manifest_leaves_out(db: CollectorDb, solo: Path) -> None:
    """Seven members outside the manifest's devices (cam-1 is in it): the line names the first
    five of them, sorted, and no rollout is recorded."""
    members = ["cam-1", *(f"cam-{i}" for i in (8, 2, 7, 3, 6, 4, 5))]
    with pytest.raises(ModelError) as exc:
        rollout_run.start(db, solo, "fleet-a", members, CanarySpec(1, False), 1, 0)
    assert str(exc.value) == (
        f"{solo}: its signed manifest names neither group 'fleet-a' nor devices "
        "['cam-2', 'cam-3', 'cam-4', 'cam-5', 'cam-6']: "
        "they would refuse it (repack with `model pack --for-group fleet-a`)"
    )
    assert rollouts.listing(db) == []
    # every member named by the manifest: started, whatever the group
    ro = rollout_run.start(db, solo, "fleet-a", ["cam-9", "cam-1"], CanarySpec(1, False), 1, 0)
    assert ro.stages == [["cam-1"], ["cam-9"]] and rollouts.get(db, ro.id) == ro


class LateBroker:
    """An MQTT server on loopback that accepts the connection (CONNACK) and holds the SUBACK
    back until ``release`` is set: a broker too slow to acknowledge the subscription."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = int(self.sock.getsockname()[1])
        self.release = threading.Event()
        self.conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.sock.accept()
            self.conns.append(conn)
            buf = b""
            while True:
                data = conn.recv(4096)
                if not data:
                    return
                buf += data
                while len(buf) >= 2 and len(buf) >= 2 + buf[1]:  # packets under 128 bytes here
                    packet, buf = buf[: 2 + buf[1]], buf[2 + buf[1] :]
                    if packet[0] == 0x10:  # CONNECT: accepted, no session
                        conn.sendall(b"\x20\x02\x00\x00")
                    elif packet[0] == 0x82:  # SUBSCRIBE: granted QoS 1, once released
                        self.release.wait()
                        conn.sendall(b"\x90\x03" + packet[2:4] + b"\x01")
        except OSError:
            return

    def close(self) -> None:
        self.release.set()
        for c in self.conns:
            c.close()
        self.sock.close()


def test_a_broker_that_does_not_acknowledge_the_subscription_in_time_is_one_error_naming_the_wait(
    tmp_path: Path,
) -> None:
    """settle() gives up when the SUBACK is not there within its timeout (here the broker sends it
    only after settle() returned, or after 30 s if settle() waits on past its timeout)."""
    from edge_agent.app.cli.configfile import load_config

    server = LateBroker()
    late = threading.Timer(30.0, server.release.set)
    late.start()
    cfg = load_config(write_config(tmp_path, port=server.port, device="operator"))
    watch = rollout_run.StatusWatch(cfg, {"cam-1"})
    try:
        with pytest.raises(SyncError) as exc:
            watch.settle(timeout_s=0.25)
        assert str(exc.value) == "the broker did not acknowledge the status subscription within 0.25 s"
    finally:
        late.cancel()
        watch.close()
        server.close()
    assert watch.bodies == {} and watch.drain() == []


def test_the_watch_reads_the_statuses_under_a_prefix_written_with_slashes(
    tmp_path: Path, broker: Any
) -> None:
    """topic_prefix "/site/edge/": the agents publish on site/edge/<device>/status (the topics
    of core/messages/builders.py), and that is where the watch reads them."""
    import json

    import paho.mqtt.client as mqtt

    from edge_agent.app.cli.configfile import load_config
    from edge_agent.core.messages.builders import topics

    path = write_config(tmp_path, port=broker.port, device="operator")
    text = path.read_text()
    assert "[mqtt]\n" in text and "topic_prefix" not in text
    path.write_text(text.replace("[mqtt]\n", '[mqtt]\ntopic_prefix = "/site/edge/"\n', 1))
    cfg = load_config(path)
    assert cfg.mqtt.topic_prefix == "/site/edge/"
    watch = rollout_run.StatusWatch(cfg, {"cam-1"})
    pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="sender")
    pub.connect("127.0.0.1", broker.port)
    pub.loop_start()
    try:
        watch.settle()
        topic = topics(cfg.mqtt.topic_prefix, "cam-1").status
        assert topic == "site/edge/cam-1/status"
        pub.publish(topic, json.dumps({"device_id": "cam-1", "n": 1}), qos=1).wait_for_publish(10)
        wait_until(lambda: "cam-1" in watch.bodies, what="cam-1's status under the prefix")
        assert [(d, b["n"]) for d, b in watch.drain()] == [("cam-1", 1), ("cam-1", 1)]
    finally:
        pub.disconnect()
        pub.loop_stop()
        watch.close()


def test_a_stage_of_several_devices_is_pushed_to_all_of_them_in_one_line(
    tmp_path: Path,
    broker: Any,
    sims: list[SimDevice],
    signed: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One canary, then the rest in one wave: "stage 1: pushing to cam-2, cam-3", each of them
    receives the stage's transfer, and the rollout ends done at stage 1 (exit 0)."""
    members = ["cam-1", "cam-2", "cam-3"]
    start_sims(tmp_path, broker.port, signed["pub"], dict.fromkeys(members, "pass"), sims, trial_s=0.2)
    url = new_db(tmp_path)
    op = write_config(tmp_path, port=broker.port, device="operator")
    args = [str(signed["pkg"]), "-c", str(op), "--group", "fleet-a", "--wait", "--timeout", "120"]
    rc = main(["-q", "model", "rollout", *args, *(a for m in members for a in ("--member", m)), "--db", url])
    out = capsys.readouterr().out
    assert rc == 0, out
    rid = out.split()[1].rstrip(":")
    pushes = [ln for ln in out.splitlines() if ": pushing to " in ln]
    assert pushes == ["stage 0 (canaries): pushing to cam-1", "stage 1: pushing to cam-2, cam-3"], out
    assert [s.received for s in sims] == [[f"{rid}-s0"], [f"{rid}-s1"], [f"{rid}-s1"]]
    d = CollectorDb(url)
    try:
        ro = rollouts.get(d, rid)
        assert ro is not None and (ro.state, ro.stage, ro.pushed, ro.reason) == ("done", 1, 1, None)
    finally:
        d.close()


def status(dev: str, vid: str, trial: bool) -> dict[str, Any]:
    return {
        "device_id": dev,
        "model_update": {"current": {"id": vid}, "trial": {"vid": vid} if trial else None, "last": {}},
    }


def test_record_goes_on_past_a_body_it_skips_to_the_verdicts_after_it(
    db: CollectorDb, signed: dict[str, Any]
) -> None:
    """The statuses come in arrival order: a non-member's, one of a device not sent to yet, one
    saying nothing of this transfer, before a pushed device's verdict, do not hide that verdict."""
    ro = rollout_run.start(
        db, signed["pkg"], "fleet-a", ["cam-1", "cam-2", "cam-3"], CanarySpec(1, False), 1, 0
    )
    assert ro.stages == [["cam-1"], ["cam-2", "cam-3"]]
    said: list[str] = []
    ro.pushed = 0
    rollout_run.record(
        db,
        ro,
        [
            ("cam-9", status("cam-9", ro.vid, False)),  # no member
            ("cam-2", status("cam-2", ro.vid, False)),  # stage 1: not sent to it yet
            ("cam-1", status("cam-1", ro.vid, False)),
        ],
        said.append,
    )
    assert said == [f"cam-1: passed: {ro.vid} runs, its trial is over"]
    ro.pushed = ro.stage = 1
    rollout_run.record(
        db,
        ro,
        [
            ("cam-2", {"device_id": "cam-2", "model_update": {"current": {"id": "other"}}}),  # no word yet
            ("cam-3", status("cam-3", ro.vid, True)),
        ],
        said.append,
    )
    assert said[1:] == [f"cam-3: switched: {ro.vid} on trial"]
    got = rollouts.verdicts(db, ro.id)
    assert [(v.device, v.stage, v.transfer_id, v.verdict) for v in got] == [
        ("cam-1", 0, f"{ro.id}-s0", "passed"),
        ("cam-3", 1, f"{ro.id}-s1", "switched"),
    ]

"""A real mosquitto started with exactly the files `edge-agent fleet enroll` wrote, and paho
clients that log in as one of the enrolled users.

``enroll(dir, *args)`` runs the real command (a child process, as an operator would);
``EnrolledBroker`` is a :class:`support.mqtt.Broker` on the snippet's own listener, with the
``passwd`` and ``acl`` named by it (``--deploy-dir`` = the enrollment directory itself).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import paho.mqtt.client as mqtt

from support import cli, free_port, wait_until
from support.mqtt import Broker, require_mosquitto


def enroll(broker_dir: Path, *args: str) -> str:
    """``edge-agent fleet enroll ARGS --broker-dir DIR``; its stdout (the config snippets)."""
    run = cli("fleet", "enroll", *args, "--broker-dir", str(broker_dir))
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def secret(broker_dir: Path, name: str) -> str:
    return (broker_dir / "secrets" / f"{name}.password").read_text().strip()


def enrolled_broker(workdir: Path, *args: str) -> Broker:
    """Enroll ``args`` (devices, --collector, --operator ...) into ``workdir/enroll`` for a
    listener on a free loopback port, and return the (not yet started) broker using those files."""
    require_mosquitto()
    d = workdir / "enroll"
    port = free_port()
    enroll(d, *args, "--port", str(port), "--bind", "127.0.0.1", "--deploy-dir", str(d))
    return Broker(workdir / "broker", snippet=d / "mosquitto.conf", port=port)


@dataclass
class Peer:
    """A paho client logged in as ``user``: what it received, whether it was refused. MQTT 3.1.1
    (the agent's protocol) unless ``session_expiry`` asks for MQTT 5 (the collector's); paho 2's
    MQTT 5 client drops the connection on mosquitto's PUBACK "not authorized" (rc 135) to a
    denied publish, which would end a test of several denied publishes at the first."""

    port: int
    user: Optional[str]
    password: Optional[str]
    client_id: str = ""
    clean_start: bool = True
    session_expiry: int = 0
    got: list[tuple[str, bytes]] = field(default_factory=list)
    reason: Optional[str] = None

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self.answered = threading.Event()
        self.subacks: list[list[int]] = []
        self.v5 = self.session_expiry > 0
        proto = mqtt.MQTTv5 if self.v5 else mqtt.MQTTv311
        self.client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=self.client_id,
            protocol=proto,
            clean_session=None if self.v5 else self.clean_start,
        )
        if self.user is not None:
            self.client.username_pw_set(self.user, self.password)
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.client.on_subscribe = lambda c, u, mid, reasons, p: self.subacks.append(
            [r.value for r in reasons]
        )

    def _on_connect(
        self, client: object, userdata: object, flags: object, reason: object, props: object
    ) -> None:
        self.reason = str(reason)
        self.answered.set()

    def _on_message(self, client: object, userdata: object, msg: mqtt.MQTTMessage) -> None:
        with self.lock:
            self.got.append((msg.topic, bytes(msg.payload)))

    def connect(self) -> str:
        """Connect, wait for the CONNACK; its reason ("Success", "Not authorized", ...)."""
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        if self.v5:
            props = Properties(PacketTypes.CONNECT)
            props.SessionExpiryInterval = self.session_expiry
            self.client.connect("127.0.0.1", self.port, 30, clean_start=self.clean_start, properties=props)
        else:
            self.client.connect("127.0.0.1", self.port, 30)
        self.client.loop_start()
        assert self.answered.wait(10), "no CONNACK"
        assert self.reason is not None
        return self.reason

    def subscribe(self, *filters: str) -> None:
        n = len(self.subacks)
        self.client.subscribe([(f, 1) for f in filters])
        wait_until(lambda: len(self.subacks) > n, 10, "the SUBACK")

    def publish(self, topic: str, payload: bytes = b"x", retain: bool = False) -> None:
        info = self.client.publish(topic, payload, qos=1, retain=retain)
        info.wait_for_publish(10)

    def topics(self) -> list[str]:
        with self.lock:
            return [t for t, _ in self.got]

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def result_body(device: str, seq: int) -> bytes:
    return json.dumps(
        {"id": f"{device}-{seq}", "seq": seq, "boot": 1, "device_id": device, "ts": 1.8e9}
    ).encode()

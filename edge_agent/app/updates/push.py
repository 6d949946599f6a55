"""The sending side of the MQTT model transfer (``edge-agent model push``), for operators and tests.

The begin carries the package's signed manifest, whose transfer plan (made by ``model pack``)
fixes the chunking and each chunk's sha256: the sender chooses only the transfer id. Publishes
``begin`` then every chunk with QoS 1 and waits for each PUBACK, so when it returns the
broker holds the whole package for every subscribed device, online or not (persistent sessions).
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Optional

import paho.mqtt.client as mqtt

from edge_agent.adapters.host.durable import write_durable
from edge_agent.adapters.mqtt.connect import login, read_password, tls_context
from edge_agent.adapters.updates.package_file import transfer_parts
from edge_agent.adapters.updates.receiver import model_topics
from edge_agent.core.config.schema import Config
from edge_agent.core.updates import cancel
from edge_agent.core.updates.binding import SignedBegin
from edge_agent.errors import SyncError

PUBACK_TIMEOUT_S = 60.0


def push_package(
    cfg: Config,
    package: Path,
    devices: list[str],
    group: Optional[str],
    transfer_id: Optional[str] = None,
    only: Optional[Iterable[int]] = None,
    cancel_sha256: Optional[str] = None,
) -> str:
    """Send ``package`` (ModelError when it has no signed transfer plan); ``only`` re-sends just
    those chunk indexes (a device's ``missing`` ranges after its broker session was lost) under the
    same ``transfer_id``."""
    plan, manifest_data, signature = transfer_parts(package)
    with open(package, "rb") as f:
        data = f.read(plan.size)
    tid = transfer_id or uuid.uuid4().hex[:16]
    prefix = cfg.mqtt.topic_prefix
    bases = [model_topics(prefix, d, [])[0] for d in devices]
    if group:
        bases.append(model_topics(prefix, "-", [group])[1])
    chunks, chunk_size = plan.count, plan.chunk_size
    begin = SignedBegin(tid, manifest_data, signature, cancel_sha256).to_json()
    client = _connect(cfg)
    try:
        for base in bases:
            infos = [client.publish(f"{base}/begin", begin, qos=1)]
            for i in range(chunks) if only is None else sorted(set(only)):
                infos.append(
                    client.publish(
                        f"{base}/chunk/{tid}/{i}", data[i * chunk_size : (i + 1) * chunk_size], qos=1
                    )
                )
                if len(infos) >= 64:
                    _wait(infos)
                    infos = []
            _wait(infos)
    finally:
        client.disconnect()
        client.loop_stop()
    return tid


def secret_file(tid: str) -> Path:
    """Where ``model push`` keeps a transfer's cancel secret (0600): ``$XDG_STATE_HOME`` or
    ``~/.local/state``, ``edge-agent/pushes/<transfer>``."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "edge-agent" / "pushes" / tid


def keep_secret(tid: str) -> str:
    """A new cancel secret for ``tid``, written before the begin goes out; returns its commitment."""
    secret = cancel.new_secret()
    path = secret_file(tid)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_durable(path, secret.encode("ascii"), 0o600)
    return cancel.commitment(secret)


def send_cancel(cfg: Config, tid: str, devices: list[str], group: Optional[str]) -> None:
    """Publish the cancel of ``tid`` (its secret from :func:`secret_file`) to the same topics."""
    try:
        secret = cancel.parse_secret(secret_file(tid).read_bytes())
    except (OSError, ValueError):
        raise SyncError(
            f"transfer {tid}: no cancel secret in {secret_file(tid)}; only the user and machine that "
            "pushed it can cancel it"
        ) from None
    bases = [model_topics(cfg.mqtt.topic_prefix, d, [])[0] for d in devices]
    if group:
        bases.append(model_topics(cfg.mqtt.topic_prefix, "-", [group])[1])
    client = _connect(cfg)
    try:
        _wait([client.publish(f"{b}/cancel/{tid}", secret, qos=1) for b in bases])
    finally:
        client.disconnect()
        client.loop_stop()


def _connect(cfg: Config, role: str = "push") -> mqtt.Client:
    """``role`` "watch" for the verdict watcher: with ``role_usernames`` its own broker user, else
    the broker (client id = user name) would close the push's connection for it, and back."""
    m = cfg.mqtt
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"edge-agent-{role}-{uuid.uuid4().hex[:8]}")
    user = login(m, role)
    if user is not None:
        c.username_pw_set(user, read_password(m))
    ctx = tls_context(m)
    if ctx is not None:
        c.tls_set_context(ctx)
    c.max_inflight_messages_set(64)
    try:
        c.connect(m.host, m.port, m.keepalive_s)
    except OSError as exc:
        raise SyncError(f"cannot connect to {m.host}:{m.port}: {exc}") from None
    c.loop_start()
    return c


def _wait(infos: list[mqtt.MQTTMessageInfo]) -> None:
    for info in infos:
        info.wait_for_publish(PUBACK_TIMEOUT_S)
        if not info.is_published():
            raise SyncError(f"the broker did not acknowledge a chunk within {PUBACK_TIMEOUT_S:g} s")


class OutcomeWatcher:
    """Collects the devices' verdicts on one transfer from their retained status topics
    (``model_update.last`` whose origin is ``mqtt:<transfer>``)."""

    def __init__(self, cfg: Config, transfer_id: str) -> None:
        self.origin = f"mqtt:{transfer_id}"
        self.outcomes: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._client = _connect(cfg, "watch")
        self._client.on_message = self._on_message
        self._client.subscribe(f"{cfg.mqtt.topic_prefix.strip('/')}/+/status", qos=1)

    def _on_message(self, client: mqtt.Client, userdata: object, msg: mqtt.MQTTMessage) -> None:
        try:
            body = json.loads(msg.payload.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return
        mu = body.get("model_update") or {}
        last = mu.get("last") or {}
        transfer = mu.get("transfer") or {}
        if last.get("origin") == self.origin and last.get("outcome") != "unchanged":
            with self._lock:
                self.outcomes[str(body.get("device_id"))] = last
        elif transfer.get("transfer_id") == self.origin[len("mqtt:") :] and transfer.get("refused"):
            # refused at its begin (signature, targets, rolled back, floor): no install, no "last"
            verdict = {"outcome": "refused", "detail": str(transfer["refused"]), "origin": self.origin}
            with self._lock:
                self.outcomes.setdefault(str(body.get("device_id")), verdict)

    def wait(self, timeout_s: float, devices: list[str], expect: int) -> dict[str, dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                done = set(self.outcomes)
            if (devices and set(devices) <= done) or (expect and len(done) >= expect):
                break
            time.sleep(0.1)
        self._client.disconnect()
        self._client.loop_stop()
        with self._lock:
            return dict(self.outcomes)

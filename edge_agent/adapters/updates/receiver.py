"""Model packages over MQTT: a chunked, resumable QoS 1 transfer, received into the inbox.

Topics (``<p>`` = ``mqtt.topic_prefix``): ``<p>/<device>/model/begin`` and
``<p>/<device>/model/chunk/<transfer>/<index>``, and the same under ``<p>/groups/<group>/model/``
for a fleet. ``begin`` is JSON ``{transfer_id, manifest, signature}`` (the package's signed
manifest, base64); a chunk is raw bytes of the package body. The receiver keeps a persistent
session (``clean_session=False``, a fixed client id) so the broker queues what arrives while the
device is off, and writes every chunk to its own file
(:func:`~edge_agent.adapters.host.durable.write_durable`) *inside* ``on_message``: paho sends the
PUBACK after the callback returns, so a chunk acknowledged is a chunk on disk, and one lost to a
kill -9 is redelivered.

What a message may do (signature first, signed chunk hashes, targets, the free-space floor) is
adapters.updates.intake; the transfers on disk are adapters.updates.transfers. Whatever arrives is
only a candidate: the agent installs it only after the same checks as a local file
(docs/threat-model.md).
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import paho.mqtt.client as mqtt

from edge_agent.adapters.mqtt.connect import login, read_password, suback_problems, tls_context
from edge_agent.adapters.updates.intake import MAX_TRANSFERS as MAX_TRANSFERS
from edge_agent.adapters.updates.intake import TRANSFER_MAX_AGE_S as TRANSFER_MAX_AGE_S
from edge_agent.adapters.updates.intake import FreeSpace, TransferIntake, free_space, log
from edge_agent.core.config.schema import Config

if TYPE_CHECKING:
    from paho.mqtt.client import Client, ConnectFlags, MQTTMessage
    from paho.mqtt.properties import Properties
    from paho.mqtt.reasoncodes import ReasonCode

    Props = Optional[Properties]  # a callback's MQTT 5 properties


def model_topics(prefix: str, device_id: str, groups: list[str]) -> list[str]:
    p = prefix.strip("/")
    return [f"{p}/{device_id}/model"] + [f"{p}/groups/{g}/model" for g in groups]


class ModelReceiver(TransferIntake):
    def __init__(
        self,
        cfg: Config,
        workdir: Path,
        inbox: Path,
        on_progress: Callable[[Optional[dict[str, Any]]], None],
        client_id: Optional[str] = None,
        space: FreeSpace = free_space,
    ) -> None:
        super().__init__(cfg, workdir, inbox, on_progress, space)
        self.client_id = client_id or f"{cfg.device.id}-model"
        self.bases = model_topics(cfg.mqtt.topic_prefix, cfg.device.id, cfg.model_update.groups)
        self._client: Optional[mqtt.Client] = None
        self._stopping = False
        # set once the broker granted every subscription (SUBACK): from then on a push reaches us
        self.subscribed = threading.Event()

    def start(self) -> None:
        self.load()
        self._connect()
        self.finish_loaded()

    def ensure_alive(self) -> bool:
        """Supervision (called by the update worker): paho's network thread restarted if it ended
        for any reason, counted in ``restarts``. True when it had to."""
        if self._client is None or self._stopping or self.alive():
            return False
        log.error("model receiver: its MQTT thread ended; restarting it")
        with contextlib.suppress(Exception):
            self._client.loop_stop()
        self._connect()
        with self._lock:
            self.counts["restarts"] += 1
        return True

    def _connect(self) -> None:
        m = self.cfg.mqtt
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=self.client_id, clean_session=False)
        user = login(m, "model")
        if user is not None:
            c.username_pw_set(user, read_password(m))
        ctx = tls_context(m)
        if ctx is not None:
            c.tls_set_context(ctx)
        c.reconnect_delay_set(int(m.reconnect_min_s), int(m.reconnect_max_s))
        c.on_connect = self._on_connect
        c.on_message = self._on_message
        c.on_subscribe = self._on_subscribe
        c.connect_async(m.host, m.port, m.keepalive_s)
        c.loop_start()
        self._client = c

    def stop(self) -> None:
        self._stopping = True  # before the thread ends: supervision must not restart it
        if self._client is not None:
            self._client.disconnect()
            self._client.loop_stop()
            self._client = None

    def alive(self) -> bool:
        """paho's network thread runs (the status snapshot shows it)."""
        thread = getattr(self._client, "_thread", None)  # paho keeps no public handle on it
        return bool(thread is not None and thread.is_alive())

    def snapshot(self) -> dict[str, Any]:
        return {"alive": self.alive(), **self.counters()}

    # ---- paho thread ------------------------------------------------------------------------
    def _on_connect(
        self, client: Client, userdata: object, flags: ConnectFlags, reason: ReasonCode, props: Props
    ) -> None:
        if reason.is_failure:
            log.warning("model receiver: broker refused: %s", reason)
            return
        self.subscribed.clear()
        client.subscribe([(f"{b}/#", 1) for b in self.bases])

    def _on_subscribe(
        self, client: Client, userdata: object, mid: int, reasons: list[ReasonCode], props: Props
    ) -> None:
        # The SUBACK alone tells a refused filter (a broker ACL: no update ever arrives) or a grant
        # cut to QoS 0 (`max_qos 0`: the broker keeps nothing for the offline device, so a package
        # sent while it is away never completes). Either is shown in the status, not only logged.
        filters = [f"{b}/#" for b in self.bases]
        refused, qos0 = suback_problems(filters, reasons)
        if refused:
            with self._lock:
                self.last_error = "broker refused the subscription to " + ", ".join(refused)
            log.warning("model receiver: %s", self.last_error)
            return
        if qos0:
            with self._lock:
                self.last_error = (
                    f"broker granted only QoS 0 for {', '.join(qos0)}: chunks sent while the device "
                    "is offline are not kept for it (raise the broker's max_qos to 1)"
                )
            log.warning("model receiver: %s", self.last_error)
        self.subscribed.set()

    def _on_message(self, client: Client, userdata: object, msg: MQTTMessage) -> None:
        self.handle(msg.topic, msg.payload)

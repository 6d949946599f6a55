"""The device's side of ``[mqtt] confirm = "collector"``: subscribe to ``<prefix>/<device>/confirm``,
check the SUBACK, decode each confirmation (outside input: core.messages.confirm bounds every
field) and hand it to the outbox, which deletes the SENT rows it covers.

The broker's PUBACK only says the broker took a result; a broker can still drop it (mosquitto's
``max_queued_messages`` while a collector is down), lose it (``kill -9`` before its autosave) or
discard it (a client reusing the collector's id with a clean start). The collector confirms what it
committed, so a row is deleted only once it is in the database; what stays unconfirmed is sent
again after ``confirm_timeout_s`` (the collector's primary key drops the second copy).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Optional

import paho.mqtt.client as mqtt

from edge_agent.adapters.mqtt.session import SyncSession
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.core.config.schema import MqttConfig
from edge_agent.core.messages.confirm import ConfirmError, confirm_topic, decode
from edge_agent.core.messages.log_throttle import LogThrottle
from edge_agent.errors import QueueError

log = logging.getLogger("edge_agent.mqtt")
CHECK_EVERY_S = 5.0
# a confirmation normally follows its PUBACK within one collector round (well under a second):
# a minute without one, for results the broker took, is a collector down or a confirm topic that
# cannot reach this device (the resend timeout is another matter: how long to wait per result)
SILENCE_MIN_S = 60.0


class Confirmations:
    """Confirmations of one sync (all connections); ``enabled`` only with confirm = "collector"."""

    def __init__(self, cfg: MqttConfig, device_id: str, outbox: Outbox) -> None:
        self.enabled = cfg.confirm == "collector"
        self.topic = confirm_topic(cfg.topic_prefix, device_id)
        self.prefix = cfg.topic_prefix
        self.timeout_s = cfg.confirm_timeout_s
        self.outbox = outbox
        self.received = 0
        self.rejected = 0
        self.rows = 0  # rows deleted by confirmations
        self.last: Optional[float] = None  # unix time of the last confirmation
        self.error: Optional[str] = None  # a refused subscription
        self.warning: Optional[str] = None  # sent rows, and no confirmation comes
        self._throttle = LogThrottle()
        self._checked = time.monotonic()
        self._since: Optional[float] = None  # monotonic: SENT rows first seen (none: None)
        self._last_mono = 0.0  # monotonic: the last confirmation
        if self.enabled:
            outbox.confirm_with(self.timeout_s)

    def subscribe(self, client: mqtt.Client, session: SyncSession) -> None:
        """Subscribe (QoS 1) on a new connection; the retained confirmation comes at once."""
        if not self.enabled:
            return
        rc, _ = client.subscribe(self.topic, qos=1)
        if rc != mqtt.MQTT_ERR_SUCCESS:
            session.sub_refused = f"cannot subscribe to {self.topic}: {mqtt.error_string(rc)}"

    def apply(self, session: SyncSession) -> Optional[str]:
        """Apply what came (on the sync thread); returns an error for the status, if any."""
        if not self.enabled:
            return None
        if session.sub_refused and self.error != session.sub_refused:
            self.error = session.sub_refused
            log.error(
                "mqtt: %s: results stay SENT and are resent; allow this device to subscribe to it "
                '(broker ACL) or set [mqtt] confirm = "puback"',
                self.error,
            )
        while session.confirms:
            payload = session.confirms.popleft()
            try:
                confirms = decode(payload)
            except ConfirmError as exc:
                self.rejected += 1
                line = self._throttle.line(self.topic, f"mqtt: {self.topic}: refused: {exc}")
                if line is not None:
                    log.warning("%s", line)
                continue
            self.received += 1
            self.last = time.time()
            self._last_mono = time.monotonic()
            self.rows += self.outbox.confirm(confirms)
        self._check_silence()
        return self.error

    def _check_silence(self) -> None:
        """Warn once when results were acknowledged by the broker long ago and no confirmation came."""
        now = time.monotonic()
        if self.warning is not None or now - self._checked < CHECK_EVERY_S:
            return
        self._checked = now
        try:
            stats = self.outbox.stats()
        except QueueError:
            return
        if not stats["sent"]:
            self._since = None
            return
        # since SENT rows were first seen, or since the last confirmation (not the rows' age: a
        # backlog made offline a day ago is not a day without confirmations)
        self._since = now if self._since is None else self._since
        if now - max(self._since, self._last_mono) < SILENCE_MIN_S:
            return
        quiet = now - max(self._since, self._last_mono)
        ever = "none ever received" if self.last is None else "none lately"
        self.warning = (
            f"{stats['sent']} results acknowledged by the broker have had no confirmation from the "
            f"collector for {quiet:.0f} s ({ever}): they are kept and resent. Is a collector running "
            f"(edge-agent collect), allowed by the broker's ACL to publish {self.topic}, with prefix "
            f"{self.prefix!r} like this device?"
        )
        log.warning("mqtt: %s", self.warning)

    def stats(self) -> dict[str, Any]:
        return {
            "mode": "collector" if self.enabled else "puback",
            "received": self.received,
            "rejected": self.rejected,
            "rows": self.rows,
            "last": self.last,
            "error": self.error,
            "warning": self.warning,
        }

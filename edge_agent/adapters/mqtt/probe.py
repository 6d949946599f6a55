"""One MQTT CONNECT/CONNACK round trip with the service's own settings, for ``doctor``.

A TCP connect says little: TLS, the CA, credentials and the broker's ACL all fail only at CONNACK.
A client id of its own (``<device>-doctor``) so the probe never kicks the running agent's session
off the broker (MQTT closes an existing session that has the same client id).
"""

from __future__ import annotations

import ssl
import threading
from typing import TYPE_CHECKING, Literal, Optional

import paho.mqtt.client as mqtt

from edge_agent.adapters.mqtt.connect import describe_connect_error, login, read_password, tls_context
from edge_agent.core.config.schema import MqttConfig
from edge_agent.errors import EdgeAgentError

if TYPE_CHECKING:
    from paho.mqtt.client import Client, ConnectFlags
    from paho.mqtt.properties import Properties
    from paho.mqtt.reasoncodes import ReasonCode

# "refused": the broker answered and said no (bad password, not authorised), or our TLS/credential
# files are wrong: a configuration mistake that never heals by waiting. "unreachable": no answer,
# which an offline device may legitimately see (results queue locally).
Outcome = Literal["ok", "refused", "unreachable"]


def probe_broker(cfg: MqttConfig, device_id: str, timeout_s: float = 5.0) -> tuple[Outcome, str]:
    """(outcome, what happened): connect, wait for CONNACK, disconnect. Publishes nothing."""
    answered = threading.Event()
    outcome: dict[str, Optional[str]] = {"refused": None}

    def on_connect(
        client: Client, userdata: object, flags: ConnectFlags, reason: ReasonCode, props: Optional[Properties]
    ) -> None:
        if reason.is_failure:
            outcome["refused"] = str(reason)
        answered.set()

    try:
        tls = tls_context(cfg)
        password = read_password(cfg)
    except (EdgeAgentError, OSError) as exc:
        return "refused", str(exc)
    client = mqtt.Client(
        mqtt.CallbackAPIVersion.VERSION2, client_id=f"{device_id}-doctor", reconnect_on_failure=False
    )
    user = login(cfg, "doctor")
    if user is not None:
        client.username_pw_set(user, password)
    if tls is not None:
        client.tls_set_context(tls)
    client.on_connect = on_connect
    where = f"{cfg.host}:{cfg.port}{' (TLS)' if tls is not None else ''}"
    try:
        client.connect(cfg.host, cfg.port, keepalive=max(5, int(timeout_s) * 2))
    except OSError as exc:
        # a certificate the CA does not sign is a configuration mistake, not an outage
        return ("refused" if isinstance(exc, ssl.SSLError) else "unreachable"), describe_connect_error(
            cfg, exc
        )
    client.loop_start()
    try:
        if not answered.wait(timeout_s):
            return "unreachable", f"{where}: no CONNACK within {timeout_s:.0f}s"
        if outcome["refused"]:
            who = f" as {user!r}" if user else " anonymously"
            return "refused", f"{where}: broker refused the connection{who}: {outcome['refused']}"
        return "ok", f"{where}: connected as {user or 'anonymous'}"
    finally:
        client.disconnect()
        client.loop_stop()

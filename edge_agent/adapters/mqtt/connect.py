"""Broker connection settings shared by every MQTT client of the agent (sync, probe, model push and
receiver, collector): the password from a file or the environment, the TLS context, and the one
sentence a failed connect is reported with."""

from __future__ import annotations

import os
import ssl
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple

from edge_agent.core.broker.identity import DEVICE_ROLES, OPERATOR_ROLES
from edge_agent.core.config.schema import MqttConfig
from edge_agent.errors import SyncError

ROLE_SUFFIXES = {**DEVICE_ROLES, **OPERATOR_ROLES}


def login(cfg: MqttConfig, role: str) -> Optional[str]:
    """The user name of the connection playing ``role`` (a key of core.broker.identity's
    DEVICE_ROLES or OPERATOR_ROLES): ``username`` + the role's suffix with ``role_usernames``
    (a broker with ``use_username_as_clientid``: every connection needs a user, hence a client id,
    of its own, or they would close each other's sessions), else ``username`` itself."""
    if cfg.username is None or not cfg.role_usernames:
        return cfg.username
    return cfg.username + ROLE_SUFFIXES[role]


def read_password(cfg: MqttConfig) -> Optional[str]:
    """Password from ``password_file`` (relative paths resolve under systemd's
    ``$CREDENTIALS_DIRECTORY``) or else the ``password_env`` variable; never from the TOML."""
    if cfg.username is None:
        return None
    if cfg.password_file:
        path = Path(cfg.password_file)
        creds = os.environ.get("CREDENTIALS_DIRECTORY")
        if not path.is_absolute() and creds:
            path = Path(creds) / path
        try:
            # empty (the unit's SetCredential= fallback is a lone newline) means "no password"
            return path.read_text(encoding="utf-8").rstrip("\r\n") or None
        except OSError as exc:
            raise SyncError(
                f"mqtt.password_file = {cfg.password_file!r}: cannot read it ({exc.strerror})"
            ) from None
    return os.environ.get(cfg.password_env)


def tls_context(cfg: MqttConfig) -> Optional[ssl.SSLContext]:
    """An SSLContext when ``tls_ca`` or ``tls_cert`` is set; file problems are reported up front."""
    if not (cfg.tls_ca or cfg.tls_cert):
        return None
    try:
        ctx = ssl.create_default_context(cafile=cfg.tls_ca)
    except (OSError, ssl.SSLError) as exc:
        raise SyncError(f"mqtt.tls_ca = {cfg.tls_ca!r}: cannot load CA certificates ({exc})") from None
    if cfg.tls_cert:
        try:
            ctx.load_cert_chain(cfg.tls_cert, cfg.tls_key)
        except (OSError, ssl.SSLError) as exc:
            raise SyncError(
                f"mqtt.tls_cert = {cfg.tls_cert!r} / mqtt.tls_key = {cfg.tls_key!r}: "
                f"cannot load the client certificate ({exc})"
            ) from None
    return ctx


def describe_connect_error(cfg: MqttConfig, exc: OSError) -> str:
    where = f"{cfg.host}:{cfg.port}"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (
            f"TLS handshake with {where} failed: certificate verify failed: {exc.verify_message} "
            f"(is the broker certificate signed by mqtt.tls_ca = {cfg.tls_ca!r}?)"
        )
    if isinstance(exc, ssl.SSLError):
        # OpenSSL's errors carry a reason; an SSLError raised by Python code (or paho) may not
        return f"TLS handshake with {where} failed: {getattr(exc, 'reason', None) or exc}"
    return f"cannot connect to {where}: {exc.strerror or exc}"


def suback_problems(filters: Sequence[str], reasons: Sequence[Any]) -> Tuple[List[str], List[str]]:
    """The filters a SUBACK refused (with the broker's reason) and those granted only QoS 0.

    Only the SUBACK tells either: a refused filter (an ACL) never delivers, a QoS 0 grant keeps
    nothing for an offline client. A SUBACK with fewer codes than filters (a broken broker) leaves
    the rest unanswered: they are refused, not assumed granted."""
    refused: List[str] = []
    qos0: List[str] = []
    for i, topic in enumerate(filters):
        if i >= len(reasons):
            refused.append(f"{topic} (no reason code in the SUBACK)")
        elif reasons[i].is_failure:
            refused.append(f"{topic} ({reasons[i]})")
        elif reasons[i].value == 0:
            qos0.append(topic)
    return refused, qos0

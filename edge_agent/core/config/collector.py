"""The collector's settings (``[collector]`` in collector.toml, or the same as flags), validated.

The collector runs at the far end (a back-office host), not on a board: its own small file, its
own section, so a device config never grows collector keys and vice versa.
"""

from __future__ import annotations

import sys
from typing import Optional
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from edge_agent.core.config.schema import _format_validation_error
from edge_agent.core.messages.mqtt_names import topic_prefix_problem
from edge_agent.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python < 3.11
    import tomli as tomllib


class CollectorConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    broker: str = Field(
        default="mqtt://127.0.0.1:1883",
        description="the broker the devices publish to: mqtt://HOST[:PORT] (1883), or mqtts://HOST[:PORT] "
        "(8883) for TLS with tls_ca/tls_cert/tls_key",
    )
    db: str = Field(
        default="sqlite:////var/lib/edge-collector/fleet.db",
        description="the database: sqlite:///PATH (three slashes and a relative path, four for an "
        "absolute one) or postgresql://user@host/dbname (needs the [collector] extra)",
    )
    prefix: str = Field(default="edge", description="the devices' [mqtt] topic_prefix")
    client_id: str = Field(
        default="edge-collector",
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="fixed MQTT client id: the broker keeps this id's session (and queues its messages) "
        "while the collector is down; distinct for every collector of a group",
    )
    group: str = Field(
        default="",
        max_length=64,
        pattern=r"^[A-Za-z0-9_.-]*$",
        description="shared subscription group ($share/<group>/...): collectors of one group split the "
        'messages; "" = none (one collector, a plain persistent session)',
    )
    session_expiry_s: int = Field(
        default=7 * 86400,
        ge=60,
        le=2**32 - 1,
        description="how long the broker keeps the session, and queues for it, while this collector is away",
    )
    receive_maximum: int = Field(
        default=1000,
        ge=1,
        le=65535,
        description="un-acknowledged messages the broker may have in flight to us (MQTT 5 Receive Maximum)",
    )
    batch_max: int = Field(
        default=500,
        ge=1,
        le=100_000,
        description="MQTT messages per database transaction (each acknowledged only after that commit)",
    )
    keepalive_s: int = Field(default=30, gt=0, le=65535, description="MQTT keepalive, seconds")
    username: Optional[str] = Field(
        default=None, description="MQTT user name; none = anonymous", examples=["collector"]
    )
    password_file: Optional[str] = Field(
        default=None,
        description="file holding the MQTT password (a relative path resolves under systemd's "
        "$CREDENTIALS_DIRECTORY when set); never the password itself in this file",
        examples=["mqtt-password"],
    )
    password_env: str = Field(
        default="EDGE_COLLECTOR_MQTT_PASSWORD",
        description="environment variable holding the MQTT password when password_file is not set",
    )
    tls_ca: Optional[str] = Field(
        default=None,
        description="CA certificate file (PEM) for mqtts://",
        examples=["/etc/edge-collector/ca.pem"],
    )
    tls_cert: Optional[str] = Field(
        default=None,
        description="client certificate file (PEM) for mutual TLS",
        examples=["/etc/edge-collector/collector.pem"],
    )
    tls_key: Optional[str] = Field(
        default=None,
        description="the client certificate's private key file (PEM)",
        examples=["/etc/edge-collector/collector.key"],
    )
    metrics_port: int = Field(
        default=0, ge=0, lt=65536, description="Prometheus text on 127.0.0.1:PORT/metrics; 0 = off"
    )

    @field_validator("broker")
    @classmethod
    def _broker_url(cls, value: str) -> str:
        broker_address(value)
        return value

    @field_validator("db")
    @classmethod
    def _db_url(cls, value: str) -> str:
        if not value.startswith(("sqlite:///", "postgresql://", "postgres://")):
            raise ValueError("expected sqlite:///PATH (4 slashes for an absolute path) or postgresql://...")
        return value

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        problem = topic_prefix_problem(value)
        if problem is not None:
            raise ValueError(f"not a usable MQTT topic prefix: {problem}")
        return value


def broker_address(url: str) -> tuple[str, int, bool]:
    """``(host, port, tls)`` of ``mqtt://HOST[:PORT]`` (1883) or ``mqtts://HOST[:PORT]`` (8883)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{url!r}: {exc}") from None
    if parts.scheme not in ("mqtt", "mqtts") or not parts.hostname or parts.path not in ("", "/"):
        raise ValueError(f"{url!r}: expected mqtt://HOST[:PORT] or mqtts://HOST[:PORT]")
    tls = parts.scheme == "mqtts"
    return parts.hostname, port or (8883 if tls else 1883), tls


def parse_collector_config(text: str, source: str, overrides: dict[str, object]) -> CollectorConfig:
    """The ``[collector]`` table of ``text`` with ``overrides`` (flags given) on top."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    unknown = sorted(set(data) - {"collector"})
    if unknown:
        raise ConfigError(f"{source}: unknown section [{unknown[0]}], a collector file has only [collector]")
    section = data.get("collector", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{source}: collector must be a table ([collector])")
    try:
        return CollectorConfig.model_validate({**section, **overrides})
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(f"{source} [collector]", exc)) from None

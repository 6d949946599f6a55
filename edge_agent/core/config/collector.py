"""The collector's settings (``[collector]`` in collector.toml, or the same as flags), validated.

The collector runs at the far end (a back-office host), not on a board: its own small file, its
own section, so a device config never grows collector keys and vice versa.
"""

from __future__ import annotations

import sys
from typing import Optional
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from edge_agent.core.config.schema import _format_validation_error
from edge_agent.core.messages.mqtt_names import topic_prefix_problem
from edge_agent.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python < 3.11
    import tomli as tomllib


class CollectorConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True)

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
    # a backlog's rounds fill up to batch_max; its per-round cost (the devices upsert, watermarks,
    # the commit) is spread over more rows: store / bare COPY 0.58x at 500, 0.69x at 2000, 0.72x at
    # 5000 (SQLite 0.74x / 0.89x / 0.94x; tests/bench/bench_ingest.py, docs/performance.md); two
    # rounds in flight (the writer's and the next) need receive_maximum >= 2 x batch_max
    receive_maximum: int = Field(
        default=4000,
        ge=1,
        le=65535,
        description="un-acknowledged messages the broker may have in flight to us (MQTT 5 Receive Maximum)",
    )
    batch_max: int = Field(
        default=2000,
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
    db_password_file: Optional[str] = Field(
        default=None,
        description="file holding the PostgreSQL password (a relative path resolves under systemd's "
        "$CREDENTIALS_DIRECTORY when set); the db URL itself may not carry one (it would show in ps); "
        "libpq's PGPASSFILE works too",
        examples=["db-password"],
    )
    inbox_max_mib: int = Field(
        default=64,
        ge=1,
        le=4096,
        description="MiB of received, not yet stored messages held in memory; when full the subscriber "
        "stops reading the socket, so TCP back-pressure holds the broker",
    )
    message_max_kib: int = Field(
        default=16 * 1024,
        ge=64,
        le=16 * 1024,
        description="largest MQTT payload taken (KiB); a larger one is rejected at once, its payload "
        "not kept. At least the devices' [mqtt] batch_max_kib (at most 16384)",
    )
    deliveries_max: int = Field(
        default=3,
        ge=1,
        le=100,
        description="a message whose store failed this many times (for a reason other than the "
        "database being unreachable) is dead-lettered: acknowledged and kept in dead_letters",
    )
    rejected_max: int = Field(
        default=10_000,
        ge=10,
        le=10_000_000,
        description="newest rows kept in the rejected table (and in dead_letters); older ones are "
        "deleted and counted",
    )
    conflicts_max_per_device: int = Field(
        default=1000,
        ge=1,
        le=10_000_000,
        description="conflicting messages (same device, boot, seq; other content) kept per device; "
        "beyond it they are only counted",
    )
    seq_jump_max: int = Field(
        default=1_000_000,
        ge=1_000_000,
        le=2**62,
        description="a seq more than this above the highest the device is known to have reached "
        "(stored or reported in its status) is held as a conflict, not stored as a huge gap",
    )
    enrolled_file: Optional[str] = Field(
        default=None,
        description="JSON file of enrolled devices (written by `edge-agent fleet enroll`); when set, "
        "a message from any other device id is rejected. Re-read when its mtime changes",
        examples=["/etc/edge-collector/enrolled.json"],
    )
    new_devices_max: int = Field(
        default=100,
        ge=1,
        le=1_000_000,
        description="without enrolled_file: new device ids taken per new_devices_interval_s; a "
        "message from one more is rejected (no device row)",
    )
    new_devices_interval_s: int = Field(
        default=3600, ge=1, le=30 * 86400, description="the interval of new_devices_max, seconds"
    )
    log_every: int = Field(
        default=100,
        ge=1,
        le=1_000_000,
        description="refusal log lines: the first of each device, then every Nth with the count",
    )
    history_full_days: float = Field(
        default=7,
        ge=0,
        le=3650,
        description="health history (every status received, `fleet history`): every status is kept "
        "this many days; older ones are thinned to one per device, state and history_bucket_s",
    )
    history_bucket_s: int = Field(
        default=300,
        ge=1,
        le=86400,
        description="health history older than history_full_days: one status kept per device, state "
        "and bucket of this many seconds",
    )
    history_keep_days: float = Field(
        default=90,
        gt=0,
        le=3650,
        description="health history older than this many days is deleted (at least history_full_days)",
    )
    retention_results_days: float = Field(
        default=0,
        ge=0,
        le=36500,
        description="results (detections, sensor readings, every seq'd kind but objects and counts) "
        "older than this many days (by the device's ts) are deleted in batches; 0 = kept for ever",
    )
    retention_objects_days: float = Field(
        default=0, ge=0, le=36500, description="the same for objects messages; 0 = kept for ever"
    )
    retention_counts_days: float = Field(
        default=0,
        ge=0,
        le=36500,
        description="the same for counts messages; 0 = kept for ever (statuses: history_keep_days)",
    )
    maintenance_every_s: int = Field(
        default=60,
        ge=1,
        le=86400,
        description="how often the collector thins and expires its health history and deletes the "
        "messages past their retention_*_days",
    )
    maintenance_batch: int = Field(
        default=5000,
        ge=10,
        le=1_000_000,
        description="rows per maintenance transaction (ingest waits for one batch at most)",
    )
    metrics_devices_max: int = Field(
        default=1000,
        ge=0,
        le=100_000,
        description="devices with per-device series on /metrics (the first by id); bounds the label "
        "cardinality Prometheus stores (edge_agent_collector_devices_known says how many there are)",
    )

    @model_validator(mode="after")
    def _history_ages(self) -> CollectorConfig:
        if self.history_keep_days < self.history_full_days:
            raise ValueError(
                f"history_keep_days = {self.history_keep_days} is less than history_full_days = "
                f"{self.history_full_days}: keep at least what is kept in full"
            )
        return self

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


def db_url_password(url: str) -> bool:
    """Whether a postgresql:// URL holds a password (``user:pw@`` or ``password=`` in the query)."""
    if not url.startswith(("postgresql://", "postgres://")):
        return False
    try:
        parts = urlsplit(url)
        has = parts.password is not None
    except ValueError:
        return False
    return has or "password=" in parts.query.lower()


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
    for where, given in ((f"{source} [collector] db", section.get("db")), ("--db", overrides.get("db"))):
        if isinstance(given, str) and db_url_password(given):  # the URL is not echoed: it holds the secret
            raise ConfigError(
                f"{where}: the database URL carries a password (it would show in ps, logs and shell "
                "history): put it in a file named by db_password_file / --db-password-file, or use "
                "libpq's PGPASSFILE"
            )
    try:
        return CollectorConfig.model_validate({**section, **overrides})
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(f"{source} [collector]", exc)) from None

"""Config sections for what goes out: ``[output]``, ``[queue]``, ``[mqtt]``, ``[health]``, ``[model_update]``.

As in core/config/inputs.py: each key's default and explanation live once, in its ``Field``.
"""

from __future__ import annotations

import ipaddress
from typing import List, Literal, Optional

from pydantic import Field, field_validator, model_validator

from edge_agent.core.config.inputs import Section
from edge_agent.core.messages.mqtt_names import topic_level_problem, topic_prefix_problem
from edge_agent.core.vision.thresholds import Thresholds

MAX_GROUPS = 32  # one subscription each
MAX_GROUP_BYTES = 128

_GATE = Thresholds()  # the update gate's limits default to `edge-agent validate`'s


class MqttConfig(Section):
    enabled: bool = Field(default=True, description="false: results stay in the queue, nothing is sent")
    host: str = Field(default="127.0.0.1", description="the broker's host name or address")
    port: int = Field(default=1883, gt=0, lt=65536, description="the broker's port (TLS usually 8883)")
    topic_prefix: str = Field(
        default="edge",
        description="the first topic level: <prefix>/<device>/detections, .../status, ... (docs/messages.md); "
        "no + # or control characters, no leading $ or /$",
    )
    keepalive_s: int = Field(default=30, gt=0, description="MQTT keepalive interval")
    username: Optional[str] = Field(
        default=None,
        examples=["pi-entrance-01"],
        description="broker user name (unset: connect without credentials)",
    )
    role_usernames: bool = Field(
        default=False,
        description="true (a broker enrolled by `edge-agent fleet enroll`, docs/collector.md): each connection "
        "logs in with a user of its own, username + its role: the sync as <username>, the model receiver as "
        "<username>-model, `doctor` as <username>-doctor (`model push`: <username>, its --wait as "
        "<username>-watch); the broker makes that the client id. On a device: username = [device] id",
    )
    password_file: Optional[str] = Field(
        default=None,
        examples=["mqtt-password"],
        description="a file holding the broker password (never put it in this file); a relative name is "
        "looked up in systemd's $CREDENTIALS_DIRECTORY, where the unit hands over "
        "/etc/edge-agent/mqtt-password as mqtt-password",
    )
    password_env: str = Field(
        default="EDGE_AGENT_MQTT_PASSWORD",
        description="without password_file: the environment variable holding the password",
    )
    tls_ca: Optional[str] = Field(
        default=None,
        examples=["/etc/edge-agent/ca.pem"],
        description="TLS: the CA certificates the broker's certificate must chain to (turns TLS on)",
    )
    tls_cert: Optional[str] = Field(
        default=None,
        examples=["/etc/edge-agent/client.pem"],
        description="TLS client certificate (turns TLS on; system CAs unless tls_ca is set)",
    )
    tls_key: Optional[str] = Field(
        default=None,
        examples=["/etc/edge-agent/client.key"],
        description="the client certificate's private key (unset: it is in tls_cert)",
    )
    inflight: int = Field(
        default=100,
        gt=0,
        description="QoS 1 publishes (a batch counts once) sent and not yet acknowledged (PUBACK) at once",
    )
    newest_first: bool = Field(
        default=False, description="send the newest backlog first (fresh data before history after an outage)"
    )
    rate_limit_per_s: float = Field(
        default=0.0, ge=0, description="publishes per second (a batch counts once); 0 = unlimited"
    )
    reconnect_min_s: float = Field(default=1.0, gt=0, description="the first wait before reconnecting")
    reconnect_max_s: float = Field(default=60.0, gt=0, description="the longest wait between reconnects")
    status_interval_s: float = Field(
        default=60.0,
        gt=0,
        description="seconds between status messages (retained) on <prefix>/<device>/status",
    )
    batch_threshold: int = Field(
        default=0,
        ge=0,
        description="batched, compressed sync (docs/collector.md): while at least this many messages "
        "wait, they go in one zlib JSON Lines message on <prefix>/<device>/batch.zlib, deleted after its "
        "PUBACK; 0 = never (one message per result, lowest latency), 1 = always; needs a batch-aware consumer",
    )
    batch_max_messages: int = Field(
        default=500, gt=0, le=100_000, description="at most this many messages in one batch"
    )
    batch_max_kib: int = Field(default=256, gt=0, le=16_384, description="at most this many KiB in one batch")
    confirm: Literal["puback", "collector"] = Field(
        default="puback",
        description='when a sent result is deleted: "puback" = when the broker acknowledged it (a broker '
        'that drops, loses or wipes what it acknowledged loses it); "collector" = only once the collector '
        "confirms it is in its database (<prefix>/<device>/confirm, retained): the production setting "
        "(docs/queue.md); needs this collector, which publishes the confirmations",
    )
    confirm_timeout_s: float = Field(
        default=60.0,
        ge=1.0,
        le=86_400.0,
        description='with confirm "collector", a result acknowledged by the broker but not confirmed this long '
        "after is sent again (the wait doubles per attempt, at most an hour or this value)",
    )

    @field_validator("topic_prefix")
    @classmethod
    def _valid_topic_prefix(cls, value: str) -> str:
        problem = topic_prefix_problem(value)
        if problem is not None:
            raise ValueError(f"not a usable MQTT topic prefix: {problem}")
        return value


class QueueConfig(Section):
    path: str = Field(default="/var/lib/edge-agent/outbox.db", description="the SQLite outbox file")
    max_messages: int = Field(default=1_000_000, gt=0, description="cap on queued messages")
    max_bytes: int = Field(default=512 * 1024 * 1024, gt=0, description="cap on queued bytes")
    max_age_days: float = Field(default=90.0, gt=0, description="unsent messages older than this are dropped")
    policy: Literal["drop_oldest", "reject_new"] = Field(
        default="drop_oldest",
        description="at a cap (and on a full disk, docs/queue.md): drop the oldest messages, or refuse new ones",
    )
    flush_interval_s: float = Field(
        default=0.2,
        ge=0,
        le=60,
        description="group commit: a kill -9 or power cut loses at most this window of results, seen as a "
        "gap in the message seq (docs/queue.md)",
    )
    flush_batch: int = Field(
        default=100, gt=0, description="group commit: commit at once at this many results"
    )
    reserve_bytes: int = Field(
        default=1 << 20,
        ge=0,
        description="disk headroom kept in <path>.reserve and released on a full disk so deletes and acks "
        "still work; 0 = none (a full disk may trap the backlog), else at least 1 MiB",
    )

    @field_validator("reserve_bytes")
    @classmethod
    def _reserve_big_enough(cls, value: int) -> int:
        if 0 < value < 1 << 20:
            raise ValueError("must be 0 (no reserve) or at least 1048576 (1 MiB)")
        return value


class OutputConfig(Section):
    mode: Literal["event", "every_frame", "objects"] = Field(
        default="event",
        description="event: a result when the set of detections changes, plus a heartbeat; every_frame: "
        "every result; objects: tracked objects, zone/line events and counts (docs/objects.md)",
    )
    heartbeat_s: float = Field(default=60.0, gt=0, description='mode "event": a result at least this often')
    snapshot: bool = Field(
        default=False,
        description="attach a JPEG (base64) to each result; objects mode: the best crop to each ended object",
    )
    snapshot_max_bytes: int = Field(
        default=64 * 1024,
        gt=1024,
        description="a snapshot is re-encoded (lower quality, then smaller) until it fits",
    )
    counts_interval_s: float = Field(
        default=300.0, ge=1, le=86400, description="objects mode: seconds between the per-line/zone counts"
    )


class HealthConfig(Section):
    status_file: str = Field(
        default="/run/edge-agent/status.json",
        description="rewritten every 2 s; read by `edge-agent status`",
    )
    prometheus_port: Optional[int] = Field(
        default=None,
        gt=0,
        lt=65536,
        examples=[9108],
        description="serve Prometheus metrics on <prometheus_bind>:<port>/metrics (unset: off)",
    )
    prometheus_bind: str = Field(
        default="127.0.0.1",
        description="the address /metrics listens on: loopback by default; any other (0.0.0.0, a LAN "
        "address, ::) needs prometheus_token_file",
    )
    prometheus_token_file: Optional[str] = Field(
        default=None,
        examples=["/etc/edge-agent/metrics.token"],
        description="file holding the bearer token every scrape must send (Prometheus: "
        "authorization.credentials_file); required when prometheus_bind is not loopback",
    )

    @field_validator("prometheus_bind")
    @classmethod
    def _an_address(cls, value: str) -> str:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            raise ValueError(f"expected an IP address (127.0.0.1, 0.0.0.0, ::), got {value[:60]!r}") from None
        return value

    @model_validator(mode="after")
    def _token_off_loopback(self) -> HealthConfig:
        if not ipaddress.ip_address(self.prometheus_bind).is_loopback and not self.prometheus_token_file:
            raise ValueError(
                f"prometheus_bind = {self.prometheus_bind} is not loopback: the metrics would be open to the "
                "network; set prometheus_token_file (the scraper's bearer token) or bind 127.0.0.1"
            )
        return self


class ModelUpdateConfig(Section):
    enabled: bool = Field(
        default=True,
        description="the running agent takes model packages (inbox; MQTT when allowed) through the gate "
        "and a trial (docs/model-updates.md)",
    )
    trusted_keys: List[str] = Field(
        default_factory=list,
        description="base64 Ed25519 public keys (`edge-agent model keygen`); set: only packages signed by "
        "one are installed; empty: MQTT delivery stays off and local packages may be unsigned",
    )
    inbox: Optional[str] = Field(
        default=None,
        examples=["/srv/edge-agent/inbox"],
        description="the folder watched for packages (unset: <state_dir>/models/inbox)",
    )
    max_package_mb: float = Field(default=512.0, gt=0, description="larger packages are refused")
    transfer_min_free_mb: float = Field(
        default=64.0,
        ge=0,
        le=1 << 20,
        description="an MQTT transfer stores a chunk only while the state filesystem keeps this much "
        "free (and transfer_min_free_percent, and the queue's reserve_bytes when the outbox is there "
        "too): a transfer never fills the disk the outbox needs",
    )
    transfer_min_free_percent: float = Field(
        default=10.0,
        ge=0,
        le=90,
        description="the transfer floor as a share of the state filesystem's size; the larger of the two counts",
    )
    mqtt: bool = Field(
        default=True,
        description="take packages on <prefix>/<device>/model/... and <prefix>/groups/<group>/model/... "
        "(needs trusted_keys and [mqtt] enabled)",
    )
    groups: List[str] = Field(
        default_factory=list,
        max_length=MAX_GROUPS,
        description='groups whose pushed packages this device takes too, e.g. ["shop-floor"]',
    )
    ring_frames: int = Field(
        default=0,
        ge=0,
        description="recent frames kept on disk for the update gate to compare models on; 0 = off "
        "(frames of a site can be personal data)",
    )
    ring_interval_s: float = Field(default=60.0, gt=0, description="one ring frame at most this often")
    ring_max_age_h: float = Field(default=72.0, gt=0, description="ring frames older than this are deleted")
    min_recall: float = Field(
        default=_GATE.min_recall,
        ge=0,
        le=1,
        description="the gate (as `edge-agent validate`): share of the current model's detections the new "
        "one finds (same class, IoU >= 0.5)",
    )
    min_mean_iou: float = Field(
        default=_GATE.min_mean_iou, ge=0, le=1, description="the gate: mean IoU of the matched detections"
    )
    max_conf_delta: float = Field(
        default=_GATE.max_conf_delta,
        ge=0,
        le=1,
        description="the gate: mean confidence difference of the matched detections",
    )
    min_top1_agreement: float = Field(
        default=_GATE.min_top1_agreement,
        ge=0,
        le=1,
        description="the gate, classifiers: share of crops with the same top-1 class",
    )
    trial_s: float = Field(
        default=600.0,
        ge=0,
        description="after a switch the new model is on trial this long: a detection-rate collapse rolls it back",
    )
    trial_min_frames: int = Field(
        default=30, gt=0, description="the trial judges (and ends) only after this many frames"
    )
    collapse_ratio: float = Field(
        default=0.2,
        ge=0,
        le=1,
        description="rollback when the new model's detections per frame fall below this x the old one's",
    )
    keep_versions: int = Field(
        default=3, ge=2, description="model versions kept on disk, the running one included"
    )

    @field_validator("groups")
    @classmethod
    def _valid_groups(cls, value: List[str]) -> List[str]:
        """Each group is one topic level of ``<prefix>/groups/<group>/model/#``: a ``/`` or a
        wildcard would subscribe to other groups' (or every device's) packages, a control
        character makes the broker drop the receiver."""
        for group in value:
            problem = topic_level_problem(group)
            if problem is None and len(group.encode("utf-8")) > MAX_GROUP_BYTES:
                problem = f"is {len(group.encode('utf-8'))} bytes long, at most {MAX_GROUP_BYTES} allowed"
            if problem is not None:
                raise ValueError(f"group {group!r} is not a usable MQTT topic level: {problem}")
        return value

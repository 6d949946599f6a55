"""Config schema (pure): TOML text in, validated objects out, every error naming its key path.

pydantic with ``extra="forbid"`` makes a typo (``[mqtt] hots = ...``) an error instead of a
silently ignored key, which on a headless board is the difference between "syncs" and "doesn't".
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import List, Literal, Optional, Tuple, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from edge_agent.core.defaults import CONF_THRESHOLD, CROP_PADDING, IOU_THRESHOLD, MAX_DET
from edge_agent.core.mqtt_names import topic_level_problem, topic_prefix_problem
from edge_agent.errors import ConfigError, EdgeAgentError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on 3.9/3.10
    import tomli as tomllib

DEFAULT_CONFIG_PATH = Path("/etc/edge-agent/config.toml")
_DEVICE_ID = re.compile(r"[A-Za-z0-9_.-]+")


# Field annotations use typing.List/Optional, never list[...] / X | None: pydantic evaluates them,
# and this module must import on Python 3.8 (JetPack 4/5).
class _Section(BaseModel):
    # protected_namespaces=(): pydantic < 2.10 (the floor, 2.5) warns on every start that the
    # field ``model_update`` shadows its ``model_`` namespace
    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=())


class DeviceConfig(_Section):
    # the MQTT client id and a topic level: ASCII letters, digits, "_", ".", "-" (so no "+", "#",
    # "/", control characters or leading "$"), at most 64 characters (MQTT 3.1.1 only guarantees
    # 23; mosquitto takes more)
    id: str = Field(default="edge-0", min_length=1, max_length=64)
    # where durable state lives (queue, TensorRT engine cache, status file)
    state_dir: str = "/var/lib/edge-agent"

    @field_validator("id")
    @classmethod
    def _valid_device_id(cls, value: str) -> str:
        problem = topic_level_problem(value)
        if problem is None and not _DEVICE_ID.fullmatch(value):
            problem = "only ASCII letters, digits, '_', '.' and '-' are allowed"
        if problem is not None:
            raise ValueError(f"not a usable device id (MQTT client id and topic level): {problem}")
        return value


class CameraConfig(_Section):
    # int index, /dev/videoN, rtsp:// or http:// URL, GStreamer pipeline ("... ! appsink"),
    # a video file, or a folder of images replayed in name order
    source: Union[int, str] = 0
    loop: bool = False
    width: Optional[int] = Field(default=None, gt=0)
    height: Optional[int] = Field(default=None, gt=0)
    fps: Optional[float] = Field(default=None, gt=0)
    # capture cadence: 0 = as fast as inference goes; otherwise seconds between frames
    interval_s: float = Field(default=0.0, ge=0)
    stall_timeout_s: float = Field(default=10.0, gt=0)
    # every decode path: folder images and HTTP-MJPEG parts larger than this (read from the header)
    # are skipped and counted, never decoded (a 20000x20000 PNG of 1.1 MB would otherwise take
    # 2.45 GB); a video/RTSP/V4L2 source announcing larger frames is not opened, a larger frame skipped
    max_pixels: int = Field(default=40_000_000, gt=0)
    # http(s) MJPEG basic auth: a file with one line "user:password" (systemd LoadCredential=)
    credentials_file: Optional[str] = None
    # RTSP: RTP over "tcp" (no smeared frames on Wi-Fi), "udp", or "auto" = TCP, and UDP when the
    # server answers 461 Unsupported Transport (VLC, several NVRs and cheap cameras offer UDP only)
    rtsp_transport: Literal["tcp", "udp", "auto"] = "auto"
    reconnect_max_s: float = Field(default=30.0, gt=0)


class DetectorConfig(_Section):
    model: str = ""
    labels: Optional[str] = None
    conf_threshold: float = Field(default=CONF_THRESHOLD, ge=0, le=1)
    iou_threshold: float = Field(default=IOU_THRESHOLD, ge=0, le=1)
    max_det: int = Field(default=MAX_DET, gt=0)
    # class names to keep (empty = all)
    classes: List[str] = Field(default_factory=list)
    provider: Optional[str] = None
    threads: Optional[int] = Field(default=None, gt=0)
    # run a detector the load-time guard says cannot produce scores (e.g. INT8 output scale 8)
    allow_broken_model: bool = False
    # the FP32/FP16 model a quantized `model` was made from: TensorRT builds its FP16 engine from it
    # on GPUs without INT8 (Jetson Nano); a model package's manifest may fill it in
    float_model: Optional[str] = None
    # force the output format instead of recognising it from the output shape and metadata
    # (`edge-agent inspect` shows the recognised one): yolov8 | yolov5 | end2end | rtdetr
    output_format: Optional[str] = None

    @field_validator("output_format")
    @classmethod
    def _format_known(cls, value: Optional[str]) -> Optional[str]:
        if value is None or value.strip().lower() in ("", "auto"):
            return None
        from edge_agent.core.formats import check_name  # numpy/cv2 only when the key is set

        try:
            return check_name(value)
        except EdgeAgentError as exc:
            raise ValueError(str(exc)) from None


class ClassifierConfig(_Section):
    model: str
    labels: Optional[str] = None
    # detector classes whose crops are classified (empty = all)
    classes: List[str] = Field(default_factory=list)
    crop_padding: float = Field(default=CROP_PADDING, ge=0, le=1)
    top_k: int = Field(default=1, gt=0)
    provider: Optional[str] = None
    # ultralytics | imagenet | raw | custom "resize=shorter,crop=0.875,scale=1/255,mean=..,std=..,order=RGB";
    # unset: the model's metadata, else a guess that `edge-agent inspect` flags
    preprocess: Optional[str] = None

    @field_validator("preprocess")
    @classmethod
    def _preprocess_parses(cls, value: Optional[str]) -> Optional[str]:
        if value is None or value.strip().lower() in ("", "auto"):
            return value
        from edge_agent.core.preprocess import ClassifierPreprocess
        from edge_agent.core.presets import parse_spec

        try:
            parse_spec(value, ClassifierPreprocess(), "classifier.preprocess")
        except EdgeAgentError as exc:
            raise ValueError(str(exc)) from None
        return value


class SensorConfig(_Section):
    port: str
    baudrate: int = Field(default=9600, gt=0)
    protocol: Literal["jsonl", "kv", "csv", "regex"] = "jsonl"
    # csv: column names in order; regex: a pattern with named groups
    csv_fields: List[str] = Field(default_factory=list)
    regex: Optional[str] = None
    # a reading that triggers capture + inference, e.g. "pir >= 1"
    trigger: Optional[str] = None
    attach_to_results: bool = True
    publish: bool = False

    @model_validator(mode="after")
    def _protocol_and_trigger_parse(self) -> SensorConfig:
        # checked here so `config check` and startup fail on a bad regex/trigger, not the reader thread
        from edge_agent.core.sensor_parse import make_parser, parse_trigger

        try:
            make_parser(self)
            parse_trigger(self.trigger)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return self


class MqttConfig(_Section):
    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(default=1883, gt=0, lt=65536)
    topic_prefix: str = "edge"
    keepalive_s: int = Field(default=30, gt=0)
    username: Optional[str] = None
    # password comes from a file (systemd LoadCredential=) or an env variable, never from the TOML
    password_file: Optional[str] = None
    password_env: str = "EDGE_AGENT_MQTT_PASSWORD"
    tls_ca: Optional[str] = None
    tls_cert: Optional[str] = None
    tls_key: Optional[str] = None
    inflight: int = Field(default=100, gt=0)
    newest_first: bool = False
    rate_limit_per_s: float = Field(default=0.0, ge=0)
    reconnect_min_s: float = Field(default=1.0, gt=0)
    reconnect_max_s: float = Field(default=60.0, gt=0)
    status_interval_s: float = Field(default=60.0, gt=0)
    # batched, compressed sync (core.batch, docs/collector.md): while at least batch_threshold
    # messages wait, up to batch_max_messages / batch_max_kib KiB of them go in ONE zlib JSON Lines
    # message on <prefix>/<device>/batch.zlib, all deleted after its one PUBACK. 0 = never (one
    # message per result, lowest latency: the default), 1 = always. Needs a batch-aware consumer.
    batch_threshold: int = Field(default=0, ge=0)
    batch_max_messages: int = Field(default=500, gt=0, le=100_000)
    batch_max_kib: int = Field(default=256, gt=0, le=16_384)

    @field_validator("topic_prefix")
    @classmethod
    def _valid_topic_prefix(cls, value: str) -> str:
        problem = topic_prefix_problem(value)
        if problem is not None:
            raise ValueError(f"not a usable MQTT topic prefix: {problem}")
        return value


class QueueConfig(_Section):
    path: str = "/var/lib/edge-agent/outbox.db"
    max_messages: int = Field(default=1_000_000, gt=0)
    max_bytes: int = Field(default=512 * 1024 * 1024, gt=0)
    max_age_days: float = Field(default=90.0, gt=0)
    policy: Literal["drop_oldest", "reject_new"] = "drop_oldest"
    # group-commit window: a kill -9 or power cut loses at most the results of this window, and
    # they show as a gap in the message seq (docs/queue.md gives the measured loss per kill -9)
    flush_interval_s: float = Field(default=0.2, ge=0, le=60)
    flush_batch: int = Field(default=100, gt=0)
    # headroom kept in <path>.reserve and released on SQLITE_FULL so deletes/acks still work
    # (docs/queue.md); 0 disables it (a full disk may then trap the backlog), else >= 1 MiB: the
    # WAL of one commit slice plus an autocheckpoint's worth must fit in 3/4 of it
    reserve_bytes: int = Field(default=1 << 20, ge=0)

    @field_validator("reserve_bytes")
    @classmethod
    def _reserve_big_enough(cls, value: int) -> int:
        if 0 < value < 1 << 20:
            raise ValueError("must be 0 (no reserve) or at least 1048576 (1 MiB)")
        return value


class OutputConfig(_Section):
    # objects: tracked objects, zone/line events and interval counts instead of per-frame results
    # (docs/objects.md)
    mode: Literal["event", "every_frame", "objects"] = "event"
    heartbeat_s: float = Field(default=60.0, gt=0)
    snapshot: bool = False
    snapshot_max_bytes: int = Field(default=64 * 1024, gt=1024)
    # objects mode: seconds between the per-line/per-zone counts messages
    counts_interval_s: float = Field(default=300.0, ge=1, le=86400)


# ---- objects mode: [tracker], [[zones]], [[lines]] (docs/objects.md) ---------------------------
_NAME = r"^[^\x00-\x1f\x7f]{1,64}$"  # shown in messages and on frames: no control characters


class TrackerConfig(_Section):
    """``[tracker]``: the ByteTrack-class tracker of objects mode (edge_agent.core.tracker)."""

    high: float = Field(default=0.3, ge=0, le=1)
    low: float = Field(default=0.1, ge=0, le=1)
    new_track: float = Field(default=0.4, ge=0, le=1)
    match_iou: float = Field(default=0.2, gt=0, le=1)
    lost_frames: int = Field(default=30, ge=0, le=10000)
    # true: a track only continues with detections of its own class
    per_class: bool = False
    # first association on IoU x detection score (ByteTrack's MOT17 setting)
    fuse_score: bool = True
    # the point of a box that is in a zone / crosses a line
    anchor: Literal["bottom_center", "center"] = "bottom_center"
    # a track must be seen on this many frames before it is reported ("appeared")
    min_hits: int = Field(default=3, ge=1, le=1000)
    # line hysteresis: the band (fraction of the frame) either side of a line where the side is undecided
    line_margin: float = Field(default=0.02, ge=0, le=0.2)
    # zone hysteresis: consecutive frames outside before an object has left
    zone_exit_frames: int = Field(default=3, ge=1, le=1000)

    @model_validator(mode="after")
    def _ordered(self) -> TrackerConfig:
        if not self.low <= self.high:
            raise ValueError(f"tracker.low = {self.low} must not be above tracker.high = {self.high}")
        return self


class ZoneConfig(_Section):
    name: str = Field(pattern=_NAME)
    # [[x, y], ...] fractions of the frame; a simple (not self-intersecting) polygon
    polygon: List[Tuple[float, float]]
    classes: List[str] = Field(default_factory=list)  # empty = all
    # an object has entered only after this long inside (0: at once)
    min_dwell_s: float = Field(default=0.0, ge=0, le=86400)

    @field_validator("polygon")
    @classmethod
    def _simple_polygon(cls, poly: List[Tuple[float, float]]) -> List[Tuple[float, float]]:
        from edge_agent.core.zones import polygon_problem

        problem = polygon_problem(poly)
        if problem is not None:
            raise ValueError(f"the polygon {problem}")
        return poly


class LineConfig(_Section):
    name: str = Field(pattern=_NAME)
    # [[x1, y1], [x2, y2]] fractions of the frame
    points: List[Tuple[float, float]]
    classes: List[str] = Field(default_factory=list)
    # which side of the direction points[0] -> points[1] (as seen on the image) is "in"
    in_side: Literal["left", "right"] = "right"

    @field_validator("points")
    @classmethod
    def _usable_line(cls, points: List[Tuple[float, float]]) -> List[Tuple[float, float]]:
        from edge_agent.core.zones import line_problem

        problem = line_problem(points)
        if problem is not None:
            raise ValueError(f"the line {problem}")
        return points


class MotionConfig(_Section):
    """``[motion]``: run the detector only on motion (see edge_agent.core.motion)."""

    enabled: bool = False
    # grey-level change (0-255) that counts a pixel as changed
    threshold: int = Field(default=25, ge=1, le=254)
    # the largest changed region must cover this fraction of the frame
    min_area: float = Field(default=0.002, gt=0, lt=1)
    # width the frame is shrunk to before the check (cost ~ width^2)
    width: int = Field(default=160, ge=16, le=1920)
    # background adaptation per checked frame (light changes, shadows)
    alpha: float = Field(default=0.05, gt=0, le=1)
    # more than this fraction of the frame changing at once (lights on, IR switch) = a new scene:
    # relearn the background instead of reporting motion until it adapts (1 = never)
    lightning_threshold: float = Field(default=0.8, gt=0, le=1)
    # polygons ignored by the check, points as [x, y] fractions of the frame (0..1)
    masks: List[List[Tuple[float, float]]] = Field(default_factory=list)
    # the detector still runs at least this often without motion (heartbeat)
    max_idle_s: float = Field(default=60.0, gt=0)
    # ... and on this many frames after motion stops (so a departure is seen)
    frames_after: int = Field(default=5, ge=0)

    @field_validator("masks")
    @classmethod
    def _polygons(cls, masks: list[list[tuple[float, float]]]) -> list[list[tuple[float, float]]]:
        for n, poly in enumerate(masks):
            if len(poly) < 3:
                raise ValueError(f"mask {n} has {len(poly)} points, a polygon needs at least 3")
            for x, y in poly:
                if not (0.0 <= x <= 1.0 and 0.0 <= y <= 1.0):
                    raise ValueError(f"mask {n} point [{x}, {y}] is outside 0..1 (fractions of the frame)")
        return masks


class HealthConfig(_Section):
    status_file: str = "/run/edge-agent/status.json"
    prometheus_port: Optional[int] = Field(default=None, gt=0, lt=65536)


class ModelUpdateConfig(_Section):
    """Model updates (docs/model-updates.md): delivery, signatures, the gate, the trial after a switch."""

    enabled: bool = True
    # base64 Ed25519 public keys; when set, unsigned or badly signed packages are refused
    trusted_keys: List[str] = Field(default_factory=list)
    # watched folder for packages; default <state_dir>/models/inbox
    inbox: Optional[str] = None
    max_package_mb: float = Field(default=512.0, gt=0)
    # MQTT delivery on <prefix>/<device>/model/... and <prefix>/groups/<group>/model/...
    mqtt: bool = True
    groups: List[str] = Field(default_factory=list)
    # the frame ring the gate compares on: off (0) by default, frames of a site can be personal data
    ring_frames: int = Field(default=0, ge=0)
    ring_interval_s: float = Field(default=60.0, gt=0)
    ring_max_age_h: float = Field(default=72.0, gt=0)
    # the gate: the thresholds of `edge-agent validate` (the broken-model guard is always on)
    min_recall: float = Field(default=0.9, ge=0, le=1)
    min_mean_iou: float = Field(default=0.8, ge=0, le=1)
    max_conf_delta: float = Field(default=0.1, ge=0, le=1)
    min_top1_agreement: float = Field(default=0.95, ge=0, le=1)
    # the trial after a switch: rollback on a detection-rate collapse within trial_s
    trial_s: float = Field(default=600.0, ge=0)
    trial_min_frames: int = Field(default=30, gt=0)
    collapse_ratio: float = Field(default=0.2, ge=0, le=1)
    keep_versions: int = Field(default=3, ge=2)


class Config(_Section):
    device: DeviceConfig = Field(default_factory=DeviceConfig)
    camera: CameraConfig = Field(default_factory=CameraConfig)
    detector: DetectorConfig = Field(default_factory=DetectorConfig)
    classifier: Optional[ClassifierConfig] = None
    sensor: Optional[SensorConfig] = None
    mqtt: MqttConfig = Field(default_factory=MqttConfig)
    queue: QueueConfig = Field(default_factory=QueueConfig)
    output: OutputConfig = Field(default_factory=OutputConfig)
    motion: MotionConfig = Field(default_factory=MotionConfig)
    health: HealthConfig = Field(default_factory=HealthConfig)
    model_update: ModelUpdateConfig = Field(default_factory=ModelUpdateConfig)
    tracker: TrackerConfig = Field(default_factory=TrackerConfig)
    zones: List[ZoneConfig] = Field(default_factory=list, max_length=64)
    lines: List[LineConfig] = Field(default_factory=list, max_length=64)

    @model_validator(mode="after")
    def _unique_zone_and_line_names(self) -> Config:
        # the names key the counts messages: two zones called "gate" would merge their counts
        names: dict[str, list[str]] = {
            "zones": [z.name for z in self.zones],
            "lines": [ln.name for ln in self.lines],
        }
        for kind, items in names.items():
            for n, name in enumerate(items):
                if name in items[:n]:
                    raise ValueError(f"{kind}.{n}.name = {name!r} is used twice; names must be unique")
        return self

    @field_validator("classifier", "sensor", mode="before")
    @classmethod
    def _empty_table_is_none(cls, value: object) -> object:
        return None if value == {} else value


def _format_validation_error(source: str, err: ValidationError) -> str:
    lines = []
    for item in err.errors():
        path = ".".join(str(p) for p in item["loc"]) or "<root>"
        if item["type"] == "extra_forbidden":
            lines.append(f"{source}: unknown key '{path}' (not part of the edge-agent config)")
        elif not item["loc"]:  # a whole-config rule (e.g. unique zone names): its message names the key
            msg = item["msg"]
            lines.append(
                f"{source}: {msg[len('Value error, ') :] if msg.startswith('Value error, ') else msg}"
            )
        else:
            shown = repr(item.get("input"))
            if len(shown) > 80:  # a 70 000-character value must not become a 70 000-character line
                shown = f"{shown[:60]}... ({len(shown)} characters)"
            lines.append(f"{source}: {path} = {shown}: {item['msg']}")
    return "; ".join(lines)


def parse_config(text: str, source: str = "<config>") -> Config:
    """Parse TOML text into a validated :class:`Config`; errors name ``source`` and the key path."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(source, exc)) from None


def require_detector(cfg: Config, source: str) -> None:
    """``run`` and ``config check`` need a detector: an empty ``detector.model`` is an error naming
    the key, never a silent fall-back to the demo model on /dev/video0 (that is ``edge-agent demo``)."""
    if not cfg.detector.model.strip():
        raise ConfigError(
            f"{source}: detector.model is not set: give the path of an ONNX detector in [detector] model "
            "(to try the bundled demo models, run `edge-agent demo`)"
        )

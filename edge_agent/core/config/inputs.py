"""Config sections for what goes in: ``[device]``, ``[camera]``, ``[detector]``, ``[classifier]``, ``[sensor]``.

Each key's default and its explanation live once, in its ``Field``: ``edge-agent config example``
is generated from them (core/config/example.py), and a test fails on a key without a description.
Keys without a usable default carry ``examples`` (the example config shows the first one).
"""

from __future__ import annotations

import re
from typing import List, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from edge_agent.core.messages.mqtt_names import topic_level_problem
from edge_agent.core.runtime.providers import MAX_THREADS
from edge_agent.core.vision.defaults import CONF_THRESHOLD, CROP_PADDING, IOU_THRESHOLD, MAX_DET
from edge_agent.errors import ConfigError, EdgeAgentError

_DEVICE_ID = re.compile(r"[A-Za-z0-9_.-]+")


# Field annotations use typing.List/Optional, never list[...] / X | None: pydantic evaluates them,
# and these modules must import on Python 3.8 (JetPack 4/5).
class Section(BaseModel):
    """Base of every config table: unknown keys are errors (a typo must not be silently ignored)."""

    # protected_namespaces=(): pydantic < 2.10 (the floor, 2.5) warns on every start that the
    # field ``model_update`` shadows its ``model_`` namespace
    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=(), strict=True)


class DeviceConfig(Section):
    id: str = Field(
        default="edge-0",
        min_length=1,
        max_length=64,
        description="this device's name: the MQTT client id and the topic level in <prefix>/<id>/...; "
        "ASCII letters, digits, '_', '.', '-' only (no MQTT wildcards or control characters)",
    )
    state_dir: str = Field(
        default="/var/lib/edge-agent",
        description="durable state: installed model versions, TensorRT engine cache, objects-mode counts "
        "(systemd StateDirectory=); the queue is [queue] path",
    )

    max_cameras: int = Field(
        default=8,
        ge=1,
        le=64,
        description="at most this many [[cameras]]: each costs a capture and a prefetch thread and frame "
        "buffers; `config check` refuses more",
    )

    @field_validator("id")
    @classmethod
    def _valid_device_id(cls, value: str) -> str:
        return valid_topic_id(value, "device id (MQTT client id and topic level)")


def valid_topic_id(value: str, what: str) -> str:
    """A device or camera id: one MQTT topic level, and ASCII letters, digits, '_', '.', '-' only."""
    problem = topic_level_problem(value)
    if problem is None and not _DEVICE_ID.fullmatch(value):
        problem = "only ASCII letters, digits, '_', '.' and '-' are allowed"
    if problem is not None:
        raise ValueError(f"not a usable {what}: {problem}")
    return value


class CameraConfig(Section):
    source: Union[int, str] = Field(
        default=0,
        description='a camera index (0) or "/dev/videoN" (V4L2, MJPG), an "rtsp://user:pw@host/path" or '
        '"http://" MJPEG URL (docs/cameras.md), a GStreamer pipeline ending in "! appsink" (Pi CSI: '
        '"libcamerasrc ! video/x-raw,width=1280,height=720 ! videoconvert ! appsink"), '
        "a video file, or a folder of images replayed in name order",
    )
    loop: bool = Field(default=False, description="replay a video file or image folder forever")
    width: Optional[int] = Field(
        default=None, gt=0, examples=[1280], description="V4L2 only: frame width asked of the driver"
    )
    height: Optional[int] = Field(
        default=None, gt=0, examples=[720], description="V4L2 only: frame height asked of the driver"
    )
    fps: Optional[float] = Field(
        default=None,
        gt=0,
        examples=[15],
        description="V4L2: the rate asked of the driver (the log says what it granted); "
        "image folders: the replay rate (unset: as fast as they are taken)",
    )
    interval_s: float = Field(
        default=0.0, ge=0, description="0 = infer as fast as inference goes; else seconds between inferences"
    )
    stall_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="no new frame for this long (or the same bytes over and over): close and reopen the "
        "source, with capped backoff",
    )
    max_pixels: int = Field(
        default=40_000_000,
        gt=0,
        description="larger images and MJPEG parts (read from the header) are skipped and counted, never "
        "decoded; a stream or device announcing larger frames is not opened, a larger frame is skipped",
    )
    credentials_file: Optional[str] = Field(
        default=None,
        examples=["/etc/edge-agent/camera-credentials"],
        description='http(s) MJPEG basic auth: a file with one line "user:password" (kept out of this file)',
    )
    rtsp_transport: Literal["tcp", "udp", "auto"] = Field(
        default="auto",
        description="RTSP: RTP over tcp (no smeared frames on Wi-Fi) or udp; auto = tcp, and udp when the "
        "server answers 461 Unsupported Transport (VLC, some NVRs and cheap cameras)",
    )
    reconnect_max_s: float = Field(
        default=30.0, gt=0, description="the longest wait between two attempts to reopen a lost source"
    )


class DetectorConfig(Section):
    model: str = Field(
        default="",
        examples=["/var/lib/edge-agent/models/detector.onnx"],
        description="the ONNX detector, FP32 or INT8, in one of the formats of output_format; "
        "`run` and `config check` refuse an empty value",
    )
    labels: Optional[str] = Field(
        default=None,
        examples=["/etc/edge-agent/labels.txt"],
        description="class names, one per line or a JSON list/dict; overrides the names in the model",
    )
    conf_threshold: float = Field(
        default=CONF_THRESHOLD, ge=0, le=1, description="a detection's score must be above this"
    )
    iou_threshold: float = Field(
        default=IOU_THRESHOLD, ge=0, le=1, description="class-aware non-maximum suppression IoU"
    )
    max_det: int = Field(default=MAX_DET, gt=0, description="at most this many detections per frame")
    classes: List[str] = Field(
        default_factory=list,
        description='class names (or ids) to keep, e.g. ["person", "car"]; empty = all; '
        "a name the model does not know is an error at start",
    )
    provider: Optional[str] = Field(
        default=None,
        examples=["xnnpack"],
        description="override the per-board onnxruntime provider choice: cpu, xnnpack, cuda, tensorrt "
        "(comma-separated for a chain; CPU is added last)",
    )
    threads: Optional[int] = Field(
        default=None,
        gt=0,
        le=MAX_THREADS,
        examples=[4],
        description=f"intra-op threads, 1 to {MAX_THREADS} (unset: the physical cores on a Pi, onnxruntime's "
        "choice elsewhere)",
    )
    max_batch: int = Field(
        default=4,
        ge=1,
        le=16,
        description="several cameras: up to this many frames ready at once (none waited for) run in one "
        "session.run when the model's batch axis is dynamic, not on TensorRT (measured 0.93-0.96x the "
        "time of separate runs: docs/cameras.md); 1 = one run per frame",
    )
    allow_broken_model: bool = Field(
        default=False,
        description="run a detector the load-time guard says cannot produce scores (e.g. INT8 output scale 8)",
    )
    float_model: Optional[str] = Field(
        default=None,
        examples=["/var/lib/edge-agent/models/detector.fp32.onnx"],
        description="the FP32/FP16 model a quantized `model` was made from: TensorRT builds its FP16 "
        "engine from it on GPUs without INT8 (Jetson Nano); a model package may fill it in",
    )
    output_format: Optional[str] = Field(
        default=None,
        examples=["yolov8"],
        description="force the output format (yolov8, yolov5, end2end, rtdetr; auto = unset) instead of "
        "recognising it from the output shape and metadata (`edge-agent inspect` shows the recognised one)",
    )

    @field_validator("output_format")
    @classmethod
    def _format_known(cls, value: Optional[str]) -> Optional[str]:
        if value is None or value.strip().lower() in ("", "auto"):
            return None
        from edge_agent.core.vision.formats import check_name  # numpy/cv2 only when the key is set

        try:
            return check_name(value)
        except EdgeAgentError as exc:
            raise ValueError(str(exc)) from None


class ClassifierConfig(Section):
    model: str = Field(
        examples=["/var/lib/edge-agent/models/classifier.onnx"],
        description="the ONNX classifier run on detection crops",
    )
    labels: Optional[str] = Field(
        default=None,
        examples=["/etc/edge-agent/classifier-labels.txt"],
        description="class names, one per line or a JSON list/dict; overrides the names in the model",
    )
    classes: List[str] = Field(
        default_factory=list,
        description='detector classes whose crops are classified, e.g. ["person"]; empty = all',
    )
    crop_padding: float = Field(
        default=CROP_PADDING,
        ge=0,
        le=1,
        description="a crop grows by this fraction of the box size on each side",
    )
    top_k: int = Field(default=1, gt=0, description="classes reported per crop")
    provider: Optional[str] = Field(
        default=None,
        examples=["cpu"],
        description="onnxruntime provider for the classifier (unset: the detector's)",
    )
    preprocess: Optional[str] = Field(
        default=None,
        examples=["imagenet"],
        description='ultralytics | imagenet | raw | "resize=shorter,crop=0.875,scale=1/255,mean=..,'
        'std=..,order=RGB"; unset: from the model metadata, else a guess `edge-agent inspect` flags',
    )

    @field_validator("preprocess")
    @classmethod
    def _preprocess_parses(cls, value: Optional[str]) -> Optional[str]:
        if value is None or value.strip().lower() in ("", "auto"):
            return value
        from edge_agent.core.vision.classifier_presets import parse_spec
        from edge_agent.core.vision.preprocess import ClassifierPreprocess

        try:
            parse_spec(value, ClassifierPreprocess(), "classifier.preprocess")
        except EdgeAgentError as exc:
            raise ValueError(str(exc)) from None
        return value


class SensorConfig(Section):
    port: str = Field(
        examples=["/dev/ttyUSB0"], description="serial device or pyserial URL (e.g. socket://host:port)"
    )
    baudrate: int = Field(default=9600, gt=0, description="serial speed")
    protocol: Literal["jsonl", "kv", "csv", "regex"] = Field(
        default="jsonl",
        description="one reading per line: a JSON object, key=value pairs, CSV (with csv_fields) or "
        "a regex (named groups)",
    )
    csv_fields: List[str] = Field(
        default_factory=list, description='protocol "csv": the column names in order, e.g. ["temp", "hum"]'
    )
    regex: Optional[str] = Field(
        default=None,
        examples=["T=(?P<temp>[-0-9.]+)"],
        description='protocol "regex": a pattern whose named groups become the reading\'s keys',
    )
    trigger: Optional[str] = Field(
        default=None,
        examples=["pir >= 1"],
        description='capture + infer when a reading makes "<key> <op> <value>" become true '
        "(op: > >= < <= == !=); with interval_s = 0 the camera then runs only on triggers",
    )
    attach_to_results: bool = Field(
        default=True, description="put the latest readings into every result message"
    )
    publish: bool = Field(
        default=False, description="also queue each reading as a message on <prefix>/<device>/sensors"
    )

    @model_validator(mode="after")
    def _protocol_and_trigger_parse(self) -> SensorConfig:
        # checked here so `config check` and startup fail on a bad regex/trigger, not the reader thread
        from edge_agent.core.sensor.parse import make_parser, parse_trigger

        try:
            make_parser(self)
            parse_trigger(self.trigger)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return self

"""Config schema (pure): TOML text in, validated objects out, every error naming its key path.

pydantic with ``extra="forbid"`` makes a typo (``[mqtt] hots = ...``) an error instead of a
silently ignored key, which on a headless board is the difference between "syncs" and "doesn't".
The sections live in config_sections.py (what goes in), config_delivery.py (what goes out) and
config_scene.py (motion, objects mode); each key's default and description are in its ``Field``,
and ``edge-agent config example`` is generated from them (core/config/example.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

from pydantic import Field, ValidationError, field_validator, model_validator

from edge_agent.core.config.cameras import CameraEntry, scene_problem
from edge_agent.core.config.inputs import (
    CameraConfig,
    ClassifierConfig,
    DetectorConfig,
    DeviceConfig,
    Section,
    SensorConfig,
)
from edge_agent.core.config.outputs import (
    HealthConfig,
    ModelUpdateConfig,
    MqttConfig,
    OutputConfig,
    QueueConfig,
)
from edge_agent.core.config.scene import LineConfig, MotionConfig, TrackerConfig, ZoneConfig
from edge_agent.core.config.sensor_models import SensorModelConfig
from edge_agent.core.config.web import WebConfig
from edge_agent.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on 3.9/3.10
    import tomli as tomllib

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "CameraConfig",
    "CameraEntry",
    "ClassifierConfig",
    "Config",
    "DetectorConfig",
    "DeviceConfig",
    "HealthConfig",
    "LineConfig",
    "ModelUpdateConfig",
    "MotionConfig",
    "MqttConfig",
    "OutputConfig",
    "QueueConfig",
    "Section",
    "SensorConfig",
    "SensorModelConfig",
    "TrackerConfig",
    "WebConfig",
    "ZoneConfig",
    "config_from_data",
    "parse_config",
    "require_detector",
    "toml_data",
]

DEFAULT_CONFIG_PATH = Path("/etc/edge-agent/config.toml")


class Config(Section):
    """The whole file; each field's description heads its section in the example config."""

    device: DeviceConfig = Field(default_factory=DeviceConfig, description="this device")
    camera: CameraConfig = Field(
        default_factory=CameraConfig,
        description="the frame source (docs/agent.md, docs/cameras.md); several: [[cameras]] instead",
    )
    cameras: List[CameraEntry] = Field(
        default_factory=list,
        max_length=64,
        description="several cameras on one model set, each with an id and its own scene (docs/cameras.md "
        '"Several cameras"); replaces [camera]',
    )
    detector: DetectorConfig = Field(default_factory=DetectorConfig, description="the object detector")
    classifier: Optional[ClassifierConfig] = Field(
        default=None, description="optional: classify the crops of some detector classes"
    )
    sensor: Optional[SensorConfig] = Field(
        default=None, description="optional: a serial sensor whose readings join results or trigger capture"
    )
    mqtt: MqttConfig = Field(
        default_factory=MqttConfig, description="the broker everything queued is sent to (QoS 1)"
    )
    queue: QueueConfig = Field(
        default_factory=QueueConfig,
        description="the durable outbox every message waits in until the broker acknowledges it (docs/queue.md)",
    )
    output: OutputConfig = Field(default_factory=OutputConfig, description="which results become messages")
    motion: MotionConfig = Field(
        default_factory=MotionConfig, description="a cheap motion check in front of the detector"
    )
    health: HealthConfig = Field(default_factory=HealthConfig, description="status file and metrics")
    web: WebConfig = Field(
        default_factory=WebConfig,
        description="the device page: live view, counts, events, the zone and line editor, the HTTP API "
        "(docs/web.md)",
    )
    model_update: ModelUpdateConfig = Field(
        default_factory=ModelUpdateConfig,
        description="model updates: delivery, signatures, the gate, the trial after a switch "
        "(docs/model-updates.md)",
    )
    tracker: TrackerConfig = Field(
        default_factory=TrackerConfig,
        description='objects mode ([output] mode = "objects", docs/objects.md): the ByteTrack-class tracker; '
        "the defaults suit most scenes",
    )
    zones: List[ZoneConfig] = Field(
        default_factory=list,
        max_length=64,
        description="objects mode: zones (up to 64) whose entries, exits and dwell are reported and counted",
    )
    lines: List[LineConfig] = Field(
        default_factory=list,
        max_length=64,
        description="objects mode: counting lines (up to 64); crossings are reported and counted in/out",
    )
    sensor_models: List[SensorModelConfig] = Field(
        default_factory=list,
        max_length=16,
        description="optional: ONNX models run on windows of the [sensor]'s readings (docs/sensors.md), "
        "each with its results on <prefix>/<device>/<name>/sensor_results",
    )

    @model_validator(mode="after")
    def _unique_zone_and_line_names(self) -> Config:
        # the names key the counts messages: two zones called "gate" would merge their counts
        # (per camera: [[cameras]] may each have a "gate"; scene_problem checks a camera's whole scene)
        names: dict[str, list[tuple[Optional[str], str]]] = {
            "zones": [(z.camera, z.name) for z in self.zones],
            "lines": [(ln.camera, ln.name) for ln in self.lines],
        }
        for kind, items in names.items():
            for n, (camera, name) in enumerate(items):
                if (camera, name) in items[:n]:
                    raise ValueError(f"{kind}.{n}.name = {name!r} is used twice; names must be unique")
        models = [m.name for m in self.sensor_models]
        for n, name in enumerate(models):
            if name in models[:n]:
                raise ValueError(f"sensor_models.{n}.name = {name!r} is used twice; names must be unique")
        if self.sensor_models and self.sensor is None:
            raise ValueError("sensor_models need a [sensor] (the serial port their readings come from)")
        problem = scene_problem(self, "camera" in self.model_fields_set)
        if problem is not None:
            raise ValueError(problem)
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
        elif not item["loc"] or isinstance(item.get("input"), dict):
            # a rule over a whole config or section (unique zone names, a bind that needs a token):
            # its message names the key; the section's table is not repeated as a Python dict
            msg = item["msg"]
            msg = msg[len("Value error, ") :] if msg.startswith("Value error, ") else msg
            lines.append(f"{source}: [{path}] {msg}" if item["loc"] else f"{source}: {msg}")
        else:
            shown = repr(item.get("input"))
            if len(shown) > 80:  # a 70 000-character value must not become a 70 000-character line
                shown = f"{shown[:60]}... ({len(shown)} characters)"
            lines.append(f"{source}: {path} = {shown}: {item['msg']}")
    return "; ".join(lines)


def parse_config(text: str, source: str = "<config>") -> Config:
    """Parse TOML text into a validated :class:`Config`; errors name ``source`` and the key path."""
    return config_from_data(toml_data(text, source), source)


def toml_data(text: str, source: str = "<config>") -> dict[str, object]:
    """TOML text as a table (ConfigError naming ``source`` when it is not TOML)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None


def config_from_data(data: object, source: str = "<config>") -> Config:
    """A parsed table validated into a :class:`Config` (the same errors as :func:`parse_config`)."""
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

"""Config section ``[[sensor_models]]``: models that run on windows of serial readings.

Each table names a model file and what it reads; what the model's metadata says (channels, window,
hop, layout, mean/std, task, labels) is the default for every key left out, so a model built by
``models/train_sensor.py`` needs only ``name`` and ``model``. The pure windowing is
core/sensor/window.py; the model is read by inference/sensor_model.py.
"""

from __future__ import annotations

from typing import List, Literal, Optional

from pydantic import Field, field_validator, model_validator

from edge_agent.core.config.inputs import Section, valid_topic_id


class SensorModelConfig(Section):
    name: str = Field(
        examples=["activity"],
        min_length=1,
        max_length=64,
        description="this model's name: the topic level in <prefix>/<device>/<name>/sensor_results",
    )
    model: str = Field(examples=["/opt/models/activity.onnx"], description="the ONNX sensor model")
    fields: List[str] = Field(
        default_factory=list,
        description="the reading keys the model takes, in channel order (default: the model's "
        '"channels" metadata)',
    )
    window: Optional[int] = Field(
        default=None,
        ge=2,
        le=100_000,
        examples=[50],
        description='readings per window (default: the model\'s "window")',
    )
    hop: Optional[int] = Field(
        default=None,
        ge=1,
        le=100_000,
        examples=[25],
        description='readings between windows (default: the model\'s "hop")',
    )
    window_s: Optional[float] = Field(
        default=None,
        gt=0,
        examples=[5.0],
        description="the window in seconds instead (needs rate_hz; wins over window)",
    )
    hop_s: Optional[float] = Field(
        default=None,
        gt=0,
        examples=[2.5],
        description="the hop in seconds instead (needs rate_hz; wins over hop)",
    )
    rate_hz: Optional[float] = Field(
        default=None,
        ge=0,
        le=100_000,
        examples=[10.0],
        description="the sensor's reading rate (default: the model's \"rate_hz\"): a reading later than "
        "1.5 periods means readings were lost; 0 never counts any as lost",
    )
    time_field: Optional[str] = Field(
        default=None,
        examples=["t"],
        description="a reading key holding its time in seconds (default: the time the line arrived)",
    )
    layout: Literal["auto", "NCT", "NTC"] = Field(
        default="auto",
        description='"NCT" = [1, channels, time], "NTC" = [1, time, channels]; auto: the model\'s '
        '"layout" metadata, else its input shape',
    )
    mean: List[float] = Field(
        default_factory=list, description='per-channel mean subtracted first (default: the model\'s "mean")'
    )
    std: List[float] = Field(
        default_factory=list, description='per-channel std divided by next (default: the model\'s "std")'
    )
    task: Optional[Literal["classify", "score", "regress"]] = Field(
        default=None,
        examples=["classify"],
        description="classify (labels), score (an anomaly score) or regress (named outputs); default: the "
        'model\'s "task"',
    )
    labels: List[str] = Field(
        default_factory=list, description='classify: the class names (default: the model\'s "labels")'
    )
    threshold: float = Field(
        default=0.0,
        ge=0.0,
        description="classify: a top probability below this is reported as label null; score: a score at "
        "or above this is an anomaly",
    )
    outputs: List[str] = Field(
        default_factory=list, description="regress: the names of the model's output values, in order"
    )
    missing: Literal["hold", "interpolate", "drop"] = Field(
        default="hold",
        description="a window with missing or lost readings: hold the last value, interpolate, or drop it "
        "(counted)",
    )
    max_missing: Optional[int] = Field(
        default=None,
        ge=0,
        examples=[12],
        description="a window with more readings missing than this is dropped as a gap (default: window/4)",
    )
    publish: Literal["every_window", "change"] = Field(
        default="every_window",
        description="a message per window, or only when the label (classify) / anomaly (score) changes",
    )
    trigger_camera: bool = Field(
        default=False,
        description="capture + infer a frame when a window is an anomaly (score) or its label changes "
        "(classify), as [sensor] trigger does",
    )
    max_pending: int = Field(
        default=8,
        ge=1,
        le=1024,
        description="windows waiting for the model at most; a burst beyond this drops the oldest (counted "
        '"busy")',
    )

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return valid_topic_id(value, "sensor model name (a topic level)")

    @model_validator(mode="after")
    def _seconds_need_a_rate(self) -> SensorModelConfig:
        problem = table_problem(self)  # a plain function: mutmut 3 does not mutate decorated methods
        if problem is not None:
            raise ValueError(problem)
        return self


def table_problem(m: SensorModelConfig) -> Optional[str]:
    """The first rule a ``[[sensor_models]]`` table breaks beyond its keys' own, or None."""
    if (m.window_s is not None or m.hop_s is not None) and not m.rate_hz:  # 0 or unset
        return f"sensor_models {m.name!r}: window_s/hop_s need rate_hz (readings per second)"
    if len(set(m.fields)) != len(m.fields):
        return f"sensor_models {m.name!r}: fields {m.fields} name a key twice"
    return None

"""Config sections about the scene: ``[motion]`` and objects mode's ``[tracker]``, ``[[zones]]``, ``[[lines]]``.

As in core/config/inputs.py: each key's default and explanation live once, in its ``Field``.
"""

from __future__ import annotations

from typing import List, Literal, Optional, Tuple

from pydantic import BeforeValidator, Field, field_validator, model_validator
from typing_extensions import Annotated

from edge_agent.core.config.inputs import Section


def _as_tuple(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value


# TOML has no tuples: a point is an array, made a tuple before the strict check (the floats in it
# stay strict). Not ``Strict(False)``: pydantic 2.5 (the floor) cannot apply it to a tuple
Point = Annotated[Tuple[float, float], BeforeValidator(_as_tuple)]

_NAME = r"^[^\x00-\x1f\x7f]{1,64}$"  # shown in messages and on frames: no control characters


class MotionConfig(Section):
    """``[motion]``: run the detector only on motion (see edge_agent.core.camera.motion)."""

    enabled: bool = Field(default=False, description="run the detector only on motion (docs/cameras.md)")
    threshold: int = Field(
        default=25, ge=1, le=254, description="grey-level change (0-255) that counts a pixel as changed"
    )
    min_area: float = Field(
        default=0.002,
        gt=0,
        lt=1,
        description="the largest changed region must cover this fraction of the frame",
    )
    width: int = Field(
        default=160,
        ge=16,
        le=1920,
        description="the frame is shrunk to this width for the check (cost ~ width^2)",
    )
    alpha: float = Field(
        default=0.05,
        gt=0,
        le=1,
        description="background adaptation per checked frame (light changes, shadows)",
    )
    lightning_threshold: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="more than this fraction of the frame changing at once (lights on, IR switch) is a "
        "new scene: the background is relearned instead of reporting motion (1 = never)",
    )
    masks: List[List[Point]] = Field(
        default_factory=list,
        description="polygons the check ignores, points [x, y] as fractions of the frame, e.g. "
        "[[[0.0, 0.0], [0.3, 0.0], [0.3, 0.2]]]",
    )
    max_idle_s: float = Field(
        default=60.0, gt=0, description="the detector still runs at least this often on a still scene"
    )
    frames_after: int = Field(
        default=5, ge=0, description="... and on this many frames after motion stops (so a departure is seen)"
    )

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


class TrackerConfig(Section):
    """``[tracker]``: the ByteTrack-class tracker of objects mode (edge_agent.core.objects.tracker)."""

    high: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="detections scoring at least this take part in the first association",
    )
    low: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="detections between low and high only in the second one, which keeps occluded "
        "objects tracked; none below [detector] conf_threshold arrive, so lower that to use this",
    )
    new_track: float = Field(
        default=0.4, ge=0, le=1, description="a detection that starts a new track must score at least this"
    )
    match_iou: float = Field(
        default=0.2,
        gt=0,
        le=1,
        description="the first association's IoU gate (ByteTrack's cost 1 - IoU <= 0.8)",
    )
    lost_frames: int = Field(
        default=30, ge=0, le=10000, description="frames a lost track is kept so it can be re-found"
    )
    per_class: bool = Field(
        default=False, description="true: a track only continues with detections of its own class"
    )
    fuse_score: bool = Field(
        default=True, description="first association on IoU x detection score (ByteTrack's MOT17 setting)"
    )
    anchor: Literal["bottom_center", "center"] = Field(
        default="bottom_center", description="the point of a box that is in a zone or crosses a line"
    )
    min_hits: int = Field(
        default=3, ge=1, le=1000, description='a track is reported ("appeared") after this many frames'
    )
    line_margin: float = Field(
        default=0.02,
        ge=0,
        le=0.2,
        description="line hysteresis: the band (fraction of the frame) either side of a line where the side "
        "is undecided",
    )
    zone_exit_frames: int = Field(
        default=3,
        ge=1,
        le=1000,
        description="zone hysteresis: consecutive frames outside before an object has left",
    )

    @model_validator(mode="after")
    def _ordered(self) -> TrackerConfig:
        if not self.low <= self.high:
            raise ValueError(f"tracker.low = {self.low} must not be above tracker.high = {self.high}")
        return self


class ZoneConfig(Section):
    name: str = Field(
        pattern=_NAME,
        examples=["waiting"],
        description="names the zone in events and counts: unique, 1-64 characters, no control characters",
    )
    polygon: List[Point] = Field(
        examples=[[(0.1, 0.5), (0.5, 0.5), (0.5, 0.9), (0.1, 0.9)]],
        description="[[x, y], ...] as fractions of the frame (x right, y down): 3 to 64 points, "
        "not self-intersecting",
    )
    classes: List[str] = Field(
        default_factory=list, description="classes whose events and counts this zone makes; empty = all"
    )
    camera: Optional[str] = Field(
        default=None,
        examples=["gate"],
        description="the [[cameras]] id this zone is drawn on (unset: the only camera)",
    )
    min_dwell_s: float = Field(
        default=0.0,
        ge=0,
        le=86400,
        description="an object has entered only after this long inside (0: at once)",
    )

    @field_validator("polygon")
    @classmethod
    def _simple_polygon(cls, poly: List[Tuple[float, float]]) -> List[Tuple[float, float]]:
        from edge_agent.core.objects.zones import polygon_problem

        problem = polygon_problem(poly)
        if problem is not None:
            raise ValueError(f"the polygon {problem}")
        return poly


class LineConfig(Section):
    name: str = Field(
        pattern=_NAME,
        examples=["gate"],
        description="names the line in events and counts: unique, 1-64 characters, no control characters",
    )
    points: List[Point] = Field(
        examples=[[(0.5, 0.0), (0.5, 1.0)]],
        description="[[x1, y1], [x2, y2]] as fractions of the frame (x right, y down)",
    )
    classes: List[str] = Field(
        default_factory=list, description="classes whose crossings this line reports and counts; empty = all"
    )
    camera: Optional[str] = Field(
        default=None,
        examples=["gate"],
        description="the [[cameras]] id this line is drawn on (unset: the only camera)",
    )
    in_side: Literal["left", "right"] = Field(
        default="right",
        description='the side of points[0] -> points[1], as seen on the image, that is "in"',
    )

    @field_validator("points")
    @classmethod
    def _usable_line(cls, points: List[Tuple[float, float]]) -> List[Tuple[float, float]]:
        from edge_agent.core.objects.zones import line_problem

        problem = line_problem(points)
        if problem is not None:
            raise ValueError(f"the line {problem}")
        return points


def tracker_low_warning(mode: str, conf_threshold: float, low: float, high: float) -> Optional[str]:
    """What ``config check`` says when ``[tracker] low`` cannot act: the tracker only sees the
    detector's output, and the detector keeps scores above ``conf_threshold`` only.

    Not fixed by handing the tracker more: detections below the threshold would also reach the
    classifier (a crop each), the update trial's detection rate, the annotations and the NMS, so
    the operator lowers the threshold knowingly (docs/objects.md)."""
    if mode != "objects" or conf_threshold < low or conf_threshold == 0:
        return None
    lost = (
        "has no effect (the second association gets nothing)"
        if conf_threshold >= high
        else f"acts from {conf_threshold:g} only"
    )
    return (
        f"tracker.low = {low:g} {lost}: the tracker only sees detections scoring above "
        f"detector.conf_threshold = {conf_threshold:g}; set conf_threshold below {low:g} to keep "
        "occluded objects tracked (docs/objects.md)"
    )


def objects_classifier_warning(mode: str, has_classifier: bool) -> Optional[str]:
    """Objects mode builds its events from the detector's classes alone, so a ``[classifier]``
    there costs a crop and a model run per detection per frame for nothing (on a Pi, often more
    than the detector). Said, not silently skipped: the update gate still checks the classifier."""
    if mode != "objects" or not has_classifier:
        return None
    return (
        "[classifier] in objects mode: object events and counts use the detector's classes only, "
        "so every crop is classified for nothing; remove [classifier] or use output.mode "
        "event / every_frame (docs/objects.md)"
    )

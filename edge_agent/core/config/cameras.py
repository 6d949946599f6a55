"""``[[cameras]]``: several cameras on one agent, each with its own scene, sharing one model set.

A camera table holds every ``[camera]`` key plus what is per camera in a Frigate config: an ``id``
(a topic level: ``<prefix>/<device>/<id>/<kind>``), a scheduling ``weight``, a ``classes`` filter on
the shared detector's output, an output ``mode``, and its own ``[cameras.motion]``,
``[[cameras.zones]]`` and ``[[cameras.lines]]``. Top-level ``[[zones]]``/``[[lines]]`` may name
their camera instead (``camera = "gate"``), so an old file grows a second camera without moving
its zones. :func:`camera_views` turns the file into one :class:`CameraView` per camera: a
``Config`` that reads as if the file had that camera alone, so every step of a pipeline keeps
reading ``cfg.camera``, ``cfg.motion``, ``cfg.zones`` and ``cfg.output`` as before.

The single ``[camera]`` is one camera called ``default`` whose messages carry no camera field and
keep their topics: existing users see no change unless they write ``[[cameras]]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Literal, NamedTuple, Optional, Sequence, Tuple, Union

from pydantic import Field, field_validator

from edge_agent.core.config.inputs import CameraConfig, Section, valid_topic_id
from edge_agent.core.config.scene import LineConfig, MotionConfig, ZoneConfig

if TYPE_CHECKING:
    from edge_agent.core.config.schema import Config

DEFAULT_CAMERA = "default"  # the id of the single [camera]


class _CameraId(Section):
    id: str = Field(
        min_length=1,
        max_length=64,
        examples=["gate"],
        description="names the camera in messages, topics (<prefix>/<device>/<id>/<kind>), the status and "
        "/metrics: unique; ASCII letters, digits, '_', '.', '-'",
    )

    @field_validator("id")
    @classmethod
    def _valid_id(cls, value: str) -> str:
        from edge_agent.core.messages.cameras import RESERVED_CAMERA_IDS

        if value in RESERVED_CAMERA_IDS:  # <prefix>/<device>/model/... is the model receiver's tree
            raise ValueError(f"{value!r} is reserved (not one of {', '.join(sorted(RESERVED_CAMERA_IDS))})")
        return valid_topic_id(value, "camera id")


class CameraEntry(CameraConfig, _CameraId):  # this base order puts ``id`` first in the example
    """One ``[[cameras]]`` table: ``[camera]``'s keys and what is per camera."""

    weight: int = Field(
        default=1,
        ge=1,
        le=100,
        description="its share of inference when every camera has a frame ready (2 = twice the frames of "
        "a camera of weight 1); a camera with nothing ready never holds up another",
    )
    classes: List[str] = Field(
        default_factory=list,
        description='detector classes kept from this camera\'s detections, e.g. ["car"]; empty = what '
        "[detector] classes keeps; a name the model does not know is an error at start",
    )
    mode: Optional[Literal["event", "every_frame", "objects"]] = Field(
        default=None, examples=["objects"], description="this camera's [output] mode (unset: [output] mode)"
    )
    motion: Optional[MotionConfig] = Field(
        default=None, description="this camera's [motion] (unset: the top-level [motion])"
    )
    zones: List[ZoneConfig] = Field(
        default_factory=list, max_length=64, description="objects mode: this camera's zones (up to 64)"
    )
    lines: List[LineConfig] = Field(
        default_factory=list,
        max_length=64,
        description="objects mode: this camera's counting lines (up to 64)",
    )


class CameraView(NamedTuple):
    """One camera as its pipeline sees the config: ``cfg`` reads as if the file had this camera only."""

    id: str
    named: bool  # from [[cameras]]: its messages carry ``camera`` and its topics the camera level
    cfg: Config
    weight: int
    classes: Sequence[str]


def camera_ids(cfg: Config) -> List[str]:
    return [c.id for c in cfg.cameras] if cfg.cameras else [DEFAULT_CAMERA]


def scene_problem(cfg: Config, given_camera: bool) -> Optional[str]:
    """The first rule a file with cameras breaks, as one line naming the key; None when it holds."""
    if not cfg.cameras:
        for kind, items in _top(cfg):
            for n, item in enumerate(items):
                if item.camera not in (None, DEFAULT_CAMERA):
                    return (
                        f"{kind}.{n}.camera = {item.camera!r} names no camera: there is only [camera] "
                        f"({DEFAULT_CAMERA!r}); add [[cameras]] with id = {item.camera!r}"
                    )
        return None
    if given_camera:
        return (
            "[camera] and [[cameras]] are both set: move [camera]'s keys into a [[cameras]] table with an id"
        )
    ids = camera_ids(cfg)
    if len(ids) > cfg.device.max_cameras:
        return (
            f"cameras: {len(ids)} cameras, more than device.max_cameras = {cfg.device.max_cameras} "
            '(raise it if the board carries them: docs/performance.md "Several cameras" says how to measure)'
        )
    for n, cid in enumerate(ids):
        if cid in ids[:n]:
            return f"cameras.{n}.id = {cid!r} is used twice; camera ids must be unique"
    for kind, items in _top(cfg):
        for n, item in enumerate(items):
            if item.camera is None and len(ids) > 1:
                return (
                    f"{kind}.{n}.camera is not set: with several cameras a top-level {kind[:-1]} names its "
                    f"camera (one of {', '.join(ids)}), or goes into [[cameras.{kind}]]"
                )
            if item.camera is not None and item.camera not in ids:
                return f"{kind}.{n}.camera = {item.camera!r} names no camera (the cameras: {', '.join(ids)})"
    for n, cam in enumerate(cfg.cameras):
        for kind in ("zones", "lines"):
            own: Sequence[Union[ZoneConfig, LineConfig]] = getattr(cam, kind)
            for i, item in enumerate(own):
                if item.camera not in (None, cam.id):
                    return (
                        f"cameras.{n}.{kind}.{i}.camera = {item.camera!r}: a {kind[:-1]} inside camera "
                        f"{cam.id!r} is on that camera (leave camera unset, or move it to the top level)"
                    )
            names = [z.name for z in _scene(cfg, cam, kind)]
            for i, name in enumerate(names):
                if name in names[:i]:
                    return f"cameras.{n} ({cam.id}): {kind[:-1]} name {name!r} is used twice on this camera"
    return None


def _top(cfg: Config) -> List[Tuple[str, Sequence[Union[ZoneConfig, LineConfig]]]]:
    return [("zones", cfg.zones), ("lines", cfg.lines)]


def _scene(cfg: Config, cam: CameraEntry, kind: str) -> List[Union[ZoneConfig, LineConfig]]:
    """A camera's zones (or lines): its own, then the top-level ones naming it (or every
    top-level one when it is the only camera)."""
    own: List[Union[ZoneConfig, LineConfig]] = list(getattr(cam, kind))
    alone = len(cfg.cameras) == 1
    top: Sequence[Union[ZoneConfig, LineConfig]] = getattr(cfg, kind)
    return own + [z for z in top if z.camera == cam.id or (z.camera is None and alone)]


def camera_views(cfg: Config) -> List[CameraView]:
    """One view per camera, in the file's order (the single ``[camera]``: one view, ``cfg`` itself)."""
    if not cfg.cameras:
        return [CameraView(DEFAULT_CAMERA, False, cfg, 1, ())]
    views = []
    base = set(CameraConfig.model_fields)
    for cam in cfg.cameras:
        camera = CameraConfig.model_construct(**{k: getattr(cam, k) for k in base})
        output = cfg.output if cam.mode is None else cfg.output.model_copy(update={"mode": cam.mode})
        view_cfg = cfg.model_copy(
            update={
                "camera": camera,
                "motion": cam.motion if cam.motion is not None else cfg.motion,
                "zones": _scene(cfg, cam, "zones"),
                "lines": _scene(cfg, cam, "lines"),
                "output": output,
            }
        )
        views.append(CameraView(cam.id, True, view_cfg, cam.weight, tuple(cam.classes)))
    return views

"""The camera level as the collector reads it (pure): which camera a message is of, and what
``fleet status`` shows of a device's cameras.

With ``[[cameras]]`` a device publishes a camera's results, objects and counts on
``<prefix>/<device>/<camera>/<kind>`` (core.messages.builders.camera_base) and names the camera in
the body too (``camera``, right after ``device_id``). The two must agree, like ``device_id`` and the
device level: the topic is what the broker ACL vouches for (a device writes only under its own id),
the body is what is stored and what a batch carries (``<prefix>/<device>/batch.zlib`` has no camera
level). So a body whose camera is not the topic's, a camera topic whose body names none, and a
camera that is not a topic level are refused in one line each, and stored nowhere. The single
``[camera]`` sends neither: its rows keep a NULL camera.

The status snapshot's ``cameras`` map is outside data too (the collector stores the snapshot as
sent), so the fleet view bounds it and shows only what has the documented shape.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple, Optional

from edge_agent.core.messages.builders import CAMERA_KINDS

CAMERA_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}\Z")  # the schema's pattern; \Z: no final newline
# camera ids that would put a camera's messages into a tree someone else reads: <p>/<d>/model/#
# is the device's model receiver's (a camera "model" would feed it results)
RESERVED_CAMERA_IDS = ("model",)
MAX_CAMERAS = 64  # the status schema's maxProperties: more are not shown (counted)
UP_STATES = ("streaming",)  # a camera delivering frames; anything else counts as down
DEVICE_UP = ("running", "draining")  # a device in another state has no camera up


class CameraError(ValueError):
    """A camera level or field that cannot be stored; the text names it (one line)."""


def camera_problem(camera: object) -> Optional[str]:
    """Why ``camera`` is not a camera id, or None."""
    if not isinstance(camera, str) or not CAMERA_RE.match(camera):
        return f"camera {repr(camera)[:80]} is not 1-64 of A-Za-z0-9_.-"
    if camera in RESERVED_CAMERA_IDS:
        return f"camera {camera!r} is reserved (<prefix>/<device>/{camera}/ is the model receiver's)"
    return None


def topic_camera(camera: str, kind: str) -> None:
    """The camera level of ``<prefix>/<device>/<camera>/<kind>``: a camera id, before a kind a
    camera makes; CameraError otherwise."""
    problem = camera_problem(camera)
    if problem is not None:
        raise CameraError(problem)
    if kind not in CAMERA_KINDS:
        raise CameraError(f"kind {kind[:80]!r} is not a camera kind ({', '.join(CAMERA_KINDS)})")


def body_camera(body: object, camera: Optional[str]) -> Optional[str]:
    """The camera a message body is of, checked against its topic's camera level ``camera``
    (None: a ``<prefix>/<device>/<kind>`` topic or a batch line, where the body alone says it)."""
    claimed = body.get("camera") if isinstance(body, dict) else None
    if not isinstance(body, dict) or "camera" not in body:
        if camera is not None:
            raise CameraError(f"body names no camera, the topic's is {camera!r}")
        return None
    problem = camera_problem(claimed)
    if problem is not None:
        raise CameraError(problem)
    if camera is not None and claimed != camera:
        raise CameraError(f"camera {str(claimed)!r} is not the topic's camera {camera!r}")
    return str(claimed)


# ---- the fleet view of a status's cameras map ---------------------------------------------------
class CameraRow(NamedTuple):
    device: str
    camera: str
    state: str
    fps_in: Optional[float]
    fps: Optional[float]
    processed: Optional[int]
    frame_age_ms: Optional[float]
    reconnects: Optional[int]
    last_error: Optional[str]


def _num(value: object) -> Optional[float]:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
    return float(value) if ok and abs(float(value)) < 1e15 else None  # type: ignore[arg-type]


def _whole(value: object) -> Optional[int]:
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63
    return value if ok else None  # type: ignore[return-value]


def _text(value: object, limit: int) -> str:
    return "".join(c for c in str(value)[:limit] if c.isprintable())


def camera_rows(device: str, device_state: Optional[str], cameras: object) -> tuple[list[CameraRow], int]:
    """One row per camera of a stored ``cameras`` map (sorted by id, at most :data:`MAX_CAMERAS`,
    entries that are not a camera id and an object left out) and how many were left out. A device
    that is not running (offline, stopped) has every camera's state shown as its own."""
    if not isinstance(cameras, Mapping):
        return [], 0
    good = sorted(k for k, v in cameras.items() if camera_problem(k) is None and isinstance(v, Mapping))
    rows = []
    for cam in good[:MAX_CAMERAS]:
        v: Mapping[str, Any] = cameras[cam]
        state = _text(v.get("state") or "unknown", 32)
        if device_state not in DEVICE_UP:
            state = _text(device_state or "unknown", 32)
        err = v.get("last_error")
        rows.append(
            CameraRow(
                device,
                cam,
                state,
                _num(v.get("fps_in")),
                _num(v.get("fps")),
                _whole(v.get("processed")),
                _num(v.get("frame_age_ms")),
                _whole(v.get("reconnects")),
                None if err is None else _text(err, 200),
            )
        )
    return rows, len(cameras) - len(rows)


def summary(rows: list[CameraRow], left_out: int) -> str:
    """The CAMERAS column: ``3``, ``3 (1 down)``; ``-`` for a device without a cameras map."""
    n = len(rows) + left_out
    if not n:
        return "-"
    down = sum(1 for r in rows if r.state not in UP_STATES) + left_out
    return f"{n} ({down} down)" if down else str(n)

"""Every message body and topic (pure): one builder per message kind, one module for all.

Each builder names every field of its kind, in the order it is published, ``id``/``seq``/``boot``
included: the builder places them (``seq``/``boot`` as :data:`UNSTAMPED` placeholders) and the
outbox, which owns the device sequence, fills them through :func:`stamp` when it stores the
message. So "add a field to the result message" is one keyword argument of
:func:`result_message` plus its line in ``edge_agent/schemas/result.json`` (which refuses unknown
fields, so a field added here alone fails the schema tests). docs/messages.md explains the bodies.

The ``id`` is a uuid hex chosen once, before the message is stored, so a redelivery after a
crash or reconnect carries the same id and consumers can de-duplicate on it.
"""

from __future__ import annotations

import enum
import json
import uuid
from collections.abc import Mapping, MutableMapping
from typing import Any, NamedTuple, Optional, Protocol, Union

from edge_agent.errors import QueueError

SCHEMA_VERSION = 1
_REQUIRED = ("image", "width", "height", "detections")
_DETECTION_KEYS = ("label", "class_id", "confidence", "box")
UNSTAMPED = None  # ``seq``/``boot`` of a built message until the outbox stamps it


class Absent(enum.Enum):
    """A field left out of the message (``None`` is a value some fields carry: JSON null)."""

    ABSENT = 0


ABSENT = Absent.ABSENT


def new_message_id() -> str:
    """A fresh message id (uuid4 hex, 32 chars)."""
    return uuid.uuid4().hex


def _numbers(msg_id: Optional[str]) -> dict[str, Any]:
    """The head every message starts with: schema version, id, and the outbox's two numbers."""
    return {"schema": SCHEMA_VERSION, "id": msg_id or new_message_id(), "seq": UNSTAMPED, "boot": UNSTAMPED}


def _camera(body: MutableMapping[str, Any], camera: Optional[str]) -> None:
    """``camera`` right after ``device_id`` when the config names its cameras (``[[cameras]]``);
    absent for the single ``[camera]``, whose messages stay as they were."""
    if camera is not None:
        body["camera"] = camera


def stamp(body: MutableMapping[str, Any], *, seq: int, boot: int) -> str:
    """The outbox's numbers into the places the builder named; returns the message id.

    Called by ``Outbox.put`` when it stores the message: the sequence is the outbox's (one per
    device, taken under its lock), so the builder cannot know it. A body not made by a builder
    (a test's dict) gets an id and the two numbers appended."""
    if not body.get("id"):
        body["id"] = new_message_id()
    body["seq"], body["boot"] = seq, boot
    return str(body["id"])


def _check_detection(i: int, det: object) -> dict[str, Any]:
    if not isinstance(det, Mapping):
        raise QueueError(f"result message: detections[{i}] is {type(det).__name__}, expected an object")
    missing = [k for k in _DETECTION_KEYS if k not in det]
    if missing:
        raise QueueError(f"result message: detections[{i}] lacks {', '.join(missing)}")
    box = det["box"]
    if not isinstance(box, (list, tuple)) or len(box) != 4:
        raise QueueError(f"result message: detections[{i}].box = {box!r}, expected [x1, y1, x2, y2]")
    out = dict(det)
    out["box"] = [float(v) for v in box]
    out["class_id"] = int(det["class_id"])
    out["confidence"] = float(det["confidence"])
    return out


def result_message(
    result: Mapping[str, Any],
    *,
    device_id: str,
    ts: float,
    msg_id: Optional[str] = None,
    camera: Optional[str] = None,
    frame: Optional[int] = None,
    ts_mono: Optional[float] = None,
    captured_at: Union[float, Absent, None] = ABSENT,
    clock_synced: Union[bool, Absent, None] = ABSENT,
    event: Optional[str] = None,
    models: Optional[Mapping[str, Any]] = None,
    sensor: Union[Mapping[str, Any], Absent, None] = ABSENT,
    snapshot_jpeg_b64: Optional[str] = None,
) -> dict[str, Any]:
    """The ``<prefix>/<device>/detections`` body of one ``infer --json`` result (``result``).

    Every field is named here, in published order; ``edge_agent/schemas/result.json`` describes
    each. The frame's fields (``frame`` .. ``snapshot_jpeg_b64``) are left out when not given
    (``None``, or :data:`ABSENT` for those whose ``None`` is a JSON null: no clock sync known,
    ``attach_to_results`` on but no reading yet). ``msg_id`` may be left out: a fresh one is chosen.
    """
    missing = [k for k in _REQUIRED if k not in result]
    if missing:
        raise QueueError(f"result message: inference result lacks {', '.join(missing)}")
    dets = result["detections"]
    if not isinstance(dets, (list, tuple)):
        raise QueueError(f"result message: detections is {type(dets).__name__}, expected a list")
    body = _numbers(msg_id)
    body["device_id"] = device_id
    _camera(body, camera)
    body["ts"] = float(ts)
    body["image"] = result["image"]
    body["width"] = int(result["width"])
    body["height"] = int(result["height"])
    body["detections"] = [_check_detection(i, d) for i, d in enumerate(dets)]
    body["timings_ms"] = dict(result.get("timings_ms") or {})
    optional: tuple[tuple[str, Any], ...] = (
        ("frame", frame),
        ("ts_mono", ts_mono),
        ("captured_at", captured_at),
        ("clock_synced", clock_synced),
        ("event", event),
        ("models", models),
        ("sensor", sensor),
        ("snapshot_jpeg_b64", snapshot_jpeg_b64),
    )
    for key, value in optional:
        if value is not None and value is not ABSENT:
            body[key] = value
        elif value is None and key in ("captured_at", "clock_synced", "sensor"):
            body[key] = None  # given as JSON null
    return body


def encode(payload: Mapping[str, Any]) -> bytes:
    """Compact JSON (no spaces, UTF-8, no NaN) as stored and published."""
    try:
        return json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise QueueError(f"result message: payload is not JSON-serialisable: {exc}") from None


def sensor_message(
    reading: Mapping[str, Any], *, device_id: str, ts: float, clock_synced: Optional[bool]
) -> dict[str, Any]:
    """The ``<prefix>/<device>/sensors`` body for one parsed reading (``[sensor] publish = true``)."""
    body = _numbers(None)
    body["device_id"] = device_id
    body["ts"] = float(ts)
    body["clock_synced"] = clock_synced
    body["reading"] = dict(reading)
    return body


class SensorOutcomeLike(Protocol):
    """What the sensor result builder reads of inference.sensor_model.SensorOutcome."""

    @property
    def index(self) -> int: ...

    @property
    def task(self) -> str: ...

    @property
    def label(self) -> Optional[str]: ...

    @property
    def confidence(self) -> Optional[float]: ...

    @property
    def probs(self) -> Mapping[str, float]: ...

    @property
    def score(self) -> Optional[float]: ...

    @property
    def anomaly(self) -> Optional[bool]: ...

    @property
    def values(self) -> Mapping[str, float]: ...

    @property
    def infer_ms(self) -> float: ...


def sensor_result_message(
    outcome: SensorOutcomeLike,
    *,
    model: str,
    model_id: str,
    window: int,
    filled: int,
    dropped: Mapping[str, int],
    device_id: str,
    ts: float,
    clock_synced: Optional[bool],
) -> dict[str, Any]:
    """The ``<prefix>/<device>/<model>/sensor_results`` body for one window of a sensor model
    (``outcome``: inference.sensor_model.SensorOutcome); only its task's fields are present."""
    body = _numbers(None)
    body["device_id"] = device_id
    body["ts"] = float(ts)
    body["clock_synced"] = clock_synced
    body["model"] = model
    body["model_id"] = model_id
    body["task"] = outcome.task
    body["window"] = int(outcome.index)
    body["readings"] = int(window)
    body["filled"] = int(filled)
    if outcome.task == "classify":
        body["label"] = outcome.label
        body["confidence"] = outcome.confidence
        body["probs"] = dict(outcome.probs)
    elif outcome.task == "score":
        body["score"] = outcome.score
        body["anomaly"] = outcome.anomaly
    else:
        body["values"] = dict(outcome.values)
    body["infer_ms"] = round(float(outcome.infer_ms), 3)
    body["dropped"] = {str(k): int(v) for k, v in dropped.items()}
    return body


def sensor_result_topic(prefix: str, device_id: str, model: str) -> str:
    """``<prefix>/<device>/<model>/sensor_results``: the model a level above the kind, as a named
    camera is, so the kind stays the last level for batches, the ACL and the collector."""
    return f"{prefix.strip('/')}/{device_id}/{model}/{SENSOR_RESULTS}"


SENSOR_RESULTS = "sensor_results"


def offline_status(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """The last will / goodbye: the latest status snapshot, same shape, with ``state = "offline"``."""
    body = dict(snapshot)
    body["state"] = "offline"
    return body


class Topics(NamedTuple):
    detections: str
    status: str
    sensors: str


def topics(prefix: str, device_id: str) -> Topics:
    """Every topic a device publishes on: ``<prefix>/<device>/{detections,status,sensors}``."""
    base = f"{prefix.strip('/')}/{device_id}"
    return Topics(f"{base}/detections", f"{base}/status", f"{base}/sensors")


# the kinds a camera makes; with [[cameras]] they are published one level deeper, under the camera
CAMERA_KINDS = ("detections", "objects", "counts")


def camera_base(prefix: str, device_id: str, camera: Optional[str]) -> str:
    """Where a camera's messages go: ``<prefix>/<device>/<camera>`` for a named camera
    (``[[cameras]]``), ``<prefix>/<device>`` for the single ``[camera]`` (unchanged topics).

    The camera comes before the kind, as in Frigate's ``frigate/<camera>/<object>``: the kind stays
    the last level (batches, the broker ACL and the collector read it there), one camera is one
    subscription (``<p>/<d>/gate/#``) and one kind of every camera too (``<p>/+/+/objects``)."""
    base = f"{prefix.strip('/')}/{device_id}"
    return base if camera is None else f"{base}/{camera}"


# an object event's fields after the head, in published order (schemas/object.json)
OBJECT_EVENT_FIELDS = (
    "event",
    "object_id",
    "label",
    "confidence",
    "box",
    "zone",
    "dwell_s",
    "line",
    "direction",
    "duration_s",
    "first_seen",
    "last_seen",
    "classes",
    "best_confidence",
    "best_box",
)


def object_message(
    event: Mapping[str, Any],
    *,
    device_id: str,
    ts: float,
    captured_at: float,
    frame: Optional[int] = None,
    snapshot_jpeg_b64: Optional[str] = None,
    camera: Optional[str] = None,
) -> dict[str, Any]:
    """The ``<prefix>/<device>/objects`` body of one object event (``[output] mode = "objects"``).

    ``event`` comes from :class:`edge_agent.core.objects.lifecycle.ObjectEvents`; its fields are those of
    :data:`OBJECT_EVENT_FIELDS` (an unknown one is a programming error, refused here rather than
    published); keys starting with ``_`` are the app's (e.g. the best crop), never published."""
    unknown = [k for k in event if not k.startswith("_") and k not in OBJECT_EVENT_FIELDS]
    if unknown:
        raise QueueError(f"object message: unknown event field(s) {', '.join(sorted(unknown))}")
    body = _numbers(None)
    body["device_id"] = device_id
    _camera(body, camera)
    body["ts"] = float(ts)
    body.update((k, event[k]) for k in OBJECT_EVENT_FIELDS if k in event)
    body["captured_at"] = captured_at
    if frame is not None:
        body["frame"] = frame
    if snapshot_jpeg_b64 is not None:
        body["snapshot_jpeg_b64"] = snapshot_jpeg_b64
    return body


def counts_message(
    counts: Mapping[str, Any],
    *,
    device_id: str,
    ts: float,
    interval_s: float,
    camera: Optional[str] = None,
) -> dict[str, Any]:
    """The ``<prefix>/<device>/counts`` body: one interval's counts per line and zone, with totals
    (``counts`` from :meth:`edge_agent.core.objects.lifecycle.ObjectEvents.counts_due`)."""
    body = _numbers(None)
    body["device_id"] = device_id
    _camera(body, camera)
    body["ts"] = float(ts)
    body["interval_s"] = float(interval_s)
    body["from"] = counts["from"]
    body["to"] = counts["to"]
    body["lines"] = counts["lines"]
    body["zones"] = counts["zones"]
    return body


def object_topics(prefix: str, device_id: str, camera: Optional[str] = None) -> tuple[str, str]:
    """Objects mode: ``<base>/objects`` (events) and ``<base>/counts`` (:func:`camera_base`)."""
    base = camera_base(prefix, device_id, camera)
    return f"{base}/objects", f"{base}/counts"

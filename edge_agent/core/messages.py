"""Every message body and topic (pure): result, sensor reading and status; one module for all.

The JSON Schemas in ``edge_agent/schemas/`` describe these bodies; docs/messages.md explains them.

One schema for every consumer: ``{"schema": 1, "id", "device_id", "ts", "image", "width",
"height", "detections", "timings_ms"}`` with detections exactly as ``infer --json`` prints them.
The ``id`` is a uuid hex chosen once, before the message is stored, so a redelivery after a
crash or reconnect carries the same id and consumers can de-duplicate on it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any, NamedTuple, Optional

from edge_agent.errors import QueueError

SCHEMA_VERSION = 1
_REQUIRED = ("image", "width", "height", "detections")
_DETECTION_KEYS = ("label", "class_id", "confidence", "box")


def new_message_id() -> str:
    """A fresh message id (uuid4 hex, 32 chars)."""
    return uuid.uuid4().hex


def _check_detection(i: int, det: Any) -> dict[str, Any]:
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
    extra: Optional[Mapping[str, Any]] = None,
) -> dict[str, Any]:
    """Build the message body from one ``infer --json`` result.

    ``msg_id`` may be left out: ``Outbox.put`` then assigns one. ``extra`` (e.g. sensor readings,
    classifier output) is merged in but may not overwrite the schema keys.
    """
    missing = [k for k in _REQUIRED if k not in result]
    if missing:
        raise QueueError(f"result message: inference result lacks {', '.join(missing)}")
    dets = result["detections"]
    if not isinstance(dets, (list, tuple)):
        raise QueueError(f"result message: detections is {type(dets).__name__}, expected a list")
    body: dict[str, Any] = {"schema": SCHEMA_VERSION}
    if msg_id is not None:
        body["id"] = msg_id
    body["device_id"] = device_id
    body["ts"] = float(ts)
    body["image"] = result["image"]
    body["width"] = int(result["width"])
    body["height"] = int(result["height"])
    body["detections"] = [_check_detection(i, d) for i, d in enumerate(dets)]
    body["timings_ms"] = dict(result.get("timings_ms") or {})
    for key, value in (extra or {}).items():
        if key in body:
            raise QueueError(f"result message: extra field {key!r} would overwrite a schema field")
        body[key] = value
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
    return {
        "schema": SCHEMA_VERSION,
        "device_id": device_id,
        "ts": float(ts),
        "clock_synced": clock_synced,
        "reading": dict(reading),
    }


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


def object_message(
    event: Mapping[str, Any], *, device_id: str, ts: float, extra: Mapping[str, Any]
) -> dict[str, Any]:
    """The ``<prefix>/<device>/objects`` body of one object event (``[output] mode = "objects"``).

    ``event`` comes from :class:`edge_agent.core.objects.ObjectEvents`; keys starting with ``_`` are
    the app's (e.g. the best crop) and never part of a message."""
    body: dict[str, Any] = {"schema": SCHEMA_VERSION, "device_id": device_id, "ts": float(ts)}
    body.update((k, v) for k, v in event.items() if not k.startswith("_"))
    body.update(extra)
    return body


def counts_message(
    counts: Mapping[str, Any], *, device_id: str, ts: float, interval_s: float
) -> dict[str, Any]:
    """The ``<prefix>/<device>/counts`` body: one interval's counts per line and zone, with totals."""
    return {
        "schema": SCHEMA_VERSION,
        "device_id": device_id,
        "ts": float(ts),
        "interval_s": float(interval_s),
        **counts,
    }


def object_topics(prefix: str, device_id: str) -> tuple[str, str]:
    """Objects mode: ``<prefix>/<device>/objects`` (events) and ``<prefix>/<device>/counts``."""
    base = f"{prefix.strip('/')}/{device_id}"
    return f"{base}/objects", f"{base}/counts"

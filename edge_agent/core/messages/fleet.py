"""What the collector makes of one MQTT message, and what a gap in a device's seq means (pure).

Every topic under ``<prefix>/<device>/<kind>`` is taken, and ``<prefix>/<device>/<camera>/<kind>``
for the kinds a camera makes (core.messages.cameras: the camera level and the body's ``camera``
must agree): a message with ``seq`` and ``boot``
(results, sensor readings, and any kind added later that goes through the outbox) becomes a
:class:`Record` keyed ``(device, boot, seq)``; a status snapshot (also the last will) becomes a
:class:`DeviceStatus`; anything else of a known shape is kept as an event; a batch
(``batch.zlib``, core.batch) becomes many records. Everything here meets outside data, so every
field is bounded and checked and a bad message raises :class:`IngestError` with one line that
names it (the collector stores that line, acknowledges the message, and goes on).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Optional

from edge_agent.core.messages.batch import BATCH_KIND, KIND_RE, BatchError, unpack
from edge_agent.core.messages.body import MAX_DEPTH as MAX_DEPTH
from edge_agent.core.messages.body import IngestError as IngestError
from edge_agent.core.messages.body import depth as depth
from edge_agent.core.messages.body import json_text, loads_as_sent
from edge_agent.core.messages.body import safe_text as safe_text
from edge_agent.core.messages.builders import CAMERA_KINDS, SENSOR_RESULTS
from edge_agent.core.messages.cameras import CameraError, body_camera, camera_problem, topic_camera
from edge_agent.core.messages.health_history import Health, health, model_of

DEVICE_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}\Z")  # \Z: "$" also matches before a final newline
MSG_ID_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}\Z")
MAX_SEQ = 2**62
MAX_BOOT = 2**31
MAX_PAYLOAD = 16 * 1024 * 1024
TS_MAX = 1e11  # year 5138: anything later is not a clock reading
STATUS_KIND = "status"
LOSS_COUNTERS = ("dropped", "expired", "rejected", "lost", "crashes", "seq_skipped", "salvaged")


class Record(NamedTuple):
    device: str
    boot: int
    seq: int
    kind: str
    msg_id: Optional[str]
    time: float  # the device's ts (or the receive time when it has none)
    body: str  # compact JSON
    camera: Optional[str] = None  # [[cameras]]: the camera's id (topic level and body); else None


class DeviceStatus(NamedTuple):
    device: str
    state: str
    ts: float  # the device's ts, clamped to the receive time (a future ts must not pin a row)
    version: str
    model_version: str
    backlog: int
    counters: dict[str, int]  # LOSS_COUNTERS from the snapshot's queue block
    disk_full: bool
    body: str
    # the order of statuses (boot, link, offline, status_seq): None for an old agent (then by ts)
    order: Optional[tuple[int, int, int, int]] = None
    seq: int = 0  # the outbox's current seq as the device reports it (queue.seq)
    health: Optional[Health] = None  # its health history row (core.messages.health_history)


class Event(NamedTuple):
    device: str
    kind: str
    body: str


class Parsed(NamedTuple):
    records: list[Record]
    status: Optional[DeviceStatus]
    event: Optional[Event]


def subscriptions(prefix: str, group: Optional[str]) -> list[str]:
    """The topic filters: every one-level kind under every device, and every camera kind one level
    deeper (``<p>/+/+/objects``: one filter per kind, so model transfers, which go *to* devices on
    ``<p>/<d>/model/...``, are not matched), each shared by ``group`` when given."""
    p = prefix.strip("/")
    filters = [f"{p}/+/+"] + [f"{p}/+/+/{k}" for k in (*CAMERA_KINDS, SENSOR_RESULTS)]
    return [f"$share/{group}/{f}" for f in filters] if group else filters


# a fleet's topics repeat: 2.5 of a result's 8.8 us of parse was this (a refusal is not kept, and
# at most 4096 topics are: ids made up by a flood of valid topics only push out older ones)
@functools.lru_cache(maxsize=4096)
def split_topic(prefix: str, topic: str) -> tuple[str, str, Optional[str]]:
    """``(device, kind, camera)`` of ``<prefix>/<device>/<kind>`` (camera None) or of
    ``<prefix>/<device>/<camera>/<kind>`` (a camera kind only); IngestError otherwise."""
    head = prefix.strip("/") + "/"
    if not topic.startswith(head):
        raise IngestError(f"topic {topic[:200]!r}: not under the prefix {prefix!r}")
    parts = topic[len(head) :].split("/")
    if len(parts) not in (2, 3):
        raise IngestError(
            f"topic {topic[:200]!r}: expected {head}<device>/<kind> or {head}<device>/<camera>/<kind>"
        )
    device, kind = parts[0], parts[-1]
    if not DEVICE_RE.match(device):
        raise IngestError(f"topic {topic[:200]!r}: device id {device[:80]!r} is not 1-64 of A-Za-z0-9_.-")
    if not KIND_RE.match(kind):
        raise IngestError(f"topic {topic[:200]!r}: kind {kind[:80]!r} is not a message kind")
    if len(parts) == 2:
        return device, kind, None
    if kind == SENSOR_RESULTS:  # <p>/<d>/<model>/sensor_results: a sensor model's level, not a camera
        problem = camera_problem(parts[1])
        if problem is not None:
            raise IngestError(f"topic {topic[:200]!r}: sensor model {problem[len('camera ') :]}")
        return device, kind, None
    try:
        topic_camera(parts[1], kind)
    except CameraError as exc:
        raise IngestError(f"topic {topic[:200]!r}: {exc}") from None
    return device, kind, parts[1]


def _int(body: Mapping[str, Any], key: str, lo: int, hi: int, where: str) -> int:
    value = body.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise IngestError(f"{where}: {key} = {repr(value)[:40]}, expected an integer {lo}..{hi}")
    return value


def _ts(body: Mapping[str, Any], fallback: float) -> float:
    value = body.get("ts")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        ts = float(value)
        if math.isfinite(ts) and 0 <= ts <= TS_MAX:
            return ts
    return fallback


def _camera_of(body: object, camera: Optional[str], where: str) -> Optional[str]:
    try:
        return body_camera(body, camera)
    except CameraError as exc:
        raise IngestError(f"{where}: {exc}") from None


def record(
    device: str,
    kind: str,
    body: object,
    received: float,
    where: str,
    camera: Optional[str] = None,
    as_sent: Optional[str] = None,
) -> Record:
    """One sequenced message; its ``device_id`` (when present) must be the topic's device, its
    ``camera`` the topic's camera level (``camera``; None: the body's own, if a camera id).
    ``as_sent``: the body's text as received, stored as is (:func:`~edge_agent.core.messages.body.loads_as_sent` checked it)."""
    if not isinstance(body, dict):
        raise IngestError(f"{where}: body is {type(body).__name__}, expected an object")
    claimed = body.get("device_id", device)
    if claimed != device:
        raise IngestError(f"{where}: device_id {str(claimed)[:80]!r} is not the topic's device {device!r}")
    cam = _camera_of(body, camera, where)
    seq = _int(body, "seq", 1, MAX_SEQ, where)
    boot = _int(body, "boot", 0, MAX_BOOT, where)
    msg_id = body.get("id")
    if msg_id is not None and not (isinstance(msg_id, str) and MSG_ID_RE.match(msg_id)):
        raise IngestError(f"{where}: id {str(msg_id)[:80]!r} is not 1-64 of A-Za-z0-9_.:-")
    text = as_sent if as_sent is not None else json_text(body, where)
    return Record(device, boot, seq, kind, msg_id, _ts(body, received), text, cam)


def _text(value: object, limit: int = 128) -> str:
    s = "" if value is None else str(value)
    return "".join(c for c in s[:limit] if c.isprintable())


def _count(block: Mapping[str, Any], key: str) -> int:
    value = block.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return max(0, min(value, MAX_SEQ))


def device_status(device: str, body: object, received: float, where: str) -> DeviceStatus:
    """The device-table fields of a status snapshot (core.status) or last will."""
    if not isinstance(body, dict):
        raise IngestError(f"{where}: body is {type(body).__name__}, expected an object")
    if body.get("device_id", device) != device:
        raise IngestError(f"{where}: device_id {str(body.get('device_id'))[:80]!r} is not {device!r}")
    queue = body.get("queue") if isinstance(body.get("queue"), dict) else {}
    assert isinstance(queue, dict)
    state = _text(body.get("state"), 32) or "unknown"
    return DeviceStatus(
        device=device,
        state=state,
        ts=min(_ts(body, received), received),
        version=_text(body.get("version"), 64),
        model_version=_text(model_version(body), 128),
        backlog=_count(queue, "pending"),
        counters={k: _count(queue, k) for k in LOSS_COUNTERS},
        disk_full=queue.get("disk_full") is True,
        body=json_text(body, where),
        order=status_order(body, queue, state),
        seq=_count(queue, "seq"),
        health=health(body),
    )


def _whole(value: object, hi: int) -> Optional[int]:
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= hi
    return value if ok else None  # type: ignore[return-value]


def status_order(
    body: Mapping[str, Any], queue: Mapping[str, Any], state: str
) -> Optional[tuple[int, int, int, int]]:
    """``(boot, link, offline, status_seq)``: which status of a device is the newest, without its
    wall clock (a forged ts of 9e10 pinned a row; a clock stepped back 30 days froze one). The
    device's MQTT sync stamps ``link`` (the connection a status goes out on; the last will is
    stamped for the connection it is set on, at its CONNECT) and ``status_seq`` (+1 per status of
    the boot), so the will of a connection beats every status sent on it (offline = 1 > 0) and
    loses to the first of the next connection. None (an old agent): ordered by ts, as before."""
    boot = _whole(queue.get("boot"), MAX_BOOT)
    link = _whole(body.get("link"), MAX_SEQ)
    counter = _whole(body.get("status_seq"), MAX_SEQ)
    if boot is None or link is None or counter is None:
        return None
    return (boot, link, 1 if state == "offline" else 0, counter)


def model_version(body: Mapping[str, Any]) -> str:
    """The installed model version (model updates) or else the detector's model id; never the
    text ``None`` (an agent on its config's model reports ``model_update.current.id = null``)."""
    return model_of(body)[0]


def parse(prefix: str, topic: str, payload: bytes, received: float) -> Parsed:
    """Everything one MQTT message holds; IngestError for anything that cannot be stored."""
    device, kind, camera = split_topic(prefix, topic)
    where = f"{topic[:200]}"
    if len(payload) > MAX_PAYLOAD:
        raise IngestError(f"{where}: {len(payload)} bytes, at most {MAX_PAYLOAD} taken")
    if kind == BATCH_KIND:
        try:
            lines = unpack(payload)
        except (BatchError, RecursionError) as exc:
            raise IngestError(f"{where}: {str(exc)[:200]}") from None
        for i, (_, b) in enumerate(lines):
            if depth(b) > MAX_DEPTH:
                raise IngestError(f"{where} line {i + 1}: JSON nested deeper than {MAX_DEPTH}")
        return Parsed(
            [record(device, k, b, received, f"{where} line {i + 1}") for i, (k, b) in enumerate(lines)],
            None,
            None,
        )
    body, as_sent = loads_as_sent(payload, where)
    if kind == STATUS_KIND:
        return Parsed([], device_status(device, body, received, where), None)
    if isinstance(body, dict) and "seq" in body:  # record() checks the camera (once: 1.3 us a body)
        return Parsed([record(device, kind, body, received, where, camera, as_sent)], None, None)
    _camera_of(body, camera, where)  # a camera topic's event too names its camera
    return Parsed([], None, Event(device, kind, json_text(body, where)))


# ---- gaps ---------------------------------------------------------------------------------------
class Gap(NamedTuple):
    first: int
    last: int
    boot_before: Optional[int]
    boot_after: int
    reason: str
    reported: bool  # the device's own counters account for a loss of this kind


def explain(rows: Sequence[tuple[int, int, Optional[int], int]], counters: Mapping[str, int]) -> list[Gap]:
    """Gaps from the ``gaps`` view's rows ``(first, last, boot_before, boot_after)`` and the
    device's last reported loss counters (status ``queue`` block).

    A gap at a change of boot is the crash window (the device counts it in ``crashes`` /
    ``seq_skipped``); a gap within one boot is a drop on the device (``dropped``, ``expired``,
    ``rejected``: full disk or limits; ``lost``: salvage) -- or, if the device reports none,
    messages not received (yet): still queued, in flight, or lost between broker and here.
    """
    crash = counters.get("crashes", 0) > 0 or counters.get("seq_skipped", 0) > 0
    drops = {k: counters.get(k, 0) for k in ("dropped", "expired", "rejected", "lost") if counters.get(k, 0)}
    out = []
    for first, last, before, after in rows:
        if before is None:
            reason, reported = "before the first message received", False
        elif before != after:
            if crash:
                reason = (
                    f"crash window: boot {before} -> {after} (device reports "
                    f"{counters.get('crashes', 0)} crashes, {counters.get('seq_skipped', 0)} seq skipped)"
                )
                reported = True
            else:
                reason, reported = f"boot {before} -> {after}, no crash reported: not received", False
        elif drops:
            told = ", ".join(f"{k} {v}" for k, v in drops.items())
            reason, reported = f"dropped on the device (device reports {told})", True
        else:
            reason, reported = "not received (still queued, in flight, or lost after the broker)", False
        out.append(Gap(int(first), int(last), before, int(after), reason, reported))
    return out

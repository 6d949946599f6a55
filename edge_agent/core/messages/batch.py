"""Batched, compressed sync messages (pure): many outbox rows in one MQTT message.

Topic ``<prefix>/<device>/batch.zlib``; body: zlib-compressed UTF-8 JSON Lines, one line per
message, ``["<kind>", <body>]`` where ``kind`` is the last level of the row's own topic
(``detections``, ``sensors``...) and ``body`` the exact JSON the row holds. The broker acks the
batch as one message, so the device deletes all of its rows after that one PUBACK; a batch that
is never acknowledged is sent again whole (same ids, seqs), and the far end stays idempotent.

Why zlib and JSON Lines: both are in every standard library (Python 3.8 on the device, any
language at the far end), results are repetitive JSON (keys, labels) that compresses 4-8x, and a
line-per-result body keeps every result's bytes unchanged.

The unpacker meets outside data: it bounds the inflated size (a zip bomb inflates 1000x), the line
count, and every line's shape before anything is stored.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Sequence
from typing import Any, NamedTuple

BATCH_KIND = "batch.zlib"
# one topic level of a message kind: what the agent publishes (detections, sensors, status, ...)
KIND_RE = re.compile(r"^[a-z][a-z0-9_.-]{0,31}\Z")  # \Z, not "$": no final newline
MAX_INFLATED = 64 * 1024 * 1024
MAX_LINES = 100_000
# zlib level 1: 3x the speed of the default 6 on result JSON Lines for ~13 % more bytes (measured
# by tests/bench/bench_batch_sync.py; both far under the 40 % of unbatched bytes): on the board
# the compression was a third of the batched drain's CPU time
ZLIB_LEVEL = 1


class BatchError(ValueError):
    """A batch that cannot be unpacked; the message names the reason."""


class Packed(NamedTuple):
    payload: bytes
    rows: int  # how many of the given rows are in the payload (the rest did not fit)
    raw_bytes: int  # JSON Lines size before compression


def batch_topic(prefix: str, device_id: str) -> str:
    """``<prefix>/<device>/batch.zlib``: the encoding is in the topic, so no MQTT 5 needed."""
    return f"{prefix.strip('/')}/{device_id}/{BATCH_KIND}"


def kind_of(topic: str) -> str:
    """The kind of a device topic ``<prefix>/<device>/<kind>``: its last level."""
    return topic.rsplit("/", 1)[-1]


def pack(rows: Sequence[tuple[str, bytes]], max_bytes: int, level: int = ZLIB_LEVEL) -> Packed:
    """Pack ``(kind, json body)`` rows, oldest first, into one batch of at most ``max_bytes`` of
    JSON Lines (before compression; at least one row, whatever its size)."""
    lines: list[bytes] = []
    size = 0
    for kind, body in rows:
        line = b'["' + kind.encode() + b'",' + body + b"]\n"
        if lines and size + len(line) > max_bytes:
            break
        lines.append(line)
        size += len(line)
    raw = b"".join(lines)
    return Packed(zlib.compress(raw, level), len(lines), size)


def unpack(payload: bytes) -> list[tuple[str, dict[str, Any]]]:
    """``(kind, body)`` for every line of a batch; BatchError names the first problem."""
    d = zlib.decompressobj()
    try:
        raw = d.decompress(payload, MAX_INFLATED)
    except zlib.error as exc:
        raise BatchError(f"batch is not zlib data ({exc})") from None
    if d.unconsumed_tail:
        raise BatchError(f"batch inflates to more than {MAX_INFLATED} bytes")
    if not d.eof:
        raise BatchError("batch is truncated (zlib stream not complete)")
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if len(lines) > MAX_LINES:
        raise BatchError(f"batch has {len(lines)} lines, at most {MAX_LINES} allowed")
    return [_line(i, line) for i, line in enumerate(lines)]


def _line(i: int, line: bytes) -> tuple[str, dict[str, Any]]:
    try:
        item = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BatchError(f"batch line {i + 1}: not JSON ({exc})") from None
    if not (isinstance(item, list) and len(item) == 2):
        raise BatchError(f"batch line {i + 1}: expected [kind, body]")
    kind, body = item
    if not isinstance(kind, str) or not KIND_RE.fullmatch(kind) or kind == BATCH_KIND:
        raise BatchError(f"batch line {i + 1}: kind {str(kind)[:40]!r} is not a message kind")
    if not isinstance(body, dict):
        raise BatchError(f"batch line {i + 1}: body is {type(body).__name__}, expected an object")
    return kind, body

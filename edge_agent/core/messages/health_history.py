"""A device's health history (pure): the fields of a status an operator asks about later, how old
rows are thinned, ``--since`` and how ``fleet history`` prints them.

The collector kept only the latest status per device, so "when did cam-17's fps drop, its backlog
start growing, its disk fill?" had no answer (issue 33). Every status now also becomes one
:class:`Health` row; the fields are taken here, from outside data, so each is bounded and a wrong
type reads as "not reported" (None) instead of failing the message: the status itself is valid.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, NamedTuple, Optional

TEXT_MAX = 128
NUMBER_MAX = 2**62
DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\Z")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
# an update verdict a rollout must stop on (core.updates.store_state.Outcome values)
BAD_OUTCOMES = ("refused", "rolled_back")


class Health(NamedTuple):
    fps: Optional[float]
    backlog: Optional[int]  # queue.pending: stored, not confirmed yet
    sent: Optional[int]
    oldest_unconfirmed_s: Optional[float]
    disk_free_bytes: Optional[int]
    disk_full: Optional[bool]
    crashes: Optional[int]
    errors: Optional[int]
    model_id: str
    model_version: str
    provider: str
    link: Optional[int]
    broker: str
    update_outcome: Optional[str]
    update_at: Optional[float]
    update_detail: Optional[str]


def _text(value: object, limit: int = TEXT_MAX) -> str:
    """Printable text of a str/number (a dict or None reads as "": no ``None`` in a column)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return ""
    return "".join(c for c in str(value)[:limit] if c.isprintable())


def _int(value: object) -> Optional[int]:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= NUMBER_MAX:
        return None
    return value


def _num(value: object) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    f = float(value)
    return f if math.isfinite(f) and 0 <= f <= 1e15 else None


def _block(body: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    v = body.get(key)
    return v if isinstance(v, dict) else {}


def model_of(body: Mapping[str, Any]) -> tuple[str, str]:
    """``(model id, model version)``: the installed update's (model updates) or else the
    detector's id (and no version). An agent on its config's model reports ``current.id = null``:
    that read as the text ``None`` in `fleet status` (issue 33); now the detector's id."""
    current = _block(_block(body, "model_update"), "current")
    detector = _block(_block(body, "models"), "detector")
    mid = _text(current.get("id")) or _text(detector.get("id"))
    return mid, _text(current.get("version")) if _text(current.get("id")) else ""


def health(body: Mapping[str, Any]) -> Health:
    """The history fields of one status body (core.status), every one optional."""
    queue = _block(body, "queue")
    mu = _block(body, "model_update")
    last = _block(mu, "last")
    mid, version = model_of(body)
    return Health(
        fps=_num(body.get("fps")),
        backlog=_int(queue.get("pending")),
        sent=_int(queue.get("sent")),
        oldest_unconfirmed_s=_num(queue.get("oldest_unconfirmed_s")),
        disk_free_bytes=_int(queue.get("disk_free_bytes")),
        disk_full=queue["disk_full"] if isinstance(queue.get("disk_full"), bool) else None,
        crashes=_int(queue.get("crashes")),
        errors=_int(body.get("errors")),
        model_id=mid,
        model_version=version,
        provider=_text(body.get("provider")),
        link=_int(body.get("link")),
        broker=_text(_block(body, "broker").get("state"), 32),
        update_outcome=_text(last.get("outcome"), 32) or None,
        update_at=_num(last.get("at")),
        update_detail=_text(last.get("detail"), 300) or None,
    )


# ---- thinning -------------------------------------------------------------------------------
class Row(NamedTuple):
    """What thinning needs of a stored row."""

    id: int
    device: str
    time: float
    state: str
    update_at: Optional[float]


def thin(rows: Sequence[Row], bucket_s: float, complete: bool) -> tuple[list[int], list[int]]:
    """``(ids to delete, ids to keep)`` of a batch of rows older than the full-resolution age,
    oldest first: per device, bucket of ``bucket_s``, state and update verdict, the newest row is
    kept (a state change or a new verdict inside a bucket is never thinned away). ``complete``:
    the batch holds every such row; if not, the buckets of its newest time are left for the next
    batch (they may go on in it), unless that leaves nothing (one bucket larger than a batch)."""
    if not rows:
        return [], []
    last_bucket = max(math.floor(r.time / bucket_s) for r in rows)
    todo = list(rows)
    if not complete:
        older = [r for r in rows if math.floor(r.time / bucket_s) < last_bucket]
        todo = older or todo
    newest: dict[tuple[str, int, str, Optional[float]], Row] = {}
    for r in todo:
        key = (r.device, math.floor(r.time / bucket_s), r.state, r.update_at)
        have = newest.get(key)
        if have is None or (r.time, r.id) > (have.time, have.id):
            newest[key] = r
    keep = {r.id for r in newest.values()}
    return sorted(r.id for r in todo if r.id not in keep), sorted(keep)


# ---- --since and printing ---------------------------------------------------------------------
def parse_since(text: str, now: float) -> float:
    """``--since``: a duration back from now (``90s``, ``30m``, ``6h``, ``7d``, ``2w``) or an ISO
    8601 time (``2026-12-01``, ``2026-12-01T08:00:00Z``; no zone = UTC) -> unix time."""
    t = text.strip()
    m = DURATION_RE.match(t)
    if m:
        return now - float(m.group(1)) * UNITS[m.group(2)]
    try:
        when = datetime.fromisoformat(t[:-1] + "+00:00" if t.endswith("Z") else t)
    except ValueError:
        raise ValueError(
            f"--since {text[:40]!r}: expected a duration (90s, 30m, 6h, 7d, 2w) or an ISO time "
            "(2026-12-01T08:00:00Z)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


COLUMNS = ("TIME (UTC)", "STATE", "FPS", "BACKLOG", "UNCONF", "DISK FREE", "CRASH", "ERR", "MODEL", "UPDATE")


def _bytes(n: Optional[int]) -> str:
    if n is None:
        return "-"
    for unit, size in (("G", 2**30), ("M", 2**20), ("k", 2**10)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def _opt(v: object) -> str:
    return "-" if v is None else str(v)


def table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """``fleet history`` lines: a header, then one line per row (oldest first); a verdict is
    shown on the first row that reports it."""
    out = [COLUMNS]
    seen: Optional[float] = None
    for r in rows:
        verdict = ""
        if r.get("update_outcome") and r.get("update_at") != seen:
            seen = r.get("update_at")
            verdict = str(r["update_outcome"]) + (f": {r['update_detail']}" if r.get("update_detail") else "")
        ts = datetime.fromtimestamp(float(r["time"]), timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        model = (r.get("model_id") or "-") + (f" {r['model_version']}" if r.get("model_version") else "")
        unconf = r.get("oldest_unconfirmed_s")
        out.append(
            (
                ts,
                str(r.get("state") or "-"),
                "-" if r.get("fps") is None else f"{float(r['fps']):.1f}",
                _opt(r.get("backlog")),
                "-" if unconf is None else f"{float(unconf):.0f}s",
                _bytes(r.get("disk_free_bytes")),
                _opt(r.get("crashes")),
                _opt(r.get("errors")),
                model[:32],
                verdict[:60],
            )
        )
    widths = [max(len(r[i]) for r in out) for i in range(len(COLUMNS))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in out]

"""The collector's commit watermark: the ``confirmed`` islands kept in the round's own transaction,
and the per-device confirmation message (core.messages.confirm) to publish once it committed.

Called by :meth:`CollectorDb.store` after the ``devices`` upsert, which holds each device's row
lock until the commit on PostgreSQL: two collectors of a group writing one database then merge a
device's islands one after the other (SQLite: ``BEGIN IMMEDIATE`` serialises writers anyway).
Every seq of the round is stored once the transaction commits (inserted now, or already there:
a duplicate), so the islands never hold a seq that is not in ``messages``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Dict, List

import paho.mqtt.client as mqtt

from edge_agent.core.messages.confirm import (
    MAX_BOOTS,
    MAX_RANGES,
    Confirms,
    Range,
    bound,
    confirm_topic,
    encode,
    merge,
    ranges_of,
)
from edge_agent.core.messages.fleet import Record

if TYPE_CHECKING:
    from edge_agent.adapters.collector.db import CollectorDb


def _merge_in(db: CollectorDb, device: str, boot: int, new: List[Range]) -> List[Range]:
    """Merge ``new`` into the stored islands of (device, boot); the islands that now hold them."""
    lo, hi = new[0][0], new[-1][1]
    old = [
        (int(a), int(b))
        for a, b in db._x(
            "SELECT lo, hi FROM confirmed WHERE device = ? AND boot = ? AND hi >= ? AND lo <= ? ORDER BY lo",
            (device, boot, lo - 1, hi + 1),
        ).fetchall()
    ]
    merged = merge(old + new)
    touched = [m for m in merged if any(m[0] <= a <= m[1] for a, _ in new)]
    if [m for m in merged if m not in old]:
        gone = [a for a, _ in old]
        for a in gone:
            db._x("DELETE FROM confirmed WHERE device = ? AND boot = ? AND lo = ?", (device, boot, a))
        for a, b in merged:
            db._x("INSERT INTO confirmed (device, boot, lo, hi) VALUES (?, ?, ?, ?)", (device, boot, a, b))
    return touched


def update(db: CollectorDb, records: Sequence[Record]) -> Dict[str, bytes]:
    """Inside the round's transaction: add the round's seqs to ``confirmed``; per device, the
    confirmation to publish after the commit (this round's islands + the newest boots' highest)."""
    seqs: Dict[str, Dict[int, List[int]]] = {}
    for r in records:
        seqs.setdefault(r.device, {}).setdefault(r.boot, []).append(r.seq)
    out: Dict[str, bytes] = {}
    for device in sorted(seqs):
        keep: Confirms = {}
        for boot in sorted(seqs[device]):
            keep[boot] = _merge_in(db, device, boot, ranges_of(seqs[device][boot]))
        newest = [
            int(b)
            for (b,) in db._x(
                "SELECT DISTINCT boot FROM confirmed WHERE device = ? ORDER BY boot DESC LIMIT ?",
                (device, MAX_BOOTS),
            ).fetchall()
        ]
        stored: Confirms = {}
        for boot in newest:
            rows = db._x(
                "SELECT lo, hi FROM confirmed WHERE device = ? AND boot = ? ORDER BY lo DESC LIMIT ?",
                (device, boot, MAX_RANGES),
            ).fetchall()
            stored[boot] = [(int(a), int(b)) for a, b in rows]
        out[device] = encode(bound(stored, keep))
    return out


def publish(client: mqtt.Client, prefix: str, confirms: Dict[str, bytes]) -> int:
    """Publish each device's confirmation, retained, QoS 1 (after the round's commit and acks);
    returns how many were handed to paho. One lost (not connected, refused by the ACL) only
    makes the device resend after its ``confirm_timeout_s``: the next round confirms it."""
    sent = 0
    for device, payload in confirms.items():
        info = client.publish(confirm_topic(prefix, device), payload, qos=1, retain=True)
        sent += info.rc == mqtt.MQTT_ERR_SUCCESS
    return sent

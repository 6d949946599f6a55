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
from typing import TYPE_CHECKING, Dict, List, Tuple

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


ISLANDS = "SELECT lo, hi FROM confirmed WHERE device = ? AND boot = ? AND hi >= ? AND lo <= ? ORDER BY lo"
BOOTS = "SELECT DISTINCT boot FROM confirmed WHERE device = ? ORDER BY boot DESC LIMIT ?"
NEWEST = "SELECT lo, hi FROM confirmed WHERE device = ? AND boot = ? ORDER BY lo DESC LIMIT ?"


def _changes(old: List[Range], new: List[Range]) -> Tuple[List[Range], List[int], List[Range]]:
    """Merging ``new`` into the stored islands ``old``: (the islands that now hold ``new``, the
    ``lo`` of the old rows to delete, the rows to insert); nothing to write if nothing changed."""
    merged = merge(old + new)
    touched = [m for m in merged if any(m[0] <= a <= m[1] for a, _ in new)]
    if [m for m in merged if m not in old]:
        return touched, [a for a, _ in old], merged
    return touched, [], []


def update(db: CollectorDb, records: Sequence[Record]) -> Dict[str, bytes]:
    """Inside the round's transaction: add the round's seqs to ``confirmed``; per device, the
    confirmation to publish after the commit (this round's islands + the newest boots' highest).

    In four passes of queries that do not wait on each other (one PostgreSQL pipeline each,
    :meth:`CollectorDb.many`): a round of 200 devices made some 1,100 queries one round trip at a
    time, 75 % of the store's time."""
    seqs: Dict[str, Dict[int, List[int]]] = {}
    for r in records:
        seqs.setdefault(r.device, {}).setdefault(r.boot, []).append(r.seq)
    pairs = [(d, b, ranges_of(seqs[d][b])) for d in sorted(seqs) for b in sorted(seqs[d])]
    spans = [(d, b, new[0][0] - 1, new[-1][1] + 1) for d, b, new in pairs]
    found = _islands_pg(db, spans) if db.dialect == "postgresql" else db.many(ISLANDS, spans)
    keep: Dict[str, Confirms] = {}
    deletes: List[Tuple[str, int, int]] = []
    inserts: List[Tuple[str, int, int, int]] = []
    for (device, boot, new), rows in zip(pairs, found):
        touched, gone, merged = _changes([(int(a), int(b)) for a, b in rows], new)
        keep.setdefault(device, {})[boot] = touched
        deletes += [(device, boot, a) for a in gone]
        inserts += [(device, boot, a, b) for a, b in merged]
    devices = sorted(seqs)
    stored: Dict[str, Confirms] = {d: {} for d in devices}
    if db.dialect == "postgresql":
        _write_pg(db, deletes, inserts)
        for d, b, lo, hi in _newest_pg(db, devices):
            stored[d].setdefault(int(b), []).append((int(lo), int(hi)))
        return {d: encode(bound(stored[d], keep[d])) for d in devices}
    db.many("DELETE FROM confirmed WHERE device = ? AND boot = ? AND lo = ?", deletes, fetch=False)
    db.many("INSERT INTO confirmed (device, boot, lo, hi) VALUES (?, ?, ?, ?)", inserts, fetch=False)
    boots = db.many(BOOTS, [(d, MAX_BOOTS) for d in devices])
    wanted = [(d, int(b)) for d, rows in zip(devices, boots) for (b,) in rows]
    islands = db.many(NEWEST, [(d, b, MAX_RANGES) for d, b in wanted])
    for (device, boot), rows in zip(wanted, islands):
        stored[device][boot] = [(int(a), int(b)) for a, b in rows]
    return {d: encode(bound(stored[d], keep[d])) for d in devices}


# PostgreSQL: each pass one set-based query over arrays of the round's keys (a query per device
# and boot, even pipelined, cost ~0.3 ms of psycopg each: 200 devices made it 60 % of a round)
def _cols(rows: Sequence[Tuple[object, ...]], n: int) -> List[List[object]]:
    return [list(c) for c in zip(*rows)] if rows else [[] for _ in range(n)]


def _islands_pg(db: CollectorDb, spans: Sequence[Tuple[str, int, int, int]]) -> List[List[Tuple[int, int]]]:
    rows = db.conn.execute(
        "SELECT u.i, c.lo, c.hi FROM unnest(%s::text[], %s::bigint[], %s::bigint[], %s::bigint[]) "
        "WITH ORDINALITY AS u(d, b, lo, hi, i) JOIN confirmed c ON c.device = u.d AND c.boot = u.b "
        "AND c.hi >= u.lo AND c.lo <= u.hi ORDER BY u.i, c.lo",
        _cols(spans, 4),
    ).fetchall()
    out: List[List[Tuple[int, int]]] = [[] for _ in spans]
    for i, lo, hi in rows:
        out[int(i) - 1].append((int(lo), int(hi)))
    return out


def _write_pg(
    db: CollectorDb, deletes: Sequence[Tuple[str, int, int]], inserts: Sequence[Tuple[str, int, int, int]]
) -> None:
    if deletes:
        db.conn.execute(
            "DELETE FROM confirmed c USING unnest(%s::text[], %s::bigint[], %s::bigint[]) AS u(d, b, lo) "
            "WHERE c.device = u.d AND c.boot = u.b AND c.lo = u.lo",
            _cols(deletes, 3),
        )
    if inserts:
        db.conn.execute(
            "INSERT INTO confirmed (device, boot, lo, hi) SELECT d, b, lo, hi FROM unnest(%s::text[], "
            "%s::bigint[], %s::bigint[], %s::bigint[]) AS u(d, b, lo, hi) ORDER BY d, b, lo",
            _cols(inserts, 4),
        )


def _newest_pg(db: CollectorDb, devices: Sequence[str]) -> List[Tuple[str, int, int, int]]:
    """(device, boot, lo, hi): each device's newest MAX_BOOTS boots, their highest MAX_RANGES islands."""
    return list(
        db.conn.execute(
            "SELECT u.d, bb.boot, c.lo, c.hi FROM unnest(%s::text[]) AS u(d) CROSS JOIN LATERAL "
            "(SELECT DISTINCT boot FROM confirmed WHERE device = u.d ORDER BY boot DESC LIMIT %s) AS bb "
            "CROSS JOIN LATERAL (SELECT lo, hi FROM confirmed WHERE device = u.d AND boot = bb.boot "
            "ORDER BY lo DESC LIMIT %s) AS c ORDER BY u.d, bb.boot DESC, c.lo DESC",
            [list(devices), MAX_BOOTS, MAX_RANGES],
        ).fetchall()
    )


def publish(client: mqtt.Client, prefix: str, confirms: Dict[str, bytes]) -> int:
    """Publish each device's confirmation, retained, QoS 1 (after the round's commit and acks);
    returns how many were handed to paho. One lost (not connected, refused by the ACL) only
    makes the device resend after its ``confirm_timeout_s``: the next round confirms it."""
    sent = 0
    for device, payload in confirms.items():
        info = client.publish(confirm_topic(prefix, device), payload, qos=1, retain=True)
        sent += info.rc == mqtt.MQTT_ERR_SUCCESS
    return sent

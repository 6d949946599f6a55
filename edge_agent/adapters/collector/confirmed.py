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
from typing import TYPE_CHECKING, Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import paho.mqtt.client as mqtt

from edge_agent.adapters.collector import known
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
# PostgreSQL, (device, boot, lo, hi): each device's newest MAX_BOOTS boots, their highest MAX_RANGES islands
NEWEST_PG = (
    "SELECT u.d, bb.boot, c.lo, c.hi FROM unnest(%b::text[]) AS u(d) CROSS JOIN LATERAL "
    "(SELECT DISTINCT boot FROM confirmed WHERE device = u.d ORDER BY boot DESC LIMIT %s) AS bb "
    "CROSS JOIN LATERAL (SELECT lo, hi FROM confirmed WHERE device = u.d AND boot = bb.boot "
    "ORDER BY lo DESC LIMIT %s) AS c ORDER BY u.d, bb.boot DESC, c.lo DESC"
)


def _changes(old: List[Range], new: List[Range]) -> Tuple[List[Range], List[int], List[Range]]:
    """Merging ``new`` into the stored islands ``old``: (the islands that now hold ``new``, the
    ``lo`` of the old rows to delete, the rows to insert); nothing to write if nothing changed."""
    merged = merge(old + new)
    touched = [m for m in merged if any(m[0] <= a <= m[1] for a, _ in new)]
    if [m for m in merged if m not in old]:
        return touched, [a for a, _ in old], merged
    return touched, [], []


class Plan(NamedTuple):
    """What a round changes in ``confirmed`` and what it knows of each device's islands."""

    devices: List[str]
    keep: Dict[str, Confirms]  # per device, the islands holding this round's seqs
    deletes: List[Tuple[str, int, int]]
    inserts: List[Tuple[str, int, int, int]]
    stored: Dict[str, Confirms]  # the islands after the round: known (computed) or to read back
    read: List[str]  # the devices whose newest islands are read back


def plan(
    db: CollectorDb,
    records: Sequence[Record],
    islands: Optional[Dict[Tuple[str, int], List[Range]]] = None,
    cached: Optional[Dict[str, Confirms]] = None,
) -> Plan:
    """The writes of :func:`update` (no query unless ``islands`` is None: then SQLite reads them)."""
    seqs: Dict[str, Dict[int, List[int]]] = {}
    for r in records:
        seqs.setdefault(r.device, {}).setdefault(r.boot, []).append(r.seq)
    pairs = [(d, b, ranges_of(seqs[d][b])) for d in sorted(seqs) for b in sorted(seqs[d])]
    spans = [(d, b, new[0][0] - 1, new[-1][1] + 1) for d, b, new in pairs]
    if islands is None:
        found: List[List[Any]] = db.many(ISLANDS, spans)
    else:  # the islands read for all of the round's seqs, cut to the span of these
        found = [
            [(a, b) for a, b in islands.get((d, bt), []) if b >= lo and a <= hi] for d, bt, lo, hi in spans
        ]
    keep: Dict[str, Confirms] = {}
    deletes: List[Tuple[str, int, int]] = []
    inserts: List[Tuple[str, int, int, int]] = []
    changes: Dict[str, Dict[int, Tuple[List[Range], List[Range]]]] = {}
    for (device, boot, new), rows in zip(pairs, found):
        old = [(int(a), int(b)) for a, b in rows]
        touched, gone, merged = _changes(old, new)
        changes.setdefault(device, {})[boot] = (old, merged)
        keep.setdefault(device, {})[boot] = touched
        deletes += [(device, boot, a) for a in gone]
        inserts += [(device, boot, a, b) for a, b in merged]
    devices = sorted(seqs)
    stored: Dict[str, Confirms] = {d: {} for d in devices}
    computed: Dict[str, Confirms] = {}  # the read-back of 200 devices cost 15 % of a store
    for d, tail in (cached or {}).items():
        after = known.after(tail, changes.get(d, {})) if d in stored else None
        if after is not None:
            computed[d] = after
    stored.update(computed)
    return Plan(devices, keep, deletes, inserts, stored, [d for d in devices if d not in computed])


def update(
    db: CollectorDb,
    records: Sequence[Record],
    islands: Optional[Dict[Tuple[str, int], List[Range]]] = None,
    commit: bool = False,
    tails: Optional[Dict[str, Confirms]] = None,
    cached: Optional[Dict[str, Confirms]] = None,
    planned: Optional[Plan] = None,
) -> Dict[str, bytes]:
    """Inside the round's transaction: add the round's seqs to ``confirmed``; per device, the
    confirmation to publish after the commit (this round's islands + the newest boots' highest).
    ``islands``: the stored islands around every seq of the round, read under the device locks
    in the round's first pipeline (adapters.collector.ingest) or after SQLite's BEGIN IMMEDIATE
    (trust.reads_sqlite); None: read here, one query per (device, boot).

    SQLite: four passes of queries; PostgreSQL: the writes and the read-back in one pipeline, with
    ``commit`` the round's COMMIT too (a round of 200 devices made some 1,100 queries one round
    trip at a time, 75 % of the store). ``tails``: filled with the newest islands per device
    (adapters.collector.known keeps them for the next round); ``cached``: those the round knew
    already, updated here instead of read back where that is exact (known.after). ``planned``:
    :func:`plan` of the same arguments, made while the server was busy (:class:`Early`)."""
    devices, keep, deletes, inserts, stored, read = planned or plan(db, records, islands, cached)
    if db.dialect == "postgresql":
        with db.conn.pipeline():
            _write_pg(db, deletes, inserts)
            cur = db.conn.execute(NEWEST_PG, [read, MAX_BOOTS, MAX_RANGES], prepare=False) if read else None
            if commit:
                db.conn.execute("COMMIT")
            # while the server writes and commits: the confirmations that need no read-back
            back = set(read)
            done = {d: encode(bound(stored[d], keep[d])) for d in devices if d not in back}
        for d, b, lo, hi in cur.fetchall() if cur is not None else ():
            stored[d].setdefault(int(b), []).append((int(lo), int(hi)))
        if tails is not None:
            tails.update(stored)
        done.update((d, encode(bound(stored[d], keep[d]))) for d in read)
        return {d: done[d] for d in devices}
    db.many("DELETE FROM confirmed WHERE device = ? AND boot = ? AND lo = ?", deletes, fetch=False)
    db.many("INSERT INTO confirmed (device, boot, lo, hi) VALUES (?, ?, ?, ?)", inserts, fetch=False)
    boots = db.many(BOOTS, [(d, MAX_BOOTS) for d in read])
    wanted = [(d, int(b)) for d, rows in zip(read, boots) for (b,) in rows]
    newest = db.many(NEWEST, [(d, b, MAX_RANGES) for d, b in wanted])
    for (device, boot), rows in zip(wanted, newest):
        stored[device][boot] = [(int(a), int(b)) for a, b in rows]
    if tails is not None:
        tails.update(stored)
    return {d: encode(bound(stored[d], keep[d])) for d in devices}


# PostgreSQL: each pass one set-based query over arrays of the round's keys (a query per device
# and boot, even pipelined, cost ~0.3 ms of psycopg each: 200 devices made it 60 % of a round)
def _cols(rows: Sequence[Tuple[object, ...]], n: int) -> List[List[object]]:
    return [list(c) for c in zip(*rows)] if rows else [[] for _ in range(n)]


def _write_pg(
    db: CollectorDb, deletes: Sequence[Tuple[str, int, int]], inserts: Sequence[Tuple[str, int, int, int]]
) -> None:
    """The same rows as deleting ``deletes`` and inserting ``inserts``; an island that keeps its
    ``lo`` (the usual round: the device's island grows upward) is an UPDATE of ``hi``, in place (a
    HOT update: no index entry, where a delete and an insert made a dead row and a new entry)."""
    grown = {(d, b, lo): hi for d, b, lo, hi in inserts}
    kept = {(d, b, lo) for d, b, lo in deletes if (d, b, lo) in grown}
    gone = [k for k in deletes if k not in kept]
    new = [r for r in inserts if r[:3] not in kept]
    conn = db.conn
    if gone:
        conn.execute(
            "DELETE FROM confirmed c USING unnest(%b::text[], %b::bigint[], %b::bigint[]) AS u(d, b, lo) "
            "WHERE c.device = u.d AND c.boot = u.b AND c.lo = u.lo",
            _cols(gone, 3),
            prepare=False,
        )
    if kept:
        rows = sorted((*k, grown[k]) for k in kept)
        conn.execute(
            "UPDATE confirmed c SET hi = u.hi FROM unnest(%b::text[], %b::bigint[], %b::bigint[], "
            "%b::bigint[]) AS u(d, b, lo, hi) WHERE c.device = u.d AND c.boot = u.b AND c.lo = u.lo",
            _cols(rows, 4),
            prepare=False,
        )
    if new:
        conn.execute(
            "INSERT INTO confirmed (device, boot, lo, hi) SELECT d, b, lo, hi FROM unnest(%b::text[], "
            "%b::bigint[], %b::bigint[], %b::bigint[]) AS u(d, b, lo, hi) ORDER BY d, b, lo",
            _cols(new, 4),
            prepare=False,
        )


class Early:
    """The store's hook while its COPY is in flight (adapters.collector.ingest): the caller's
    ``idle()`` first (the next round parsed), then this round's :func:`plan`, whose client work
    otherwise waited for the COPY to end (a round of 2000 results, 200 devices: ~3 ms of ~45)."""

    def __init__(
        self,
        db: CollectorDb,
        records: Sequence[Record],
        islands: Dict[Tuple[str, int], List[Range]],
        cached: Dict[str, Confirms],
        idle: Optional[Callable[[], None]],
    ) -> None:
        self._args = (db, records, islands, cached)
        self._idle = idle
        self.plan: Optional[Plan] = None

    def __call__(self) -> None:
        if self._idle is not None:
            self._idle()
        if self.plan is None:
            self.plan = plan(*self._args)


def publish(client: mqtt.Client, prefix: str, confirms: Dict[str, bytes]) -> int:
    """Publish each device's confirmation, retained, QoS 1 (after the round's commit and acks);
    returns how many were handed to paho. One lost (not connected, refused by the ACL) only
    makes the device resend after its ``confirm_timeout_s``: the next round confirms it."""
    sent = 0
    for device, payload in confirms.items():
        info = client.publish(confirm_topic(prefix, device), payload, qos=1, retain=True)
        sent += info.rc == mqtt.MQTT_ERR_SUCCESS
    return sent

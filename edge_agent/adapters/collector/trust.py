"""What the collector does not take on trust, inside the store's transaction: a second message for
a stored ``(device, boot, seq)`` with another id or body, and a seq far above what the device has
reached, are kept in ``conflicts`` (counted per device) instead of being dropped or stored; the
``rejected`` and ``dead_letters`` tables are bounded (the newest kept, the rest counted).

Measured before this: 200 forged results (seq 130..329) of a live device published first made its
200 real ones "duplicates", dropped; one forged seq 2^62 made a permanent 4.6e18-seq gap. Without
broker ACLs the collector cannot tell the forged copy from the real one: the first one stays in
``messages``, the other goes to ``conflicts``, and both are there for an operator to judge.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

from edge_agent.adapters.collector.ingest import Key, Reads, round_keys
from edge_agent.core.messages.fleet import Record

if TYPE_CHECKING:
    from edge_agent.adapters.collector.db import CollectorDb
    from edge_agent.adapters.collector.known import Known

CHUNK = 300  # keys per SQLite query (3 variables each; SQLite allows 32766)
ISLANDS_SQLITE = (
    "SELECT lo, hi FROM confirmed WHERE device = ? AND boot = ? AND hi >= ? AND lo <= ? ORDER BY lo"
)


class Limits(NamedTuple):
    seq_jump_max: int = 1_000_000
    conflicts_max_per_device: int = 1000
    rejected_max: int = 10_000


class Sorted(NamedTuple):
    new: list[Record]
    duplicates: int
    conflicts: list[tuple[Record, str]]
    same: list[Record]  # the identical redeliveries (stored already: confirmed again)


def digest(msg_id: object, body: str) -> str:
    return hashlib.sha256(f"{msg_id}\n{body}".encode()).hexdigest()[:32]


def _chunks(items: Sequence[Any], n: int = CHUNK) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


def _existing(db: CollectorDb, keys: Sequence[Key]) -> dict[Key, tuple[Any, Any]]:
    """SQLite: ``(msg_id, body)`` of the stored messages among ``keys`` (PostgreSQL reads them in
    the round's pipeline: adapters.collector.ingest)."""
    out: dict[Key, tuple[Any, Any]] = {}
    if not keys:
        return out
    # per device, the stored keys in the round's seq range (the (device, seq) index), then the
    # bodies of the few that collide: a VALUES join of every key cost 3.5x the whole insert
    want = set(keys)
    by_dev: dict[str, list[int]] = {}
    for d, _, q in keys:
        by_dev.setdefault(d, []).append(q)
    hits: list[Key] = []
    for d, qs in sorted(by_dev.items()):
        rows = db.conn.execute(
            "SELECT boot, seq FROM messages WHERE device = ? AND seq BETWEEN ? AND ?",
            (d, min(qs), max(qs)),
        ).fetchall()
        hits += [k for k in ((d, int(b), int(q)) for b, q in rows) if k in want]
    for k in hits:
        row = db.conn.execute(
            "SELECT msg_id, body FROM messages WHERE device = ? AND boot = ? AND seq = ?", k
        ).fetchone()
        out[k] = (row[0], row[1])
    return out


def _tops(db: CollectorDb, devices: Sequence[str]) -> dict[str, Optional[int]]:
    """SQLite: MAX(seq) per device in ``messages`` (None: no row). One MAX per device (a backward
    step on the (device, seq) index); a GROUP BY over the devices read every row of them on
    PostgreSQL (it halved the store's rate)."""
    out: dict[str, Optional[int]] = {}
    for d in devices:
        (top,) = db.conn.execute("SELECT MAX(seq) FROM messages WHERE device = ?", (d,)).fetchone()
        out[d] = None if top is None else int(top)
    return out


def _reported(db: CollectorDb, devices: Sequence[str]) -> dict[str, int]:
    """SQLite: the seq each device's stored status reports (devices.reported_seq), where it has one."""
    out: dict[str, int] = {}
    for part in _chunks(devices):
        marks = ", ".join("?" for _ in part)
        sql = (
            f"SELECT device, reported_seq FROM devices WHERE device IN ({marks}) AND reported_seq IS NOT NULL"
        )
        out.update((d, int(s)) for d, s in db._x(sql, list(part)).fetchall())
    return out


def reads_sqlite(db: CollectorDb, records: Sequence[Record], devices: Sequence[str], cache: Known) -> Reads:
    """SQLite's reads of a round, after its BEGIN IMMEDIATE, in the shape PostgreSQL's pipeline
    gives them (adapters.collector.ingest): the stored keys, highest seqs and ``confirmed`` islands
    of the round's devices, one query per device each (some 1,000 in a round of 200 devices),
    skipped for the devices ``cache`` answers for (adapters.collector.known).

    The cache's proof here is ``PRAGMA data_version``: unchanged since this connection's last round,
    no other connection committed anything (SQLite's writers take turns on one lock); this
    connection's own other writers of ``messages`` drop what they touch (known.bump, retire).
    ``versions``: each device's cached version + 1 (0 for one not cached), so :meth:`Known.proven`
    and :meth:`Known.keep` work as on PostgreSQL."""
    (version,) = db.conn.execute("PRAGMA data_version").fetchone()
    if version != cache.data_version:
        cache.forget()
        cache.data_version = int(version)
    keys, seqs, spans = round_keys(records)
    guess = cache.plan(seqs, spans)
    versions = {d: cache.entries[d].version + 1 if d in cache.entries else 0 for d in devices}
    out = Reads(_existing(db, [k for k in keys if k[0] not in guess]), {}, {}, {}, versions, {})
    out.tops.update(_tops(db, [d for d in seqs if d not in guess]))
    for d, b, lo, hi in spans:
        if d not in guess:
            rows = db.conn.execute(ISLANDS_SQLITE, (d, b, lo, hi)).fetchall()
            out.islands[(d, b)] = [(int(a), int(z)) for a, z in rows]
    for d, isl in guess.items():
        out.tops[d], out.tails[d] = cache.entries[d].top, cache.entries[d].tail
        out.islands.update((k, v) for k, v in isl.items() if v)
    reported = _reported(db, list(seqs))
    for d in seqs:
        marks = [v for v in (out.tops[d], reported.get(d)) if v is not None]
        if marks:
            out.highest[d] = max(marks)
    cache.hits += len(guess)
    cache.misses += len(seqs) - len(guess)
    return out


def _same(db: CollectorDb, stored: tuple[Any, Any], r: Record) -> bool:
    msg_id, body = stored
    if msg_id != r.msg_id:
        return False
    if isinstance(body, str) and body == r.body:
        return True
    try:  # PostgreSQL hands jsonb back decoded (and normalised): compare values
        return bool((json.loads(body) if isinstance(body, str) else body) == json.loads(r.body))
    except ValueError:
        return False


def sort_records(
    db: CollectorDb,
    records: Sequence[Record],
    reported: dict[str, int],
    limits: Limits,
    reads: Reads,
) -> Sorted:
    """Split a round's records into new ones, identical redeliveries and conflicts. ``reported``:
    the seq each device's statuses of this round report (queue.seq); ``reads``: the stored keys
    and highest seqs (ingest.reads_pg, :func:`reads_sqlite`)."""
    stored, highest = reads.stored, dict(reads.highest)
    for dev, s in reported.items():
        highest[dev] = max(highest.get(dev, 0), s)
    chosen: dict[Key, Record] = {}
    new: list[Record] = []
    conflicts: list[tuple[Record, str]] = []
    same: list[Record] = []
    for r in records:
        k = (r.device, r.boot, r.seq)
        first = chosen.get(k)
        if first is not None or k in stored:
            prior = (first.msg_id, first.body) if first is not None else stored[k]
            if _same(db, prior, r):
                same.append(r)
            else:
                conflicts.append((r, f"seq {r.seq} of boot {r.boot} already taken by another id or body"))
            continue
        top = highest.get(r.device)
        if top is not None and r.seq > top + limits.seq_jump_max:
            conflicts.append(
                (r, f"seq {r.seq} is more than {limits.seq_jump_max} above the highest known ({top})")
            )
            continue
        chosen[k] = r
        new.append(r)
        highest[r.device] = max(top or 0, r.seq)
    return Sorted(new, len(same), conflicts, same)


def store_conflicts(
    db: CollectorDb, conflicts: Sequence[tuple[Record, str]], received: float, limits: Limits
) -> tuple[dict[str, int], int, list[Record]]:
    """Keep the first ``conflicts_max_per_device`` of each device; returns how many new conflicts
    each device had, how many were copies of a kept conflict (redeliveries: duplicates), and the
    records that are in the conflicts table now (those may be confirmed: the database holds them;
    one over the bound is only counted, so it is never confirmed and its device keeps it)."""
    counted: dict[str, int] = {}
    repeats = 0
    held: list[Record] = []
    if not conflicts:
        return counted, repeats, held
    devices = sorted({r.device for r, _ in conflicts})
    kept: dict[str, int] = {}
    for part in _chunks(devices):
        marks = ", ".join("?" for _ in part)
        kept.update(
            (d, int(n))
            for d, n in db._x(
                f"SELECT device, COUNT(*) FROM conflicts WHERE device IN ({marks}) GROUP BY device",
                list(part),
            ).fetchall()
        )
    ins = db._ts_sql(
        "INSERT INTO conflicts (device, boot, seq, kind, msg_id, time, received, reason, digest, body, camera) "
        "VALUES (?, ?, ?, ?, ?, {t}, {t}, ?, ?, {j}, ?) ON CONFLICT DO NOTHING"
    )
    for r, why in sorted(conflicts, key=lambda c: (c[0].device, c[0].boot, c[0].seq)):
        if kept.get(r.device, 0) >= limits.conflicts_max_per_device:
            counted[r.device] = counted.get(r.device, 0) + 1
            continue
        params = (
            r.device,
            r.boot,
            r.seq,
            r.kind,
            r.msg_id,
            r.time,
            received,
            why,
            digest(r.msg_id, r.body),
            r.body,
            r.camera,
        )
        n = int(db._x(ins, params).rowcount)
        held.append(r)
        if n == 0:
            repeats += 1
            continue
        kept[r.device] = kept.get(r.device, 0) + n
        counted[r.device] = counted.get(r.device, 0) + n
    for dev, n in sorted(counted.items()):
        db._x("UPDATE devices SET conflicts = conflicts + ? WHERE device = ?", (n, dev))
    return counted, repeats, held


def trim(db: CollectorDb, table: str, keep: int) -> int:
    """Delete all but the newest ``keep`` rows of ``rejected`` / ``dead_letters``; count them."""
    if table == "rejected":
        sql = "DELETE FROM rejected WHERE id <= (SELECT MAX(id) FROM rejected) - ?"
        params: tuple[Any, ...] = (keep,)
    elif table == "dead_letters":
        sql = (
            "DELETE FROM dead_letters WHERE digest IN (SELECT digest FROM dead_letters "
            "ORDER BY last_seen DESC, digest OFFSET ?)"
            if db.dialect == "postgresql"
            else "DELETE FROM dead_letters WHERE digest IN (SELECT digest FROM dead_letters "
            "ORDER BY last_seen DESC, digest LIMIT -1 OFFSET ?)"
        )
        params = (keep,)
    else:  # pragma: no cover - a programming error
        raise ValueError(table)
    n = int(db._x(sql, params).rowcount)
    if n > 0:
        db._x(
            "INSERT INTO trimmed (name, dropped) VALUES (?, ?) ON CONFLICT (name) DO UPDATE "
            "SET dropped = trimmed.dropped + excluded.dropped",
            (table, n),
        )
    return n

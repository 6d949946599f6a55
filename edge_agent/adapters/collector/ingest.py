"""The round's bulk reads and writes on PostgreSQL that are not per-message logic (:class:`CollectorDb`
calls them inside its transaction), and the ``devices`` last-seen upsert of both dialects.

A round first takes the row lock of each of its devices (the last-seen upsert, in device order),
then reads what it decides on: the stored keys among its records, each device's highest seq and
reported seq, and the ``confirmed`` islands around its seqs. Every writer of a device's messages
holds that lock first, so a key found absent stays absent until this round commits: the new
records are then copied straight into ``messages`` (binary ``COPY``), no staging table and no
speculative ``INSERT ... ON CONFLICT`` per row (37 % of a round before). A collector that does not
take the lock first (an older version in the same group) can still beat it to a key: the COPY then
fails on the unique key, and the round is redone with the staging path (:func:`insert_staged`).

The lock, the reads and BEGIN go in one pipeline (a round's reads took 13-16 ms pipelined, 20 ms
one after another, on 2 loaded cores). Each read is planned for its own arrays (``prepare=False``):
psycopg's prepared generic plan of the highest-seq probe, made while the table was nearly empty,
scanned every row per device once it had grown (5.9 s of an 8.1 s store). Arrays go in binary
(``%b``): psycopg's text arrays escape every element in Python (2.4x the time for a round's keys).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from edge_agent.core.messages.confirm import Confirms
from edge_agent.core.messages.fleet import Record

if TYPE_CHECKING:
    from psycopg import Cursor
    from psycopg.rows import TupleRow

    from edge_agent.adapters.collector.db import CollectorDb
    from edge_agent.adapters.collector.known import Known

    Sent = Optional[Tuple[Cursor[TupleRow], Cursor[TupleRow]]]

Key = Tuple[str, int, int]
COLS = "device, boot, seq, kind, msg_id, time, received, body, camera"
STAGE_COLS = "d, b, s, k, m, t, j, c"
STAGE_TYPES = ["text", "int8", "int8", "text", "text", "float8", "text", "text"]
STAGE_SQL = (
    "CREATE TEMP TABLE IF NOT EXISTS ingest_stage (d text, b int8, s int8, k text, m text, t float8, "
    "j text, c text) ON COMMIT DELETE ROWS"
)
# one statement: per device of the round its highest stored seq (a backward step on the (device, seq)
# index) and reported seq, then the (msg_id, body) of the round's keys already stored: one probe of
# the key per key at or below that highest (none while a device only sends new seqs). LATERAL kept
# apart by OFFSET 0: a nested loop; a plain join hashed the whole table, bodies and all, every
# round (16 ms at 5,000 rows, growing with it). A CTE used twice is computed once.
KNOWN = (
    "WITH t AS (SELECT u.d, (SELECT MAX(seq) FROM messages m WHERE m.device = u.d) AS top, "
    "v.reported_seq AS rep FROM unnest(%b::text[]) AS u(d) LEFT JOIN devices v ON v.device = u.d) "
    "SELECT t.d, NULL::bigint, t.top, t.rep, NULL::text, NULL::jsonb FROM t UNION ALL "
    "SELECT k.d, k.b, k.s, NULL::bigint, m.msg_id, m.body FROM unnest(%b::text[], %b::bigint[], "
    "%b::bigint[]) AS k(d, b, s) JOIN t ON t.d = k.d AND k.s <= t.top CROSS JOIN LATERAL "
    "(SELECT msg_id, body FROM messages WHERE device = k.d AND boot = k.b AND seq = k.s OFFSET 0) AS m"
)
ISLANDS = (
    "SELECT u.d, u.b, c.lo, c.hi FROM unnest(%b::text[], %b::bigint[], %b::bigint[], %b::bigint[]) "
    "AS u(d, b, lo, hi) JOIN confirmed c ON c.device = u.d AND c.boot = u.b "
    "AND c.hi >= u.lo AND c.lo <= u.hi ORDER BY u.d, u.b, c.lo"
)
SEEN_SQLITE = (  # PostgreSQL's is one set-based upsert (seen)
    "INSERT INTO devices (device, last_seen) VALUES (?, ?) ON CONFLICT (device) DO UPDATE "
    "SET last_seen = max(COALESCE(devices.last_seen, 0), excluded.last_seen)"
)
Idle = Optional[Callable[[], None]]  # the store's hook while the server inserts (app.collector.overlap)
# PostgreSQL's binary timestamptz: microseconds since 2000-01-01 UTC, rounded as to_timestamp() does
PG_EPOCH = 946_684_800.0


class Reads(NamedTuple):
    stored: Dict[Key, Tuple[Any, Any]]  # (msg_id, body) of the round's keys already in messages
    highest: Dict[str, int]  # the highest seq stored or reported per device of the round's records
    islands: Dict[Tuple[str, int], List[Tuple[int, int]]]  # confirmed islands around the round's seqs
    tops: Dict[str, Optional[int]]  # MAX(seq) in messages per device of the round's records
    versions: Dict[str, int]  # devices.writes after the upsert (SQLite: the cache's + 1; known.py)
    tails: Dict[str, Confirms]  # the newest islands of the devices known proved (not read)


def _cols(rows: Sequence[Tuple[object, ...]]) -> List[List[object]]:
    return [list(c) for c in zip(*rows)]


def _send(db: CollectorDb, keys: Sequence[Key], spans: Sequence[Tuple[str, int, int, int]]) -> Sent:
    """The reads of ``keys`` (inside a pipeline): their cursors, fetched by :func:`_fetch`."""
    if not keys:
        return None
    params = [sorted({d for d, _, _ in keys}), *_cols(keys)]
    return db.conn.execute(KNOWN, params, prepare=False), db.conn.execute(
        ISLANDS, _cols(spans), prepare=False
    )


def _fetch(sent: Sent, out: Reads) -> None:
    if sent is None:
        return
    for d, b, s, reported, m, body in sent[0].fetchall():
        if b is not None:
            out.stored[(d, int(b), int(s))] = (m, body)
            continue
        out.tops[d] = None if s is None else int(s)
        marks = [int(v) for v in (s, reported) if v is not None]
        if marks:
            out.highest[d] = max(marks)
    for d, b, lo, hi in sent[1].fetchall():
        out.islands.setdefault((d, int(b)), []).append((int(lo), int(hi)))


def round_keys(
    records: Sequence[Record],
) -> Tuple[List[Key], Dict[str, List[int]], List[Tuple[str, int, int, int]]]:
    """A round's keys (sorted, once each), its seqs per device, and per (device, boot) the span
    ``(device, boot, lo - 1, hi + 1)`` whose stored islands its confirmation merges with."""
    keys = sorted({(r.device, r.boot, r.seq) for r in records})
    span: Dict[Tuple[str, int], Tuple[int, int]] = {}
    seqs: Dict[str, List[int]] = {}
    for d, b, s in keys:
        lo, hi = span.get((d, b), (s, s))
        span[(d, b)] = (min(lo, s), max(hi, s))
        seqs.setdefault(d, []).append(s)
    return keys, seqs, [(d, b, lo - 1, hi + 1) for (d, b), (lo, hi) in sorted(span.items())]


def reads_pg(
    db: CollectorDb,
    records: Sequence[Record],
    devices: Sequence[str],
    received: float,
    known: Optional[Known],
) -> Reads:
    """BEGIN, the last-seen upsert of ``devices`` (sorted: every round's locks in one order) and the
    round's reads, in one pipeline; a device ``known`` answers for is not read, unless the upsert's
    version disproves it (then read in a second pipeline, still under the locks)."""
    conn = db.conn
    with conn.pipeline():
        conn.execute("BEGIN")
        upserted = seen(db, devices, received) if devices else None
        # while the server upserts: the round's keys, and what the cache answers for
        keys, seqs, spans = round_keys(records)
        guess = known.plan(seqs, spans) if known is not None else {}
        sent = _send(db, [k for k in keys if k[0] not in guess], [s for s in spans if s[0] not in guess])
    out = Reads({}, {}, {}, {}, {}, {})
    rep: Dict[str, Optional[int]] = {}
    for d, v, r in upserted.fetchall() if upserted is not None else ():
        out.versions[d] = int(v)
        rep[d] = None if r is None else int(r)
    missed = {d for d in guess if known is None or not known.proven(d, out.versions[d])}
    if missed:
        with conn.pipeline():
            again = _send(db, [k for k in keys if k[0] in missed], [s for s in spans if s[0] in missed])
        _fetch(again, out)
    _fetch(sent, out)
    if known is not None:
        known.hits += len(guess) - len(missed)
        known.misses += len(seqs) - len(guess) + len(missed)
        for d in guess.keys() - missed:
            top, out.tails[d] = known.entries[d].top, known.entries[d].tail
            out.tops[d] = top
            marks = [v for v in (top, rep[d]) if v is not None]
            if marks:
                out.highest[d] = max(marks)
            out.islands.update((k, v) for k, v in guess[d].items() if v)
    return out


_HEAD = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # binary COPY's signature, flags 0, no extension
_LEN = struct.Struct("!i")
_KEY = struct.Struct("!iqiq")  # boot and seq, each with its length 8
_STAMP = struct.Struct("!iq")  # a timestamptz with its length 8
_NULL = _LEN.pack(-1)
_FIELDS = struct.pack("!h", 9)


def _text(s: Optional[str]) -> bytes:
    if s is None:
        return _NULL
    b = s.encode()
    return _LEN.pack(len(b)) + b


def _micros(t: float) -> int:
    return round((t - PG_EPOCH) * 1e6)


def copy_data(records: Sequence[Record], received: float, rows: int = 250) -> Iterator[bytes]:
    """``records`` as a binary COPY stream of :data:`COLS` (signature to trailer), ``rows`` rows a
    piece, so the server inserts the first while the next is made. Made here because psycopg's
    ``write_row`` with a dumper per value took 94 ms of client time per 10,000 rows, this 17 ms
    (cProfile, timeit, 2026-12-07). A time is PostgreSQL's timestamptz (microseconds since 2000,
    rounded as ``to_timestamp()``), a body jsonb's version byte 1 and its text as received."""
    out = [_HEAD]
    put = out.append
    recv = _STAMP.pack(8, _micros(received))
    heads: Dict[str, bytes] = {}  # the field count and device, per device
    texts: Dict[Optional[str], bytes] = {}  # kinds and cameras: a few values each
    for i, r in enumerate(records, 1):
        head = heads.get(r.device)
        if head is None:
            head = heads[r.device] = _FIELDS + _text(r.device)
        kind = texts.get(r.kind)
        if kind is None:
            kind = texts[r.kind] = _text(r.kind)
        cam = texts.get(r.camera)
        if cam is None:
            cam = texts[r.camera] = _text(r.camera)
        body = r.body.encode()
        put(head)
        put(_KEY.pack(8, r.boot, 8, r.seq))
        put(kind)
        put(_text(r.msg_id))
        put(_STAMP.pack(8, _micros(r.time)))
        put(recv)
        put(_LEN.pack(len(body) + 1))
        put(b"\x01")
        put(body)
        put(cam)
        if i % rows == 0:
            yield b"".join(out)
            out.clear()
    put(b"\xff\xff")
    yield b"".join(out)


def copy_pg(db: CollectorDb, records: Sequence[Record], received: float, idle: Idle = None) -> int:
    """Copy ``records`` (new under the round's device locks, sorted by key) into ``messages``;
    ``idle()`` once their data is sent, while the server inserts them (the most of its round).
    A key another writer inserted meanwhile fails the COPY (psycopg's UniqueViolation)."""
    with db.conn.cursor() as cur, cur.copy(f"COPY messages ({COLS}) FROM STDIN (FORMAT BINARY)") as cp:
        for piece in copy_data(records, received):
            cp.write(piece)
        if idle is not None:
            idle()
    return len(records)


def insert_staged(db: CollectorDb, records: Sequence[Record], received: float) -> int:
    """The fallback when :func:`copy_pg` lost a key to another writer: a binary COPY into a
    session-local staging table (temporary: not WAL-logged, emptied by every commit), then one
    ``INSERT ... ON CONFLICT DO NOTHING`` (no conflict target, so a TimescaleDB key that adds
    ``time`` works unchanged); returns how many went in (a key taken meanwhile is a duplicate)."""
    with db.conn.cursor() as cur:
        cur.execute(STAGE_SQL)
        with cur.copy(f"COPY ingest_stage ({STAGE_COLS}) FROM STDIN (FORMAT BINARY)") as cp:
            cp.set_types(STAGE_TYPES)
            for r in records:
                cp.write_row((r.device, r.boot, r.seq, r.kind, r.msg_id, r.time, r.body, r.camera))
        cur.execute(
            f"INSERT INTO messages ({COLS}) "
            "SELECT d, b, s, k, m, to_timestamp(t), to_timestamp(%s), j::jsonb, c FROM ingest_stage "
            "ORDER BY d, b, s ON CONFLICT DO NOTHING",
            [received],
        )
        return int(cur.rowcount)


def seen(db: CollectorDb, devices: Sequence[str], received: float) -> Optional[Cursor[TupleRow]]:
    """``devices.last_seen = received`` (never backwards) for ``devices`` (sorted), in one statement
    on PostgreSQL (one per device made 200 round trips a round), there adding 1 to each one's writes:
    its cursor of (device, writes, reported_seq)."""
    if db.dialect == "sqlite":
        db.conn.executemany(SEEN_SQLITE, [(d, received) for d in devices])
        return None
    return db.conn.execute(  # type: ignore[no-any-return]
        "INSERT INTO devices (device, last_seen) SELECT d, to_timestamp(%s) FROM unnest(%b::text[]) "
        "AS u(d) ORDER BY d ON CONFLICT (device) DO UPDATE SET last_seen = "
        "GREATEST(devices.last_seen, excluded.last_seen), writes = devices.writes + 1 "
        "RETURNING device, writes, reported_seq",
        [received, list(devices)],
    )

"""The collector's database: SQLite (stdlib, one file, WAL) or PostgreSQL (psycopg 3, the
``[collector]`` extra), one class for both.

Schema changes are versioned SQL files (``collector_sql/<dialect>/NNNN_name.sql``) applied in
order inside one transaction each, recorded in ``schema_version``. Not Alembic: that would bring
SQLAlchemy for five tables, and the two dialects differ in types anyway, so plain files per
dialect are the smaller thing to review. Two collectors starting at once serialise on the
migration (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: an advisory lock).

A round reads which of its keys are stored before it inserts (adapters.collector.trust): a
redelivery changes nothing and is counted as a duplicate. SQLite inserts with ``ON CONFLICT DO
NOTHING``; PostgreSQL COPYs the new records under the round's device locks, and falls back to a
staging table + ``ON CONFLICT DO NOTHING`` (no conflict target, so a TimescaleDB key that adds
``time`` works unchanged) when another writer took a key first (adapters.collector.ingest). A commit returns only when durable (SQLite ``synchronous=FULL``; PostgreSQL's
default ``synchronous_commit``); the caller acknowledges MQTT messages only after it.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple, Optional

from edge_agent.adapters.collector import confirmed, history, ingest, trust
from edge_agent.adapters.collector.known import Known
from edge_agent.adapters.collector.migrations import DbError as DbError
from edge_agent.adapters.collector.migrations import migrations as migrations
from edge_agent.adapters.collector.migrations import statements
from edge_agent.adapters.collector.statuses import device_rows, upsert_status
from edge_agent.adapters.collector.trust import Limits
from edge_agent.core.messages.confirm import Confirms
from edge_agent.core.messages.fleet import LOSS_COUNTERS, DeviceStatus, Event, Record

BUSY_TIMEOUT_MS = 60_000
ADVISORY_LOCK = 0x6564_6765  # "edge"


class Rejected(NamedTuple):
    topic: str
    reason: str
    received: float


def _sqlite_path(url: str) -> str:
    """``sqlite:///relative.db`` or ``sqlite:////absolute.db`` (SQLAlchemy's convention)."""
    rest = url[len("sqlite:///") :]
    if not url.startswith("sqlite:///") or not rest or rest.endswith("/"):
        raise DbError(f"--db {url!r}: expected sqlite:///relative/file.db or sqlite:////absolute/file.db")
    return rest


class CollectorDb:
    """One connection; not thread-safe (the collector stores on one thread)."""

    def __init__(self, url: str, password: Optional[str] = None, limits: Optional[Limits] = None) -> None:
        """``password``: PostgreSQL's, read from a file (never on the URL: argv shows in ps)."""
        self.url = url
        self.limits = limits or Limits()
        self.last_duplicates = 0  # of the last store(): identical redeliveries
        self.last_conflicts: dict[str, int] = {}  # of the last store(): new conflicts per device
        # device -> its confirmation (core.messages.confirm) of the last committed store()
        self.confirms: dict[str, bytes] = {}
        self.known = Known()  # what its last rounds left per device (adapters.collector.known)
        if url.startswith("sqlite:"):
            self.dialect = "sqlite"
            path = _sqlite_path(url)
            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                # opened here, then used by the thread running the collector only (tests: not the main one)
                self.conn: Any = sqlite3.connect(
                    path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False
                )
                self.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                self.conn.execute("PRAGMA journal_mode = WAL")
                self.conn.execute("PRAGMA synchronous = FULL")
            except (OSError, sqlite3.Error) as exc:
                raise DbError(f"--db {url!r}: cannot open the SQLite file: {exc}") from None
        elif url.startswith(("postgresql:", "postgres:")):
            self.dialect = "postgresql"
            try:
                import psycopg
            except ImportError:
                raise DbError(
                    "PostgreSQL needs psycopg 3: pip install 'onnx-edge-agent[collector]'"
                ) from None
            try:
                if password is None:
                    self.conn = psycopg.connect(url, autocommit=True)
                else:  # a keyword: libpq merges it with the URL, it never shows in argv
                    self.conn = psycopg.connect(url, autocommit=True, password=password)
            except psycopg.Error as exc:
                raise DbError(
                    f"--db: cannot connect to PostgreSQL: {str(exc).strip().splitlines()[0]}"
                ) from None
        else:
            raise DbError(f"--db {url!r}: expected sqlite:///PATH or postgresql://...")

    # ---- plumbing -------------------------------------------------------------------------
    def _sql(self, sql: str) -> str:
        return sql if self.dialect == "sqlite" else sql.replace("?", "%s")

    def _x(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.conn.execute(self._sql(sql), params)

    def many(self, sql: str, params: Sequence[Sequence[Any]], fetch: bool = True) -> list[list[Any]]:
        """SQLite: ``sql`` once per parameter tuple; the rows of each (``fetch``). In-process calls
        cost microseconds; PostgreSQL's callers use one set-based query instead (a round trip each)."""
        if not params:
            return []
        if not fetch:
            self.conn.executemany(sql, params)
            return []
        return [self.conn.execute(sql, p).fetchall() for p in params]

    def _begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE" if self.dialect == "sqlite" else "BEGIN")

    def errors(self) -> tuple[type[BaseException], ...]:
        """The driver's error classes (the collector retries a failed commit on these)."""
        if self.dialect == "sqlite":
            return (sqlite3.Error,)
        import psycopg

        return (psycopg.Error,)

    def transient(self) -> tuple[type[BaseException], ...]:
        """The driver's errors about the database, not the data (locked, gone, disk): the round is
        retried as a whole with backoff. Every other error of a round is about its messages."""
        if self.dialect == "sqlite":
            return (sqlite3.OperationalError,)
        import psycopg

        return (psycopg.OperationalError, psycopg.InterfaceError)

    def close(self) -> None:
        self.conn.close()

    # ---- schema ---------------------------------------------------------------------------
    def migrate(self) -> int:
        """Apply every migration not applied yet; returns the schema version now."""
        todo = migrations(self.dialect)
        self._begin()
        try:
            if self.dialect == "postgresql":
                self._x("SELECT pg_advisory_xact_lock(?)", (ADVISORY_LOCK,))
            self._x(
                "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL)"
            )
            have = int(self._x("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()[0])
            if have > len(todo):
                raise DbError(
                    f"{self.dialect} database: schema version {have} is newer than this collector ({len(todo)})"
                )
            for version, name, sql in todo[have:]:
                if self.dialect == "sqlite":
                    for stmt in statements(sql):
                        self.conn.execute(stmt)
                else:
                    self.conn.execute(sql)
                self._x("INSERT INTO schema_version (version, name) VALUES (?, ?)", (version, name))
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        return len(todo)

    def schema_version(self) -> int:
        try:
            return int(self._x("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()[0])
        except self.errors():
            if self.dialect == "postgresql":
                self.conn.rollback()
            return 0

    # ---- writes ---------------------------------------------------------------------------
    def store(
        self,
        records: Sequence[Record],
        received: float,
        statuses: Sequence[DeviceStatus] = (),
        events: Sequence[Event] = (),
        rejected: Sequence[Rejected] = (),
        idle: ingest.Idle = None,
    ) -> int:
        """Everything of one ingest round in ONE transaction; returns the records inserted (the
        rest were there: duplicates). Durable when this returns; :attr:`confirms` then holds each
        device's commit watermark to publish; ``idle()`` runs while PostgreSQL inserts the rows."""
        if self.dialect == "sqlite":
            return self._store(records, received, statuses, events, rejected, False, None)
        from psycopg.errors import UniqueViolation

        try:
            return self._store(records, received, statuses, events, rejected, False, idle)
        except UniqueViolation:  # a writer without the device locks took a key first: redo, staged
            return self._store(records, received, statuses, events, rejected, True, None)

    def _store(
        self,
        records: Sequence[Record],
        received: float,
        statuses: Sequence[DeviceStatus],
        events: Sequence[Event],
        rejected: Sequence[Rejected],
        staged: bool,
        idle: ingest.Idle,
    ) -> int:
        # every row in one fixed order (the devices first, then the messages, keys sorted): two
        # PostgreSQL writers then never wait on each other in a cycle (they deadlocked in the
        # 200-device run), and a device's messages are written by one round at a time
        records = sorted(records, key=lambda r: (r.device, r.boot, r.seq))
        seen = {r.device for r in records} | {e.device for e in events}
        reported: dict[str, int] = {}
        for st in statuses:
            reported[st.device] = max(reported.get(st.device, 0), st.seq)
        by_device: dict[str, list[DeviceStatus]] = {}
        for st in statuses:
            by_device.setdefault(st.device, []).append(st)
        # last_seen is when anything was last heard, even a status that loses to a newer one
        devices = sorted(seen | set(by_device))
        pg = self.dialect == "postgresql"
        confirms: dict[str, bytes] = {}
        try:
            if pg:
                reads = ingest.reads_pg(self, records, devices, received, None if staged else self.known)
            else:
                self._begin()
                reads = trust.reads_sqlite(self, records, devices, self.known)
            split = trust.sort_records(self, records, reported, self.limits, reads)
            early = confirmed.Early(self, [*split.new, *split.same], reads.islands, reads.tails, idle)
            inserted = self._insert_records(split.new, received, staged, early) if split.new else 0
            if not pg:  # SQLite (one writer, no lock order): after the reads, which refresh
                # the connection's schema; as the first statement, an upsert failing to prepare
                # (a broken trigger, dropped since) failed every retry (test_no_ack_on_failed_commit)
                self._seen(devices, received)
            for dev in sorted(by_device):
                for st in by_device[dev]:
                    upsert_status(self, st, received)
            history.insert(self, [st for dev in sorted(by_device) for st in by_device[dev]], received)
            conflicts, repeats, held_conflicts = trust.store_conflicts(
                self, split.conflicts, received, self.limits
            )
            for e in events:
                self._x(
                    self._ts_sql("INSERT INTO events (device, kind, received, body) VALUES (?, ?, {t}, {j})"),
                    (e.device, e.kind, received, e.body),
                )
            for r in rejected:
                self._x(
                    self._ts_sql("INSERT INTO rejected (received, topic, reason) VALUES ({t}, ?, ?)"),
                    (r.received, r.topic, r.reason),
                )
            if rejected:
                trust.trim(self, "rejected", self.limits.rejected_max)
            # Confirmed: what the database holds now (new, identical redeliveries, kept conflicts);
            # never a record it refused or a conflict over the bound
            held = [*split.new, *split.same, *held_conflicts]
            tails: dict[str, Confirms] = {}
            if held:  # PostgreSQL: the COMMIT in the pipeline of the watermark's writes
                planned = None if held_conflicts else early.plan  # made during the COPY, if one ran
                confirms = confirmed.update(self, held, reads.islands, pg, tails, reads.tails, planned)
            if not pg or not held:
                self.conn.execute("COMMIT")
        except BaseException:
            self.known.forget()
            self._rollback()
            raise
        if not staged:  # staged: a writer without the locks is about
            self.known.keep(reads.versions, reads.tops, split.new, tails)
        # a record that lost the insert race to another collector counts as a duplicate
        self.last_duplicates = split.duplicates + repeats + len(split.new) - inserted
        self.last_conflicts = conflicts
        self.confirms = confirms
        return inserted

    def _rollback(self) -> None:
        try:
            self.conn.execute("ROLLBACK")
        except self.errors():  # the connection is gone: nothing to roll back, the caller reopens
            pass

    def dead_letter(self, topic: str, reason: str, payload: bytes, received: float) -> None:
        """Keep a message that failed ``deliveries_max`` stores: its topic, the reason, the first
        4 KiB of its payload (escaped: a typical result, 0.5 KiB, is kept whole and can be replayed),
        how often; in its own transaction, bounded."""
        key = trust.digest(topic, hashlib.sha256(payload).hexdigest())
        text = payload[:4096].decode("utf-8", "backslashreplace").replace("\x00", "\\x00")
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
        self._begin()
        try:
            self._x(
                self._ts_sql(
                    "INSERT INTO dead_letters (digest, first_seen, last_seen, topic, reason, payload, count) "
                    "VALUES (?, {t}, {t}, ?, ?, ?, 1) ON CONFLICT (digest) DO UPDATE SET "
                    "last_seen = excluded.last_seen, reason = excluded.reason, count = dead_letters.count + 1"
                ),
                (key, received, received, topic[:1024], reason[:1024], text),
            )
            trust.trim(self, "dead_letters", self.limits.rejected_max)
            self.conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise

    def retire(self, device: str, purge: bool = False) -> Optional[tuple[int, int]]:
        """Remove ``device`` from the fleet: its ``devices`` row, and with ``purge`` its stored
        messages and events too, in one transaction. None if the database does not know it, else
        (messages, events) it has: deleted with ``purge``, kept without. A device that publishes
        again comes back (its next message or status makes a new row)."""
        self._begin()
        self.known.forget([device])  # SQLite: this connection's own write (PostgreSQL: a new epoch)
        try:
            known = self._x("DELETE FROM devices WHERE device = ?", (device,)).rowcount > 0
            counts = []
            for table in ("messages", "events"):
                if purge:
                    counts.append(int(self._x(f"DELETE FROM {table} WHERE device = ?", (device,)).rowcount))
                else:
                    row = self._x(f"SELECT COUNT(*) FROM {table} WHERE device = ?", (device,)).fetchone()
                    counts.append(int(row[0]))
            known = known or any(counts)
            if purge:  # its health history and retention spans go with it (not counted)
                self._x("DELETE FROM status_history WHERE device = ?", (device,))
                self._x("DELETE FROM expired WHERE device = ?", (device,))
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        return (counts[0], counts[1]) if known else None

    def _ts_sql(self, sql: str) -> str:
        if self.dialect == "sqlite":
            return sql.format(t="?", j="?")
        return sql.format(t="to_timestamp(?)", j="?::jsonb")

    def _insert_records(
        self, records: Sequence[Record], received: float, staged: bool, idle: ingest.Idle
    ) -> int:
        if self.dialect == "sqlite":
            cur = self.conn.executemany(
                "INSERT INTO messages (device, boot, seq, kind, msg_id, time, received, body, camera) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                [
                    (r.device, r.boot, r.seq, r.kind, r.msg_id, r.time, received, r.body, r.camera)
                    for r in records
                ],
            )
            return int(cur.rowcount)
        if staged:
            return ingest.insert_staged(self, records, received)
        return ingest.copy_pg(self, records, received, idle)

    def _seen(self, devices: Sequence[str], received: float) -> None:
        if devices:
            ingest.seen(self, devices, received)

    # ---- reads (fleet views, metrics, tests) ----------------------------------------------
    def devices(self) -> list[dict[str, Any]]:
        """Every device row as ``fleet status`` shows it (adapters.collector.statuses)."""
        return device_rows(self)

    def gap_rows(self, device: str) -> list[tuple[int, int, Optional[int], int]]:
        rows = self._x(
            "SELECT first_seq, last_seq, boot_before, boot_after FROM gaps WHERE device = ? ORDER BY first_seq",
            (device,),
        ).fetchall()
        return [(int(a), int(b), None if c is None else int(c), int(e)) for a, b, c, e in rows]

    def conflict_rows(self, device: str, limit: int = 1000) -> list[tuple[int, int, Optional[str], str]]:
        """``(boot, seq, msg_id, reason)`` of the device's kept conflicts, by seq."""
        rows = self._x(
            "SELECT boot, seq, msg_id, reason FROM conflicts WHERE device = ? ORDER BY seq, boot, id LIMIT ?",
            (device, limit),
        ).fetchall()
        return [(int(b), int(q), m, str(r)) for b, q, m, r in rows]

    def counters(self, device: str) -> Optional[dict[str, int]]:
        row = self._x(
            f"SELECT {', '.join(LOSS_COUNTERS)} FROM devices WHERE device = ?", (device,)
        ).fetchone()
        return None if row is None else {k: int(v or 0) for k, v in zip(LOSS_COUNTERS, row)}

    def message_stats(self) -> tuple[int, int]:
        """(rows, distinct (device, boot, seq)) of the messages table."""
        rows = int(self._x("SELECT COUNT(*) FROM messages").fetchone()[0])
        keys = int(
            self._x("SELECT COUNT(*) FROM (SELECT DISTINCT device, boot, seq FROM messages) AS k").fetchone()[
                0
            ]
        )
        return rows, keys

    def device_ids(self) -> list[str]:
        return [str(r[0]) for r in self._x("SELECT device FROM devices").fetchall()]

    def online(self) -> int:
        return int(
            self._x("SELECT COUNT(*) FROM devices WHERE state IN ('running', 'draining')").fetchone()[0]
        )

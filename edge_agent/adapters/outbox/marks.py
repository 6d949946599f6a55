"""The marks file ``<queue>.marks``: the queue's sequence high-water marks outside the queue file.

The queue file can lose its header (first bytes overwritten), its ``-wal`` (deleted after a crash)
or itself; its ``meta`` table goes with it, and a new start would hand out seq numbers consumers
have already seen (issue 17: seq/boot restarted at 1/1). So the reservation, the highest committed
seq, the boot and the row count are also written here, fsync'd inside every write transaction
before its COMMIT: no number can be committed (and so leave the device) unless a mark at least as
high is on disk outside the file that can be lost.

Two fixed 64-byte slots written in turn (generation number + CRC32 each), so a torn write leaves
the other slot intact; overwriting in place allocates nothing, so it works on a full disk too.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import struct
import threading
import zlib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from edge_agent.adapters.outbox.db import STATS_COUNTERS as COUNTERS
from edge_agent.adapters.outbox.state import QueueState
from edge_agent.core.queue.policy import Marks, resume

log = logging.getLogger("edge_agent.outbox")

MAGIC = b"EAQM"
NCOUNTERS = 8
# magic, generation, seq, committed, boot, rows, skipped_to, clean, counters
_RECORD = struct.Struct(f">4sQqqqqqB{NCOUNTERS}q")
SLOT = 128


def marks_path(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + ".marks")


def _decode(raw: bytes) -> Optional[tuple[int, Marks]]:
    if len(raw) < _RECORD.size + 4:
        return None
    body, crc = raw[: _RECORD.size], raw[_RECORD.size : _RECORD.size + 4]
    if zlib.crc32(body).to_bytes(4, "big") != crc:
        return None
    magic, gen, seq, committed, boot, rows, skipped_to, clean, *counters = _RECORD.unpack(body)
    if magic != MAGIC or min(seq, committed, boot, rows, skipped_to, *counters) < 0:
        return None
    return gen, Marks(seq, committed, boot, rows, bool(clean), skipped_to, tuple(counters))


def read_marks(db_path: Path) -> Optional[Marks]:
    """The newest intact slot of ``<db_path>.marks``, or None (absent or both slots damaged)."""
    try:
        raw = marks_path(db_path).read_bytes()
    except OSError:
        return None
    found = [d for d in (_decode(raw[:SLOT]), _decode(raw[SLOT : 2 * SLOT])) if d is not None]
    return max(found, key=lambda d: d[0])[1] if found else None


class MarksFile:
    """The writer's handle: one open descriptor, each :meth:`write` one ``pwrite`` + ``fsync``."""

    def __init__(self, db_path: Path) -> None:
        self.path = marks_path(db_path)
        old = read_marks(db_path)
        self._lock = threading.Lock()
        fd = os.open(str(self.path), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            self._gen = self._generation(fd)
            if os.fstat(fd).st_size < 2 * SLOT:
                # both slots allocated now: later writes overwrite in place, never need a free block
                os.pwrite(fd, b"\0" * (2 * SLOT), 0)
                if old is not None:
                    self._put(fd, old)
                os.fsync(fd)
                _fsync_dir(self.path.parent)
        except OSError:
            os.close(fd)
            raise
        self._fd = fd
        self.last = old
        self._before: Optional[Marks] = None

    @staticmethod
    def _generation(fd: int) -> int:
        raw = os.pread(fd, 2 * SLOT, 0)
        gens = [d[0] for d in (_decode(raw[:SLOT]), _decode(raw[SLOT:])) if d is not None]
        return max(gens, default=0)

    def _put(self, fd: int, m: Marks) -> None:
        self._gen += 1
        counters = (tuple(m.counters) + (0,) * NCOUNTERS)[:NCOUNTERS]
        body = _RECORD.pack(
            MAGIC, self._gen, m.seq, m.committed, m.boot, m.rows, m.skipped_to, int(m.clean), *counters
        )
        os.pwrite(fd, (body + zlib.crc32(body).to_bytes(4, "big")).ljust(SLOT, b"\0"), (self._gen % 2) * SLOT)

    def write(self, m: Marks) -> None:
        """Durably record ``m`` (raises OSError: the caller must not commit what it does not cover)."""
        with self._lock:
            if m == self.last:
                return
            self._put(self._fd, m)
            _datasync(self._fd)
            self._before, self.last = self.last, m

    def undo(self) -> None:
        """The transaction these marks were written for did not commit: put the previous ones back
        (best effort; marks ahead of the file only ever over-count, never hide)."""
        before = self._before
        if before is not None and self.last is not None:
            try:
                self.write(before)
            except OSError as exc:
                log.warning("outbox: cannot restore %s: %s", self.path, exc.strerror)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def _datasync(fd: int) -> None:
    """fdatasync where there is one: an overwrite in place changes no size, so the data is all that
    must reach the disk (measured: the extra flush per commit is most of what the marks cost)."""
    sync = getattr(os, "fdatasync", os.fsync)
    sync(fd)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(str(directory), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class Ledger:
    """The outbox's part that keeps the queue's ``meta`` rows and the marks file in step: at open
    (merge, count what the file lost), inside every write transaction, and when a full disk leaves
    the marks file the only place to write."""

    def __init__(self, path: Path, marks: MarksFile, state: QueueState) -> None:
        self.path = path
        self.marks = marks
        self._s = state

    def resume(self, meta: Dict[str, int], kept: Optional[Marks], salvaged: bool) -> None:
        """Sequence, boot and crash accounting from the file's meta merged with the kept marks.

        "seq" is a reservation (see :meth:`meta_rows`): after a crash the new boot starts above
        every number the dead process may have handed out, also when the file lost its WAL, header
        or itself; the skipped range and committed rows the file no longer holds are counted and
        logged."""
        s = self._s
        db = Marks(
            meta.get("seq", 0),
            meta.get("seq_committed", 0),
            meta.get("boot", 0),
            meta.get("rows", s.count),
            meta.get("clean", 1) == 1,
            meta.get("skipped_to", 0),
        )
        r = resume(db, kept, salvaged)
        s.boot = r.boot
        s.seq = s.seq_reserved = s.seq_at_open = r.seq
        s.seq_committed = r.committed
        s.skipped_to = r.skipped_to
        last = Marks(r.seq, r.committed, r.boot - 1, s.count, r.seq <= r.skipped_to, r.skipped_to)
        # what is on disk in the marks file (write() skips what is already there)
        self.marks.last = kept if kept is not None else last
        # the merged state differs from the file's: write it at the first commit
        s.dirty = r.lost > 0 or (
            kept is not None
            and not salvaged
            and (replace(kept, counters=()) != db or any(s.counters[k] > meta.get(k, 0) for k in COUNTERS))
        )
        if r.lost:
            assert kept is not None
            s.counters["lost"] += r.lost
            log.error(
                "outbox %s: the file holds no row after seq %d but seq %d was committed (its WAL or the "
                "file itself was lost): %d messages lost (at most %d were stored; acknowledged ones among "
                "them may come back and be sent again with the same id)",
                self.path,
                db.committed,
                kept.committed,
                r.lost,
                kept.rows,
            )
        if r.crashed:
            s.counters["crashes"] += 1
            s.counters["seq_skipped"] += r.skipped
            log.warning(
                "outbox %s: the previous run ended without a clean close: seq %d..%d skipped "
                "(at most %d results lost in the group-commit window)",
                self.path,
                r.seq - r.skipped + 1,
                r.seq,
                r.skipped,
            )

    def meta_rows(self, counters: Dict[str, int], seq: int, committed: int) -> List[Tuple[str, int]]:
        """The ``meta`` rows a write transaction stores with its rows.

        seq: exact on a clean close, else a reservation ahead of what was handed out (put() commits
        before handing out more), so a crash can never make the next boot reuse a number. Twice the
        last batch, at least 16, at most flush_batch: the gap a crash leaves stays close to the loss
        (30 results/s, 0.2 s window: ~6 per batch, gap <= 16 instead of 100)."""
        s = self._s
        reserved = seq if s.closing else seq + s.ahead
        rows = list(counters.items())
        rows += [("seq", reserved), ("seq_committed", committed), ("boot", s.boot)]
        # a clean close accounts for every number up to seq (stored, or counted as dropped or
        # rejected): a later start that finds the file lost counts no crash gap below it
        rows.append(("skipped_to", seq if s.closing else s.skipped_to))
        rows.append(("clean", 1 if s.closing else 0))
        return rows

    def record(
        self, conn: sqlite3.Connection, counters: Dict[str, int], seq: int, committed: int
    ) -> List[Tuple[str, int]]:
        """Inside a write transaction: store the meta rows and the marks for them; returns the rows."""
        meta = self.meta_rows(counters, seq, committed)
        conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", meta)
        self.save(conn, meta)
        return meta

    def save(self, conn: sqlite3.Connection, meta: Sequence[Tuple[str, int]]) -> None:
        """Inside a write transaction, before its COMMIT: the marks file gets what the commit will
        hold (fsync'd), so no committed number is ever above the marks kept outside the file."""
        d = dict(meta)
        rows = int(conn.execute("SELECT value FROM meta WHERE key = 'rows'").fetchone()[0])
        counters = tuple(d.get(k, 0) for k in COUNTERS)
        marks = Marks(
            d["seq"], d["seq_committed"], d["boot"], rows, d["clean"] == 1, d["skipped_to"], counters
        )
        try:
            self.marks.write(marks)
        except OSError as exc:  # handled like any failed write of the queue (the batch is kept)
            raise sqlite3.OperationalError(f"cannot write {self.marks.path}: {exc.strerror}") from None
        self._s.wrote_unclean = d["clean"] == 0

    def commit(self, conn: sqlite3.Connection) -> None:
        """COMMIT after :meth:`save`; a COMMIT that fails (full disk) takes its marks back."""
        try:
            conn.execute("COMMIT")
        except sqlite3.Error:
            self.marks.undo()
            raise

    def reserve_seq(self, counters: bool = False) -> None:
        """A commit failed, so numbers above the reservation in the file may have been handed out
        (put() commits only when the reservation is spent): reserve them in the marks file, which
        needs no free byte, so that a crash now still shows them as a counted gap, never reused.

        ``counters``: write even when the reservation is not spent -- a full disk gave up a batch,
        counted in memory only (the file takes no write now): a kill -9 before the next commit
        must neither forget the drop nor count its numbers as a crash gap (only on that path:
        nothing per result while commits work)."""
        s = self._s
        last = self.marks.last or Marks()
        with s.lock:
            top = s.seq + s.ahead
            # the counters go along, and with them what they account for: numbers up to
            # seq_committed are stored or counted (dropped), a crash now counts only above
            kept = tuple(s.counters[k] for k in COUNTERS)
            skipped_to = max(last.skipped_to, s.skipped_to, s.seq_committed)
        if top <= last.seq and not counters:
            return
        try:
            self.marks.write(replace(last, seq=top, clean=False, skipped_to=skipped_to, counters=kept))
        except OSError as exc:
            log.error(
                "outbox %s: cannot reserve seq numbers in %s: %s", self.path, self.marks.path, exc.strerror
            )
            return
        with s.lock:
            s.seq_reserved = max(s.seq_reserved, top)

    def counters_to_marks(self) -> None:
        """A full disk took every byte: the counters go into the marks file (overwritten in place,
        it needs none), with the crash gap already counted, so the next start neither forgets what
        was dropped nor counts a crash twice."""
        s = self._s
        last = self.marks.last or Marks()
        with s.lock:
            counters = tuple(s.counters[k] for k in COUNTERS)
            # a close knows the last number it handed out: exact, so a restart leaves no gap beyond
            # what the counters already explain (what was dropped or rejected)
            seq = s.seq
        # and everything up to it is accounted for (committed, or counted as dropped or rejected):
        # the next start counts no crash gap over it
        skipped_to = seq
        try:
            self.marks.write(replace(last, seq=seq, clean=True, counters=counters, skipped_to=skipped_to))
        except OSError as exc:
            log.error("outbox %s: counters not written at close: %s", self.path, exc.strerror)
            return
        log.warning("outbox %s: disk full at close: counters kept in %s", self.path, self.marks.path)

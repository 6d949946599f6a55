"""Durable outbox over stdlib sqlite3: every result is on disk before it may leave the device.

A row is deleted only once the broker acknowledged it. "In flight" (claimed by the sync thread,
not yet acked) lives in memory only, so a claim writes nothing required and a crash can only
cause a redelivery (same message id), never a loss.

Durability: WAL with ``synchronous=FULL`` on the writer connection. ``put()`` appends to an
in-memory batch committed (one fsync) at ``flush_batch`` rows or ``flush_interval_s`` after its
first row (default 0.2 s), by a background flusher, or by ``flush()``. A crash loses at most the
uncommitted batch; every message carries a device ``seq`` (see docs/queue.md) so that loss shows
as a gap. Full disk: see :mod:`edge_agent.adapters.outbox.space`.

The class is a composition of parts (:mod:`edge_agent.adapters.outbox.state` lists them); this
module opens the files, stamps and batches puts, runs the flusher and closes. It is also the one
boundary where SQLite errors become :class:`~edge_agent.errors.QueueError` (:func:`_db_errors`):
the sync (``mqtt_sync``), the CLI and the agent never see ``sqlite3``.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Dict, List, Optional, Tuple, Union

from edge_agent.adapters.outbox.claims import Claims, Message
from edge_agent.adapters.outbox.db import STATS_COUNTERS, is_disk_full, iso_time, lock_queue
from edge_agent.adapters.outbox.flusher import run_flusher
from edge_agent.adapters.outbox.marks import Ledger
from edge_agent.adapters.outbox.opening import open_queue
from edge_agent.adapters.outbox.reserve import Reserve
from edge_agent.adapters.outbox.space import SLICE_BYTES, Space, slice_batch
from edge_agent.adapters.outbox.state import QueueState, batch_bytes
from edge_agent.adapters.outbox.tallies import Op, checked, from_meta
from edge_agent.adapters.outbox.writer import Writer
from edge_agent.core.config.schema import QueueConfig
from edge_agent.core.messages.builders import encode, stamp
from edge_agent.core.messages.confirm import Confirms
from edge_agent.core.queue.policy import Limits, admit
from edge_agent.errors import QueueError, QueueFullError

log = logging.getLogger("edge_agent.outbox")

COUNTERS = STATS_COUNTERS
__all__ = ["COUNTERS", "Message", "Outbox"]


@contextlib.contextmanager
def _db_errors(path: Path, doing: str) -> Iterator[None]:
    """The one place a SQLite error leaves the outbox: as QueueError naming the file and the step."""
    try:
        yield
    except sqlite3.Error as exc:
        raise QueueError(f"{path}: cannot {doing}: {exc}") from None


class Outbox:
    """Thread-safe durable queue: the agent loop ``put()``s, the sync thread claims and acks."""

    def __init__(
        self,
        path: Union[str, Path],
        limits: Limits,
        flush_interval_s: float = 0.2,
        flush_batch: int = 100,
        max_pages: Optional[int] = None,
        reserve_bytes: int = 1 << 20,
    ) -> None:
        """``max_pages`` caps the file at that many SQLite pages (PRAGMA max_page_count)."""
        self.path = Path(path)
        self.limits = limits
        self.flush_interval_s = flush_interval_s
        self.flush_batch = flush_batch
        reserve = Reserve(self.path, reserve_bytes)
        self._lockfile: IO[bytes] = lock_queue(self.path)
        try:
            opened = open_queue(self.path, limits.policy, reserve)
        except QueueError:
            self._lockfile.close()
            raise
        kept, meta, recovery, db = opened.kept, opened.meta, opened.recovery, opened.db
        # counters: the file's, or the marks' when a full disk let only the marks be written
        saved = kept.counters if kept is not None else ()
        counters = {k: max(meta.get(k, 0), saved[i] if i < len(saved) else 0) for i, k in enumerate(COUNTERS)}
        s = self._state = QueueState(self.path, counters)
        self.counters = counters
        s.count, s.bytes = opened.rows, opened.nbytes
        s.tallies = from_meta(meta)
        if recovery is not None:
            counters["salvaged"] += recovery.salvaged
            counters["lost"] += recovery.lost
            counters["corrupt_files"] += 1
        self.db = db
        self.ledger = Ledger(self.path, opened.marks, s)
        self.ledger.resume(meta, kept, recovery is not None)
        s.dirty = s.dirty or recovery is not None or meta.get("clean", 1) == 0
        s.ahead = min(flush_batch, 16)
        self.writer = Writer(self.path, db, s, limits, self.ledger, flush_batch)
        try:
            with _db_errors(self.path, "open the queue database"):
                self.space = Space(self.path, db, s, limits, reserve, self.writer, self.ledger, max_pages)
                if not reserve.ensure():
                    step = self.space.step("opened")
                    self.space.enter_full("less than twice the reserve is free at open", keep=step.keep or 0)
                self.space.tune_sync_wal()
            self.claims = Claims(self.path, db, s, self.space)
            self.expire()
        except QueueError:
            opened.close()
            self._lockfile.close()
            raise
        self._flusher = threading.Thread(target=self._run_flusher, name="outbox-flusher", daemon=True)
        self._flusher.start()

    @classmethod
    def from_config(cls, cfg: QueueConfig) -> Outbox:
        limits = Limits(cfg.max_messages, cfg.max_bytes, cfg.max_age_days * 86400.0, cfg.policy)
        return cls(cfg.path, limits, cfg.flush_interval_s, cfg.flush_batch, reserve_bytes=cfg.reserve_bytes)

    @property
    def boot(self) -> int:
        return self._state.boot

    # ---- producer side -------------------------------------------------------------------
    def put(self, topic: str, payload: Dict[str, Any], tally: Optional[Sequence[Op]] = None) -> str:
        """Queue one message; stamps ``seq`` and ``boot`` (and ``id`` when absent) into the places
        the message's builder named (``core.messages.stamp``); returns the id.

        ``tally``: counter operations (outbox.tallies) committed with this row, or never.
        Every call takes a sequence number, also when the message is then rejected, so the far
        end sees every result the device lost as a gap. Raises QueueFullError under ``reject_new``
        at a cap or on a full disk, and for a message larger than ``max_bytes`` under any policy;
        it raises only when the message was not queued (a failed commit of a queued one is the
        flusher's to retry).
        """
        s = self._state
        ops = checked(tally) if tally else ()
        try:
            return self._put(topic, payload, ops)
        except QueueFullError:
            # a refused message took a number too: beyond the reservation, reserve it (and the
            # count of refusals) in the marks, or a crash would forget the loss and reuse the number
            with s.lock:
                spent = s.seq > s.seq_reserved
            if spent:
                self.ledger.reserve_seq()
            raise

    def _put(self, topic: str, payload: Dict[str, Any], ops: Tuple[Op, ...]) -> str:
        s = self._state
        with s.lock:
            s.check_open()
            s.seq += 1
            msg_id = stamp(payload, seq=s.seq, boot=s.boot)
            data = encode(payload)
            if s.disk_full and self.limits.policy == "reject_new":
                self._reject("disk full (SQLITE_FULL)")
            decision = admit(self.limits, s.count + len(s.batch), s.bytes + s.batch_bytes, len(data))
            if not decision.accept:
                self._reject(decision.reason)
            s.rejecting = False
            if not s.batch:
                s.batch_since = time.monotonic()
            s.batch.append((msg_id, topic, data, time.time(), s.seq))
            s.batch_bytes += len(data)
            if ops:
                s.tally_ops[s.seq] = ops
            n = len(s.batch)
            if n == 1 or n >= self.flush_batch:  # start the interval clock, or flush now
                s.cond.notify_all()
            reserve_spent = s.seq >= s.seq_reserved
        if self.flush_interval_s == 0 or n >= 4 * self.flush_batch or reserve_spent:
            try:
                self.flush()
            except QueueFullError:  # reject_new on a full disk: the batch is held, later puts refused
                pass
            except QueueError as exc:
                # queued (requeued for the flusher): raising made the caller take its tally back
                s.warn("flush", f"outbox {self.path}: flush failed (will retry): {exc}", logging.ERROR)
        return msg_id

    def _reject(self, reason: str) -> None:
        s = self._state
        s.counters["rejected"] += 1
        s.dirty = True
        if not s.rejecting:  # once per streak of rejections
            s.rejecting = True
            log.warning("outbox %s: rejecting new messages: %s (policy reject_new)", self.path, reason)
        raise QueueFullError(f"{self.path}: {reason}")

    def flush(self) -> int:
        """Commit the in-memory batch (one fsync); returns rows written."""
        s = self._state
        with self.db.wlock, _db_errors(self.path, "write the queue"):
            with s.lock:
                batch, s.batch, s.batch_bytes = s.batch, [], 0
                s.committing = (len(batch), batch_bytes(batch))
            # one transaction per <= 256 KiB: the WAL (autocheckpointed at 64 pages) then never holds
            # more than ~512 KiB, which the 3/4 of the reserve released on SQLITE_FULL can always
            # checkpoint -- 100 results with 64 KiB snapshots in one transaction could not
            slices = slice_batch(batch, SLICE_BYTES)
            n = 0
            for k, part in enumerate(slices):
                try:
                    n += self.writer.commit(part)
                except sqlite3.Error as exc:
                    rest = [b for later in slices[k:] for b in later]
                    self.ledger.reserve_seq()
                    if is_disk_full(exc):
                        return n + self.space.on_disk_full(rest)
                    s.requeue(rest)
                    raise
                except Exception:  # not SQLite's (a bug): the rows stay for the flusher's retry
                    s.requeue([b for later in slices[k:] for b in later])
                    raise
            return n

    def tallies(self) -> Dict[str, int]:
        """The stored tallies (outbox.tallies): what the committed rows' operations made them."""
        with self._state.lock:
            return dict(self._state.tallies)

    def store_tallies(self, ops: Sequence[Op]) -> None:
        """Set tallies now, in a transaction of their own (the one-time import of a count file)."""
        with self.db.wlock, _db_errors(self.path, "store the tallies"):
            self.writer.store_tallies(ops)

    # ---- sync side: the claims part, behind the boundary ---------------------------------
    def claim(self, n: int, newest_first: bool = False) -> List[Message]:
        """Up to ``n`` rows not in flight, now in flight (see :meth:`Claims.claim`)."""
        with _db_errors(self.path, "read the queue"):
            return self.claims.claim(n, newest_first)

    def ack(self, rowids: Sequence[int]) -> int:
        """Delete rows the broker acknowledged; returns how many existed (see :meth:`Claims.ack`)."""
        with _db_errors(self.path, "delete acknowledged messages"):
            return self.claims.ack(rowids)

    def ack_and_claim(
        self, rowids: Sequence[int], n: int, newest_first: bool = False
    ) -> Tuple[int, List[Message]]:
        """:meth:`ack` then :meth:`claim` in one write transaction (see :meth:`Claims.ack_and_claim`)."""
        with _db_errors(self.path, "acknowledge and claim messages"):
            return self.claims.ack_and_claim(rowids, n, newest_first)

    def release(self, rowids: Optional[Sequence[int]] = None) -> int:
        """Return in-flight rows (all when ``rowids`` is None) to pending, e.g. after a disconnect."""
        return self.claims.release(rowids)

    def confirm_with(self, timeout_s: Optional[float]) -> None:
        """``[mqtt] confirm = "collector"``: a PUBACK makes a row SENT, deleted only by
        :meth:`confirm`, resent after ``timeout_s`` (doubling per attempt); None: "puback"."""
        self.claims.confirm_timeout = timeout_s

    def confirm(self, confirms: Confirms) -> int:
        """Delete the SENT rows a collector's confirmation covers; returns how many."""
        with _db_errors(self.path, "delete confirmed messages"):
            return self.claims.confirm(confirms)

    def pending(self) -> int:
        """``stats()["pending"]`` from memory only (the sync asks it on every loop)."""
        s = self._state
        with s.lock:
            return s.count - len(s.acked_undeleted) + len(s.batch) + s.committing[0]

    # ---- maintenance -----------------------------------------------------------------------
    def purge(self) -> int:
        """Delete every stored message (counted as dropped) and return the space to the filesystem."""
        with _db_errors(self.path, "purge the queue"):
            return self.space.purge()

    def expire(self) -> int:
        """Drop rows older than ``max_age`` (not in flight); counted as dropped (and expired)."""
        with _db_errors(self.path, "expire old messages"):
            return self.space.expire()

    def vacuum(self) -> int:
        """Give free pages back to the filesystem; returns pages freed."""
        with _db_errors(self.path, "vacuum the queue"):
            return self.space.vacuum()

    def _maintain(self) -> None:
        self.expire()
        if self._state.acked_undeleted:
            self.ack([])
        with _db_errors(self.path, "maintain the queue"):
            self.space.maintain()

    def _run_flusher(self) -> None:
        s, flush = self._state, lambda: self.flush()  # looked up per call: a replaced flush is used
        run_flusher(s, self.path, self.flush_interval_s, self.flush_batch, flush, self._maintain)

    def stats(self) -> Dict[str, Any]:
        """Queue figures: ``pending`` counts every message not yet acknowledged (stored + unflushed)."""
        s = self._state
        with self.db.rlock, _db_errors(self.path, "read the queue"):
            s.check_open()
            row = self.db.r.execute("SELECT created FROM messages ORDER BY id LIMIT 1").fetchone()
        sent, sent_oldest = self.claims.sent_stats()
        with s.lock:
            oldest = row[0] if row else (s.batch[0][3] if s.batch else None)
            return {
                "pending": s.count - len(s.acked_undeleted) + len(s.batch) + s.committing[0],
                "inflight": len(s.inflight),
                "unflushed": len(s.batch) + s.committing[0],
                "bytes": s.bytes + s.batch_bytes + s.committing[1],
                "oldest": iso_time(oldest),
                # stored, acknowledged by the broker, not yet confirmed by the collector (in pending)
                "sent": sent,
                "oldest_unconfirmed_s": None
                if sent_oldest is None
                else round(max(0.0, time.time() - sent_oldest), 1),
                "path": str(self.path),
                "seq": s.seq,
                "boot": s.boot,
                "disk_full": s.capped or s.disk_full,
                **s.counters,
            }

    def close(self) -> None:
        """Flush what is batched, write the exact sequence and counters, close (idempotent, no raise
        on a full disk: what cannot be written is counted as dropped and logged)."""
        s = self._state
        with s.lock:
            if s.closed:
                return
            # write the exact seq and the clean mark only if this run wrote anything: a queue that
            # was opened and closed (queue stats/drain of nothing) stays byte-for-byte untouched
            # (or left a reservation on disk: a queue drain after a crash must not count it twice), and
            # the marks when acks changed the row count since they were written
            last = self.ledger.marks.last
            s.dirty = (
                s.dirty
                or s.seq != s.seq_at_open
                or s.wrote_unclean
                or (last is not None and last.rows != s.count)
            )
            s.closing = True
        try:
            try:
                self.flush()
            except QueueFullError:
                # reject_new, still full: the held batch is refused storage after all (counted as
                # rejected); the reserve left is kept so that the next start can open the file
                with s.lock:
                    held, s.batch, s.batch_bytes = s.batch, [], 0
                    s.counters["rejected"] += len(held)
                    s.disk_full = False
                log.error(
                    "outbox %s: disk still full at close: %d held messages rejected", self.path, len(held)
                )
            except QueueError as exc:
                log.error("outbox %s: final flush failed: %s", self.path, exc)
            if s.dirty or s.acked_undeleted:
                # the counters of what the full disk cost (rejected, or dropped with nothing left to
                # drop) or acked deletes did not land: spend the reserve kept for the next start
                # (topped up below)
                self.space.reserve.release()
                self.db.checkpoint()
                try:
                    if s.acked_undeleted:
                        self.ack([])
                    self.flush()
                except QueueError as exc:
                    log.error("outbox %s: counters not written at close: %s", self.path, exc)
            with s.lock:  # accepted, never stored (the file takes no write): counted, not hidden
                unwritten, s.batch, s.batch_bytes = len(s.batch), [], 0
                s.counters["lost"] += unwritten
                s.dirty = s.dirty or unwritten > 0
            if unwritten:
                log.error(
                    "outbox %s: %d unflushed messages lost at close (counted in lost)", self.path, unwritten
                )
            if s.dirty:  # still: the marks file, written in place, is the one place left
                self.ledger.counters_to_marks()
        finally:
            with s.lock:
                s.closed = True
                s.cond.notify_all()
            self._flusher.join(timeout=5.0)
            self.db.close()
            self.ledger.marks.close()
            if s.capped:  # SQLite just deleted -shm and WAL: keep room to open again
                self.space.reserve.top_up(self.space.reserve.size // 4)
            self._lockfile.close()

    def __enter__(self) -> Outbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

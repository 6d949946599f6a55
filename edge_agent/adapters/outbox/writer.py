"""The outbox's commit path: one group commit of the batch, with the drops the caps require, the
counters, the tallies the batch's rows carried (outbox.tallies) and the marks, in one write
transaction on the writer connection."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import List, Tuple

from edge_agent.adapters.outbox import tallies
from edge_agent.adapters.outbox.db import ROWS_DELTA
from edge_agent.adapters.outbox.marks import Ledger
from edge_agent.adapters.outbox.state import Batch, Connections, QueueState, batch_bytes
from edge_agent.core.queue.policy import Limits, over_limits, plan_drops

log = logging.getLogger("edge_agent.outbox")


class Writer:
    """Commits on ``db.w`` (the caller holds ``db.wlock``); SQLite errors pass through unchanged,
    for the caller to tell a full disk from the rest (translated at the outbox's boundary)."""

    def __init__(
        self, path: Path, db: Connections, state: QueueState, limits: Limits, ledger: Ledger, flush_batch: int
    ) -> None:
        self.path = path
        self._db = db
        self._s = state
        self._limits = limits
        self._ledger = ledger
        self._flush_batch = flush_batch

    @contextlib.contextmanager
    def txn(self) -> Iterator[None]:
        """One write transaction on the writer connection, rolled back whole on any error (the
        caller commits through :meth:`Ledger.commit`, which takes the marks back if that fails)."""
        conn = self._db.w
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def commit(self, batch: Batch) -> int:
        """Insert ``batch`` (possibly empty: then only dirty counters or a spent reservation are
        written), drop the oldest rows over the caps, store counters and marks; one fsync."""
        s, conn = self._s, self._db.w
        with s.lock:
            count, nbytes, dirty, seq = s.count, s.bytes, s.dirty, s.seq
        if not batch and not dirty and (seq < s.seq_reserved or seq == s.seq_at_open):
            return 0
        added = batch_bytes(batch)
        committed = max([s.seq_committed, *(b[4] for b in batch)])
        s.ahead = min(self._flush_batch, max(16, 2 * len(batch)))
        with s.lock:
            carried = [s.tally_ops[b[4]] for b in batch if b[4] in s.tally_ops]
        folded = tallies.fold(carried)
        with self.txn():
            boot = s.boot  # constant for the run; the row's numbers are what a confirmation names
            conn.executemany(
                "INSERT INTO messages(msg_id, topic, payload, size, created, boot, seq) VALUES (?,?,?,?,?,?,?)",
                [(m, t, p, len(p), c, boot, q) for m, t, p, c, q in batch],
            )
            tallies.write(conn, folded)  # with the rows that carried them, or not at all
            dropped, freed = self.drop_over_limits(count + len(batch), nbytes + added)
            with s.lock:
                counters = dict(s.counters)
                counters["dropped"] += dropped
            conn.execute(ROWS_DELTA, (len(batch) - dropped,))
            meta = self._ledger.record(conn, counters, seq, committed)
            self._ledger.commit(conn)
        with s.lock:
            s.count += len(batch) - dropped
            s.bytes += added - freed
            s.committing = (0, 0)
            s.counters["dropped"] += dropped
            s.dirty = s.dirty and not dirty
            s.disk_full = False
            s.seq_reserved = dict(meta)["seq"]
            s.seq_committed = committed
            tallies.apply(s.tallies, folded)
            # every row up to committed is stored or given up: their operations are done with
            for q in [q for q in s.tally_ops if q <= committed]:
                del s.tally_ops[q]
        if s.capped:
            self._db.checkpoint()  # on a full disk the WAL's bytes go straight back
        if dropped:
            s.warn(
                "cap",
                f"outbox {self.path}: at its cap ({self._limits.max_messages} messages / "
                f"{self._limits.max_bytes} bytes): dropped the {dropped} oldest "
                f"(dropped so far: {s.counters['dropped']})",
            )
        return len(batch)

    def store_tallies(self, ops: Sequence[tallies.Op]) -> None:
        """Set tallies in a transaction of their own, at once (a one-time import; the caller
        holds ``db.wlock``)."""
        folded = tallies.fold([tallies.checked(ops)])
        with self.txn():
            tallies.write(self._db.w, folded)
            self._db.w.execute("COMMIT")
        with self._s.lock:
            tallies.apply(self._s.tallies, folded)

    def forget_tallies(self, batch: Batch) -> None:
        """A full disk gave ``batch`` up: its rows' operations are never applied."""
        with self._s.lock:
            for b in batch:
                self._s.tally_ops.pop(b[4], None)

    # ---- drops (inside the writer's transaction) -----------------------------------------
    def droppable(self, limit: int, order: str = "ASC") -> List[Tuple[int, int]]:
        """Oldest (id, size) rows not in flight: the only rows a policy may delete."""
        skip = self._s.inflight | self._s.acked_undeleted
        rows = self._db.w.execute(
            f"SELECT id, size FROM messages ORDER BY id {order} LIMIT ?", (limit + len(skip),)
        ).fetchall()
        return [(int(i), int(s)) for i, s in rows if i not in skip][:limit]

    def delete_ids(self, ids: Sequence[int]) -> None:
        for i in range(0, len(ids), 500):
            chunk = list(ids[i : i + 500])
            self._db.w.execute(f"DELETE FROM messages WHERE id IN ({','.join('?' * len(chunk))})", chunk)

    def drop_over_limits(self, count: int, nbytes: int) -> Tuple[int, int]:
        """Delete the oldest rows until under the caps; (rows dropped, bytes freed)."""
        dropped = freed = 0
        while over_limits(self._limits, count, nbytes):
            rows = self.droppable(1000)
            n = plan_drops(self._limits, count, nbytes, (s for _, s in rows))
            if n == 0:
                break
            size = sum(s for _, s in rows[:n])
            self.delete_ids([i for i, _ in rows[:n]])
            dropped, freed, count, nbytes = dropped + n, freed + size, count - n, nbytes - size
        return dropped, freed

"""What the outbox's parts share: its state and the hooks one part calls in another.

The outbox is one class assembled from four modules kept under ~400 lines each: ``outbox``
(put, group commit, close), ``outbox_space`` (full disk, expiry, vacuum) and ``outbox_claims``
(the sync side: claim, ack, release), ``outbox_marks`` (the marks file). This base only declares; :class:`Outbox` sets everything.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Set, Tuple

from edge_agent.core.queue_policy import Limits
from edge_agent.errors import QueueError

if TYPE_CHECKING:
    from edge_agent.adapters.outbox_marks import MarksFile
    from edge_agent.adapters.outbox_reserve import Reserve

Batch = List[Tuple[str, str, bytes, float, int]]  # (msg_id, topic, payload, created, seq)


class OutboxBase:
    path: Path
    limits: Limits
    counters: Dict[str, int]
    flush_batch: int
    _w: sqlite3.Connection
    _r: sqlite3.Connection
    _lock: threading.Lock
    _wlock: threading.Lock
    _rlock: threading.Lock
    _count: int
    _bytes: int
    _committing: Tuple[int, int]
    _dirty: bool
    _disk_full: bool
    _capped: bool
    _full_drops: int
    _max_pages: Optional[int]
    _reserve: Reserve
    _marks: MarksFile
    _seq: int
    _seq_committed: int
    _seq_reserved: int
    _seq_at_open: int
    _skipped_to: int
    _ahead: int
    _wrote_unclean: bool
    boot: int
    _inflight: Set[int]
    _acked_undeleted: Set[int]
    _closed: bool

    def _check_open(self) -> None:
        """Called under the connection's lock: a closed queue answers QueueError, not a crash."""
        if self._closed:
            raise QueueError(f"{self.path}: queue is closed")

    # hooks, each defined by exactly one part
    def _commit(self, batch: Batch) -> int:
        raise NotImplementedError

    def _requeue(self, batch: Batch) -> None:
        raise NotImplementedError

    def _meta_rows(self, counters: Dict[str, int], seq: int, committed: int) -> List[Tuple[str, int]]:
        raise NotImplementedError

    def _save_marks(self, conn: sqlite3.Connection, meta: Sequence[Tuple[str, int]]) -> None:
        raise NotImplementedError

    def _commit_txn(self, conn: sqlite3.Connection) -> None:
        raise NotImplementedError

    def _droppable(self, limit: int, order: str = "ASC") -> List[Tuple[int, int]]:
        raise NotImplementedError

    def _delete_ids(self, ids: Sequence[int]) -> None:
        raise NotImplementedError

    def _warn(self, key: str, msg: str, level: int = 30, period: float = 10.0) -> None:
        raise NotImplementedError

    def _checkpoint(self, conn: Optional[sqlite3.Connection] = None) -> None:
        raise NotImplementedError

    def _enter_full(self, why: str, keep: int = -1) -> None:
        raise NotImplementedError

    def ack(self, rowids: Sequence[int]) -> int:
        raise NotImplementedError

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
import struct
import threading
import zlib
from pathlib import Path
from typing import Optional

from edge_agent.core.queue_policy import Marks

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
            os.fsync(self._fd)
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

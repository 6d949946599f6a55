"""The outbox's disk reserve: ``<queue>.reserve``, headroom written while there is room and given
back to the filesystem on SQLITE_FULL (why and when: :mod:`edge_agent.adapters.outbox.space`)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger("edge_agent.outbox")

CHUNK = 64 * 1024


def free_bytes(directory: Path) -> int:
    """Bytes an unprivileged writer may still use on the filesystem holding ``directory``."""
    try:
        st = os.statvfs(str(directory))
    except OSError:
        return 0
    return int(st.f_bavail) * int(st.f_frsize)


class Reserve:
    """The ``<queue>.reserve`` file: ``size`` bytes of headroom owned by the outbox."""

    def __init__(self, db_path: Path, size: int) -> None:
        self.path = db_path.with_name(db_path.name + ".reserve")
        self.size = max(0, int(size))

    @property
    def held(self) -> bool:
        try:
            return self.path.stat().st_size >= self.size
        except OSError:
            return False

    def ensure(self) -> bool:
        """Create the reserve if there is clearly room (twice its size free); True if held after."""
        if self.size == 0:
            return True
        if self.held:
            return True
        if free_bytes(self.path.parent) < 2 * self.size:
            return False
        try:
            fd = os.open(str(self.path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        except OSError as exc:
            log.warning("outbox: cannot create the disk reserve %s: %s", self.path, exc.strerror)
            return False
        try:
            zeros = b"\0" * CHUNK
            left = self.size
            while left > 0:  # real writes: a sparse file or fallocate on some filesystems holds nothing
                left -= os.write(fd, zeros[: min(CHUNK, left)])
            os.fsync(fd)
        except OSError as exc:
            os.close(fd)
            self.release()
            log.warning("outbox: cannot fill the disk reserve %s: %s", self.path, exc.strerror)
            return False
        os.close(fd)
        return True

    def release(self, keep: int = 0) -> bool:
        """Shrink the reserve to ``keep`` bytes (delete it at 0); True if bytes were given back."""
        try:
            size = self.path.stat().st_size
            if size <= keep:
                return False
            if keep:
                os.truncate(str(self.path), keep)
            else:
                self.path.unlink()
        except FileNotFoundError:
            return False
        except OSError as exc:
            log.error("outbox: cannot release the disk reserve %s: %s", self.path, exc.strerror)
            return False
        return True

    def top_up(self, size: int) -> int:
        """Grow the reserve towards ``size`` with whatever the disk still has; returns its size.

        Used at close on a full disk: SQLite has just deleted its ``-shm`` (32 KiB) and WAL, and
        a WAL database cannot even be opened again without room for a new ``-shm``."""
        try:
            fd = os.open(str(self.path), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError:
            return 0
        try:
            have = os.fstat(fd).st_size
            while have < size:
                try:
                    have += os.write(fd, b"\0" * min(4096, size - have))
                except OSError:
                    break
            return have
        finally:
            os.close(fd)

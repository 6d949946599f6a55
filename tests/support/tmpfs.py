"""A real small filesystem for full-disk tests: a tmpfs mounted by the test (root only).

``PRAGMA max_page_count`` only imitates a full disk: on a real one the WAL, the ``-shm`` and
every delete need bytes too, which is exactly where the outbox used to fail (issue 11).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _skip(reason: str) -> None:
    import pytest

    pytest.skip(reason)


@contextmanager
def tmpfs(where: Path, size: str = "16m") -> Iterator[Path]:
    """Mount a ``size`` tmpfs on ``where``; skips the test with the reason when that is impossible."""
    if os.geteuid() != 0:
        _skip("mounting a real tmpfs needs root (CI runs the suite as root)")
    where.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0777", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        _skip(f"cannot mount a tmpfs here: {r.stderr.strip() or r.returncode}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(directory: Path, name: str = "filler") -> int:
    """Write zeros into ``directory/name`` until the filesystem refuses; returns bytes written."""
    written = 0
    fd = os.open(str(directory / name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while True:
            try:
                written += os.write(fd, b"\0" * 4096)
            except OSError:
                break
        while True:  # the last partial page
            try:
                if os.write(fd, b"\0") == 0:
                    break
                written += 1
            except OSError:
                break
    finally:
        os.close(fd)
    return written


def free(directory: Path) -> int:
    st = os.statvfs(str(directory))
    return int(st.f_bavail) * int(st.f_frsize)

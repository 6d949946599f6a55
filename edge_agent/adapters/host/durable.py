"""The one way to replace a file durably: temp file beside it, fsync, rename, fsync of the directory.

A power cut at any point leaves the old content or the new, never a mix and never an empty file:
the rename is atomic on one filesystem, and the two fsyncs make the data, then the name, reach
the disk in that order. Files that need no durability (the status file on /run, the frame ring)
use a plain rename on purpose and say so in their module.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

FILE_MODE = 0o640  # the service group may read (an operator's `model status`); callers narrow it


def fsync_dir(path: Path) -> None:
    fd = os.open(str(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def durable_file(path: Path, mode: int = FILE_MODE) -> Iterator[BinaryIO]:
    """A file to stream into that replaces ``path`` only when the block ends without an error
    (then durably, with ``mode`` whatever the umask); on an error the temp file is removed."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(str(tmp), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def write_durable(path: Path, data: bytes, mode: int = FILE_MODE) -> None:
    """Replace ``path`` with ``data`` atomically and durably."""
    with durable_file(path, mode) as f:
        f.write(data)


def copy_durable(src: Path, dst: Path, mode: int = FILE_MODE) -> None:
    """Copy ``src`` to ``dst`` (any filesystem) atomically and durably: a reader polling ``dst``
    (the agent's inbox) never sees half a package."""
    with open(src, "rb") as s, durable_file(dst, mode) as d:
        shutil.copyfileobj(s, d, 1 << 20)


def move_durable(src: Path, dst: Path, mode: int = FILE_MODE) -> None:
    """Move a complete, fsync'd ``src`` to ``dst`` durably: a rename on one filesystem, else a
    durable copy (then ``src`` is left for its owner to delete)."""
    try:
        os.replace(src, dst)
    except OSError:  # another filesystem (an [model_update] inbox elsewhere)
        copy_durable(src, dst, mode)
        return
    fsync_dir(dst.parent)


def commit_durable(written: Path, dst: Path) -> None:
    """A complete file that a library wrote by path (onnx.save, onnxruntime's quantizer: neither
    takes a file object) replaces ``dst`` durably: its data fsync'd, the rename, the directory
    fsync'd. ``written`` must sit beside ``dst`` (one filesystem: the rename is atomic)."""
    fd = os.open(str(written), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(written, dst)
    fsync_dir(dst.parent)

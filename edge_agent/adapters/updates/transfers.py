"""The model receiver's transfers on disk (adapters.model_mqtt receives, this keeps): one
directory per transfer under ``transfers/`` holding ``begin.json`` and ``chunks/<index>``, the
``done.json`` list of transfers already handed to the inbox, and the assembly of a complete one.

A directory found at start is validated like a new begin (:func:`load_transfer`): a reboot, a
kill -9 or a hand edit must cost that transfer, never the agent's start.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from edge_agent.adapters.host.durable import durable_file, write_durable
from edge_agent.core.updates.package import TransferBegin, check_transfer_id, parse_begin

FILE_MODE = 0o600


class Refused(ValueError):
    """A message that breaks the protocol's rules: counted as refused, acknowledged, dropped."""


@dataclass
class Transfer:
    begin: TransferBegin
    have: set[int] = field(default_factory=set)
    active_at: float = 0.0  # wall clock of the last begin or chunk (survives a restart via mtimes)


def load_transfer(p: Path, cap: int) -> Transfer:
    """A transfer directory a restart found; Refused (or an OSError) when it cannot be one. Chunks
    that cannot belong (a temp file from a kill -9, a wrong length) are deleted."""
    if not p.is_dir() or p.is_symlink():
        raise Refused("not a transfer directory")
    check_transfer_id(p.name)
    begin = parse_begin((p / "begin.json").read_bytes()[: 1 << 16], cap)
    if begin.transfer_id != p.name:
        raise Refused(f"begin.json names transfer {begin.transfer_id!r}")
    t = Transfer(begin, active_at=(p / "begin.json").stat().st_mtime)
    chunks = p / "chunks"
    for c in chunks.iterdir() if chunks.is_dir() else []:
        # only the names the receiver writes: "7", never "07" (assembling opens chunks/<index>)
        ok = c.name.isascii() and c.name.isdigit() and len(c.name) <= 9 and c.name == str(int(c.name))
        ok = ok and int(c.name) < begin.chunks
        if ok and c.stat().st_size == begin.chunk_len(int(c.name)):
            t.have.add(int(c.name))
            t.active_at = max(t.active_at, c.stat().st_mtime)
        else:
            c.unlink()
    return t


def remove_path(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            p.unlink()


def read_done(workdir: Path) -> list[str]:
    """Transfers already handed to the inbox (their redelivered messages are ignored)."""
    try:
        data = json.loads((workdir / "done.json").read_bytes()[: 1 << 16])
    except (OSError, ValueError):
        return []
    return [str(x) for x in data] if isinstance(data, list) else []


def mark_done(workdir: Path, tid: str, keep: int) -> None:
    done = [*read_done(workdir), tid][-keep:]
    write_durable(workdir / "done.json", json.dumps(done).encode(), FILE_MODE)


def assemble_chunks(d: Path, begin: TransferBegin) -> tuple[Path, str, int]:
    """The chunks of ``d`` joined into ``d/package.pkg`` (durably): its path, sha256 and size, for
    the caller to compare with the begin."""
    pkg = d / "package.pkg"
    h = hashlib.sha256()
    with durable_file(pkg, FILE_MODE) as out:
        for i in range(begin.chunks):
            block = (d / "chunks" / str(i)).read_bytes()
            h.update(block)
            out.write(block)
    return pkg, h.hexdigest(), pkg.stat().st_size

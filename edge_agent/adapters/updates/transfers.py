"""The model receiver's transfers on disk (adapters.updates.receiver receives, this keeps): one
directory per transfer under ``transfers/`` holding ``begin.json`` (the signed begin, written only
after its signature verified) and ``chunks/<index>`` (each matched its signed hash before it was
written), the ``done.json`` list of transfers already handed to the inbox, and the assembly of a
complete one into a package.

A directory found at start is validated like a new begin (:func:`load_transfer`: the signature
again, with today's keys): a reboot, a kill -9 or a hand edit must cost that transfer, never the
agent's start.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Tuple

from edge_agent.adapters.host.durable import durable_file, write_durable
from edge_agent.adapters.updates.package_file import write_tail
from edge_agent.core.updates.binding import SignedBegin
from edge_agent.core.updates.package import Manifest, check_transfer_id
from edge_agent.core.updates.plan import TransferPlan

FILE_MODE = 0o600


class Refused(ValueError):
    """A message that breaks the protocol's rules: counted as refused (and under ``kind``),
    acknowledged, dropped."""

    def __init__(self, message: str, kind: str = "refused") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class Transfer:
    begin: SignedBegin
    manifest: Manifest  # verified: signed by a trusted key, for this device
    have: set[int] = field(default_factory=set)
    active_at: float = 0.0  # wall clock of the last begin or chunk (survives a restart via mtimes)

    @property
    def plan(self) -> TransferPlan:
        assert self.manifest.transfer is not None  # the receiver takes no manifest without one
        return self.manifest.transfer


# the begin's bytes -> the begin and its verified manifest; raises on anything it would refuse
Screen = Callable[[bytes], Tuple[SignedBegin, Manifest]]
MAX_BEGIN_FILE = 1 << 20


def load_transfer(p: Path, screen: Screen) -> Transfer:
    """A transfer directory a restart found; Refused (or an OSError) when it cannot be one. Chunks
    that cannot belong (a temp file from a kill -9, a wrong length) are deleted."""
    if not p.is_dir() or p.is_symlink():
        raise Refused("not a transfer directory")
    check_transfer_id(p.name)
    with open(p / "begin.json", "rb") as f:
        begin, manifest = screen(f.read(MAX_BEGIN_FILE))
    if begin.transfer_id != p.name:
        raise Refused(f"begin.json names transfer {begin.transfer_id!r}")
    t = Transfer(begin, manifest, active_at=(p / "begin.json").stat().st_mtime)
    plan = t.plan
    chunks = p / "chunks"
    for c in chunks.iterdir() if chunks.is_dir() else []:
        # only the names the receiver writes: "7", never "07" (assembling opens chunks/<index>)
        ok = c.name.isascii() and c.name.isdigit() and len(c.name) <= 9 and c.name == str(int(c.name))
        ok = ok and int(c.name) < plan.count
        if ok and c.stat().st_size == plan.chunk_len(int(c.name)):
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


def assemble_package(d: Path, t: Transfer) -> Path:
    """The chunks of ``d`` (each hashed again: a disk can rot) joined into ``d/package.pkg``, then
    the signed manifest appended: a package the install reads like a local file. Each chunk is
    deleted once copied, so a transfer never needs twice its size on disk. ValueError names a
    chunk whose bytes no longer match the plan."""
    pkg = d / "package.pkg"
    plan = t.plan
    with durable_file(pkg, FILE_MODE) as out:
        for i, want in enumerate(plan.chunks):
            chunk = d / "chunks" / str(i)
            block = chunk.read_bytes()
            if hashlib.sha256(block).hexdigest() != want:
                raise ValueError(f"chunk {i} on disk no longer matches its signed sha256")
            out.write(block)
            chunk.unlink()
        write_tail(out, t.begin.manifest_data, t.begin.signature)
    return pkg

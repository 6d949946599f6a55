"""Model package files on disk: write one (``model pack``), read and verify one, extract it.

A plain uncompressed tar (stdlib ``tarfile``): ONNX weights barely compress, and every board has
``tar`` to look inside one by hand. Reading never trusts member names: only the manifest, its
signature and the paths the manifest lists are read, as regular files, and every byte is hashed.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import time
from pathlib import Path
from typing import BinaryIO, Callable, Optional

from edge_agent.adapters.host.durable import FILE_MODE, durable_file, fsync_dir, write_durable
from edge_agent.core.updates.package import (
    MANIFEST,
    SIGNATURE,
    Manifest,
    PackageFile,
    manifest_bytes,
    parse_manifest,
)
from edge_agent.core.updates.plan import DEFAULT_CHUNK, TransferPlan, plan_chunk_size
from edge_agent.errors import ModelError

CHUNK = 1 << 20
MAX_PROBE_IMAGES = 32
# manifest, signature, up to three model files and the probe images, with room to spare: a tar of
# a million tiny members is refused after reading this many headers, not after indexing them all
MAX_MEMBERS = 64 + MAX_PROBE_IMAGES
FREE_RESERVE = 16 << 20  # extraction leaves this much free space: the queue and status file need it
DIR_MODE = 0o750
PACKAGE_MODE = 0o644  # `model pack` output: a file to hand around, nothing secret in it (signed, not sealed)
PRIVATE_DIR_MODE = 0o700  # inbox and transfers: whatever lands there can become the running model


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def make_dir(path: Path, mode: int = DIR_MODE) -> Path:
    """``mkdir -p`` whose created directories get ``mode`` whatever the umask (under ``umask 000``
    a plain mkdir makes them 0777: any local user could drop a package into the inbox)."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            continue
        os.chmod(d, mode)
    return path


def tighten_dir(path: Path, mode: int) -> None:
    """``mode`` on an existing directory of ours that an older version or a umask left wider."""
    st = path.stat()
    if st.st_uid == os.getuid() and st.st_mode & 0o777 & ~mode:
        os.chmod(path, mode)


def write_package(
    out: Path,
    manifest: Manifest,
    sources: dict[str, Path],
    signature: Optional[bytes] = None,
    *,
    signer: Optional[Callable[[bytes], bytes]] = None,
    chunk_size: int = DEFAULT_CHUNK,
) -> Manifest:
    """``sources`` maps each manifest path to the file to store; through the durable-write helper,
    so a full disk or a bad source leaves no half package behind and a power cut no empty one.

    Format 2 (the default): the files first, then ``manifest.json`` with the transfer plan of the
    bytes before it (the body MQTT sends, chunk by chunk, each hash signed), signed by ``signer``.
    A ready ``signature`` of ``manifest`` as it is writes the old layout (format 1: manifest
    first, no plan), which a device installs locally only. Returns the manifest written."""
    with durable_file(out, PACKAGE_MODE) as f:
        if signature is not None:
            with tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as tar:
                _add_bytes(tar, MANIFEST, manifest_bytes(manifest))
                _add_bytes(tar, SIGNATURE, signature)
                _add_files(tar, sources)
            return manifest
        approx = sum(p.stat().st_size + 2048 for p in sources.values())
        hasher = _ChunkHasher(f, plan_chunk_size(approx, chunk_size))
        with tarfile.open(fileobj=hasher, mode="w", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
            _add_files(tar, sources)
            m = manifest.model_copy(update={"transfer": hasher.plan()})
            data = manifest_bytes(m)
            _add_bytes(tar, MANIFEST, data)
            _add_bytes(tar, SIGNATURE, signer(data) if signer is not None else None)
        return m


def write_tail(f: BinaryIO, manifest_data: bytes, signature: Optional[bytes]) -> None:
    """Append the manifest (and signature) members and the end of the archive to a package body
    (the receiver's assembly: the body came in signed chunks, the manifest in the begin)."""
    with tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add_bytes(tar, MANIFEST, manifest_data)
        _add_bytes(tar, SIGNATURE, signature)


def _add_bytes(tar: tarfile.TarFile, name: str, data: Optional[bytes]) -> None:
    if data is None:
        return
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
    tar.addfile(info, io.BytesIO(data))


def _add_files(tar: tarfile.TarFile, sources: dict[str, Path]) -> None:
    for name, src in sources.items():
        info = tar.gettarinfo(str(src), arcname=name)
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        with open(src, "rb") as s:
            tar.addfile(info, s)


class _ChunkHasher:
    """A write-through file that hashes what passes, chunk by chunk, until :meth:`plan`."""

    def __init__(self, f: BinaryIO, chunk_size: int) -> None:
        self.f, self.chunk_size = f, chunk_size
        self.pos = 0
        self.hashes: list[str] = []
        self._h = hashlib.sha256()
        self._in_chunk = 0
        self._frozen = False

    def write(self, data: bytes) -> int:
        n = self.f.write(data)
        view = memoryview(data)
        while not self._frozen and view:
            take = min(len(view), self.chunk_size - self._in_chunk)
            self._h.update(view[:take])
            self._in_chunk += take
            view = view[take:]
            if self._in_chunk == self.chunk_size:
                self.hashes.append(self._h.hexdigest())
                self._h, self._in_chunk = hashlib.sha256(), 0
        self.pos += len(data)
        return n if n is not None else len(data)

    def tell(self) -> int:
        return self.pos

    def flush(self) -> None:
        self.f.flush()

    def plan(self) -> TransferPlan:
        if self._in_chunk:
            self.hashes.append(self._h.hexdigest())
        self._frozen = True
        return TransferPlan(size=self.pos, chunk_size=self.chunk_size, chunks=self.hashes)


def transfer_parts(path: Path) -> tuple[TransferPlan, bytes, bytes]:
    """What `model push` sends of a package: the plan, the manifest bytes and the signature; the
    body (the first ``plan.size`` bytes) checked against the plan's hashes first."""
    with PackageReader(path) as r:
        plan, data, sig = r.manifest.transfer, r.manifest_data, r.signature
    if plan is None:
        raise ModelError(
            f"{path}: a format-{r.manifest.format} package without a transfer plan; pushing needs a package "
            "from this version's `edge-agent model pack` (repack it)"
        )
    if sig is None:
        raise ModelError(f"{path}: unsigned; a package pushed over MQTT must be signed (`model pack --sign`)")
    with open(path, "rb") as f:
        for i, want in enumerate(plan.chunks):
            if hashlib.sha256(f.read(plan.chunk_len(i))).hexdigest() != want:
                raise ModelError(f"{path}: chunk {i} does not match its signed hash (damaged package)")
    return plan, data, sig


def describe_file(path: Path, arcname: str) -> PackageFile:
    return PackageFile(path=arcname, sha256=sha256_file(path), size=path.stat().st_size)


class PackageReader:
    """An opened package: its manifest (parsed), the manifest's bytes and signature.

    Member headers are read once, at most :data:`MAX_MEMBERS` of them; nothing is looked up by
    name in tarfile's own index (``getmember`` would index every header of a hostile tar)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._tar = tarfile.open(path, "r:")  # noqa: SIM115 - closed by close()/__exit__
            self._members = self._index()
        except (OSError, tarfile.TarError) as exc:
            self._close_quietly()
            raise ModelError(
                f"{path}: not a model package (expected a tar from `model pack`): {exc}"
            ) from None
        except ModelError:
            self._close_quietly()
            raise
        try:
            self.manifest_data = self._read_small(MANIFEST, required=True) or b""
            self.signature = self._read_small(SIGNATURE, required=False)
            self.manifest = parse_manifest(self.manifest_data, str(path))
        except BaseException:
            self._close_quietly()
            raise

    def _index(self) -> dict[str, tarfile.TarInfo]:
        out: dict[str, tarfile.TarInfo] = {}
        for i, m in enumerate(self._tar):
            if i >= MAX_MEMBERS:
                raise ModelError(f"{self.path}: more than {MAX_MEMBERS} members; a model package has a few")
            if m.name in out:
                raise ModelError(f"{self.path}: member {m.name!r} appears twice (which one is meant?)")
            out[m.name] = m
        return out

    def _close_quietly(self) -> None:
        tar = getattr(self, "_tar", None)
        if tar is not None:
            tar.close()

    def close(self) -> None:
        self._tar.close()

    def __enter__(self) -> PackageReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _member(self, name: str) -> Optional[tarfile.TarInfo]:
        m = self._members.get(name)
        if m is None:
            return None
        sparse = m.type == tarfile.GNUTYPE_SPARSE or m.issparse()
        if sparse or any(k.startswith("GNU.sparse") for k in m.pax_headers):
            # a 10 KiB tar can hold a 1 GiB sparse member: it would extract until the disk is full
            raise ModelError(
                f"{self.path}: member {name!r} is a sparse file ({m.size} bytes); a model package has none"
            )
        if not m.isreg():
            raise ModelError(f"{self.path}: member {name!r} is not a regular file")
        return m

    def _read_small(self, name: str, required: bool) -> Optional[bytes]:
        m = self._member(name)
        if m is None:
            if required:
                raise ModelError(f"{self.path}: no {name} inside (not a model package?)")
            return None
        if m.size > 1 << 20:
            raise ModelError(f"{self.path}: {name} is {m.size} bytes; expected under 1 MiB")
        f = self._tar.extractfile(m)
        assert f is not None
        return f.read()

    def entries(self) -> list[PackageFile]:
        return list(self.manifest.files.values()) + list(self.manifest.probe)

    def _checked_members(self, dest: Path) -> list[tuple[PackageFile, tarfile.TarInfo]]:
        """Every listed member's header checked, and the total bounded, before a byte is written."""
        out = []
        total = 0
        for entry in self.entries():
            m = self._member(entry.path)
            if m is None:
                raise ModelError(f"{self.path}: {entry.path} is listed in the manifest but missing")
            if m.size != entry.size:
                raise ModelError(
                    f"{self.path}: {entry.path} is {m.size} bytes, the manifest says {entry.size}"
                )
            total += m.size
            out.append((entry, m))
        size = self.path.stat().st_size
        if total > size:  # regular members' bytes are inside the tar: more is a lie or a sparse file
            raise ModelError(
                f"{self.path}: its members claim {total} bytes, more than the {size}-byte package holds"
            )
        st = os.statvfs(dest.parent)
        free = st.f_bavail * st.f_frsize
        if total + FREE_RESERVE > free:
            raise ModelError(
                f"{self.path}: extracting needs {total} bytes, {dest.parent} has {free} bytes free "
                f"(and keeps {FREE_RESERVE >> 20} MiB for the queue)"
            )
        return out

    def extract_to(self, dest: Path) -> None:
        """Copy each listed file into ``dest`` (created), checking size and sha256, fsync'd."""
        members = self._checked_members(dest)
        make_dir(dest)
        for entry, m in members:
            src = self._tar.extractfile(m)
            assert src is not None
            target = dest / entry.path
            make_dir(target.parent)
            h = hashlib.sha256()
            written = 0
            fd = os.open(str(target), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
            with os.fdopen(fd, "wb") as out:
                os.fchmod(out.fileno(), FILE_MODE)
                while written <= entry.size:
                    block = src.read(CHUNK)
                    if not block:
                        break
                    written += len(block)
                    h.update(block)
                    out.write(block)
                out.flush()
                os.fsync(out.fileno())
            if written != entry.size or h.hexdigest() != entry.sha256:
                raise ModelError(
                    f"{self.path}: {entry.path} has sha256 {h.hexdigest()[:16]}... ({written} bytes), "
                    f"the manifest says {entry.sha256[:16]}... ({entry.size} bytes) (corrupt or tampered package)"
                )
        write_durable(dest / MANIFEST, self.manifest_data)
        if self.signature is not None:
            write_durable(dest / SIGNATURE, self.signature)
        for sub in {dest, *((dest / e.path).parent for e in self.entries())}:
            fsync_dir(sub)

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
from typing import Optional

from edge_agent.core.model_package import (
    MANIFEST,
    SIGNATURE,
    Manifest,
    PackageFile,
    manifest_bytes,
    parse_manifest,
)
from edge_agent.errors import ModelError

CHUNK = 1 << 20
MAX_PROBE_IMAGES = 32


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def fsync_dir(path: Path) -> None:
    fd = os.open(str(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_durable(path: Path, data: bytes) -> None:
    """Replace ``path`` atomically and durably (power cut -> old or new content, never a mix)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_package(
    out: Path,
    manifest: Manifest,
    sources: dict[str, Path],
    signature: Optional[bytes] = None,
) -> None:
    """``sources`` maps each manifest path to the file to store; written to a temp name, then renamed."""
    tmp = out.with_name(out.name + ".partial")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in ((MANIFEST, manifest_bytes(manifest)), (SIGNATURE, signature)):
            if data is None:
                continue
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
            tar.addfile(info, io.BytesIO(data))
        for name, src in sources.items():
            info = tar.gettarinfo(str(src), arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with open(src, "rb") as f:
                tar.addfile(info, f)
    os.replace(tmp, out)


def describe_file(path: Path, arcname: str) -> PackageFile:
    return PackageFile(path=arcname, sha256=sha256_file(path), size=path.stat().st_size)


class PackageReader:
    """An opened package: its manifest (parsed), the manifest's bytes and signature."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._tar = tarfile.open(path, "r:")  # noqa: SIM115 - closed by close()/__exit__
        except (OSError, tarfile.TarError) as exc:
            raise ModelError(
                f"{path}: not a model package (expected a tar from `model pack`): {exc}"
            ) from None
        self.manifest_data = self._read_small(MANIFEST, required=True) or b""
        self.signature = self._read_small(SIGNATURE, required=False)
        self.manifest = parse_manifest(self.manifest_data, str(path))

    def close(self) -> None:
        self._tar.close()

    def __enter__(self) -> PackageReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _member(self, name: str) -> Optional[tarfile.TarInfo]:
        try:
            m = self._tar.getmember(name)
        except KeyError:
            return None
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

    def extract_to(self, dest: Path) -> None:
        """Copy each listed file into ``dest`` (created), checking size and sha256, fsync'd."""
        dest.mkdir(parents=True, exist_ok=True)
        for entry in self.entries():
            m = self._member(entry.path)
            if m is None:
                raise ModelError(f"{self.path}: {entry.path} is listed in the manifest but missing")
            if m.size != entry.size:
                raise ModelError(
                    f"{self.path}: {entry.path} is {m.size} bytes, the manifest says {entry.size}"
                )
            src = self._tar.extractfile(m)
            assert src is not None
            target = dest / entry.path
            target.parent.mkdir(parents=True, exist_ok=True)
            h = hashlib.sha256()
            with open(target, "wb") as out:
                while True:
                    block = src.read(CHUNK)
                    if not block:
                        break
                    h.update(block)
                    out.write(block)
                out.flush()
                os.fsync(out.fileno())
            if h.hexdigest() != entry.sha256:
                raise ModelError(
                    f"{self.path}: {entry.path} has sha256 {h.hexdigest()[:16]}..., "
                    f"the manifest says {entry.sha256[:16]}... (corrupt or tampered package)"
                )
        write_durable(dest / MANIFEST, self.manifest_data)
        if self.signature is not None:
            write_durable(dest / SIGNATURE, self.signature)
        for sub in {dest, *((dest / e.path).parent for e in self.entries())}:
            fsync_dir(sub)

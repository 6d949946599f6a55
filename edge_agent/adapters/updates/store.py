"""The on-device model store: versions, the active pointer, staging, and the lock.

Layout under ``<state_dir>/models``::

    versions/<name>-<version>-<sha8>/   complete, verified packages (manifest + files), never edited
    staging/                            extraction in progress; anything here at start is debris
    active.json                         the only switch: core.model_state.StoreState as JSON
    lock                                flock: the agent and the CLI never switch at the same time

Crash safety comes from ordering: a version directory is extracted under ``staging/``, every file
fsync'd, then renamed into ``versions/`` (rename is atomic on one filesystem) and the directory
fsync'd; only then is ``active.json`` replaced (temp + fsync + rename + dir fsync). A kill -9 at any
point leaves either the old pointer or the new one, each naming a complete directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

from edge_agent.adapters.host.durable import FILE_MODE, fsync_dir, write_durable
from edge_agent.adapters.updates.package_file import (
    DIR_MODE,
    PackageReader,
    make_dir,
    sha256_file,
    tighten_dir,
)
from edge_agent.core.config.schema import Config
from edge_agent.core.updates.binding import Target
from edge_agent.core.updates.package import MANIFEST, Manifest, parse_manifest, parse_version
from edge_agent.core.updates.store_state import Highest, StoreState
from edge_agent.errors import ModelError

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1)
def _board_kind() -> str:
    from edge_agent.adapters.runtime.board import detect_board

    return str(detect_board().kind)


def device_target(cfg: Config) -> Target:
    """This device as a manifest's target fields name it: its id, groups, board kind, agent version."""
    from edge_agent import __version__

    return Target(cfg.device.id, tuple(cfg.model_update.groups), _board_kind(), __version__)


class ModelStore:
    def __init__(self, state_dir: str) -> None:
        self.root = Path(state_dir) / "models"
        self.versions = self.root / "versions"
        self.staging = self.root / "staging"
        self.pointer = self.root / "active.json"

    def ensure(self) -> ModelStore:
        """The store's directories, 0750 whatever the umask (the state dir too, when we make it)."""
        created = not self.root.exists()
        for d in (self.versions, self.staging):
            make_dir(d, DIR_MODE)
        if created:
            with contextlib.suppress(OSError):
                tighten_dir(self.root, DIR_MODE)
        return self

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        self.ensure()
        fd = os.open(str(self.root / "lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
        with os.fdopen(fd, "r+b") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)

    # ---- the pointer ------------------------------------------------------------------------
    def state(self) -> StoreState:
        try:
            raw = self.pointer.read_bytes()
            return StoreState.from_json(json.loads(raw.decode("utf-8")), str(self.pointer))
        except FileNotFoundError:
            return StoreState()
        except (OSError, ValueError, ModelError) as exc:
            # written atomically, so this is disk corruption or a hand edit: the config's model
            # beats no model, and the one line names the field (ModelError) or the parse error
            reason = str(exc) if isinstance(exc, ModelError) else f"{self.pointer}: unreadable ({exc})"
            log.error("%s; running the config's model, the file is kept as .corrupt", reason)
            with contextlib.suppress(OSError):
                os.replace(self.pointer, self.pointer.with_suffix(".corrupt"))
            return StoreState()

    def save(self, state: StoreState) -> None:
        self.ensure()
        state.updated_at = time.time()
        write_durable(self.pointer, (json.dumps(state.to_json(), indent=1) + "\n").encode("utf-8"))

    # ---- versions ---------------------------------------------------------------------------
    def version_dir(self, vid: str) -> Path:
        return self.versions / vid

    def manifest(self, vid: str) -> Manifest:
        d = self.version_dir(vid)
        try:
            data = (d / MANIFEST).read_bytes()
        except OSError as exc:
            raise ModelError(f"{d}: installed version has no readable manifest ({exc})") from None
        return parse_manifest(data, str(d))

    def verify(self, vid: str) -> Manifest:
        """Re-hash an installed version's model files (a flipped bit on an SD card is a real thing)."""
        m = self.manifest(vid)
        d = self.version_dir(vid)
        for role, f in m.files.items():
            p = d / f.path
            if not p.is_file() or sha256_file(p) != f.sha256:
                raise ModelError(f"{p}: {role} file missing or its sha256 no longer matches the manifest")
        return m

    def stage(self, reader: PackageReader) -> str:
        """Extract ``reader`` into ``versions/`` (via staging + rename); returns the version id."""
        m = reader.manifest
        vid = m.version_id
        final = self.version_dir(vid)
        if final.is_dir():
            return vid  # same name, version and detector hash: already here and verified at its staging
        self.ensure()
        tmp = self.staging / f"{vid}.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            reader.extract_to(tmp)
            labels = m.labels.get("detector")
            if labels:
                write_durable(tmp / "detector.labels.json", json.dumps(labels).encode("utf-8"))
            if m.labels.get("classifier"):
                write_durable(tmp / "classifier.labels.json", json.dumps(m.labels["classifier"]).encode())
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        fsync_dir(self.versions)
        return vid

    def clean_staging(self) -> None:
        """Half-extracted versions from a power cut are never referenced: remove them at start
        (files as well as directories: nothing in staging is ever used)."""
        if self.staging.is_dir():
            for p in self.staging.iterdir():
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        p.unlink()

    def prune(self, keep: list[Optional[str]]) -> None:
        """Delete every version directory not in ``keep`` (None entries = the config's model)."""
        wanted = {k for k in keep if k}
        if not self.versions.is_dir():
            return
        for p in self.versions.iterdir():
            if p.name not in wanted:
                shutil.rmtree(p, ignore_errors=True)

    def paths(self, vid: str) -> dict[str, Path]:
        """Role -> file path of an installed version, plus ``<role>_labels`` when the manifest had labels."""
        m = self.manifest(vid)
        d = self.version_dir(vid)
        out = {role: d / f.path for role, f in m.files.items()}
        for role in ("detector", "classifier"):
            if (d / f"{role}.labels.json").is_file():
                out[f"{role}_labels"] = d / f"{role}.labels.json"
        return out

    def probe_images(self, vid: str) -> list[Path]:
        m = self.manifest(vid)
        return [self.version_dir(vid) / p.path for p in m.probe]


def highest(store: ModelStore, state: StoreState) -> Optional[Highest]:
    """The highest version ever switched to (kept in the pointer file, so across rollbacks and
    restarts); a store from before anti-rollback starts from its current version."""
    if state.highest is not None:
        return state.highest
    if state.current:
        try:
            return Highest(version=store.manifest(state.current).version, vid=state.current)
        except ModelError:
            return None
    return None


def downgrade_reason(store: ModelStore, state: StoreState, m: Manifest) -> Optional[str]:
    """Why ``m`` would be a rollback (PEP 440 order), or None. The same version is accepted only
    as the very package that set the mark (re-installing it after a rollback): a different package
    under an old version number is a replay of an older build."""
    hi = highest(store, state)
    if hi is None:
        return None
    try:
        top = parse_version(hi.version)
    except ValueError:  # a pointer written by hand: not a reason to refuse every update
        return None
    v = parse_version(m.version)
    if v > top or (v == top and hi.vid == m.version_id):
        return None
    return (
        f"version {m.version} is not newer than {hi.version}, the highest installed "
        "(anti-rollback); to go back on purpose run `edge-agent model rollback` or "
        "`edge-agent model install --allow-downgrade PACKAGE` on the device"
    )

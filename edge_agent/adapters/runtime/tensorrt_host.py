"""TensorRT on the board: its version, the GPU, the keyed engine cache and the first-build notice.

Read from files under an injectable root (tests use a fake tree), never by importing the
``tensorrt`` Python module: JetPack installs it for the system Python only, not into our venv.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Optional, Union

from edge_agent.adapters.host import sdnotify
from edge_agent.adapters.runtime.board import BoardInfo
from edge_agent.core.runtime.tensorrt_plan import engine_cache_dir, jetson_gpu

log = logging.getLogger(__name__)

_LIB_DIRS = ("usr/lib/aarch64-linux-gnu", "usr/lib/x86_64-linux-gnu", "usr/lib64", "usr/local/cuda/lib64")
# A first FP16 engine build of a YOLOv8n-sized model takes minutes on a Nano (sm_53, 4 GB shared
# memory; Ultralytics' Jetson guide: TensorRT export is the slow step there): the start timeout
# is extended by this much before it starts.
FIRST_BUILD_EXTEND_S = 30 * 60


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def tensorrt_version(root: Union[str, Path] = "/") -> Optional[str]:
    """libnvinfer's version: from the library file name (libnvinfer.so.8.2.1), else dpkg's record."""
    root = Path(root)
    found = []
    for d in _LIB_DIRS:
        for lib in (root / d).glob("libnvinfer.so.*"):
            m = re.fullmatch(r"libnvinfer\.so\.(\d+(?:\.\d+)*)", lib.name)
            if m:
                found.append(m.group(1))
    if found:
        return max(found, key=_version_key)
    try:
        status = (root / "var/lib/dpkg/status").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for block in status.split("\n\n"):
        if re.search(r"^Package: libnvinfer\d+$", block, re.M):
            m = re.search(r"^Version: (?:\d+:)?(\d+(?:\.\d+)*)", block, re.M)
            if m:
                return m.group(1)
    return None


def gpu_key(board: BoardInfo, root: Union[str, Path] = "/") -> str:
    """Jetson: SoC + compute capability; a discrete GPU: the driver's model name; else 'gpu-unknown'."""
    gpu = jetson_gpu(board.compatible)
    if gpu is not None:
        return f"{gpu.soc.split(',')[-1]}-sm{gpu.sm}"
    for info in sorted(Path(root, "proc/driver/nvidia/gpus").glob("*/information")):
        try:
            text = info.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        m = re.search(r"^Model:\s*(.+)$", text, re.M)
        if m:
            return re.sub(r"[^A-Za-z0-9]+", "-", m.group(1).strip()).strip("-").lower()
    return "gpu-unknown"


def engine_dir(state_dir: str, model_sha256: str, board: BoardInfo, root: Union[str, Path] = "/") -> str:
    return engine_cache_dir(
        state_dir, model_sha256, tensorrt_version(root) or "unknown", gpu_key(board, root)
    )


class EngineBuild:
    """Around a TensorRT session creation: a cold cache means a build -> extend systemd's start
    timeout first and log how long it took; a warm cache is just a load."""

    def __init__(self, cache_dir: str, model_name: str) -> None:
        self.cache_dir = Path(cache_dir)
        self.model_name = model_name
        self.cold = not any(self.cache_dir.glob("*.engine"))
        self._t0 = 0.0

    def start(self) -> None:
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # e.g. doctor run by a user who cannot write the service's state dir
            log.warning(
                "%s: TensorRT engine cache %s cannot be created (%s): the engine is rebuilt on every start",
                self.model_name,
                self.cache_dir,
                exc.strerror or exc,
            )
        if self.cold:
            sdnotify.notify(f"EXTEND_TIMEOUT_USEC={FIRST_BUILD_EXTEND_S * 1_000_000}")
            log.warning(
                "%s: building the TensorRT FP16 engine (first run for this model, TensorRT and GPU; "
                "minutes on a Jetson Nano), cached in %s",
                self.model_name,
                self.cache_dir,
            )
        self._t0 = time.perf_counter()

    def finish(self, used: Sequence[str]) -> float:
        """Log the outcome once the session exists; returns the seconds it took."""
        took = time.perf_counter() - self._t0
        if "TensorrtExecutionProvider" not in used:
            return took
        if self.cold:
            log.warning("%s: TensorRT engine built in %.1f s (%s)", self.model_name, took, self.cache_dir)
        else:
            log.info("%s: TensorRT engine loaded from %s in %.1f s", self.model_name, self.cache_dir, took)
        return took

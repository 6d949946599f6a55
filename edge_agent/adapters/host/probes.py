"""Small probes of the host for ``doctor`` and the result metadata: clock, CPU, devices, disk, network.

Each probe answers instead of raising: a doctor that crashes on the first odd board helps nobody.
Paths take an injectable ``root`` so tests can use fake ``/proc`` and ``/dev`` trees.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import shutil
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

# Year before which a wall clock is certainly wrong (boards without RTC boot at 1970 or at the
# last fake-hwclock save); used when the kernel cannot tell us its NTP state.
_PLAUSIBLE_YEAR = 2025
_TIME_ERROR = 5  # adjtimex(2): clock not synchronised


@functools.lru_cache(maxsize=1)
def _libc() -> Optional[ctypes.CDLL]:
    # find_library runs `ldconfig -p` in a subprocess: once per process, never per frame
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        return ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None


_clock_cache: dict[str, tuple[float, Optional[bool]]] = {}
_CLOCK_TTL_S = 5.0


def clock_synchronised(root: Union[str, Path] = "/") -> Optional[bool]:
    """True/False when known, None when this system cannot say (cached for a few seconds).

    The kernel's NTP state (``adjtimex``) is what ``timedatectl`` shows as "System clock
    synchronized"; systemd-timesyncd also leaves ``/run/systemd/timesync/synchronized``.
    """
    key = str(root)
    now = time.monotonic()
    hit = _clock_cache.get(key)
    if hit is not None and now - hit[0] < _CLOCK_TTL_S:
        return hit[1]
    state = _clock_state(Path(root))
    _clock_cache[key] = (now, state)
    return state


def _clock_state(root: Path) -> Optional[bool]:
    if time.gmtime().tm_year < _PLAUSIBLE_YEAR:
        return False
    if (root / "run/systemd/timesync/synchronized").exists():
        return True
    libc = _libc()
    if libc is None:
        return None
    try:
        buf = ctypes.create_string_buffer(512)  # struct timex is ~208 bytes; modes=0 only reads
        state = int(libc.adjtimex(buf))
    except (OSError, AttributeError):
        return None
    if state < 0:
        return None
    return state != _TIME_ERROR


@dataclass(frozen=True)
class CpuFeatures:
    model: str
    flags: tuple[str, ...]
    dot_product: bool  # ARM asimddp / x86 VNNI: int8 dot products, where INT8 pays off most

    @property
    def summary(self) -> str:
        if not self.flags:
            return "unknown"
        arm = "asimd" in self.flags
        name = "dot-product (asimddp)" if arm else "VNNI"
        return f"{name}: {'yes' if self.dot_product else 'no'}"


def cpu_features(root: Union[str, Path] = "/") -> CpuFeatures:
    try:
        text = (Path(root) / "proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return CpuFeatures("unknown", (), False)
    flags: set[str] = set()
    model = ""
    for line in text.splitlines():
        key, _, val = line.partition(":")
        key = key.strip().lower()
        if key in ("flags", "features"):
            flags.update(val.split())
        elif key in ("model name", "hardware", "cpu part") and not model:
            model = val.strip()
    dot = bool(flags & {"asimddp", "avx512_vnni", "avx_vnni", "avxvnni"})
    return CpuFeatures(model or "unknown", tuple(sorted(flags)), dot)


def list_devices(root: Union[str, Path] = "/") -> dict[str, list[str]]:
    dev = Path(root) / "dev"
    patterns = {
        "cameras": ("video*",),
        "serial": ("ttyUSB*", "ttyACM*", "ttyAMA*", "ttyS0", "serial0", "serial1", "ttyTHS*"),
    }
    found: dict[str, list[str]] = {}
    for kind, globs in patterns.items():
        names: set[str] = set()
        for g in globs:
            names.update(str(p) for p in dev.glob(g))
        found[kind] = sorted(names)
    return found


def dir_writable(path: Union[str, Path]) -> tuple[bool, str]:
    """Create ``path`` if needed and write a probe file; (ok, message)."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe = p / f".edge-agent-probe-{os.getpid()}"
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as exc:
        return False, f"{p}: {exc.strerror or exc}"
    return True, str(p)


def free_disk_bytes(path: Union[str, Path]) -> Optional[int]:
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free
    except OSError:
        return None


def tcp_reachable(host: str, port: int, timeout_s: float = 2.0) -> tuple[bool, str]:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True, f"{host}:{port} accepts connections"
    except OSError as exc:
        return False, f"{host}:{port}: {exc.strerror or exc}"


def lower_thread_priority(niceness: int = 10) -> bool:
    """Raise the calling thread's nice value (Linux: per thread). False where not possible.

    Capture and preprocessing threads run beside onnxruntime's intra-op pool, which splits each
    operator across all cores and waits for its slowest part: a background thread preempting one
    pool thread stalls the whole operator. Niced, they fill the pool's idle gaps instead.
    """
    if not hasattr(os, "setpriority") or not hasattr(threading, "get_native_id"):
        return False
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + niceness))
    except OSError:
        return False
    return True

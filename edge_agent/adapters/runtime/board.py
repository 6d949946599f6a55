"""Which board are we on? Read from the device tree and L4T release file under an injectable root.

Tests pass a fake root (a tmp dir with ``proc/device-tree/model`` etc.); production uses ``/``.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional, Union

BoardKind = Literal["rpi4", "rpi5", "rpi", "jetson", "generic-arm", "generic-x86", "generic"]


@dataclass(frozen=True)
class BoardInfo:
    kind: BoardKind
    model: str  # human name, e.g. "Raspberry Pi 5 Model B Rev 1.0"
    machine: str  # platform.machine()
    physical_cores: int
    compatible: tuple[str, ...] = ()
    l4t_release: Optional[str] = None  # e.g. "R36 (release), REVISION: 3.0"

    @property
    def is_jetson(self) -> bool:
        return self.kind == "jetson"

    @property
    def is_raspberry_pi(self) -> bool:
        return self.kind in ("rpi4", "rpi5", "rpi")


def _read(path: Path) -> Optional[bytes]:
    try:
        return path.read_bytes()
    except OSError:
        return None


def physical_cores(root: Path) -> int:
    """Distinct (physical id, core id) pairs from /proc/cpuinfo; SMT siblings count once."""
    raw = _read(root / "proc/cpuinfo")
    logical = os.cpu_count() or 1
    if not raw:
        return logical
    pairs: set[tuple[str, str]] = set()
    processors = 0
    phys = core = ""
    for line in [*raw.decode("utf-8", "replace").splitlines(), ""]:
        key, _, val = line.partition(":")
        key, val = key.strip(), val.strip()
        if key == "processor":
            processors += 1
        elif key == "physical id":
            phys = val
        elif key == "core id":
            core = val
        elif not line.strip() and core:
            pairs.add((phys, core))
            phys = core = ""
    # ARM cpuinfo has no core ids: every "processor" is a physical core there
    return len(pairs) or processors or logical


def detect_board(root: Union[str, Path] = "/", machine: Optional[str] = None) -> BoardInfo:
    root = Path(root)
    machine = machine or platform.machine()
    model_raw = _read(root / "proc/device-tree/model") or b""
    compat_raw = _read(root / "proc/device-tree/compatible") or b""
    model = model_raw.rstrip(b"\x00").decode("utf-8", "replace").strip()
    compatible = tuple(c.decode("utf-8", "replace") for c in compat_raw.split(b"\x00") if c)
    tegra = _read(root / "etc/nv_tegra_release")
    l4t = tegra.decode("utf-8", "replace").splitlines()[0].lstrip("# ").strip() if tegra else None
    cores = physical_cores(root)
    kind: BoardKind
    compat_l = " ".join(compatible).lower()
    model_l = model.lower()
    if l4t or "jetson" in model_l or "nvidia,tegra" in compat_l:
        kind = "jetson"
    elif "raspberry pi 5" in model_l or "raspberrypi,5" in compat_l or "brcm,bcm2712" in compat_l:
        kind = "rpi5"
    elif "raspberry pi 4" in model_l or "raspberrypi,4" in compat_l or "brcm,bcm2711" in compat_l:
        kind = "rpi4"
    elif "raspberry pi" in model_l or "raspberrypi" in compat_l:
        kind = "rpi"
    elif machine.lower() in ("aarch64", "arm64") or machine.lower().startswith("arm"):
        kind = "generic-arm"
    elif machine.lower() in ("x86_64", "amd64", "i686", "x86"):
        kind = "generic-x86"
    else:
        kind = "generic"
    if not model:
        model = {"jetson": "NVIDIA Jetson"}.get(kind, f"generic {machine}")
    return BoardInfo(kind, model, machine, cores, compatible, l4t)


_VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})


def int8_saturates(root: Union[str, Path] = "/", machine: Optional[str] = None) -> bool:
    """True on x86-64 without VNNI, where INT8 accuracy measured on the host is not the board's.

    onnxruntime's u8 x s8 kernels there (``vpmaddubsw``) add each pair of products into a saturating
    int16; measured on an AVX2 EPYC: 774 of 1073 MatMulInteger outputs off with full-range
    activations, none below 128. ARM dot-product kernels and VNNI (int32 sums) are exact.
    """
    machine = machine or platform.machine()
    if machine.lower() not in ("x86_64", "amd64"):
        return False
    raw = _read(Path(root) / "proc/cpuinfo")
    if raw is None:
        return False
    for line in raw.decode("utf-8", "replace").splitlines():
        if line.startswith("flags"):
            return not _VNNI_FLAGS & set(line.partition(":")[2].split())
    return False

"""Which onnxruntime can load which model: the one table, and the checks built on it.

An onnxruntime release refuses a model whose IR version or whose ``ai.onnx`` / ``ai.onnx.ml``
opset is newer than the ONNX release it was built against ("Unsupported model IR version: 9, max
supported IR version: 8", "Current official support for domain ai.onnx is till opset 16"). A
Jetson Nano on JetPack 4.6 has onnxruntime 1.11, so a model exported today must be down-converted
before it goes there. Pure logic: the caller reads the model's IR/opsets (core.onnx_wire) and the
installed version.

Sources: the version matrix in onnxruntime's docs (docs/Versioning.md, "ONNX Runtime compatibility"
page: each release's ONNX release and ai.onnx opset) and, for the IR version and ``ai.onnx.ml`` opset
of that ONNX release, onnx's docs/Versioning.md (= ``onnx.helper.VERSION_TABLE``). Where
onnxruntime's page lists an older ML opset than the ONNX release it ships, the ONNX release wins:
that is what the runtime enforces (measured: onnxruntime 1.11.1 loads ``ai.onnx.ml`` 3).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Optional


@dataclass(frozen=True)
class RuntimeLimits:
    """The newest model one onnxruntime minor release loads."""

    ort: tuple[int, int]
    onnx: str
    ir: int
    opset: int
    ml_opset: int

    @property
    def name(self) -> str:
        return f"{self.ort[0]}.{self.ort[1]}"


# onnxruntime minor -> (ONNX release it implements, max IR, max ai.onnx opset, max ai.onnx.ml opset)
_ROWS: tuple[tuple[str, str, int, int, int], ...] = (
    ("1.6", "1.8", 7, 13, 2),
    ("1.7", "1.8", 7, 13, 2),
    ("1.8", "1.9", 7, 14, 2),
    ("1.9", "1.10", 8, 15, 2),
    ("1.10", "1.10", 8, 15, 2),
    ("1.11", "1.11", 8, 16, 3),  # JetPack 4.6 (Jetson Nano): the oldest runtime edge-agent supports
    ("1.12", "1.12", 8, 17, 3),
    ("1.13", "1.12", 8, 17, 3),
    ("1.14", "1.13", 8, 18, 3),
    ("1.15", "1.14", 9, 19, 3),
    ("1.16", "1.14.1", 9, 19, 3),  # JetPack 5
    ("1.17", "1.15", 9, 20, 4),
    ("1.18", "1.16", 10, 21, 5),
    ("1.19", "1.16", 10, 21, 5),
    ("1.20", "1.16", 10, 21, 5),
    ("1.21", "1.17", 10, 22, 5),
    ("1.22", "1.18", 11, 23, 5),
)


def _minor(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


TABLE: tuple[RuntimeLimits, ...] = tuple(
    RuntimeLimits(_minor(o), onnx, ir, op, ml) for o, onnx, ir, op, ml in _ROWS
)
OLDEST_SUPPORTED = "1.11"  # pyproject's onnxruntime>=1.11


def parse_version(text: str) -> Optional[tuple[int, int]]:
    """``1.11.1``, ``1.16.3+cu118``, ``1.11`` -> (1, 11); anything else None."""
    m = re.match(r"\s*(\d{1,4})\.(\d{1,4})(?:[.+\-\s]|$)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def limits_for(version: str) -> Optional[RuntimeLimits]:
    """The row for an installed/target onnxruntime; None when the version is unknown or newer than
    the table (a newer runtime loads at least what the newest row loads: no check then)."""
    v = parse_version(version)
    if v is None or v > TABLE[-1].ort:
        return None
    below = [row for row in TABLE if row.ort <= v]
    return below[-1] if below else TABLE[0]


def _ml(opsets: Mapping[str, int]) -> int:
    return opsets.get("ai.onnx.ml", 0)


def _main(opsets: Mapping[str, int]) -> int:
    return opsets.get("ai.onnx", opsets.get("", 0))


def refusals(ir_version: int, opsets: Mapping[str, int], limits: RuntimeLimits) -> list[str]:
    """What in the model is newer than ``limits`` allows, e.g. ``["IR 9 > 8", "opset 20 > 16"]``."""
    out = []
    if ir_version > limits.ir:
        out.append(f"IR {ir_version} > {limits.ir}")
    if _main(opsets) > limits.opset:
        out.append(f"opset {_main(opsets)} > {limits.opset}")
    if _ml(opsets) > limits.ml_opset:
        out.append(f"ai.onnx.ml opset {_ml(opsets)} > {limits.ml_opset}")
    return out


def oldest_runtime(ir_version: int, opsets: Mapping[str, int]) -> Optional[RuntimeLimits]:
    """The oldest onnxruntime release that loads a model with these stamps (None: newer than the table)."""
    for row in TABLE:
        if not refusals(ir_version, opsets, row):
            return row
    return None


def describe_stamps(ir_version: int, opsets: Mapping[str, int]) -> str:
    """``IR 9, opset 20`` (+ ``ai.onnx.ml N`` when imported): how inspect and errors name a model."""
    text = f"IR {ir_version}, opset {_main(opsets)}"
    return text + (f", ai.onnx.ml {_ml(opsets)}" if "ai.onnx.ml" in opsets else "")


def load_refusal(path: str, ir_version: int, opsets: Mapping[str, int], installed: str) -> Optional[str]:
    """One line when the installed onnxruntime cannot load the model, naming the fix; else None."""
    limits = limits_for(installed)
    if limits is None:
        return None
    too_new = refusals(ir_version, opsets, limits)
    if not too_new:
        return None
    target = limits.name
    # the output goes to the folder the command runs in, not beside the input: the model's own
    # folder (/usr/share/edge-agent, a read-only image, another user's) is often not writable
    name = PurePath(path).name
    stem = name[:-5] if name.endswith(".onnx") else name
    return (
        f"{path}: this onnxruntime {installed} cannot load the model ({', '.join(too_new)}); "
        f"convert it on a PC with `edge-agent model convert {path} --target-ort {target} "
        f"-o ./{stem}-ort{target}.onnx` (into the current folder), then use the converted file"
    )


_NO_KERNEL = re.compile(r"Could not find an implementation for (\w+)\((\d+)\) node with name '([^']*)'")


def kernel_refusal(path: str, message: str, installed: str) -> Optional[str]:
    """One line for onnxruntime's ``NOT_IMPLEMENTED : Could not find an implementation for Add(14)
    node with name ''`` (an operator form or tensor type the installed runtime has no kernel for),
    naming the operator, the runtime and the fix; None for any other message."""
    m = _NO_KERNEL.search(message)
    if m is None:
        return None
    op, version, node = m.groups()
    limits = limits_for(installed)
    v = parse_version(installed)
    target = limits.name if limits else f"{v[0]}.{v[1]}" if v else installed
    name = PurePath(path).name
    stem = name[:-5] if name.endswith(".onnx") else name
    where = f", node '{node}'" if node else ""
    return (
        f"{path}: onnxruntime {installed} has no kernel for operator {op} (opset-{version} form{where}) "
        f"with this model's tensor types; convert it on a PC with `edge-agent model convert {path} "
        f"--target-ort {target} -o ./{stem}-ort{target}.onnx` (older operator forms), or export the "
        "model with float32 tensors if it uses a type this runtime lacks (bfloat16, float8)"
    )

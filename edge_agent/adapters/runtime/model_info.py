"""What a model file says about itself: its tensors, class names (Ultralytics metadata or a
labels file), input size, and the summary ``edge-agent inspect`` prints (:class:`ModelInfo`).

Split from adapters.runtime, which loads the session; the names stay importable from there.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

import numpy as np
import numpy.typing as npt

from edge_agent.core.runtime.onnx_wire import GraphSummary
from edge_agent.errors import ModelError

__all__ = ["ModelInfo", "TensorInfo", "parse_imgsz", "parse_names", "read_labels_file"]

_ORT_DTYPES: dict[str, npt.DTypeLike] = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(uint8)": np.uint8,
    "tensor(int8)": np.int8,
    "tensor(int32)": np.int32,
    "tensor(int64)": np.int64,
}


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[Union[int, str, None], ...]
    type: str

    @property
    def dtype(self) -> npt.DTypeLike:
        return _ORT_DTYPES.get(self.type, np.float32)

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "shape": list(self.shape), "type": self.type}


def parse_names(raw: Optional[str]) -> dict[int, str]:
    """Ultralytics writes ``names`` as a Python dict literal; also accept JSON dicts and lists."""
    if not raw:
        return {}
    try:
        val = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        try:
            val = json.loads(raw)
        except ValueError:
            return {}
    if isinstance(val, dict):
        return {int(k): str(v) for k, v in val.items()}
    if isinstance(val, (list, tuple)):
        return {i: str(v) for i, v in enumerate(val)}
    return {}


def read_labels_file(path: Union[str, Path]) -> dict[int, str]:
    """One label per line (blank lines skipped), or a JSON list/dict; UTF-8 whatever the locale."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ModelError(f"{p}: cannot read labels file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:  # a ValueError: it would leave the CLI as a traceback
        raise ModelError(f"{p}: labels file is not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    stripped = text.strip()
    if stripped.startswith(("{", "[")):
        names = parse_names(stripped)
        if not names:
            raise ModelError(f"{p}: labels file looks like JSON but is not a list or dict of names")
        return names
    return {i: line.strip() for i, line in enumerate(ln for ln in text.splitlines() if ln.strip())}


@dataclass
class ModelInfo:
    path: str
    sha256: str
    size_bytes: int
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    metadata: dict[str, str]
    names: dict[int, str]
    task: Optional[str]
    imgsz: Optional[tuple[int, int]]
    stride: Optional[int]
    graph: GraphSummary
    providers: list[str] = field(default_factory=list)
    provider_reason: str = ""
    load_ms: float = 0.0

    @property
    def quant_kind(self) -> str:
        return self.graph.quant_kind

    @property
    def model_id(self) -> str:
        return f"{Path(self.path).name}@{self.sha256[:12]}"

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "sha256": self.sha256,
            "size_bytes": self.size_bytes,
            "inputs": [t.to_json() for t in self.inputs],
            "outputs": [t.to_json() for t in self.outputs],
            "task": self.task,
            "imgsz": list(self.imgsz) if self.imgsz else None,
            "stride": self.stride,
            "names": {str(k): v for k, v in self.names.items()},
            "quantization": self.quant_kind,
            "opsets": self.graph.opsets,
            "producer": self.graph.producer,
            "op_counts": dict(self.graph.op_counts.most_common()),
            "metadata": {k: v for k, v in self.metadata.items() if k != "names"},
            "providers": self.providers,
            "provider_reason": self.provider_reason,
            "load_ms": round(self.load_ms, 1),
        }


def parse_imgsz(raw: Optional[str]) -> Optional[tuple[int, int]]:
    """Ultralytics' ``imgsz`` metadata (``640`` or ``[480, 640]``), else None."""
    if not raw:
        return None
    try:
        val = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return None
    if isinstance(val, int):
        return (val, val)
    if isinstance(val, (list, tuple)) and len(val) == 2 and all(isinstance(v, int) for v in val):
        return (int(val[0]), int(val[1]))
    return None

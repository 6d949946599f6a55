"""A sensor model: what it reads (channels, window, hop, layout, normalisation) and its task,
decided once from the model's metadata and the ``[[sensor_models]]`` table (the table wins), and
one window of readings through it.

Metadata keys (what ``models/train_sensor.py`` writes, docs/sensors.md): ``task`` (classify |
score | regress), ``labels`` (JSON list), ``channels`` (JSON list of reading keys), ``window``,
``hop``, ``rate_hz``, ``layout`` (``[1,C,T]`` or ``[1,T,C]``), ``mean``/``std`` (JSON lists, one
per channel), ``outputs`` (regress: JSON list of names). Without ``layout`` the input shape decides
when its axes tell channels from time.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

import numpy as np

from edge_agent.core.sensor.window import Window, Windower
from edge_agent.errors import ModelError

if TYPE_CHECKING:
    from edge_agent.adapters.runtime.onnx_model import OnnxModel
    from edge_agent.core.config.sensor_models import SensorModelConfig

TASKS = ("classify", "score", "regress")
_LAYOUTS = {"[1,C,T]": "NCT", "[1,T,C]": "NTC", "NCT": "NCT", "NTC": "NTC"}


@dataclass(frozen=True)
class SensorSpec:
    name: str
    channels: List[str]
    window: int
    hop: int
    rate_hz: Optional[float]
    layout: str  # NCT | NTC
    mean: List[float]
    std: List[float]
    task: str
    labels: List[str] = field(default_factory=list)
    threshold: float = 0.0
    outputs: List[str] = field(default_factory=list)
    missing: str = "hold"
    max_missing: Optional[int] = None
    time_field: Optional[str] = None

    def describe(self) -> str:
        shape = (
            f"[1,{len(self.channels)},{self.window}]"
            if self.layout == "NCT"
            else f"[1,{self.window},{len(self.channels)}]"
        )
        rate = f" at {self.rate_hz:g} Hz" if self.rate_hz else ""
        return (
            f"{self.task}: window {self.window} readings, hop {self.hop}{rate}, input {shape} "
            f"({self.layout}), channels {', '.join(self.channels)}"
        )


def is_sensor_model(meta: Dict[str, str], input_shape: Sequence[object]) -> bool:
    """A model over windows of readings: ``kind = sensor`` in its metadata, or a rank-3 input with
    ``channels`` metadata."""
    return meta.get("kind") == "sensor" or (len(input_shape) == 3 and bool(meta.get("channels")))


def _meta_list(meta: Dict[str, str], key: str, path: str) -> List[Any]:
    raw = meta.get(key)
    if raw is None or raw == "":
        return []
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        raise ModelError(f"{path}: metadata {key!r} = {raw[:60]!r} is not a JSON list") from None
    if not isinstance(value, list):
        raise ModelError(f"{path}: metadata {key!r} = {raw[:60]!r} is not a JSON list")
    return value


def _meta_int(meta: Dict[str, str], key: str, path: str) -> Optional[int]:
    raw = meta.get(key)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ModelError(f"{path}: metadata {key!r} = {raw[:60]!r} is not an integer") from None


def resolve_spec(
    path: str,
    meta: Dict[str, str],
    input_shape: Sequence[object],
    cfg: Optional[SensorModelConfig] = None,
    name: Optional[str] = None,
) -> SensorSpec:
    """The spec of a sensor model: ``cfg``'s keys where set, else the metadata, else the input shape;
    one ModelError line naming the file and the key when something cannot be known."""
    where = f"{path}" + (f" ([[sensor_models]] {cfg.name!r})" if cfg is not None else "")
    channels = (
        list(cfg.fields)
        if cfg is not None and cfg.fields
        else [str(c) for c in _meta_list(meta, "channels", path)]
    )
    if not channels:
        raise ModelError(
            f"{where}: which reading keys does it take? set fields = [...] (no 'channels' metadata)"
        )
    rate = cfg.rate_hz if cfg is not None and cfg.rate_hz is not None else None
    if rate is None and meta.get("rate_hz"):
        try:
            rate = float(meta["rate_hz"])
        except ValueError:
            raise ModelError(
                f"{path}: metadata 'rate_hz' = {meta['rate_hz'][:60]!r} is not a number"
            ) from None
    dims = [d if isinstance(d, int) and d > 0 else None for d in input_shape]
    if len(dims) != 3:
        raise ModelError(f"{where}: input shape {list(input_shape)}: expected [1, C, T] or [1, T, C]")
    layout = (
        cfg.layout
        if cfg is not None and cfg.layout != "auto"
        else _LAYOUTS.get(meta.get("layout", "").replace(" ", ""))
    )
    if layout is None:
        if dims[1] == len(channels) and dims[2] != len(channels):
            layout = "NCT"
        elif dims[2] == len(channels) and dims[1] != len(channels):
            layout = "NTC"
        else:
            raise ModelError(
                f'{where}: input {list(input_shape)} with {len(channels)} channels: set layout = "NCT" or "NTC"'
            )
    c_dim, t_dim = (dims[1], dims[2]) if layout == "NCT" else (dims[2], dims[1])
    if c_dim is not None and c_dim != len(channels):
        raise ModelError(
            f"{where}: the model takes {c_dim} channels ({layout}), fields name {len(channels)}: {channels}"
        )
    window = _seconds(cfg.window_s, rate) if cfg is not None and cfg.window_s else None
    window = (
        window
        or (cfg.window if cfg is not None and cfg.window else None)
        or t_dim
        or _meta_int(meta, "window", path)
    )
    if window is None:
        raise ModelError(
            f"{where}: the input's time axis is dynamic and there is no 'window' metadata: set window"
        )
    if t_dim is not None and window != t_dim:
        raise ModelError(f"{where}: window = {window} readings but the model's time axis is {t_dim}")
    hop = _seconds(cfg.hop_s, rate) if cfg is not None and cfg.hop_s else None
    hop = hop or (cfg.hop if cfg is not None and cfg.hop else None) or _meta_int(meta, "hop", path) or window
    mean = [
        float(x) for x in (cfg.mean if cfg is not None and cfg.mean else _meta_list(meta, "mean", path))
    ] or [0.0] * len(channels)
    std = [float(x) for x in (cfg.std if cfg is not None and cfg.std else _meta_list(meta, "std", path))] or [
        1.0
    ] * len(channels)
    for key, values in (("mean", mean), ("std", std)):
        if len(values) != len(channels):
            raise ModelError(f"{where}: {key} has {len(values)} values for {len(channels)} channels")
    if any(s <= 0 or not math.isfinite(s) for s in std):
        raise ModelError(f"{where}: std {std}: every value must be > 0")
    task = (cfg.task if cfg is not None and cfg.task else None) or meta.get("task") or ""
    if task not in TASKS:
        raise ModelError(f"{where}: task {task!r}: expected one of {', '.join(TASKS)} (set task = ...)")
    labels = (
        list(cfg.labels)
        if cfg is not None and cfg.labels
        else [str(x) for x in _meta_list(meta, "labels", path)]
    )
    outputs = (
        list(cfg.outputs)
        if cfg is not None and cfg.outputs
        else [str(x) for x in _meta_list(meta, "outputs", path)]
    )
    if task == "classify" and not labels:
        raise ModelError(f"{where}: a classify model needs labels (metadata 'labels' or labels = [...])")
    return SensorSpec(
        name=name or (cfg.name if cfg is not None else path.rsplit("/", 1)[-1].rsplit(".", 1)[0]),
        channels=channels,
        window=window,
        hop=hop,
        rate_hz=rate or None,
        layout=layout,
        mean=mean,
        std=std,
        task=task,
        labels=labels,
        threshold=cfg.threshold if cfg is not None else 0.0,
        outputs=outputs,
        missing=cfg.missing if cfg is not None else "hold",
        max_missing=cfg.max_missing if cfg is not None else None,
        time_field=cfg.time_field if cfg is not None else None,
    )


def _seconds(seconds: Optional[float], rate: Optional[float]) -> Optional[int]:
    if seconds is None or not rate:
        return None
    return max(1, int(round(seconds * rate)))


@dataclass(frozen=True)
class SensorOutcome:
    """One window's result: ``label``/``confidence``/``probs`` (classify), ``score``/``anomaly``
    (score), ``values`` (regress), and the model's time."""

    index: int
    task: str
    label: Optional[str] = None
    confidence: Optional[float] = None
    probs: Dict[str, float] = field(default_factory=dict)
    score: Optional[float] = None
    anomaly: Optional[bool] = None
    values: Dict[str, float] = field(default_factory=dict)
    infer_ms: float = 0.0

    @property
    def state(self) -> object:
        """What "only on change" compares: the label, or whether it is an anomaly."""
        return self.label if self.task == "classify" else self.anomaly if self.task == "score" else None


class SensorModel:
    """An ONNX sensor model (through :class:`OnnxModel`: the load guard, providers) and its spec."""

    def __init__(self, model: OnnxModel, spec: SensorSpec) -> None:
        self.model = model
        self.spec = spec
        self._mean = np.asarray(spec.mean, np.float32)[:, None]
        self._std = np.asarray(spec.std, np.float32)[:, None]

    @classmethod
    def load(
        cls,
        path: str,
        cfg: Optional[SensorModelConfig] = None,
        threads: Optional[int] = 1,
        provider: Optional[str] = None,
    ) -> SensorModel:
        from edge_agent.adapters.runtime.onnx_model import OnnxModel

        model = OnnxModel(path, provider=provider, threads=threads, warmup=False)
        if len(model.info.inputs) != 1:
            raise ModelError(f"{path}: a sensor model takes one input, this one has {len(model.info.inputs)}")
        spec = resolve_spec(path, model.info.metadata, model.info.inputs[0].shape, cfg)
        out = cls(model, spec)
        out.run([[0.0] * len(spec.channels)] * spec.window)  # warm up with the real shape
        return out

    def windower(self) -> Windower:
        s = self.spec
        return Windower(s.channels, s.window, s.hop, s.missing, s.max_missing, s.rate_hz)

    def tensor(self, rows: Sequence[Sequence[float]]) -> np.ndarray:
        """``rows[t][c]`` -> the normalised input tensor in the model's layout."""
        x = (np.asarray(rows, np.float32).T - self._mean) / self._std  # [C, T]
        return (x if self.spec.layout == "NCT" else x.T)[None].astype(np.float32)

    def run(self, rows: Sequence[Sequence[float]]) -> np.ndarray:
        out = self.model.run_single(self.tensor(rows))
        return (
            np.asarray(out[0], np.float64).reshape(-1)
            if len(out) == 1
            else np.concatenate([np.asarray(o, np.float64).reshape(-1) for o in out])
        )

    def infer(self, window: Window) -> SensorOutcome:
        t0 = time.perf_counter()
        y = self.run(window.rows)
        ms = (time.perf_counter() - t0) * 1000.0
        return self.outcome(window.index, y, ms)

    def outcome(self, index: int, y: np.ndarray, ms: float = 0.0) -> SensorOutcome:
        s = self.spec
        if s.task == "classify":
            if len(y) != len(s.labels):
                raise ModelError(f"{self.model.path}: {len(y)} outputs for {len(s.labels)} labels {s.labels}")
            p = y
            if not (np.all(p >= 0) and abs(float(p.sum()) - 1.0) < 1e-3):  # logits: softmax them
                e = np.exp(p - p.max())
                p = e / e.sum()
            top = int(np.argmax(p))
            conf = float(p[top])
            return SensorOutcome(
                index=index,
                task="classify",
                label=s.labels[top] if conf >= s.threshold else None,
                confidence=round(conf, 6),
                probs={lab: round(float(v), 6) for lab, v in zip(s.labels, p)},
                infer_ms=ms,
            )
        if s.task == "score":
            score = float(y[0])
            return SensorOutcome(
                index=index, task="score", score=round(score, 6), anomaly=score >= s.threshold, infer_ms=ms
            )
        names = s.outputs or [f"y{i}" for i in range(len(y))]
        if len(names) != len(y):
            raise ModelError(f"{self.model.path}: {len(y)} output values for {len(names)} names {names}")
        return SensorOutcome(
            index=index, task="regress", values={n: round(float(v), 6) for n, v in zip(names, y)}, infer_ms=ms
        )

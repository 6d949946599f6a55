"""PyTorch -> ONNX export checks (dev tooling; needs the ``torch`` extra, never the runtime).

What a good export needs, checked rather than hoped for: ``eval()`` (BatchNorm/Dropout in
inference mode), opset >= 13 (per-channel QDQ), a dynamic batch axis, ``onnx.checker``, and the ONNX
output equal to PyTorch's within 1e-4 relative (0.01 %, of the output's scale) at batch 1 *and* batch
2. torch 2.13's default dynamo exporter needs opset 18 for YOLO-style ``Split``; the TorchScript
exporter (``dynamo=False``) is used at the default 16, the newest a Jetson Nano's onnxruntime 1.11
reads. The export's IR version (torch writes its onnx's newest) is lowered to what the oldest
onnxruntime implementing that opset reads (core.ort_compat), so ``--opset N`` gives a file that
runtime loads; the INT8 copy is made for the same runtime. Also times PyTorch vs ORT FP32 vs ORT INT8 (static QDQ from
:func:`edge_agent.tools.quantize.quantize_model`), same thread count for all.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Optional

import numpy as np
import numpy.typing as npt

from edge_agent import install_hint
from edge_agent.tools import ToolingDependencyError, require_onnx

if TYPE_CHECKING:
    from collections.abc import Callable

    from torch import Tensor
    from torch.nn import Module

MAX_REL_DIFF = 1e-4
MIN_OPSET = 13  # per-channel QuantizeLinear/DequantizeLinear
DEFAULT_OPSET = 16  # onnxruntime 1.11 (JetPack 4.6, Jetson Nano) reads opset <= 16


def require_torch() -> ModuleType:
    try:
        import torch
    except ImportError:
        raise ToolingDependencyError(
            "export checks need PyTorch; install it with: " + install_hint("torch")
        ) from None
    module: ModuleType = torch
    return module


def small_convnet(num_classes: int = 10) -> Module:
    """A small Conv-BN-SiLU classifier (~0.1 M params) to check the export path end to end."""
    torch = require_torch()
    nn = torch.nn

    def block(cin: int, cout: int, stride: int) -> Module:
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.SiLU())

    torch.manual_seed(0)
    net = nn.Sequential(
        block(3, 16, 2),
        block(16, 32, 2),
        block(32, 64, 2),
        block(64, 64, 1),
        block(64, 128, 2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(128, num_classes),
    )
    # give BatchNorm non-trivial running stats, as a trained net has
    net.train()
    with torch.no_grad():
        for _ in range(3):
            net(torch.randn(4, 3, 64, 64))
    return net.eval()


def load_factory(spec: str, kwargs: Optional[dict[str, object]] = None) -> Module:
    """``pkg.module:callable`` or ``path/to/file.py:callable`` -> the nn.Module it returns."""
    target, _, attr = spec.rpartition(":")
    if not target or not attr:
        raise ToolingDependencyError(f"--module {spec!r}: expected MODULE:CALLABLE or FILE.py:CALLABLE")
    if target.endswith(".py"):
        path = Path(target).resolve()
        sys.path.insert(0, str(path.parent))  # sibling imports of the file
        mod_spec = importlib.util.spec_from_file_location(path.stem, path)
        if mod_spec is None or mod_spec.loader is None:
            raise ToolingDependencyError(f"--module: cannot import {path}")
        module = importlib.util.module_from_spec(mod_spec)
        mod_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    return getattr(module, attr)(**(kwargs or {}))


def set_export_mode(net: Module) -> int:
    """Set ``export = True`` wherever a submodule has that flag (Ultralytics convention: the head then
    emits its deployable output). Returns how many were set."""
    n = 0
    for m in net.modules():
        if isinstance(getattr(m, "export", None), bool):
            m.export = True
            n += 1
    return n


@dataclass
class ExportReport:
    onnx_path: Path
    opset: int
    checker_ok: bool
    dynamic_batch: bool
    max_abs_diff: float
    max_rel_diff: float
    batch2_rel_diff: float
    timings_ms: dict[str, float] = field(default_factory=dict)
    min_onnxruntime: str = "?"
    int8: str = "static"  # static (QDQ) | dynamic (MatMulInteger/ConvInteger) | none

    @property
    def passed(self) -> bool:
        return (
            self.checker_ok
            and self.dynamic_batch
            and self.opset >= MIN_OPSET
            and self.max_rel_diff <= MAX_REL_DIFF
            and self.batch2_rel_diff <= MAX_REL_DIFF
        )

    def format(self) -> str:
        ok = _ok
        lines = [
            f"export-check {self.onnx_path.name}: opset {self.opset} ({ok(self.opset >= MIN_OPSET)}), "
            f"onnx.checker {ok(self.checker_ok)}, dynamic batch {ok(self.dynamic_batch)}, "
            f"loads on onnxruntime >= {self.min_onnxruntime}",
            f"  ONNX vs PyTorch: max abs {self.max_abs_diff:.3g}, max rel {self.max_rel_diff:.3g} "
            f"(batch 2: {self.batch2_rel_diff:.3g}; limit {MAX_REL_DIFF:g}) {ok(self.max_rel_diff <= MAX_REL_DIFF and self.batch2_rel_diff <= MAX_REL_DIFF)}",
        ]
        if self.timings_ms:
            base = self.timings_ms.get("pytorch")
            lines.append(f"  {'runtime':<26} {'p50 ms':>8} {'vs PyTorch':>10}")
            for k, v in self.timings_ms.items():
                lines.append(f"  {k:<26} {v:8.2f} {(base / v if base else float('nan')):9.2f}x")
        lines.append("PASS" if self.passed else "FAIL")
        return "\n".join(lines)


def _ok(passed: bool) -> str:
    return "ok" if passed else "FAIL"


def _rel(a: npt.ArrayLike, b: npt.ArrayLike) -> tuple[float, float]:
    from edge_agent.core.vision.accuracy import raw_difference

    return raw_difference(np.asarray(a), np.asarray(b))


def runtime_for_opset(opset: int) -> str:
    """The oldest onnxruntime implementing ``opset`` (the export is stamped for it)."""
    from edge_agent.core.runtime.ort_compat import TABLE

    return next((row.name for row in TABLE if row.opset >= opset), TABLE[-1].name)


def input_name(example: Tensor) -> str:
    """``images`` for a float image batch, ``input_ids`` for int64 token ids, else ``input``."""
    if not example.dtype.is_floating_point:
        return "input_ids"
    return "images" if example.dim() == 4 else "input"


def export(net: Module, example: Tensor, out: Path, opset: int = DEFAULT_OPSET) -> None:
    torch = require_torch()
    name = input_name(example)
    # token ids: the sequence axis is dynamic too (one export for every text length)
    axes = {0: "batch", 1: "seq"} if name == "input_ids" else {0: "batch"}
    net.eval()
    with torch.no_grad(), warnings.catch_warnings():
        # the TorchScript exporter warns that it is deprecated in favour of dynamo, which needs
        # opset 18 for YOLO-style Split; at 17 it is the one that works
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            net,
            (example,),
            str(out),
            opset_version=opset,
            input_names=[name],
            output_names=["output0"],
            dynamic_axes={name: axes, "output0": {0: "batch"}},
            dynamo=False,
        )
    _static_output_dims(out)
    from edge_agent.tools.convert import convert_model

    onnx = require_onnx()
    onnx.save(convert_model(onnx.load(str(out)), runtime_for_opset(opset)), str(out))


def _static_output_dims(path: Path) -> None:
    """Re-infer output shapes with data propagation through Shape/Slice/Concat.

    Why: with a dynamic batch axis the TorchScript exporter names *every* output dim (e.g. a
    YOLO output becomes [batch, d1, d2]), and a consumer can no longer tell 4+nc from the anchors.
    Data propagation recovers the static ones ([batch, 4+nc, d2]).
    """
    onnx = require_onnx()
    model = onnx.load(str(path))
    for o in model.graph.output:
        o.type.tensor_type.ClearField("shape")
    del model.graph.value_info[:]
    onnx.save(onnx.shape_inference.infer_shapes(model, data_prop=True), str(path))


def check_export(net: Module, example: Tensor, out: Path, opset: int = DEFAULT_OPSET) -> ExportReport:
    """Export ``net`` and check the file against PyTorch (batch 1 and 2)."""
    torch = require_torch()
    onnx = require_onnx()
    import onnxruntime as ort

    export(net, example, out, opset)
    model = onnx.load(str(out))
    try:
        onnx.checker.check_model(model, full_check=True)
        checker_ok = True
    # the full check's strict shape inference raises InferenceError, not ValidationError
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError):
        checker_ok = False
    got_opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    dim0 = model.graph.input[0].type.tensor_type.shape.dim[0]
    dynamic = bool(dim0.dim_param) and not dim0.HasField("dim_value")
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    x1 = example.detach().cpu().numpy()
    x2 = np.concatenate([x1, np.flip(x1, axis=-1).copy()], axis=0)
    name = input_name(example)
    with torch.no_grad():
        t1 = net(torch.from_numpy(x1)).numpy()
        t2 = net(torch.from_numpy(x2)).numpy()
    o1 = sess.run(None, {name: x1})[0]
    abs1, rel1 = _rel(t1, o1)
    rel2 = _rel(t2, sess.run(None, {name: x2})[0])[1] if dynamic else float("inf")
    from edge_agent.core.runtime.ort_compat import oldest_runtime

    oldest = oldest_runtime(model.ir_version, {o.domain or "ai.onnx": o.version for o in model.opset_import})
    rep = ExportReport(out, got_opset, checker_ok, dynamic, abs1, rel1, rel2)
    rep.min_onnxruntime = oldest.name if oldest else "?"
    return rep


def _synthetic_calibration(folder: Path, hw: tuple[int, int], n: int = 16) -> list[Path]:
    import cv2

    from edge_agent.tools.bench import synthetic_image

    files = []
    for i in range(n):
        p = folder / f"calib{i:03d}.png"
        cv2.imwrite(str(p), synthetic_image(hw[0], hw[1], seed=i))
        files.append(p)
    return files


def time_runtimes(
    net: Module,
    example: Tensor,
    fp32: Path,
    int8: Optional[Path],
    runs: int = 30,
    threads: int = 2,
    dynamic: Optional[Path] = None,
) -> dict[str, float]:
    """Median latency of PyTorch, ORT FP32 and ORT INT8 (and ``dynamic``, a second INT8 copy) on
    ``example``, same thread count.

    Measured in alternating blocks (5 rounds of runs/5 per runtime), not strictly interleaved:
    PyTorch's OpenMP pool and ORT's pool both busy-wait after a call, so alternating them call
    by call makes each one's idle spinners steal the cores from the other (PyTorch came out
    10x slower that way on 2 cores). Blocks still spread machine drift over all three.
    """
    torch = require_torch()
    import onnxruntime as ort

    torch.set_num_threads(threads)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sessions = {"onnxruntime fp32": ort.InferenceSession(str(fp32), so, providers=["CPUExecutionProvider"])}
    if int8 is not None:
        sessions["onnxruntime int8"] = ort.InferenceSession(str(int8), so, providers=["CPUExecutionProvider"])
    if dynamic is not None:
        sessions["onnxruntime int8 (dynamic)"] = ort.InferenceSession(
            str(dynamic), so, providers=["CPUExecutionProvider"]
        )
    x = example.detach().cpu().numpy()
    calls: dict[str, Callable[[], object]] = {"pytorch": lambda: net(example)}
    for k, s in sessions.items():
        calls[k] = functools.partial(s.run, None, {input_name(example): x})
    times: dict[str, list[float]] = {k: [] for k in calls}
    rounds = 5
    per_block = max(1, runs // rounds)
    with torch.inference_mode():
        for _ in range(rounds):
            for k, call in calls.items():
                for i in range(per_block + 1):
                    t0 = time.perf_counter()
                    call()
                    if i:  # the first call of a block wakes the pool up: not timed
                        times[k].append((time.perf_counter() - t0) * 1e3)
    return {k: float(np.median(v)) for k, v in times.items()}


def int8_kind(input_shape: tuple[int, ...], dtype: str, int8: Optional[str]) -> str:
    """``static`` (QDQ, calibrated on images: only for [N, 1|3, H, W] float input), ``dynamic``
    (MatMulInteger/ConvInteger, no calibration: token ids, sensor windows, transformers) or
    ``none``; ``int8`` None = static for images, dynamic otherwise; ``both`` (images): the two,
    timed side by side. One line when impossible."""
    image = dtype == "float32" and len(input_shape) == 4 and input_shape[1] in (1, 3)
    kind = int8 or ("static" if image else "dynamic")
    if kind in ("static", "both") and not image:
        raise ToolingDependencyError(
            f"--int8 static calibrates on images, and input {list(input_shape)} {dtype} is not an image "
            "[N, 3, H, W] float32; use --int8 dynamic"
        )
    return kind


def run_export_check(
    net: Module,
    input_shape: tuple[int, ...],
    out: Path,
    opset: int = DEFAULT_OPSET,
    runs: int = 30,
    threads: int = 2,
    with_int8: bool = True,
    dtype: str = "float32",
    int8_mode: Optional[str] = None,
    vocab: int = 100,
) -> ExportReport:
    """``dtype`` int64: the example is token ids in 0..vocab-1; ``int8_mode``: see :func:`int8_kind`."""
    torch = require_torch()
    from edge_agent.tools.quantize import quantize_model

    kind = int8_kind(input_shape, dtype, int8_mode) if with_int8 else "none"
    net.eval()
    torch.manual_seed(0)
    if dtype == "int64":
        example = torch.randint(0, vocab, tuple(input_shape), dtype=torch.int64)
    else:
        example = torch.rand(*input_shape)
    report = check_export(net, example, out, opset)
    int8: Optional[Path] = None
    dynamic: Optional[Path] = None
    if kind in ("static", "both"):
        int8 = out.with_name(out.stem + ".int8.onnx")
        with tempfile.TemporaryDirectory(prefix="edge-agent-calib-") as tmp:
            files = _synthetic_calibration(Path(tmp), (input_shape[2], input_shape[3]))
            quantize_model(out, int8, files, progress=False, target_ort=runtime_for_opset(opset))
    if kind in ("dynamic", "both"):
        from onnxruntime.quantization import QuantType, quantize_dynamic

        dynamic = out.with_name(out.stem + ".int8-dynamic.onnx")
        quantize_dynamic(str(out), str(dynamic), weight_type=QuantType.QInt8)
    report.int8 = kind
    if runs > 0:
        report.timings_ms = time_runtimes(net, example, out, int8, runs, threads, dynamic)
        if kind == "both":  # say which INT8 the first copy is (the order kept)
            named = {"onnxruntime int8": "onnxruntime int8 (static)"}
            report.timings_ms = {named.get(k, k): v for k, v in report.timings_ms.items()}
    return report

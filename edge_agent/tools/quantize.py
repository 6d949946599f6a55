"""Static INT8 (QDQ) quantization that keeps a YOLO detector's accuracy.

The choices, and why (measured on this project's x86 CI machine, onnxruntime 1.32):

* **Static QDQ**, not dynamic: dynamic INT8 (ConvInteger) ran 1.7-6x *slower* than FP32.
* **uint8 activations, int8 per-channel weights (U8S8)** on both targets:
  - x86-64: MLAS has U8S8 kernels (AVX2 ``vpmaddubsw``, AVX512-VNNI ``vpdpbusd``); S8S8 QDQ ran
    2-2.5x slower than FP32 here while U8S8 ran 1.4-2x faster. (Without VNNI, ``vpmaddubsw`` can
    saturate; ``--reduce-range`` is the documented fallback if accuracy drops.)
  - arm64: MLAS ships U8S8 and S8S8 kernels for both cases - NEON ``umull``-style kernels on
    CPUs without dot product (Cortex-A72/Pi 4, A57/Jetson Nano) and ``udot``/``sdot`` kernels on
    CPUs with it (Cortex-A76/Pi 5, Carmel/Xavier). S8S8 only gains with I8MM (``smmla``, A78+/
    Neoverse), which no supported Pi has, and MLAS's ARM quantized-conv path prefers unsigned
    activations without I8MM (``ArmNeonIsQuantActivationsUnsigned``). So U8S8 there too.
* **The post-processing tail stays float** (see :mod:`edge_agent.tools.graph`), found by graph
  structure, so the final Concat of pixel boxes and 0..1 scores is never put under one scale.
* **Pre-processing** with ``quant_pre_process`` (shape inference + graph optimisation) because
  QDQ placement needs tensor shapes; per-channel QDQ needs opset >= 13, so older models are
  converted first.
* Calibration images go through the model's own preprocessing (letterbox or classifier crop), so
  the activation ranges are the ones the runtime will see.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Literal, Optional

import numpy as np
import numpy.typing as npt

from edge_agent import __version__
from edge_agent.adapters.host.durable import commit_durable
from edge_agent.errors import EdgeAgentError, QuantizeError
from edge_agent.tools import require_onnx
from edge_agent.tools.convert import convert_model
from edge_agent.tools.dequantize import to_float32
from edge_agent.tools.graph import ensure_node_names, hoist_transposed_softmax, postprocess_tail
from edge_agent.tools.progress import Progress

if TYPE_CHECKING:
    from onnx import ModelProto

    from edge_agent.adapters.runtime.onnx_model import OnnxModel

    # image (BGR) -> the model's input tensor
    Preprocess = Callable[[npt.NDArray[np.uint8]], npt.NDArray[np.generic]]

log = logging.getLogger(__name__)

Method = Literal["minmax", "entropy", "percentile"]
Target = Literal["x86", "arm64"]
MIN_OPSET = 13  # per-channel QuantizeLinear/DequantizeLinear (axis attribute)

# activation / weight types per target; the reasons are in the module docstring
TARGET_TYPES: dict[str, tuple[str, str]] = {"x86": ("QUInt8", "QInt8"), "arm64": ("QUInt8", "QInt8")}


@dataclass
class QuantizeResult:
    output: Path
    excluded_nodes: list[str]
    samples: int
    settings: dict[str, Any] = field(default_factory=dict)


def model_kind(model: OnnxModel) -> Literal["detect", "classify"]:
    """``detect`` or ``classify`` (see :func:`edge_agent.inference.task.model_task`)."""
    from edge_agent.inference.task import model_task

    return model_task(model)


def make_preprocess(model: OnnxModel) -> Preprocess:
    """image (BGR) -> input tensor, exactly as the runtime pipeline does it for this model."""
    from edge_agent.core.vision.preprocess import preprocess_classifier, preprocess_detector
    from edge_agent.inference.pipeline import classifier_preprocess_for

    dtype = model.input.dtype
    if model_kind(model) == "detect":
        from edge_agent.inference.task import detector_format

        hw = model.input_hw()
        stretch = detector_format(model).fmt.stretch_input  # RT-DETR: stretched, not letterboxed
        return lambda img: preprocess_detector(img, hw, dtype, stretch=stretch)[0]
    pp = classifier_preprocess_for(model)
    return lambda img: preprocess_classifier([img], pp, dtype)


def pick_samples(paths: Sequence[Path], n: int) -> list[Path]:
    """``n`` paths spread evenly over the (sorted) list, so calibration sees every class folder."""
    if n <= 0 or n >= len(paths):
        return list(paths)
    idx = np.linspace(0, len(paths) - 1, n).round().astype(int)
    return [paths[i] for i in sorted(set(idx.tolist()))]


def image_files(folder: Path) -> list[Path]:
    """Images in ``folder`` and its subfolders (class-per-folder layouts), sorted."""
    from edge_agent.adapters.camera.images import IMAGE_SUFFIXES

    if not folder.is_dir():
        raise QuantizeError(f"{folder}: not a directory of images")
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise QuantizeError(f"{folder}: no images found (looked for {', '.join(IMAGE_SUFFIXES)})")
    return files


class _Reader:
    """onnxruntime CalibrationDataReader: one preprocessed image per ``get_next`` with a progress bar."""

    def __init__(self, input_name: str, files: list[Path], preprocess: Preprocess, progress: bool) -> None:
        self.input_name = input_name
        self.files = files
        self.preprocess = preprocess
        self.i = 0
        self.bar = Progress(len(files), "calibrating") if progress else None

    def get_next(self) -> Optional[dict[str, npt.NDArray[Any]]]:
        from edge_agent.adapters.camera.images import read_image

        if self.i >= len(self.files):
            if self.bar:
                self.bar.close()
                self.bar = None
            return None
        img = read_image(self.files[self.i])
        self.i += 1
        if self.bar:
            self.bar.update()
        return {self.input_name: self.preprocess(img)}

    def rewind(self) -> None:
        self.i = 0


def _upgrade_opset(onnx: ModuleType, model: ModelProto) -> ModelProto:
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset >= MIN_OPSET:
        return model
    from onnx import version_converter

    log.info("converting opset %d -> %d (per-channel QDQ needs %d)", opset, MIN_OPSET, MIN_OPSET)
    return version_converter.convert_version(model, MIN_OPSET)


def _have_sympy() -> bool:
    try:
        import sympy  # noqa: F401 - only whether it imports
    except ImportError:
        return False
    return True


@contextmanager
def _working_dir(path: Path) -> Iterator[None]:
    """chdir for the duration (not thread-safe; the tools are single-threaded CLI code)."""
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def preprocess_for_quantization(src: Path, dst: Path) -> None:
    """Opset upgrade + ``quant_pre_process``; symbolic shape inference is skipped when it fails
    (without sympy -- onnxruntime >= 1.32 no longer installs it -- and on some dynamic H/W and
    dynamic-batch exports), ONNX shape inference still runs.

    Both attempts read the model from a *file*: ``quant_pre_process`` given a ModelProto mutates it
    (it moves the weights to external data under a temp dir that is gone afterwards), so retrying
    with the same object failed with "Data of TensorProto ... should be stored in .../foo.bin".
    Runs with ``dst``'s folder as the working directory: a failing symbolic pass dumps
    ``sym_shape_infer_temp.onnx`` plus external data into the *current* dir.
    """
    onnx = require_onnx()
    dst = dst.resolve()
    try:
        from onnxruntime.quantization.shape_inference import quant_pre_process
    except ImportError:  # onnxruntime < 1.13 (JetPack 4's 1.11): no pre-processing step there
        import onnxruntime

        log.warning(
            "onnxruntime %s has no quant_pre_process (1.13+): quantizing without its shape inference "
            "and graph optimisation (results may differ from a newer onnxruntime)",
            onnxruntime.__version__,
        )
        onnx.save(_upgrade_opset(onnx, onnx.load(str(src))), str(dst))
        return
    upgraded = dst.with_name(f"{dst.stem}.opset.onnx")
    onnx.save(_upgrade_opset(onnx, onnx.load(str(src))), str(upgraded))
    with _working_dir(dst.parent):
        if not _have_sympy():
            log.info("sympy is not installed: quantization pre-processing without symbolic shape inference")
            quant_pre_process(str(upgraded), str(dst), skip_symbolic_shape=True)
            return
        try:
            quant_pre_process(str(upgraded), str(dst))
        except Exception as exc:  # noqa: BLE001 - symbolic shape inference raises bare Exception; logged, then retried
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            log.warning("symbolic shape inference failed (%s); pre-processing without it", first)
            quant_pre_process(str(upgraded), str(dst), skip_symbolic_shape=True)


def check_output(dst: Path) -> None:
    """Refuse an output path that cannot be written *before* the calibration runs (minutes on a
    real model), in one line naming the path."""
    parent = dst.parent if str(dst.parent) else Path(".")
    if dst.is_dir():
        raise QuantizeError(f"{dst}: is a directory; give the output file's path (-o DIR/NAME.onnx)")
    if not parent.is_dir():
        raise QuantizeError(f"{dst}: the output folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise QuantizeError(f"{dst}: the output folder {parent} is not writable")


def _one_line(exc: BaseException, tmp: str, src: Path) -> str:
    """An onnxruntime/onnx failure as one line, with our temp files named for what they are."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    line = line.replace(str(Path(tmp) / "float32.onnx"), f"<FP32 copy of {src.name}>")
    return line.replace(tmp, "<temp dir>")


def quantize_model(
    src: Path,
    dst: Path,
    calib_files: Sequence[Path],
    method: Method = "minmax",
    target: Target = "x86",
    naive: bool = False,
    reduce_range: bool = False,
    progress: bool = True,
    float_copy: Optional[Path] = None,
    target_ort: Optional[str] = None,
) -> QuantizeResult:
    """Write a static QDQ INT8 copy of ``src`` to ``dst``, calibrated on ``calib_files``.

    ``float_copy``: where to keep the FP32 model quantized from, when ``src`` was not FP32 (the
    reference to validate against: an INT8 source is no reference for accuracy). ``target_ort``:
    the onnxruntime the model must load on (e.g. 1.11, a Jetson Nano): the float model is
    down-converted first and the result is stamped for it (see :mod:`edge_agent.tools.convert`).
    """
    onnx = require_onnx()
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    from edge_agent.adapters.runtime.onnx_model import OnnxModel

    if not calib_files:
        raise QuantizeError("no calibration images")
    dst = Path(dst)
    check_output(dst)
    src_kind = OnnxModel(src, provider="cpu", warmup=False).info.quant_kind
    act, wt = TARGET_TYPES[target]
    # written beside dst under a temporary name and renamed at the very end: a run that fails
    # anywhere (onnxruntime, a bad calibration image, Ctrl-C) never leaves a file named dst
    part = dst.with_name(f".{dst.name}.{os.getpid()}.partial")
    tmp = ""
    try:
        with tempfile.TemporaryDirectory(prefix="edge-agent-quant-") as tmp:
            float_src, note = src, ""
            if src_kind != "fp32":
                model, note = to_float32(onnx.load(str(src)), src_kind)
                float_src = Path(tmp) / "float32.onnx"
                onnx.save(model, str(float_src))
                log.info("%s: %s", src.name, note)
                if float_copy is not None:
                    onnx.save(model, str(float_copy))
            if target_ort:
                lowered = Path(tmp) / "float-target.onnx"
                onnx.save(convert_model(onnx.load(str(float_src)), target_ort, log.info), str(lowered))
                float_src = lowered
            ref = OnnxModel(float_src, provider="cpu", warmup=False)
            ref.info.metadata.update(_metadata(onnx, src))
            ref.info.task = ref.info.metadata.get("task")
            kind = model_kind(ref)
            reader = _Reader(ref.input.name, list(calib_files), make_preprocess(ref), progress)
            pre = Path(tmp) / "pre.onnx"
            preprocess_for_quantization(float_src, pre)
            pre_model = onnx.load(str(pre))
            ensure_node_names(pre_model.graph)
            hoisted = hoist_transposed_softmax(pre_model.graph)
            excluded = [] if naive else [n.name for n in postprocess_tail(pre_model.graph)]
            onnx.save(pre_model, str(pre))
            methods = {
                "minmax": CalibrationMethod.MinMax,
                "entropy": CalibrationMethod.Entropy,
                "percentile": CalibrationMethod.Percentile,
            }
            # not "CalibMaxIntermediateOutputs": in onnxruntime 1.32 MinMaxCalibrater clears the collected
            # ranges every N samples without merging them (calibrate.py collect_data), i.e. calibrates
            # on the last partial chunk only. MinMax keeps just two scalars per tensor per sample anyway.
            extra: dict[str, Any] = {}
            if method == "percentile":
                extra["CalibPercentile"] = 99.999
            quantize_static(
                str(pre),
                str(part),
                reader,
                quant_format=QuantFormat.QDQ,
                per_channel=True,
                reduce_range=reduce_range,
                activation_type=getattr(QuantType, act),
                weight_type=getattr(QuantType, wt),
                nodes_to_exclude=excluded,
                calibrate_method=methods[method],
                # onnxruntime < 1.16 has no such argument and calibrates on the CPU anyway
                **(
                    {"calibration_providers": ["CPUExecutionProvider"]}
                    if "calibration_providers" in inspect.signature(quantize_static).parameters
                    else {}
                ),
                extra_options=extra,
            )
            settings = _settings(
                method, target, act, wt, reduce_range, reader.i, excluded, naive, hoisted, kind
            )
            settings.update({"source": src.name, "source_quantization": src_kind})
            if target_ort:  # the quantizer stamps ai.onnx.ml 5 & co. into every model it writes
                onnx.save(convert_model(onnx.load(str(part)), target_ort, log.info), str(part))
                settings["target_ort"] = target_ort
            if note:
                settings["source_note"] = note
            _write_metadata(onnx, src, part, settings)
        commit_durable(part, dst)  # durable: a power cut after "done" must not leave an empty model
    except BaseException as exc:
        part.unlink(missing_ok=True)
        if not isinstance(exc, Exception) or (
            isinstance(exc, EdgeAgentError) and not (tmp and tmp in str(exc))
        ):
            raise
        # onnxruntime's quantizer and session raise bare Fail/InvalidGraph/RuntimeError/ValueError,
        # and a load error names our temp files (e.g. a dequantized QOperator copy onnxruntime
        # refuses): one line naming the user's model instead
        log.debug("quantization of %s failed", src, exc_info=True)
        hint = (
            f"; the FP32 copy dequantized from this {src_kind} model is not usable: quantize its "
            "FP32/FP16 source instead"
            if src_kind != "fp32"
            else ""
        )
        where = "" if isinstance(exc, EdgeAgentError) else "quantization failed in onnxruntime: "
        raise QuantizeError(f"{src}: {where}{_one_line(exc, tmp, src)}{hint}") from None
    return QuantizeResult(dst, excluded, reader.i, settings)


def _settings(
    method: str,
    target: str,
    act: str,
    wt: str,
    reduce_range: bool,
    samples: int,
    excluded: list[str],
    naive: bool,
    hoisted: int,
    kind: str,
) -> dict[str, Any]:
    return {
        "format": "QDQ",
        "method": method,
        "target": target,
        "activation_type": "uint8" if act == "QUInt8" else "int8",
        "weight_type": "int8 per-channel" if wt == "QInt8" else "uint8 per-channel",
        "reduce_range": reduce_range,
        "samples": samples,
        "excluded_nodes": len(excluded),
        "naive": naive,
        "softmax_hoisted": hoisted,
        "task": kind,
        "edge_agent_version": __version__,
    }


def _metadata(onnx: ModuleType, src: Path) -> dict[str, str]:
    return {p.key: p.value for p in onnx.load(str(src), load_external_data=False).metadata_props}


def _write_metadata(onnx: ModuleType, src: Path, dst: Path, settings: dict[str, Any]) -> None:
    """Carry the source's metadata (names, imgsz, stride, task, preprocess...) and add ``quantization``."""
    src_meta = _metadata(onnx, src)
    out = onnx.load(str(dst))
    meta = {p.key: p.value for p in out.metadata_props}
    meta.update(src_meta)
    meta["quantization"] = json.dumps(settings, sort_keys=True)
    del out.metadata_props[:]
    for k, v in meta.items():
        out.metadata_props.add(key=k, value=v)
    onnx.save(out, str(dst))

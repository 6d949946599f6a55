"""The onnxruntime adapter: load a model file on the planned providers and describe it.

Everything onnxruntime-specific lives here: session options, provider fallback, and turning
ORT's own exception zoo into one clear :class:`ModelError` naming the file. What a model says
about itself (tensors, names, labels, the summary ``inspect`` prints) is adapters.model_info.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
import numpy.typing as npt

from edge_agent.adapters.runtime.board import BoardInfo
from edge_agent.adapters.runtime.model_info import (  # re-exported: callers and tests import them from here
    ModelInfo,
    TensorInfo,
    parse_imgsz,
    parse_names,
    read_labels_file,
)
from edge_agent.adapters.runtime.planner import ProviderPlanner
from edge_agent.adapters.runtime.tensorrt_host import EngineBuild, engine_dir
from edge_agent.core.runtime.onnx_wire import GraphSummary, WireError, summarize
from edge_agent.core.runtime.ort_compat import kernel_refusal, load_refusal
from edge_agent.core.runtime.providers import CPU, TRT, ProviderPlan
from edge_agent.core.runtime.tensorrt_plan import QUANTIZED_KINDS, choose_tensorrt_source, jetson_gpu
from edge_agent.errors import ModelError, ProviderError

log = logging.getLogger(__name__)


def _ort_errors() -> tuple[type[BaseException], ...]:
    from onnxruntime.capi import onnxruntime_pybind11_state as st

    names = (
        "Fail",
        "InvalidArgument",
        "NoSuchFile",
        "NoModel",
        "InvalidProtobuf",
        "InvalidGraph",
        "NotImplemented",
        "RuntimeException",
        "EPFail",
        "EngineError",
    )
    return (RuntimeError, *(getattr(st, n) for n in names if hasattr(st, n)))


class OnnxModel:
    """An onnxruntime session plus what we know about the model. Warmed up once at load."""

    def __init__(
        self,
        path: Union[str, Path],
        provider: Optional[str] = None,
        threads: Optional[int] = None,
        labels: Optional[Union[str, Path]] = None,
        board: Optional[BoardInfo] = None,
        state_dir: str = "/var/lib/edge-agent",
        warmup: bool = True,
        available_providers: Optional[Sequence[str]] = None,
        float_source: Optional[Union[str, Path]] = None,
        ort_module: Any = None,
        system_root: Union[str, Path] = "/",
        planner: Optional[ProviderPlanner] = None,
    ) -> None:
        """``float_source``: the FP32/FP16 model a quantized one was made from, for TensorRT on
        GPUs without INT8 (Jetson Nano). ``planner``: the host's plans, kept by a model set across
        reloads (then ``board``/``available_providers`` are its own); without one, this host is
        detected here. ``ort_module``/``system_root``: injection points for tests."""
        ort = ort_module if ort_module is not None else importlib.import_module("onnxruntime")

        self.path = Path(path)
        t0 = time.perf_counter()
        data = self._read(self.path)
        graph = self._summarize(self.path, data)
        planner = planner or ProviderPlanner.detect(ort, board, available_providers)
        self._ort_version = str(planner.ort_version)
        refusal = load_refusal(str(self.path), graph.ir_version, graph.opsets, planner.ort_version)
        if refusal:  # before ORT's own multi-line error, which names neither the limit nor the fix
            raise ModelError(refusal)
        plan = planner.plan(provider, threads, state_dir)
        self._engine: Optional[EngineBuild] = None
        if plan.names[0] == TRT:
            data, graph, plan = self._tensorrt_plan(data, graph, plan, planner.board, float_source)
        if plan.names[0] == TRT:  # the keyed cache path only: the reason keeps what _tensorrt_plan added
            cache = engine_dir(state_dir, hashlib.sha256(data).hexdigest(), planner.board, system_root)
            plan = plan.with_engine_cache(cache)
            self._engine = EngineBuild(cache, self.path.name)
        self.session, used = self._create_session(ort, data, plan)
        meta = dict(self.session.get_modelmeta().custom_metadata_map)
        inputs = [TensorInfo(i.name, tuple(i.shape), i.type) for i in self.session.get_inputs()]
        outputs = [TensorInfo(o.name, tuple(o.shape), o.type) for o in self.session.get_outputs()]
        names = read_labels_file(labels) if labels else parse_names(meta.get("names"))
        stride_raw = meta.get("stride", "")
        self.info = ModelInfo(
            path=str(self.path),
            sha256=hashlib.sha256(data).hexdigest(),
            size_bytes=len(data),
            inputs=inputs,
            outputs=outputs,
            metadata=meta,
            names=names,
            task=meta.get("task"),
            imgsz=parse_imgsz(meta.get("imgsz")),
            stride=int(stride_raw) if stride_raw.isascii() and stride_raw.isdigit() else None,
            graph=graph,
            providers=used,
            provider_reason=plan.reason,
        )
        if graph.quant_kind == "dynamic_int8" and graph.op_counts["ConvInteger"]:
            log.warning(
                "%s: dynamic INT8 convolutions (ConvInteger x%d) are usually slower than FP32 on CPU "
                "(1.7-6x measured); make a static INT8 model with `edge-agent quantize`",
                self.path,
                graph.op_counts["ConvInteger"],
            )
        if warmup:
            self.run(self.dummy_inputs())
        self.info.load_ms = (time.perf_counter() - t0) * 1000
        log.info(
            "loaded %s (%s) on %s [%s] in %.0f ms",
            self.path.name,
            graph.quant_kind,
            ", ".join(used),
            plan.reason,
            self.info.load_ms,
        )

    @staticmethod
    def _summarize(path: Path, data: bytes) -> GraphSummary:
        try:
            return summarize(data)
        except WireError as exc:
            raise ModelError(f"{path}: not an ONNX model or truncated ({exc})") from None

    def _tensorrt_plan(
        self,
        data: bytes,
        graph: GraphSummary,
        plan: ProviderPlan,
        board: BoardInfo,
        float_source: Optional[Union[str, Path]],
    ) -> tuple[bytes, GraphSummary, ProviderPlan]:
        """TensorRT first on a GPU without INT8 and a quantized model: swap in the float source,
        or drop TensorRT with one line saying what to configure."""
        gpu = jetson_gpu(board.compatible)
        choice = choose_tensorrt_source(
            str(self.path), graph.quant_kind, gpu, str(float_source) if float_source else None
        )
        if choice.message:
            log.warning("%s", choice.message)
        if not choice.use_tensorrt:
            rest = [(n, o) for n, o in plan.providers if n != TRT]
            why = f"{plan.reason}; TensorRT skipped ({graph.quant_kind} model, no INT8 on this GPU)"
            return data, graph, ProviderPlan(rest, why, plan.intra_op_threads, plan.notes)
        if choice.float_source:
            fpath = Path(choice.float_source)
            fdata = self._read(fpath)
            fgraph = self._summarize(fpath, fdata)
            if fgraph.quant_kind in QUANTIZED_KINDS:
                raise ModelError(
                    f"{fpath}: [detector] float_model must be an FP32/FP16 model, this one is {fgraph.quant_kind}"
                )
            self.path = fpath
            why = f"{plan.reason}; FP16 engine from float source {fpath.name}"
            return fdata, fgraph, ProviderPlan(plan.providers, why, plan.intra_op_threads, plan.notes)
        return data, graph, plan

    @staticmethod
    def _read(path: Path) -> bytes:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ModelError(f"{path}: model file not found") from None
        except OSError as exc:
            raise ModelError(f"{path}: cannot read model: {exc.strerror or exc}") from None
        if not data:
            raise ModelError(f"{path}: model file is empty (expected an ONNX model)")
        return data

    def _create_session(self, ort: Any, data: bytes, plan: ProviderPlan) -> tuple[Any, list[str]]:
        """Try the planned providers; a provider that fails to initialise is dropped with a warning."""
        chain = list(plan.providers)
        errors = _ort_errors()
        while chain:
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            so.log_severity_level = 3
            if plan.intra_op_threads:
                so.intra_op_num_threads = plan.intra_op_threads
            # No spinning: after each run ORT's pool threads busy-wait for more work, stealing the
            # cores from our own pre/post-processing, the camera thread and anything else on the
            # board (and XNNPACK has its own pool anyway). Measured on a shared 2-core x86 box,
            # YOLOv8n 640: session.run median 155 -> 81 ms, letterbox after a run 10 -> 6 ms.
            so.add_session_config_entry("session.intra_op.allow_spinning", "0")
            engine = self._engine if chain[0][0] == TRT else None
            if engine is not None:
                engine.start()
            try:
                sess = ort.InferenceSession(
                    data,
                    sess_options=so,
                    providers=[n for n, _ in chain],
                    provider_options=[o for _, o in chain],
                )
            except errors as exc:
                msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                if chain[0][0] == CPU or len(chain) == 1:
                    # "NOT_IMPLEMENTED : Could not find an implementation for Add(14) node": the op
                    # named with the runtime and the fix; anything else as onnxruntime said it
                    no_kernel = kernel_refusal(str(self.path), msg, self._ort_version)
                    raise ModelError(no_kernel or f"{self.path}: onnxruntime cannot load it: {msg}") from None
                log.warning(
                    "%s: provider %s failed to initialise (%s); falling back",
                    self.path.name,
                    chain[0][0],
                    msg,
                )
                chain = chain[1:]
                continue
            used = list(sess.get_providers())
            if engine is not None:
                engine.finish(used)
            wanted = chain[0][0]
            if wanted not in used:
                log.warning(
                    "%s: %s was requested but onnxruntime fell back to %s", self.path.name, wanted, used
                )
            return sess, used
        raise ProviderError(f"{self.path}: no execution provider could be initialised")

    @property
    def input(self) -> TensorInfo:
        return self.info.inputs[0]

    def input_hw(self, default: tuple[int, int] = (640, 640)) -> tuple[int, int]:
        """Static H, W of the image input; else the metadata ``imgsz``; else ``default``."""
        shape = self.input.shape
        layout_nhwc = len(shape) == 4 and shape[3] in (1, 3) and shape[1] not in (1, 3)
        h, w = (
            (shape[1], shape[2]) if layout_nhwc else (shape[2], shape[3]) if len(shape) == 4 else (None, None)
        )
        if isinstance(h, int) and isinstance(w, int) and h > 0 and w > 0:
            return (h, w)
        return self.info.imgsz or default

    @property
    def dynamic_batch(self) -> bool:
        return not isinstance(self.input.shape[0], int) if self.input.shape else False

    def dummy_inputs(self) -> dict[str, npt.NDArray[np.generic]]:
        feeds = {}
        for t in self.info.inputs:
            if t is self.input and len(t.shape) == 4:
                h, w = self.input_hw()
                nhwc = t.shape[3] in (1, 3) and t.shape[1] not in (1, 3)
                c = t.shape[3] if nhwc else t.shape[1]
                c = c if isinstance(c, int) else 3
                shape: tuple[int, ...] = (1, h, w, c) if nhwc else (1, c, h, w)
            else:
                shape = tuple(d if isinstance(d, int) and d > 0 else 1 for d in t.shape)
            feeds[t.name] = np.zeros(shape, dtype=t.dtype)
        return feeds

    def run(self, feeds: Mapping[str, npt.NDArray[np.generic]]) -> list[npt.NDArray[np.generic]]:
        try:
            out: list[npt.NDArray[np.generic]] = self.session.run(None, dict(feeds))
        except _ort_errors() as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ModelError(f"{self.path}: inference failed: {first}") from None
        return out

    def run_single(self, tensor: npt.NDArray[np.generic]) -> list[npt.NDArray[np.generic]]:
        return self.run({self.input.name: tensor})

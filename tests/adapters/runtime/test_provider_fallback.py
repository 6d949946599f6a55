"""The project's own provider fallback and the Nano's TensorRT path, through OnnxModel.

A GPU cannot exist here, so onnxruntime is wrapped (FakeGpuOrt): the real CPU onnxruntime runs every
session, while TensorRT/CUDA *session creation* is simulated: it raises for the providers told to
fail, the way NVIDIA's onnxruntime-gpu does when an engine cannot be built, and a TensorRT "build"
writes an engine file into the cache directory it was given, as the TensorRT EP does.
Unlike passing a fake provider list to the real onnxruntime (which silently drops what it does not
have, so the project's fallback code is never reached), these failures reach only our code.
"""

from __future__ import annotations

import hashlib
import logging
import socket
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from support.notify import received

from edge_agent.adapters.runtime.board import BoardInfo
from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.adapters.runtime.planner import ProviderPlanner
from edge_agent.core.runtime.providers import CPU, CUDA, TRT
from edge_agent.errors import ModelError

NANO = BoardInfo(
    "jetson",
    "NVIDIA Jetson Nano Developer Kit",
    "aarch64",
    4,
    ("nvidia,p3450-0000", "nvidia,tegra210"),
    "R32 (release), REVISION: 7.4",
)


class _Session:
    def __init__(self, real: Any, providers: list[str]) -> None:
        self._real = real
        self._providers = providers

    def get_providers(self) -> list[str]:
        return self._providers

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class FakeGpuOrt:
    """onnxruntime with TensorRT/CUDA session creation simulated (see the module docstring)."""

    GraphOptimizationLevel = ort.GraphOptimizationLevel
    SessionOptions = ort.SessionOptions

    def __init__(self, fail: tuple[str, ...] = (), version: str = "1.11.0") -> None:
        self.fail = fail
        self.__version__ = version
        self.calls: list[tuple[str, list[str], list[dict[str, str]]]] = []

    def get_available_providers(self) -> list[str]:
        return [TRT, CUDA, CPU]

    def InferenceSession(
        self, data: bytes, sess_options: Any, providers: list[str], provider_options: list[dict[str, str]]
    ) -> _Session:
        self.calls.append(
            (hashlib.sha256(data).hexdigest(), list(providers), [dict(o) for o in provider_options])
        )
        first = providers[0]
        if first in self.fail:
            from onnxruntime.capi import onnxruntime_pybind11_state as st

            raise st.Fail(f"[ONNXRuntimeError] : 1 : FAIL : {first}: failed to create the engine")
        if first == TRT:
            cache = Path(provider_options[0]["trt_engine_cache_path"])
            (cache / "TensorrtExecutionProvider_TRTKernel_graph_0_fp16.engine").write_bytes(b"engine")
        real = ort.InferenceSession(data, sess_options, providers=[CPU])
        return _Session(real, [p for p in providers if p != CPU] + [CPU])


@pytest.fixture
def nano_root(tmp_path: Path) -> Path:
    lib = tmp_path / "root/usr/lib/aarch64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libnvinfer.so.8.2.1").write_bytes(b"")
    return tmp_path / "root"


def test_failed_tensorrt_reaches_our_fallback_with_aligned_options(
    quant_models: dict[str, Path], tmp_path: Path, nano_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeGpuOrt(fail=(TRT,))
    with caplog.at_level(logging.WARNING):
        m = OnnxModel(
            quant_models["fp32"], board=NANO, state_dir=str(tmp_path), ort_module=fake, system_root=nano_root
        )
    assert [c[1] for c in fake.calls] == [[TRT, CUDA, CPU], [CUDA, CPU]]
    assert fake.calls[1][2] == [{}, {}]  # CUDA retried with its own (empty) options, not TensorRT's
    assert m.info.providers == [CUDA, CPU]
    assert "provider TensorrtExecutionProvider failed to initialise" in caplog.text
    x = np.zeros((1, 3, 32, 32), np.float32)
    assert m.run_single(x)[0].shape == (1, 4)


def test_every_gpu_provider_failing_ends_on_cpu_and_cpu_failing_is_one_error(
    quant_models: dict[str, Path], tmp_path: Path, nano_root: Path
) -> None:
    fake = FakeGpuOrt(fail=(TRT, CUDA))
    m = OnnxModel(
        quant_models["fp32"], board=NANO, state_dir=str(tmp_path), ort_module=fake, system_root=nano_root
    )
    assert len(fake.calls) == 3 and m.info.providers == [CPU]
    with pytest.raises(ModelError, match=r"onnxruntime cannot load it: .*CPUExecutionProvider"):
        OnnxModel(
            quant_models["fp32"],
            board=NANO,
            state_dir=str(tmp_path),
            ort_module=FakeGpuOrt(fail=(TRT, CUDA, CPU)),
            system_root=nano_root,
        )


def test_nano_builds_fp16_engine_from_the_float_source_once(
    quant_models: dict[str, Path],
    tmp_path: Path,
    nano_root: Path,
    notify_socket: socket.socket,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fp32_sha = hashlib.sha256(quant_models["fp32"].read_bytes()).hexdigest()
    fake = FakeGpuOrt()
    with caplog.at_level(logging.INFO):
        m = OnnxModel(
            quant_models["qdq_int8"],
            board=NANO,
            state_dir=str(tmp_path / "state"),
            float_source=quant_models["fp32"],
            ort_module=fake,
            system_root=nano_root,
        )
    sha, providers, options = fake.calls[0]
    assert sha == fp32_sha and providers[0] == TRT  # TensorRT got the float model
    engine_dir = tmp_path / "state/trt-engines" / f"{fp32_sha[:16]}-trt8.2.1-tegra210-sm53"
    assert options[0] == {
        "trt_fp16_enable": "True",
        "trt_engine_cache_enable": "True",
        "trt_engine_cache_path": str(engine_dir),
    }
    assert m.info.sha256 == fp32_sha and m.info.path == str(quant_models["fp32"])
    assert "no INT8 path in TensorRT: building an FP16 engine from its float source" in caplog.text
    assert received(notify_socket) == [f"EXTEND_TIMEOUT_USEC={30 * 60 * 1_000_000}"]
    assert "TensorRT engine built in" in caplog.text
    # second start: the engine is cached for this model + TensorRT + GPU -> no timeout extension
    caplog.clear()
    with caplog.at_level(logging.INFO):
        OnnxModel(
            quant_models["qdq_int8"],
            board=NANO,
            state_dir=str(tmp_path / "state"),
            float_source=quant_models["fp32"],
            ort_module=FakeGpuOrt(),
            system_root=nano_root,
        )
    assert received(notify_socket) == []
    assert "TensorRT engine loaded from" in caplog.text and "built in" not in caplog.text


def test_nano_int8_without_float_source_skips_tensorrt_with_one_line(
    quant_models: dict[str, Path], tmp_path: Path, nano_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeGpuOrt()
    with caplog.at_level(logging.WARNING):
        m = OnnxModel(
            quant_models["qdq_int8"],
            board=NANO,
            state_dir=str(tmp_path),
            ort_module=fake,
            system_root=nano_root,
        )
    assert [c[1] for c in fake.calls] == [[CUDA, CPU]]
    assert m.info.providers == [CUDA, CPU] and "TensorRT skipped" in m.info.provider_reason
    lines = [r.getMessage() for r in caplog.records if "float_model" in r.getMessage()]
    assert len(lines) == 1 and "qdq_int8" in lines[0] and "\n" not in lines[0]


def test_float_source_that_is_quantized_is_refused(
    quant_models: dict[str, Path], tmp_path: Path, nano_root: Path
) -> None:
    with pytest.raises(ModelError, match=r"float_model must be an FP32/FP16 model, this one is dynamic_int8"):
        OnnxModel(
            quant_models["qdq_int8"],
            board=NANO,
            state_dir=str(tmp_path),
            float_source=quant_models["dynamic_int8"],
            ort_module=FakeGpuOrt(),
            system_root=nano_root,
        )


def test_config_float_model_reaches_the_detector_load(
    tmp_path: Path, nano_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`[detector] float_model` -> ModelSet -> OnnxModel: on a Nano the demo INT8 detector's float
    twin is what TensorRT gets."""
    import edge_agent.app.agent.modelset as modelset
    from edge_agent.core.config.schema import parse_config

    repo = Path(__file__).resolve().parents[3]
    int8, fp32 = repo / "models/demo-detector-int8.onnx", repo / "models/demo-detector.onnx"
    real = modelset.OnnxModel
    fake = FakeGpuOrt()

    def on_a_nano(*args: Any, **kwargs: Any) -> OnnxModel:
        return real(*args, ort_module=fake, system_root=nano_root, **kwargs)

    monkeypatch.setattr(modelset, "OnnxModel", on_a_nano)
    cls = repo / "models/demo-classifier.onnx"
    cfg = parse_config(
        f'[device]\nstate_dir = "{tmp_path}"\n[detector]\nmodel = "{int8}"\nfloat_model = "{fp32}"\n'
        f'[classifier]\nmodel = "{cls}"\n'
    )
    models = modelset.ModelSet.from_config(cfg, ProviderPlanner.detect(fake, NANO))
    assert fake.calls[0][0] == hashlib.sha256(fp32.read_bytes()).hexdigest()
    assert fake.calls[0][1][0] == TRT
    assert models.detector.model.info.quant_kind == "fp32"
    # both engines are cached under the config's state_dir (not /var/lib/edge-agent)
    engines = [c[2][0]["trt_engine_cache_path"] for c in fake.calls if c[1][0] == TRT]
    assert len(engines) == 2 and all(e.startswith(f"{tmp_path}/") for e in engines), engines


def test_unwritable_engine_cache_is_a_warning_not_a_crash(
    quant_models: dict[str, Path], tmp_path: Path, nano_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "state"
    blocker.write_text("a file where the state directory should be")

    class NoCacheOrt(FakeGpuOrt):
        def InferenceSession(
            self, data: bytes, sess_options: Any, providers: list[str], provider_options: list[dict[str, str]]
        ) -> _Session:
            self.calls.append((hashlib.sha256(data).hexdigest(), list(providers), provider_options))
            return _Session(ort.InferenceSession(data, sess_options, providers=[CPU]), list(providers))

    with caplog.at_level(logging.WARNING):
        m = OnnxModel(
            quant_models["fp32"],
            board=NANO,
            state_dir=str(blocker),
            ort_module=NoCacheOrt(),
            system_root=nano_root,
        )
    assert m.info.providers[0] == TRT
    assert "TensorRT engine cache" in caplog.text and "rebuilt on every start" in caplog.text

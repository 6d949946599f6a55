"""What OnnxModel asks onnxruntime for: threads, no spinning, full graph optimisation, the provider
chain and its fallback, and what it reports about the model (issue 19).

onnxruntime is wrapped (``RecordingOrt``): every session is the real CPU onnxruntime, but the
SessionOptions and the provider lists OnnxModel passed are kept, and providers can be told to
fail at session creation the way onnxruntime-gpu does.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any, Optional

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from edge_agent.adapters.runtime.board import BoardInfo
from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.core.runtime.providers import CPU, CUDA, TRT, XNNPACK
from edge_agent.errors import ModelError

X86 = BoardInfo("generic-x86", "test", "x86_64", 2)
PI4 = BoardInfo("rpi4", "Raspberry Pi 4 Model B", "aarch64", 4)


class _Session:
    def __init__(self, real: Any, providers: list[str], runs: list[Any]) -> None:
        self._real, self._providers, self._runs = real, providers, runs

    def get_providers(self) -> list[str]:
        return self._providers

    def run(self, names: Any, feeds: dict[str, Any]) -> Any:
        self._runs.append({k: v.shape for k, v in feeds.items()})
        return self._real.run(names, feeds)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class RecordingOrt:
    GraphOptimizationLevel = ort.GraphOptimizationLevel
    SessionOptions = ort.SessionOptions

    def __init__(
        self,
        available: tuple[str, ...] = (CPU,),
        fail: dict[str, BaseException] | None = None,
        version: str = ort.__version__,
        used: Optional[list[str]] = None,
    ) -> None:
        self.available, self.fail, self.__version__, self.used = list(available), fail or {}, version, used
        self.options: list[Any] = []
        self.providers: list[tuple[list[str], list[dict[str, str]]]] = []
        self.runs: list[Any] = []

    def get_available_providers(self) -> list[str]:
        return self.available

    def InferenceSession(
        self, data: bytes, sess_options: Any, providers: list[str], provider_options: list[dict[str, str]]
    ) -> _Session:
        self.options.append(sess_options)
        self.providers.append((list(providers), [dict(o) for o in provider_options]))
        if providers[0] in self.fail:
            raise self.fail[providers[0]]
        real = ort.InferenceSession(data, sess_options, providers=[CPU])
        return _Session(real, self.used if self.used is not None else list(providers), self.runs)


def _fail(text: str = "FAIL : could not create the provider\nsecond line") -> BaseException:
    from onnxruntime.capi import onnxruntime_pybind11_state as st

    return st.Fail(text)


@pytest.mark.parametrize(
    ("board", "threads", "expected"),
    [(X86, None, 0), (X86, 3, 3), (PI4, None, 4), (PI4, 2, 2)],
)
def test_thread_count_reaches_onnxruntime(
    quant_models: dict[str, Path], board: BoardInfo, threads: Optional[int], expected: int
) -> None:
    fake = RecordingOrt()
    OnnxModel(quant_models["fp32"], board=board, threads=threads, ort_module=fake)
    so = fake.options[-1]
    assert so.intra_op_num_threads == expected  # 0: onnxruntime's own default
    # no busy-waiting pool threads, every graph optimisation, only errors in the log
    assert so.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert so.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert so.log_severity_level == 3


def test_xnnpack_on_a_pi_gets_its_own_threads_and_one_session_thread(quant_models: dict[str, Path]) -> None:
    fake = RecordingOrt(available=(XNNPACK, CPU), used=[CPU])
    m = OnnxModel(quant_models["fp32"], board=PI4, ort_module=fake)
    assert fake.providers == [([XNNPACK, CPU], [{"intra_op_num_threads": "4"}, {}])]
    assert fake.options[-1].intra_op_num_threads == 1
    assert m.info.providers == [CPU]


def test_a_failing_provider_falls_back_to_the_next_with_one_warning_line(
    quant_models: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    fake = RecordingOrt(available=(CUDA, CPU), fail={CUDA: _fail()})
    with caplog.at_level(logging.WARNING):
        m = OnnxModel(quant_models["fp32"], board=X86, provider="cuda", ort_module=fake)
    assert [p for p, _ in fake.providers] == [[CUDA, CPU], [CPU]]
    assert m.info.providers == [CPU]
    assert len(fake.options) == 2 and fake.options[1].intra_op_num_threads == 0
    name = Path(quant_models["fp32"]).name
    assert caplog.messages == [
        f"{name}: provider {CUDA} failed to initialise (FAIL : could not create the provider); falling back"
    ]


@pytest.mark.parametrize("exc", [RuntimeError("boom\nmore"), _fail("boom\nmore")])
def test_cpu_failing_is_one_model_error_naming_the_file(
    quant_models: dict[str, Path], exc: BaseException
) -> None:
    fake = RecordingOrt(fail={CPU: exc})
    with pytest.raises(ModelError) as err:
        OnnxModel(quant_models["fp32"], board=X86, ort_module=fake)
    assert str(err.value) == f"{quant_models['fp32']}: onnxruntime cannot load it: boom"
    assert len(fake.providers) == 1


def test_an_exception_without_text_is_named_by_its_type(quant_models: dict[str, Path]) -> None:
    with pytest.raises(ModelError) as err:
        OnnxModel(quant_models["fp32"], board=X86, ort_module=RecordingOrt(fail={CPU: RuntimeError()}))
    assert str(err.value).endswith(": onnxruntime cannot load it: RuntimeError")


def test_the_only_provider_requested_failing_is_not_retried(quant_models: dict[str, Path]) -> None:
    fake = RecordingOrt(available=(CUDA,), fail={CUDA: _fail("no CUDA")})
    with pytest.raises(ModelError, match=r": onnxruntime cannot load it: no CUDA$"):
        OnnxModel(quant_models["fp32"], board=X86, provider="cuda", ort_module=fake)
    assert len(fake.providers) == 1


def test_onnxruntime_falling_back_by_itself_is_a_warning(
    quant_models: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    fake = RecordingOrt(available=(CUDA, CPU), used=[CPU])
    with caplog.at_level(logging.WARNING):
        m = OnnxModel(quant_models["fp32"], board=X86, provider="cuda", ort_module=fake)
    assert m.info.providers == [CPU]
    name = Path(quant_models["fp32"]).name
    assert caplog.messages == [f"{name}: {CUDA} was requested but onnxruntime fell back to ['{CPU}']"]


def test_no_warning_when_the_first_provider_is_used(
    quant_models: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        OnnxModel(quant_models["fp32"], board=X86, ort_module=RecordingOrt())
    assert caplog.messages == []


def test_a_model_too_new_for_the_installed_onnxruntime_is_refused_before_loading(tmp_path: Path) -> None:
    path = _image_model(tmp_path, [1, 3, 8, 8], {}, opset=17)
    fake = RecordingOrt(version="1.11.0")
    with pytest.raises(ModelError) as err:
        OnnxModel(path, board=X86, ort_module=fake)
    assert str(err.value).startswith(f"{path}: ") and "opset 17 > 16" in str(err.value)
    assert fake.providers == []
    OnnxModel(path, board=X86, ort_module=RecordingOrt(version="1.12.0"))  # 1.12 reads opset 17


def test_warmup_runs_once_on_dummy_inputs_and_can_be_skipped(tmp_path: Path) -> None:
    path = _image_model(tmp_path, [1, 3, 24, 40], {})
    fake = RecordingOrt()
    OnnxModel(path, board=X86, ort_module=fake)
    assert fake.runs == [{"img": (1, 3, 24, 40)}]
    fake2 = RecordingOrt()
    OnnxModel(path, board=X86, ort_module=fake2, warmup=False)
    assert fake2.runs == []


def test_info_describes_the_file_and_the_choice(
    quant_models: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    path = quant_models["fp32"]
    with caplog.at_level(logging.INFO, logger="edge_agent.adapters.runtime.onnx_model"):
        m = OnnxModel(path, board=X86, ort_module=RecordingOrt())
    data = Path(path).read_bytes()
    assert m.info.sha256 == hashlib.sha256(data).hexdigest() and m.info.size_bytes == len(data)
    assert m.info.path == str(path) and m.info.providers == [CPU]
    assert m.info.provider_reason == "generic-x86: CPU"
    assert m.info.load_ms > 0
    assert any(
        r.startswith(f"loaded {Path(path).name} (fp32) on {CPU} [generic-x86: CPU] in ")
        for r in caplog.messages
    ), caplog.messages


def _image_model(
    tmp_path: Path, shape: list[Any], meta: dict[str, str], second: bool = False, opset: int = 13
) -> Path:
    inputs = [helper.make_tensor_value_info("img", TensorProto.FLOAT, shape)]
    nodes = [helper.make_node("ReduceMax", ["img"], ["y"], keepdims=0)]
    if second:
        inputs.append(helper.make_tensor_value_info("extra", TensorProto.FLOAT, ["n", 3]))
        nodes.append(helper.make_node("Identity", ["extra"], ["z"]))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])]
    if second:
        outputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, ["n", 3]))
    m = helper.make_model(
        helper.make_graph(nodes, "g", inputs, outputs), opset_imports=[helper.make_opsetid("", opset)]
    )
    m.ir_version = 8
    for k, v in meta.items():
        m.metadata_props.add(key=k, value=v)
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    return p


@pytest.mark.parametrize(
    ("shape", "meta", "hw", "batch_dynamic", "dummy"),
    [
        ([1, 3, 48, 80], {}, (48, 80), False, (1, 3, 48, 80)),
        ([1, 48, 80, 3], {}, (48, 80), False, (1, 48, 80, 3)),
        ([1, 40, 24, 1], {}, (40, 24), False, (1, 40, 24, 1)),
        (["b", 3, "h", "w"], {"imgsz": "[96, 128]"}, (96, 128), True, (1, 3, 96, 128)),
        (["b", 3, "h", "w"], {}, (640, 640), True, (1, 3, 640, 640)),
        (["b", "h", "w", 3], {"imgsz": "32"}, (32, 32), True, (1, 32, 32, 3)),
        ([1, "c", 16, 16], {}, (16, 16), False, (1, 3, 16, 16)),
    ],
)
def test_input_size_layout_and_dummy_inputs(
    tmp_path: Path,
    shape: list[Any],
    meta: dict[str, str],
    hw: tuple[int, int],
    batch_dynamic: bool,
    dummy: tuple[int, ...],
) -> None:
    m = OnnxModel(_image_model(tmp_path, shape, meta), board=X86, warmup=False)
    assert m.input_hw() == hw and m.dynamic_batch is batch_dynamic
    feeds = m.dummy_inputs()
    assert feeds["img"].shape == dummy and feeds["img"].dtype == np.float32 and not feeds["img"].any()
    assert m.input_hw((10, 20)) == (hw if hw != (640, 640) else (10, 20))


def test_other_inputs_get_one_for_each_unknown_dim(tmp_path: Path) -> None:
    m = OnnxModel(_image_model(tmp_path, [1, 3, 8, 8], {}, second=True), board=X86)
    assert {k: v.shape for k, v in m.dummy_inputs().items()} == {"img": (1, 3, 8, 8), "extra": (1, 3)}


@pytest.mark.parametrize(("stride", "expected"), [("32", 32), ("", None), ("x8", None), ("\u0668", None)])
def test_stride_metadata_only_when_it_is_a_plain_number(
    tmp_path: Path, stride: str, expected: Optional[int]
) -> None:
    m = OnnxModel(_image_model(tmp_path, [1, 3, 8, 8], {"stride": stride, "task": "detect"}), board=X86)
    assert m.info.stride == expected and m.info.task == "detect"


def test_inference_failure_is_one_model_error(tmp_path: Path) -> None:
    m = OnnxModel(_image_model(tmp_path, [1, 3, 8, 8], {}), board=X86)
    with pytest.raises(ModelError) as err:
        m.run({"img": np.zeros((1, 3, 8, 8), np.float64)})
    text = str(err.value)
    assert text.startswith(f"{tmp_path / 'm.onnx'}: inference failed: ") and "\n" not in text
    np.testing.assert_array_equal(m.run_single(np.ones((1, 3, 8, 8), np.float32))[0], np.float32(1))


def test_an_unreadable_model_path_is_one_error(tmp_path: Path) -> None:
    d = tmp_path / "dir.onnx"
    d.mkdir()
    with pytest.raises(ModelError) as err:
        OnnxModel(d, board=X86)
    assert str(err.value) == f"{d}: cannot read model: Is a directory"


NANO = BoardInfo(
    "jetson",
    "NVIDIA Jetson Nano Developer Kit",
    "aarch64",
    4,
    ("nvidia,p3450-0000", "nvidia,tegra210"),
    "R32",
)


@pytest.mark.parametrize("kind", ["qdq_int8", "qoperator_int8", "dynamic_int8"])
def test_every_quantized_float_source_is_refused_for_tensorrt(
    quant_models: dict[str, Path], tmp_path: Path, kind: str
) -> None:
    fake = RecordingOrt(available=(TRT, CUDA, CPU))
    with pytest.raises(ModelError) as err:
        OnnxModel(
            quant_models["qdq_int8"],
            board=NANO,
            state_dir=str(tmp_path),
            float_source=quant_models[kind],
            ort_module=fake,
            system_root=tmp_path,
        )
    assert str(err.value) == (
        f"{quant_models[kind]}: [detector] float_model must be an FP32/FP16 model, this one is {kind}"
    )
    assert fake.providers == []


@pytest.mark.parametrize("kind", ["fp32", "fp16"])
def test_a_float_source_is_what_tensorrt_gets(
    quant_models: dict[str, Path], tmp_path: Path, kind: str
) -> None:
    fake = RecordingOrt(available=(TRT, CUDA, CPU))
    m = OnnxModel(
        quant_models["qdq_int8"],
        board=NANO,
        state_dir=str(tmp_path),
        float_source=quant_models[kind],
        ort_module=fake,
        system_root=tmp_path,
    )
    assert m.info.path == str(quant_models[kind]) and m.info.quant_kind == kind
    assert fake.providers[0][0] == [TRT, CUDA, CPU]
    assert m.info.provider_reason.endswith(f"; FP16 engine from float source {quant_models[kind].name}")


def _ort_error_names() -> list[str]:
    from onnxruntime.capi import onnxruntime_pybind11_state as st

    names = ["Fail", "InvalidArgument", "NoSuchFile", "NoModel", "InvalidProtobuf", "InvalidGraph"]
    names += ["NotImplemented", "RuntimeException", "EPFail", "EngineError"]
    return [n for n in names if hasattr(st, n)]


@pytest.mark.parametrize("name", _ort_error_names())
def test_each_onnxruntime_error_is_one_model_error(quant_models: dict[str, Path], name: str) -> None:
    from onnxruntime.capi import onnxruntime_pybind11_state as st

    exc = getattr(st, name)(f"{name} happened\ndetails")
    with pytest.raises(ModelError) as err:
        OnnxModel(quant_models["fp32"], board=X86, ort_module=RecordingOrt(fail={CPU: exc}))
    assert str(err.value) == f"{quant_models['fp32']}: onnxruntime cannot load it: {name} happened"


class _FailingRun:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def run(self, names: Any, feeds: Any) -> Any:
        raise self.exc


@pytest.mark.parametrize(
    ("exc", "line"),
    [
        (RuntimeError("bad shape\nat node 3"), "bad shape"),
        (RuntimeError("  "), "RuntimeError"),
        *[(n, f"{n} in run") for n in _ort_error_names()],
    ],
)
def test_an_inference_failure_is_one_line(tmp_path: Path, exc: Any, line: str) -> None:
    from onnxruntime.capi import onnxruntime_pybind11_state as st

    if isinstance(exc, str):
        exc = getattr(st, exc)(f"{exc} in run\nmore")
    m = OnnxModel(_image_model(tmp_path, [1, 3, 8, 8], {}), board=X86)
    m.session = _FailingRun(exc)
    with pytest.raises(ModelError) as err:
        m.run_single(np.zeros((1, 3, 8, 8), np.float32))
    assert str(err.value) == f"{tmp_path / 'm.onnx'}: inference failed: {line}"


def test_an_onnxruntime_without_a_version_attribute_still_loads(quant_models: dict[str, Path]) -> None:
    class Bare(RecordingOrt):
        def __getattribute__(self, name: str) -> Any:
            if name == "__version__":
                raise AttributeError(name)
            return super().__getattribute__(name)

    m = OnnxModel(quant_models["fp32"], board=X86, ort_module=Bare())
    assert m.info.providers == [CPU]


def test_cpu_first_and_failing_is_final_even_with_more_providers(quant_models: dict[str, Path]) -> None:
    fake = RecordingOrt(available=(CUDA, CPU), fail={CPU: _fail("cpu broke")})
    with pytest.raises(ModelError, match=r": onnxruntime cannot load it: cpu broke$"):
        OnnxModel(quant_models["fp32"], board=X86, provider="cpu,cuda", ort_module=fake)
    assert [p for p, _ in fake.providers] == [[CPU, CUDA]]


def test_a_failed_tensorrt_build_is_announced_once(
    quant_models: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = RecordingOrt(available=(TRT, CUDA, CPU), fail={TRT: _fail("engine build failed")})
    with caplog.at_level(logging.WARNING):
        m = OnnxModel(
            quant_models["fp32"], board=NANO, state_dir=str(tmp_path), ort_module=fake, system_root=tmp_path
        )
    assert m.info.providers == [CUDA, CPU]
    assert sum("building the TensorRT FP16 engine" in r for r in caplog.messages) == 1


def test_skipping_tensorrt_keeps_the_thread_count(quant_models: dict[str, Path], tmp_path: Path) -> None:
    fake = RecordingOrt(available=(TRT, CUDA, CPU))
    m = OnnxModel(
        quant_models["qdq_int8"],
        board=NANO,
        threads=2,
        state_dir=str(tmp_path),
        ort_module=fake,
        system_root=tmp_path,
    )
    assert fake.providers[0][0] == [CUDA, CPU] and fake.options[0].intra_op_num_threads == 2
    assert "TensorRT skipped (qdq_int8 model, no INT8 on this GPU)" in m.info.provider_reason


def test_the_skip_line_names_a_model_path_with_percent_signs(
    quant_models: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    odd = tmp_path / "det%d-100%.onnx"
    odd.write_bytes(quant_models["qdq_int8"].read_bytes())
    with caplog.at_level(logging.WARNING):
        OnnxModel(
            odd, board=NANO, state_dir=str(tmp_path), ort_module=RecordingOrt(available=(TRT, CUDA, CPU))
        )
    lines = [m for m in caplog.messages if "no INT8 path in TensorRT" in m]
    assert len(lines) == 1 and lines[0].startswith(f"{odd} is qdq_int8 and the ")


def test_a_broken_float_source_is_named(quant_models: dict[str, Path], tmp_path: Path) -> None:
    bad = tmp_path / "float.onnx"
    bad.write_bytes(quant_models["fp32"].read_bytes()[:-40])
    with pytest.raises(ModelError) as err:
        OnnxModel(
            quant_models["qdq_int8"],
            board=NANO,
            state_dir=str(tmp_path),
            float_source=bad,
            ort_module=RecordingOrt(available=(TRT, CUDA, CPU)),
        )
    assert str(err.value).startswith(f"{bad}: not an ONNX model or truncated")


@pytest.mark.parametrize(
    ("shape", "hw"),
    [
        ([1, 5, 3, 3], (5, 3)),  # NHWC, three columns
        ([1, 1, 16, 3], (16, 3)),  # NCHW grey, three columns
        ([1, 3, 16, 3], (16, 3)),  # NCHW colour, three columns
        ([1, 3, 1, 40], (1, 40)),
        ([1, 3, 40, 1], (40, 1)),
        ([1, 3, 32, "w"], (640, 640)),
        (["n", 12], (640, 640)),
    ],
)
def test_input_hw_edge_layouts(tmp_path: Path, shape: list[Any], hw: tuple[int, int]) -> None:
    m = OnnxModel(_image_model(tmp_path, shape, {}), board=X86, warmup=False)
    assert m.input_hw() == hw
    if len(shape) == 4 and all(isinstance(d, int) for d in shape):
        assert m.dummy_inputs()["img"].shape == tuple(shape)


def test_a_second_image_sized_input_keeps_its_own_shape(tmp_path: Path) -> None:
    inputs = [
        helper.make_tensor_value_info("img", TensorProto.FLOAT, [1, 3, 16, 16]),
        helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["n", 1, 4, 6]),
    ]
    nodes = [
        helper.make_node("ReduceMax", ["img"], ["y"], keepdims=0),
        helper.make_node("Identity", ["mask"], ["z"]),
    ]
    outputs = [
        helper.make_tensor_value_info("y", TensorProto.FLOAT, []),
        helper.make_tensor_value_info("z", TensorProto.FLOAT, ["n", 1, 4, 6]),
    ]
    mm = helper.make_model(
        helper.make_graph(nodes, "g", inputs, outputs), opset_imports=[helper.make_opsetid("", 13)]
    )
    mm.ir_version = 8
    p = tmp_path / "two.onnx"
    onnx.save(mm, str(p))
    m = OnnxModel(p, board=X86)
    assert {k: v.shape for k, v in m.dummy_inputs().items()} == {"img": (1, 3, 16, 16), "mask": (1, 1, 4, 6)}


def test_the_keyed_tensorrt_plan_keeps_the_override_and_the_threads(
    quant_models: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = RecordingOrt(available=(TRT, CUDA, CPU))
    with caplog.at_level(logging.WARNING):
        m = OnnxModel(
            quant_models["fp32"],
            board=NANO,
            provider="tensorrt",
            threads=2,
            state_dir=str(tmp_path),
            ort_module=fake,
            system_root=tmp_path,
        )
    assert fake.providers[0][0] == [TRT, CPU] and fake.options[0].intra_op_num_threads == 2
    assert fake.providers[0][1][0]["trt_engine_cache_path"].startswith(str(tmp_path / "trt-engines"))
    assert m.info.provider_reason == "override: tensorrt"
    name = Path(quant_models["fp32"]).name
    assert any(r.startswith(f"{name}: building the TensorRT FP16 engine") for r in caplog.messages)


def test_the_loaded_line_names_every_provider_used(
    quant_models: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="edge_agent.adapters.runtime.onnx_model"):
        m = OnnxModel(
            quant_models["fp32"], board=X86, provider="cuda", ort_module=RecordingOrt(available=(CUDA, CPU))
        )
    assert any(f"on {CUDA}, {CPU} [override: cuda] in " in r for r in caplog.messages), caplog.messages
    assert 0 < m.info.load_ms < 600_000
    assert [(o.name, o.type) for o in m.info.outputs] == [("output0", "tensor(float)")]
    assert m.info.metadata == {"task": "classify"}


def test_the_dynamic_int8_warning_is_the_whole_line(
    quant_models: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        OnnxModel(quant_models["dynamic_int8"], board=X86, ort_module=RecordingOrt())
    assert caplog.messages == [
        f"{quant_models['dynamic_int8']}: dynamic INT8 convolutions (ConvInteger x2) are usually slower than "
        "FP32 on CPU (1.7-6x measured); make a static INT8 model with `edge-agent quantize`"
    ]

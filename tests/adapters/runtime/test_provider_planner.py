"""The provider plan is made once and reused at reload (issue 30): ``ProviderPlanner`` reads the
host once and plans once per request; a model set and the model updates hand it to the next load;
on a Jetson the keyed engine cache and the reason are what the second ``plan_providers`` call and
``_tensorrt_plan`` made before."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable

import onnxruntime as ort
import pytest

import edge_agent.adapters.runtime.planner as planner_mod
from edge_agent.adapters.runtime.board import BoardInfo
from edge_agent.adapters.runtime.onnx_model import OnnxModel
from edge_agent.adapters.runtime.planner import ProviderPlanner
from edge_agent.adapters.runtime.tensorrt_host import engine_dir
from edge_agent.app.agent.modelset import ModelSet
from edge_agent.core.config.schema import parse_config
from edge_agent.core.runtime.providers import CPU, CUDA, TRT, plan_providers
from edge_agent.errors import ProviderError

REPO = Path(__file__).resolve().parents[3]
FP32, INT8 = REPO / "models/demo-detector.onnx", REPO / "models/demo-detector-int8.onnx"
CLASSIFIER = REPO / "models/demo-classifier.onnx"
X86 = BoardInfo("generic-x86", "test", "x86_64", 2)
NANO = BoardInfo(
    "jetson",
    "NVIDIA Jetson Nano Developer Kit",
    "aarch64",
    4,
    ("nvidia,p3450-0000", "nvidia,tegra210"),
    "R32",
)


class _Session:
    def __init__(self, real: Any, providers: list[str]) -> None:
        self._real, self._providers = real, providers

    def get_providers(self) -> list[str]:
        return self._providers

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class GpuOrt:
    """onnxruntime-gpu 1.11 as on JetPack 4: sessions are CPU ones, the requests are recorded."""

    GraphOptimizationLevel = ort.GraphOptimizationLevel
    SessionOptions = ort.SessionOptions
    __version__ = "1.11.0"

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], list[dict[str, str]]]] = []

    def get_available_providers(self) -> list[str]:
        return [TRT, CUDA, CPU]

    def InferenceSession(
        self, data: bytes, sess_options: Any, providers: list[str], provider_options: list[dict[str, str]]
    ) -> _Session:
        self.calls.append(
            (hashlib.sha256(data).hexdigest(), list(providers), [dict(o) for o in provider_options])
        )
        return _Session(ort.InferenceSession(data, sess_options, providers=[CPU]), list(providers))


def counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """Count the calls of ``planner_mod.<name>`` (still calling the real one)."""
    calls: list[int] = []
    real: Callable[..., Any] = getattr(planner_mod, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(planner_mod, name, spy)
    return calls


def test_one_plan_per_request_and_the_same_object_after(monkeypatch: pytest.MonkeyPatch) -> None:
    plans = counting(monkeypatch, "plan_providers")
    p = ProviderPlanner(X86, [CUDA, CPU], "1.20.0")
    first = p.plan(None, None, "/s")
    assert p.plan(None, None, "/s") is first and len(plans) == 1 and p.planned == 1
    assert first == plan_providers("generic-x86", [CUDA, CPU], 2, None, None, "/s", "1.20.0")
    cuda = p.plan("cuda", None, "/s")
    assert cuda.names == [CUDA, CPU] and len(plans) == 2
    assert p.plan(None, 3, "/s").intra_op_threads == 3 and p.plan(None, None, "/t") is not first
    assert len(plans) == 4 and p.planned == 4


def test_an_invalid_override_raises_each_time_and_is_not_kept() -> None:
    p = ProviderPlanner(X86, [CPU], "1.20.0")
    for _ in range(2):
        with pytest.raises(ProviderError, match="provider CUDAExecutionProvider requested"):
            p.plan("cuda")
    assert p.planned == 0


def test_detect_reads_only_what_it_is_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    boards = counting(monkeypatch, "detect_board")
    fake = GpuOrt()
    given = ProviderPlanner.detect(fake, NANO, [CUDA, CPU])
    assert (given.board, given.available, given.ort_version, boards) == (NANO, (CUDA, CPU), "1.11.0", [])
    asked = ProviderPlanner.detect(fake, NANO, [])  # an empty list is not an answer: onnxruntime's is
    assert asked.available == (TRT, CUDA, CPU)
    detected = ProviderPlanner.detect()
    assert len(boards) == 1 and detected.board.physical_cores >= 1
    assert detected.available == tuple(ort.get_available_providers())
    assert detected.ort_version == ort.__version__

    class Bare:  # an onnxruntime without __version__ still loads
        def get_available_providers(self) -> list[str]:
            return [CPU]

    assert ProviderPlanner.detect(Bare(), X86).ort_version == ""


def config(state: Path, threads: str = "") -> Any:
    return parse_config(
        f'[device]\nstate_dir = "{state}"\n[detector]\nmodel = "{FP32}"\n{threads}'
        f'[classifier]\nmodel = "{CLASSIFIER}"\n'
    )


def test_a_load_and_a_reload_detect_the_board_and_plan_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: 2 plans and 2 board detections per load (detector, classifier), 4 + 4 with a reload."""
    boards, plans = counting(monkeypatch, "detect_board"), counting(monkeypatch, "plan_providers")
    cfg = config(tmp_path)
    models = ModelSet.from_config(cfg)
    assert (len(boards), len(plans)) == (1, 1)
    again = models.reload(cfg)
    assert (len(boards), len(plans)) == (1, 1)
    assert again.planner is models.planner is not None and again is not models
    assert again.detector.model.info.provider_reason == models.detector.model.info.provider_reason
    threads = models.reload(config(tmp_path, "threads = 1\n"))  # other threads: planned, not detected
    assert (len(boards), len(plans)) == (1, 2) and threads.detector.model.info.providers == [CPU]


def test_model_updates_reload_on_the_planner_of_the_first_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from support.updates import write_config

    from edge_agent.app.cli.configfile import load_config
    from edge_agent.app.updates.agent_side import ModelUpdates, release_run_lock

    boards, plans = counting(monkeypatch, "detect_board"), counting(monkeypatch, "plan_providers")
    cfg = load_config(write_config(tmp_path))
    updates = ModelUpdates(cfg, lambda: None)
    try:
        first = updates.build_models(cfg)
        second = updates.build_models(cfg)  # the SIGHUP / switch reload
    finally:
        release_run_lock(cfg)
    assert first.planner is second.planner is not None
    assert (len(boards), len(plans)) == (1, 1)


def test_the_keyed_cache_is_what_the_second_plan_gave(tmp_path: Path) -> None:
    fake = GpuOrt()
    planner = ProviderPlanner.detect(fake, NANO)
    OnnxModel(FP32, state_dir=str(tmp_path), ort_module=fake, system_root=tmp_path, planner=planner)
    sha = hashlib.sha256(FP32.read_bytes()).hexdigest()
    cache = engine_dir(str(tmp_path), sha, NANO, tmp_path)
    second = plan_providers("jetson", [TRT, CUDA, CPU], 4, None, None, str(tmp_path), "1.11.0", cache)
    assert fake.calls == [(sha, [TRT, CUDA, CPU], [o for _, o in second.providers])]
    assert cache.startswith(f"{tmp_path}/trt-engines/{sha[:16]}-")
    # the shared plan keeps the unkeyed default: the next model gets its own key, not this one's
    assert planner.plan(None, None, str(tmp_path)).providers[0][1]["trt_engine_cache_path"] == str(
        tmp_path / "trt-engines"
    )


def test_the_reason_keeps_the_float_source_and_the_cache_is_keyed_by_it(tmp_path: Path) -> None:
    fake = GpuOrt()
    planner = ProviderPlanner.detect(fake, NANO)
    m = OnnxModel(
        INT8,
        state_dir=str(tmp_path),
        float_source=FP32,
        ort_module=fake,
        system_root=tmp_path,
        planner=planner,
    )
    base = planner.plan(None, None, str(tmp_path)).reason
    assert m.info.provider_reason == f"{base}; FP16 engine from float source {FP32.name}"
    sha = hashlib.sha256(FP32.read_bytes()).hexdigest()
    assert fake.calls[0][0] == sha
    assert fake.calls[0][2][0]["trt_engine_cache_path"] == engine_dir(str(tmp_path), sha, NANO, tmp_path)
    skipped = OnnxModel(INT8, state_dir=str(tmp_path), ort_module=fake, system_root=tmp_path, planner=planner)
    assert fake.calls[1][1:] == ([CUDA, CPU], [{}, {}]) and planner.planned == 1
    assert skipped.info.provider_reason == (f"{base}; TensorRT skipped (qdq_int8 model, no INT8 on this GPU)")


def test_the_gate_of_a_switch_loads_on_the_running_agents_planner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package in the inbox: the gate loads the current and the candidate detector without
    detecting the board again (before: once per model loaded)."""
    from support.updates import INT8, SAMPLES, pack_in_process, write_config

    from edge_agent.app.cli.configfile import load_config
    from edge_agent.app.updates.agent_side import ModelUpdates, inbox_dir, release_run_lock

    cfg = load_config(write_config(tmp_path, extra="[model_update]\ntrial_s = 0\n"))
    package = pack_in_process(
        tmp_path / "v2.0.pkg", INT8, version="2.0", probe=sorted(SAMPLES.glob("*.jpg"))[:1]
    )
    updates = ModelUpdates(cfg, lambda: None)
    try:
        updates.build_models(cfg)
        boards = counting(monkeypatch, "detect_board")
        inbox_dir(cfg).mkdir(parents=True, exist_ok=True)
        (inbox_dir(cfg) / package.name).write_bytes(package.read_bytes())
        updates.scan_inbox()
        second = updates.build_models(cfg)  # the reload the switch asks for
    finally:
        updates.stop()
        release_run_lock(cfg)
    assert str(updates.store.state().current).startswith("demo-2.0-") and boards == []
    assert second.detector.model.info.sha256 == hashlib.sha256(INT8.read_bytes()).hexdigest()


def test_a_sighup_reload_without_model_updates_plans_on_the_running_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent's own reload (SIGHUP, [model_update] off) goes through ModelSet.reload: before, it
    called ModelSet.from_config and detected the board and planned again."""
    from edge_agent.app.agent.agent import Agent

    boards, plans = counting(monkeypatch, "detect_board"), counting(monkeypatch, "plan_providers")
    cfg = config(tmp_path)
    models = ModelSet.from_config(cfg)
    agent = Agent(cfg, models=models)
    agent._reload()
    assert agent.reloads == 1 and agent.reload_failures == 0
    assert agent.models is not models and agent.models is not None
    assert agent.models.planner is models.planner
    assert (len(boards), len(plans)) == (1, 1)

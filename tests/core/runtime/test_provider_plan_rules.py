"""The provider plan per board as the operator reads it (providers, options, threads, the reason
line and the one-line errors), and the TensorRT facts it rests on."""

from __future__ import annotations

import pytest

from edge_agent.core.runtime.providers import CPU, CUDA, TRT, XNNPACK, plan_providers, resolve_name
from edge_agent.core.runtime.tensorrt_plan import (
    engine_cache_dir,
    jetpack_major,
    ort_version_tuple,
    tensorrt_options,
)
from edge_agent.errors import ProviderError


def test_a_pi_with_xnnpack() -> None:
    p = plan_providers("rpi4", [XNNPACK, CPU], 4)
    assert p.providers == [(XNNPACK, {"intra_op_num_threads": "4"}), (CPU, {})]
    assert p.reason == "Raspberry Pi: XNNPACK > CPU with 4 threads (physical cores)"
    assert p.intra_op_threads == 1  # XNNPACK's own pool does the work
    t = plan_providers("rpi5", [XNNPACK, CPU], 4, threads=0)
    assert t.providers[0] == (XNNPACK, {"intra_op_num_threads": "1"})


def test_a_pi_without_xnnpack() -> None:
    p = plan_providers("rpi3", [CPU], 4)
    assert p.providers == [(CPU, {})] and p.intra_op_threads == 4
    assert (
        p.reason == "Raspberry Pi: CPU with 4 threads (physical cores); XNNPACK not in this onnxruntime build"
    )
    assert plan_providers("rpi3", [CPU], 4, threads=2).intra_op_threads == 2


def test_other_boards_leave_threads_to_onnxruntime() -> None:
    p = plan_providers("generic", [CPU, CUDA], 8)
    assert p.providers == [(CPU, {})] and p.reason == "generic: CPU" and p.intra_op_threads == 0
    assert plan_providers("generic", [CPU], 8, threads=3).intra_op_threads == 3


def test_a_jetson_with_and_without_its_gpu_providers() -> None:
    p = plan_providers("jetson", [TRT, CUDA, CPU], 4, state_dir="/s", ort_version="1.11.0")
    assert (
        p.names == [TRT, CUDA, CPU]
        and p.reason == "Jetson: TensorrtExecutionProvider > CUDAExecutionProvider > CPU"
    )
    assert p.providers[0][1] == tensorrt_options("/s/trt-engines", "1.11.0") and p.intra_op_threads == 0
    assert (
        plan_providers("jetson", [TRT, CPU], 4, trt_cache_dir="/k").providers[0][1]["trt_engine_cache_path"]
        == "/k"
    )
    q = plan_providers("jetson", [CPU], 4)
    assert q.names == [CPU]
    assert (
        q.reason
        == "Jetson but this onnxruntime has no TensorRT/CUDA provider (install NVIDIA's onnxruntime-gpu)"
    )


def test_an_override_by_alias_or_full_name() -> None:
    p = plan_providers("rpi4", [XNNPACK, CUDA, CPU], 4, override=" XNNPACK , ,cuda")
    assert p.names == [XNNPACK, CUDA, CPU] and p.reason == "override:  XNNPACK , ,cuda"
    assert p.providers[0][1] == {"intra_op_num_threads": "4"} and p.intra_op_threads == 4
    q = plan_providers("generic", [CPU, "FooExecutionProvider"], 2, override="FooExecutionProvider,cpu")
    assert q.names == ["FooExecutionProvider", CPU]  # CPU not appended twice
    assert plan_providers("generic", ["FooExecutionProvider"], 2, override="FooExecutionProvider").names == [
        "FooExecutionProvider"
    ]  # no CPU to fall back on: none added


def test_override_errors_are_one_line() -> None:
    with pytest.raises(ProviderError) as exc:
        plan_providers("generic", [CPU], 2, override="cpu,gpu,tpu")
    assert str(exc.value) == (
        "unknown provider 'gpu', 'tpu'; valid names: cpu, cuda, trt, tensorrt, xnnpack, coreml, openvino, acl, "
        "armnn or a full onnxruntime name such as CPUExecutionProvider"
    )
    with pytest.raises(ProviderError) as exc:
        plan_providers("generic", [CPU, XNNPACK], 2, override="trt,cuda")
    assert str(exc.value) == (
        "provider TensorrtExecutionProvider, CUDAExecutionProvider requested but this onnxruntime only has "
        "CPUExecutionProvider, XnnpackExecutionProvider"
    )
    with pytest.raises(ProviderError) as exc:
        plan_providers("rpi4", [XNNPACK, CUDA], 4)
    assert str(exc.value) == (
        "this onnxruntime reports no CPUExecutionProvider (has: XnnpackExecutionProvider, CUDAExecutionProvider)"
    )


def test_names_resolve_case_blind_and_unknown_ones_pass_through_stripped() -> None:
    assert resolve_name(" TensorRT ") == TRT and resolve_name("Foo ") == "Foo"


def test_tensorrt_facts() -> None:
    assert [jetpack_major(r) for r in ("R32.7.4", "R34.1", "R35.4.1", "R36.2", "R33.0", "", None, "x")] == [
        4,
        5,
        5,
        6,
        None,
        None,
        None,
        None,
    ]
    assert ort_version_tuple("1.11.0") == (1, 11) and ort_version_tuple("") == (99, 0)
    assert ort_version_tuple("dev") == (99, 0)
    assert tensorrt_options("/c") == tensorrt_options("/c", "99.0")  # unknown: the newest
    d = engine_cache_dir("/s", "ab" * 32, "8.5.2", "Orin (nvgpu)")
    assert d == "/s/trt-engines/" + "ab" * 8 + "-trt8.5.2-Orin-nvgpu"
    assert engine_cache_dir("/s", "00" * 32, "", "--") == "/s/trt-engines/" + "00" * 8 + "-trt"

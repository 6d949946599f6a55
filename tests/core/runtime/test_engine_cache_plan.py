"""``ProviderPlan.with_engine_cache``: a model's keyed TensorRT cache set on the plan already made,
exactly what a second ``plan_providers(..., trt_cache_dir=...)`` gave before (issue 30)."""

from __future__ import annotations

import copy
from typing import Optional

from hypothesis import given
from hypothesis import strategies as st

from edge_agent.core.runtime.providers import CPU, CUDA, TRT, XNNPACK, ProviderPlan, plan_providers
from edge_agent.errors import ProviderError

BOARDS = ("jetson", "rpi4", "rpi5", "rpi", "generic-x86", "generic-arm")
VERSIONS = ("1.11.0", "1.14.1", "1.15.1", "1.16.3+cu118", "1.17.0", "1.20.1", "", "dev")
OVERRIDES = (None, "trt", "tensorrt", "cuda,trt", "tensorrt,cuda,cpu", "cuda", "cpu", "xnnpack")


@given(
    board=st.sampled_from(BOARDS),
    extra=st.lists(st.sampled_from((TRT, CUDA, XNNPACK)), unique=True),
    cores=st.integers(1, 16),
    override=st.sampled_from(OVERRIDES),
    threads=st.one_of(st.none(), st.integers(0, 8)),
    version=st.sampled_from(VERSIONS),
    cache=st.text(min_size=1, max_size=40),
)
def test_the_keyed_plan_is_what_planning_again_with_the_cache_dir_gave(
    board: str,
    extra: list[str],
    cores: int,
    override: Optional[str],
    threads: Optional[int],
    version: str,
    cache: str,
) -> None:
    available = [*extra, CPU]
    try:
        plan = plan_providers(board, available, cores, override, threads, "/state", version)
    except ProviderError:
        return  # an override this onnxruntime lacks: no plan, before and after
    before = copy.deepcopy(plan)
    keyed = plan.with_engine_cache(cache)
    assert keyed == plan_providers(board, available, cores, override, threads, "/state", version, cache)
    assert plan == before  # the planner's plan is shared by every model: never changed in place


def test_only_tensorrt_paths_change_and_reason_threads_notes_are_kept() -> None:
    """The reason _tensorrt_plan extended (the float source) survives, and so do the notes."""
    trt = {
        "trt_fp16_enable": "True",
        "trt_engine_cache_path": "/s/trt-engines",
        "trt_timing_cache_path": "/s/t",
    }
    odd = {"trt_engine_cache_path": "/not-tensorrt"}  # another provider's option of that name is its own
    plan = ProviderPlan(
        [(TRT, trt), (CUDA, odd), (CPU, {})], "Jetson: x; FP16 engine from float source f.onnx", 3, ["a note"]
    )
    keyed = plan.with_engine_cache("/k/abc")
    assert keyed.providers == [
        (
            TRT,
            {"trt_fp16_enable": "True", "trt_engine_cache_path": "/k/abc", "trt_timing_cache_path": "/k/abc"},
        ),
        (CUDA, {"trt_engine_cache_path": "/not-tensorrt"}),
        (CPU, {}),
    ]
    assert keyed.reason == "Jetson: x; FP16 engine from float source f.onnx"
    assert keyed.intra_op_threads == 3 and keyed.notes == ["a note"]
    assert trt["trt_engine_cache_path"] == "/s/trt-engines"  # the original options are untouched


def test_no_timing_cache_path_is_added_where_onnxruntime_has_none() -> None:
    plan = plan_providers("jetson", [TRT, CUDA, CPU], 4, ort_version="1.11.0").with_engine_cache("/k")
    assert plan.providers[0] == (
        TRT,
        {"trt_fp16_enable": "True", "trt_engine_cache_enable": "True", "trt_engine_cache_path": "/k"},
    )
    assert plan.reason == "Jetson: TensorrtExecutionProvider > CUDAExecutionProvider > CPU"

"""Execution-provider policy per board (pure): which providers to try, in what order, and why.

Jetson: TensorRT (FP16, engine cache in the state dir so a restart doesn't spend minutes
rebuilding engines) > CUDA > CPU. Raspberry Pi: XNNPACK when the installed onnxruntime has it
(the stock aarch64 wheel does not) > CPU, threads = physical cores. Elsewhere: CPU.
Only providers the installed onnxruntime reports as available are ever proposed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Optional

from edge_agent.core.runtime.tensorrt_plan import TRT_CACHE_PATH_OPTIONS, tensorrt_options
from edge_agent.errors import ProviderError

TRT = "TensorrtExecutionProvider"
CUDA = "CUDAExecutionProvider"
XNNPACK = "XnnpackExecutionProvider"
CPU = "CPUExecutionProvider"
# onnxruntime creates its intra-op threads at session start, one OS thread each: 1024 took 0.1 s
# there, 8192 more than 30 s and 100000 never finished (x86, 2 cores). No board has use for more
# than a few per core: config check and --threads refuse above this, in one line.
MAX_THREADS = 256

ALIASES = {
    "cpu": CPU,
    "cuda": CUDA,
    "trt": TRT,
    "tensorrt": TRT,
    "xnnpack": XNNPACK,
    "coreml": "CoreMLExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "acl": "ACLExecutionProvider",
    "armnn": "ArmNNExecutionProvider",
}


@dataclass(frozen=True)
class ProviderPlan:
    """Providers (with options) in preference order, CPU always last; plus the reason."""

    providers: list[tuple[str, dict[str, str]]]
    reason: str
    intra_op_threads: int = 0  # 0 = onnxruntime's default
    notes: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [p for p, _ in self.providers]

    def with_engine_cache(self, cache_dir: str) -> ProviderPlan:
        """The same plan with TensorRT's engine (and timing) cache in ``cache_dir``, the keyed
        directory of one model: what ``plan_providers(..., trt_cache_dir=cache_dir)`` gives, without
        planning again. Only the path options the plan already has are set (ORT 1.11 has no timing
        cache path); every other provider, the reason, threads and notes are kept; ``self`` is untouched."""
        keyed = [
            (n, {k: cache_dir if k in TRT_CACHE_PATH_OPTIONS else v for k, v in o.items()} if n == TRT else o)
            for n, o in self.providers
        ]
        return replace(self, providers=keyed)


def resolve_name(name: str) -> str:
    return ALIASES.get(name.strip().lower(), name.strip())


def plan_providers(
    board_kind: str,
    available: Sequence[str],
    physical_cores: int,
    override: Optional[str] = None,
    threads: Optional[int] = None,
    state_dir: str = "/var/lib/edge-agent",
    ort_version: str = "",
    trt_cache_dir: Optional[str] = None,
) -> ProviderPlan:
    """Decide the provider order for ``board_kind`` given what onnxruntime has.

    ``ort_version`` limits TensorRT options to names that release parses (JetPack 4: 1.11);
    ``trt_cache_dir`` is the keyed engine directory (default ``<state_dir>/trt-engines``)."""
    avail = list(available)
    is_pi = board_kind.startswith("rpi")
    if threads is not None and threads > MAX_THREADS:
        raise ProviderError(f"threads = {threads}: expected 1 to {MAX_THREADS} (one OS thread each)")
    n_threads = threads if threads is not None else (physical_cores if is_pi else 0)

    def opts(name: str) -> dict[str, str]:
        if name == TRT:
            return tensorrt_options(trt_cache_dir or os.path.join(state_dir, "trt-engines"), ort_version)
        if name == XNNPACK:
            return {"intra_op_num_threads": str(max(1, physical_cores if threads is None else threads))}
        return {}

    if override:
        wanted = [resolve_name(p) for p in override.split(",") if p.strip()]
        unknown = [p for p in wanted if p not in ALIASES.values() and not p.endswith("ExecutionProvider")]
        if unknown:
            raise ProviderError(
                f"unknown provider {', '.join(map(repr, unknown))}; valid names: {', '.join(ALIASES)} "
                f"or a full onnxruntime name such as {CPU}"
            )
        missing = [p for p in wanted if p not in avail]
        if missing:
            raise ProviderError(
                f"provider {', '.join(missing)} requested but this onnxruntime only has {', '.join(avail)}"
            )
        chain = [*wanted, *([CPU] if CPU not in wanted and CPU in avail else [])]
        return ProviderPlan([(p, opts(p)) for p in chain], f"override: {override}", n_threads)

    if board_kind == "jetson":
        chain = [p for p in (TRT, CUDA) if p in avail]
        why = (
            f"Jetson: {' > '.join(chain)} > CPU"
            if chain
            else "Jetson but this onnxruntime has no TensorRT/CUDA provider (install NVIDIA's onnxruntime-gpu)"
        )
    elif is_pi:
        chain = [XNNPACK] if XNNPACK in avail else []
        why = f"Raspberry Pi: {'XNNPACK > ' if chain else ''}CPU with {n_threads} threads (physical cores)"
        if not chain:
            why += "; XNNPACK not in this onnxruntime build"
    else:
        chain = []
        why = f"{board_kind}: CPU"
    if CPU not in avail:
        raise ProviderError(f"this onnxruntime reports no CPUExecutionProvider (has: {', '.join(avail)})")
    chain.append(CPU)
    # with XNNPACK its own pool does the work; ORT recommends one intra-op thread for the session
    intra = 1 if chain[0] == XNNPACK else n_threads
    return ProviderPlan([(p, opts(p)) for p in chain], why, intra)

"""The provider plan of this host, made once: the board, onnxruntime's providers and version read
once, and one :class:`ProviderPlan` per requested provider, thread count and state dir.

A model set keeps its planner, and a reload (SIGHUP, a model switch) hands it to the new set: the
board is not detected again and a configuration that asks for the same providers is not planned
again. What is planned per model file (TensorRT's float source, the keyed engine cache) stays in
``OnnxModel``, on top of this plan.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Optional, Protocol

from edge_agent.adapters.runtime.board import BoardInfo, detect_board
from edge_agent.core.runtime.providers import ProviderPlan, plan_providers

DEFAULT_STATE_DIR = "/var/lib/edge-agent"


class OrtProviders(Protocol):
    """What the planner reads of an onnxruntime module (the real one, or a test's fake)."""

    def get_available_providers(self) -> list[str]: ...


class ProviderPlanner:
    """Host facts (board, available providers, onnxruntime version) and the plans made from them."""

    def __init__(self, board: BoardInfo, available: Sequence[str], ort_version: str) -> None:
        self.board = board
        self.available = tuple(available)
        self.ort_version = ort_version
        self._plans: dict[tuple[Optional[str], Optional[int], str], ProviderPlan] = {}

    @classmethod
    def detect(
        cls,
        ort: Optional[OrtProviders] = None,
        board: Optional[BoardInfo] = None,
        available: Optional[Sequence[str]] = None,
    ) -> ProviderPlanner:
        """This host: ``board``/``available`` when given, else detected (and asked of ``ort``)."""
        mod: OrtProviders = ort if ort is not None else importlib.import_module("onnxruntime")
        return cls(
            board or detect_board(),
            list(available or mod.get_available_providers()),
            str(getattr(mod, "__version__", "")),
        )

    @property
    def planned(self) -> int:
        """How many plans were made (one per distinct request)."""
        return len(self._plans)

    def plan(
        self,
        provider: Optional[str] = None,
        threads: Optional[int] = None,
        state_dir: str = DEFAULT_STATE_DIR,
    ) -> ProviderPlan:
        """The plan for this request: made on the first ask, the same object afterwards. An invalid
        override raises each time (nothing is kept for it)."""
        key = (provider, threads, state_dir)
        if key not in self._plans:
            b = self.board
            self._plans[key] = plan_providers(
                b.kind, self.available, b.physical_cores, provider, threads, state_dir, self.ort_version
            )
        return self._plans[key]

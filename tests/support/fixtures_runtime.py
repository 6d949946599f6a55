"""Fixtures around the runtime adapter shared by the tool and workbench tests."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def opened_models(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The real models a command opens, in order (a subclass of OnnxModel that only records them):
    what provider and threads each was really opened with."""
    from edge_agent.adapters.runtime import onnx_model

    seen: list[Any] = []

    class Recorded(onnx_model.OnnxModel):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            seen.append(self)

    monkeypatch.setattr(onnx_model, "OnnxModel", Recorded)
    return seen

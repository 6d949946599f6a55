"""Model tooling (quantize, validate, bench, export checks): needs the ``onnx`` package.

Never imported by the runtime; ``onnx`` comes with the ``[models]`` extra of onnx-edge-agent.
"""

from __future__ import annotations

from types import ModuleType

from edge_agent import install_hint
from edge_agent.errors import EdgeAgentError


class ToolingDependencyError(EdgeAgentError):
    """An optional package needed by a model tool is not installed."""


def require_onnx() -> ModuleType:
    """Import ``onnx`` or say which extra provides it."""
    try:
        import onnx as module
    except ImportError:
        raise ToolingDependencyError(
            "the 'onnx' package is needed for model tooling; install it with: " + install_hint("models")
        ) from None
    onnx: ModuleType = module
    return onnx

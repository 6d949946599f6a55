"""edge-agent: offline ONNX inference on ARM boards with a durable outbox synced over MQTT."""

__version__ = "0.1.0"

# The distribution name: "edge-agent" on the package index is another project that ships the same
# import package, so every install hint names this one (see install_hint).
DIST_NAME = "onnx-edge-agent"


def install_hint(extra: str) -> str:
    """How to get an optional extra: by the distribution name, or from a checkout."""
    return f"pip install '{DIST_NAME}[{extra}]' (from a checkout: pip install '.[{extra}]')"

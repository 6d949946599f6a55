"""edge-agent: offline ONNX inference on ARM boards with a durable outbox synced over MQTT."""

__version__ = "0.1.0"

# The distribution name: "edge-agent" on the package index is another project that ships the same
# import package, so every install hint names this one (see install_hint).
DIST_NAME = "onnx-edge-agent"


def install_hint(extra: str) -> str:
    """How to get an optional extra. The checkout form comes first: no package index serves
    the distribution yet, so the index form is only for when it is published."""
    return (
        f"pip install '.[{extra}]' in the edge-agent checkout "
        f"(once published on the package index: pip install '{DIST_NAME}[{extra}]')"
    )

"""edge-agent: offline ONNX inference on ARM boards with a durable outbox synced over MQTT."""

import os

__version__ = "0.1.0"

# onnxruntime >= 1.2x's official Linux wheels start a telemetry client when the library loads; it
# keeps an id in $XDG_CACHE_HOME or ~/.cache, and under the service's user (no writable home)
# every process logged "Failed to persist telemetry device ID". An offline agent sends nothing:
# the variable is read once, when onnxruntime loads, so it is set here, before any import of it
# (a user's own ORT_DISABLE_TELEMETRY=0 is kept).
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

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

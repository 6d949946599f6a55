"""onnxruntime's telemetry stays off: under a user whose home is not writable (the service user)
the wheel logged "Failed to persist telemetry device ID" at every start; edge-agent sets
``ORT_DISABLE_TELEMETRY`` before onnxruntime loads, so nothing is written or logged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MODEL = REPO / "models" / "demo-detector-int8.onnx"
LOAD = f"import onnxruntime as ort; ort.InferenceSession({str(MODEL)!r}, providers=['CPUExecutionProvider'])"


def _stderr(code: str, tmp_path: Path) -> str:
    # as the service user's home: nothing can be kept there (under /proc not even root can create it)
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "ORT_DISABLE_TELEMETRY")}
    env.update(HOME="/proc/edge-agent-no-home", PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stderr


def test_loading_a_model_through_edge_agent_logs_no_telemetry_warning(tmp_path: Path) -> None:
    bare = _stderr(LOAD, tmp_path)
    if "telemetry" not in bare:
        pytest.skip("this onnxruntime has no telemetry client (older wheel): nothing to silence")
    ours = _stderr(f"import edge_agent; {LOAD}", tmp_path)
    assert "telemetry" not in ours.lower(), ours

"""Fixtures shared by more than one folder.

The fixtures of one feature (collector databases, format models, outbox, tool models, update
packages) live in ``tests/support/fixtures_*.py``, loaded here as plugins: a feature's tests sit in
several layer folders (``tests/adapters/collector``, ``tests/app/collector``), so a folder
conftest.py would serve only one of them."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from support.models import make_bright_detector, make_color_classifier, make_conv_net
from support.mqtt import Broker, TlsFiles, make_tls, require_mosquitto

REPO = Path(__file__).resolve().parent.parent

pytest_plugins = [
    "support.fixtures_collector",
    "support.fixtures_inference",
    "support.fixtures_outbox",
    "support.fixtures_runtime",
    "support.fixtures_tools",
    "support.fixtures_updates",
]
MAX_FILE_BYTES = 4 << 30


def pytest_configure(config: pytest.Config) -> None:
    """No test writes a file over 4 GiB (the largest is a 1 GiB sparse tar member). Under mutation
    testing a mutated write loop (``have += os.write(...)`` made ``have = ...``) wrote until the
    real disk was full: 32 GB and 26 GB reserve files stopped every other job on the machine. With
    this limit such a write fails with EFBIG (SIGXFSZ ignored, so it is an error, not a crash),
    the mutant is killed, and child processes inherit both."""
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft == resource.RLIM_INFINITY or soft > MAX_FILE_BYTES:
        limit = MAX_FILE_BYTES if hard == resource.RLIM_INFINITY else min(MAX_FILE_BYTES, hard)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))


SHARED = REPO.parent / "shared"
MODELS = REPO / "models"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``../shared`` (real third-party models and photos); tests using it skip when it is absent."""
    if not (SHARED / "models").is_dir():
        pytest.skip(f"shared test data absent: {SHARED} (real YOLOv8n models and photos live there)")
    return SHARED


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    """A real mosquitto of this test's own, on a free loopback port (skips without mosquitto)."""
    require_mosquitto()
    b = Broker(tmp_path / "broker")
    b.start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def notify_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    """A real, non-blocking sd_notify socket named by $NOTIFY_SOCKET (read it with
    ``support.notify.received``)."""
    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        sock.setblocking(False)
        monkeypatch.setenv("NOTIFY_SOCKET", str(path))
        yield sock


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    require_mosquitto()
    return make_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def tls_broker(tmp_path: Path, tls_files: TlsFiles) -> Iterator[Broker]:
    b = Broker(tmp_path / "tls-broker", tls=tls_files)
    b.start()
    try:
        yield b
    finally:
        b.stop()


# test-built models for core, adapters, inference and cli tests, built once per session
@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def bright_detector(model_dir: Path) -> Path:
    return make_bright_detector(model_dir / "bright.onnx")


@pytest.fixture(scope="session")
def color_classifier(model_dir: Path) -> Path:
    return make_color_classifier(model_dir / "color.onnx")


class _Reader:
    """Calibration data for the quantization-kind fixtures."""

    def __init__(self, n: int = 4) -> None:
        rng = np.random.default_rng(1)
        self.data = iter([{"images": rng.uniform(0, 1, (1, 3, 32, 32)).astype(np.float32)} for _ in range(n)])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.data, None)


@pytest.fixture(scope="session")
def quant_models(model_dir: Path) -> dict[str, Path]:
    """One model of each kind users bring: FP32, FP16, QDQ, QOperator and dynamic INT8."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic, quantize_static

    fp32 = make_conv_net(model_dir / "conv-fp32.onnx")
    out = {"fp32": fp32, "fp16": make_conv_net(model_dir / "conv-fp16.onnx", fp16=True)}
    out["dynamic_int8"] = model_dir / "conv-dyn.onnx"
    quantize_dynamic(
        str(fp32), str(out["dynamic_int8"]), weight_type=QuantType.QUInt8, op_types_to_quantize=["Conv"]
    )
    for kind, fmt in (("qdq_int8", QuantFormat.QDQ), ("qoperator_int8", QuantFormat.QOperator)):
        out[kind] = model_dir / f"conv-{kind}.onnx"
        quantize_static(str(fp32), str(out[kind]), _Reader(), quant_format=fmt, per_channel=False)  # type: ignore[arg-type]
    # what a Jetson Nano's onnxruntime 1.11 loads (test_provider_fallback's fake says 1.11): the
    # quantizer stamps ai.onnx.ml 5 and more into every model it writes
    import onnx

    from edge_agent.tools.convert import convert_model

    for path in out.values():
        onnx.save(convert_model(onnx.load(str(path)), "1.11"), str(path))
    return out


@pytest.fixture(autouse=True)
def _push_secrets_in_tmp(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """``model push`` keeps each transfer's cancel secret under $XDG_STATE_HOME: never the
    tester's home (subprocesses inherit it)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.getbasetemp() / "xdg-state"))

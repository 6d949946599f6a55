"""Fixtures shared by every test area (each area has its own folder and conftest)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.mqtt import Broker, TlsFiles, make_tls, require_mosquitto

REPO = Path(__file__).resolve().parent.parent
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

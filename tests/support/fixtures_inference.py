"""Detectors in every output format (tests/support/models.py), built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.models import make_format_detector

FORMATS = ("yolov8", "yolov8t", "yolov5", "end2end")


@pytest.fixture(scope="session")
def fmt_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("formats")


@pytest.fixture(scope="session")
def format_models(fmt_dir: Path) -> dict[str, Path]:
    """The same bright-patch detector exported in each format, input 48 high x 96 wide (non-square)."""
    return {f: make_format_detector(fmt_dir / f"{f}.onnx", f, imgsz_hw=(48, 96)) for f in FORMATS}

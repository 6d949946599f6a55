"""Fixtures for the model toolchain tests: a small YOLO-like ONNX detector built with onnx.helper,
synthetic calibration images, and calibration images derived from the shared photos."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip(
    "onnx", reason="the model toolchain needs the onnx package (onnx-edge-agent[models])"
)
cv2 = pytest.importorskip("cv2")

from support.toolchain import build_toy_detector, write_scenes  # noqa: E402


@pytest.fixture(scope="session")
def toy_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("toy")
    build_toy_detector(d / "toy-fp32.onnx")
    write_scenes(d / "calib", 12, seed=0)
    write_scenes(d / "val", 8, seed=100)
    return d


@pytest.fixture(scope="session")
def shared_calib(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two shared photos plus flips and crops of them (8 calibration images, no downloads)."""
    d = tmp_path_factory.mktemp("shared-calib")
    for name in ("bus.jpg", "zidane.jpg"):
        img = cv2.imread(str(shared_dir / "images" / name))
        h, w = img.shape[:2]
        variants = {
            "orig": img,
            "flip": np.ascontiguousarray(img[:, ::-1]),
            "crop": img[h // 8 : h - h // 8, w // 8 : w - w // 8],
            "half": img[: h // 2 + h // 4, w // 4 :],
        }
        for tag, v in variants.items():
            cv2.imwrite(str(d / f"{Path(name).stem}-{tag}.jpg"), v)
    return d


@pytest.fixture
def torch_threads_kept() -> Iterator[None]:
    """export_check.time_runtimes sets the process's torch thread count: each test that uses this
    gives back the count it found (the export-check tests, which skip without torch)."""
    import torch

    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)

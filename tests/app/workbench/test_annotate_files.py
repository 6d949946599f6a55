"""``infer --save``'s files: a JPEG at the quality asked for, mode 0644 under umask 022, an existing
file truncated, never through a symlink (one line naming the path), and names that skip the
inputs, symlinks and names already written in this run."""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np
import pytest

from edge_agent.app.workbench.annotate import safe_output_name, save_image
from edge_agent.errors import ImageError


def _noise() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (48, 64, 3), dtype=np.uint8)


def test_a_jpeg_at_the_quality_asked_for_mode_0644_and_truncated(tmp_path: Path) -> None:
    out = tmp_path / "a.jpg"
    out.write_bytes(b"x" * 200_000)  # longer than any JPEG below: truncated, not overwritten in place
    old = os.umask(0o022)
    try:
        save_image(out, _noise())
    finally:
        os.umask(old)
    assert out.stat().st_mode & 0o777 == 0o644
    first = out.read_bytes()
    assert first[:2] == b"\xff\xd8" and len(first) < 200_000
    img = cv2.imdecode(np.frombuffer(first, np.uint8), cv2.IMREAD_COLOR)
    assert img.shape == (48, 64, 3)
    save_image(out, _noise(), quality=20)
    assert len(out.read_bytes()) < len(first)  # 20 is smaller than the default 90
    save_image(out, _noise(), quality=90)
    assert out.read_bytes() == first


def test_a_symlink_at_the_path_is_refused_and_its_target_left_alone(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    link = tmp_path / "out.jpg"
    link.symlink_to(victim)
    with pytest.raises(ImageError, match=r"out\.jpg: could not write image: ") as exc:
        save_image(link, _noise())
    assert "\n" not in str(exc.value) and victim.read_text() == "keep"


def test_an_image_that_cannot_be_encoded_is_one_line(tmp_path: Path) -> None:
    with pytest.raises((ImageError, cv2.error)):
        save_image(tmp_path / "e.jpg", np.zeros((0, 0, 3), np.uint8))


def test_output_names_skip_inputs_symlinks_and_names_used(tmp_path: Path) -> None:
    (tmp_path / "bus.jpg").write_bytes(b"in")
    (tmp_path / "bus_1.jpg").symlink_to(tmp_path / "elsewhere.jpg")
    used: set[str] = set()
    inputs = {(tmp_path / "bus.jpg").resolve()}
    assert safe_output_name(tmp_path, "bus", used, inputs) == tmp_path / "bus_2.jpg"
    assert safe_output_name(tmp_path, "bus", used, inputs) == tmp_path / "bus_3.jpg"
    assert safe_output_name(tmp_path, "cat", used, inputs) == tmp_path / "cat.jpg"
    assert used == {"bus_2.jpg", "bus_3.jpg", "cat.jpg"}

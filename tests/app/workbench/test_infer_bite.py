"""``edge-agent infer`` over a folder with a broken image in it (issue 36, survivors of the first
app-infer run): the broken one is one line, the images after it are still read, each result has
its own image's width and height, and the exit status says something failed."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from edge_agent.app.cli.main import main


def test_a_broken_image_is_one_line_and_the_next_images_are_still_inferred(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "a-broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not an image")
    cv2.imwrite(str(tmp_path / "b-wide.png"), np.zeros((10, 30, 3), np.uint8))  # 30 wide, 10 high
    cv2.imwrite(str(tmp_path / "c-tall.png"), np.zeros((40, 20, 3), np.uint8))
    rc = main(["infer", "--json", str(tmp_path)])
    out, err = capsys.readouterr()
    got = [json.loads(line) for line in out.splitlines()]
    assert rc == 1
    assert [(Path(r["image"]).name, r["width"], r["height"]) for r in got] == [
        ("b-wide.png", 30, 10),
        ("c-tall.png", 20, 40),
    ]
    (line,) = err.splitlines()
    assert line.startswith("edge-agent infer: error: ") and "a-broken.png" in line

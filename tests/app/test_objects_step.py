"""The objects step of the loop in-process: best-confidence snapshot on "ended", the counter
checkpoint (written, continued, a corrupt one refused with one log line), counts on their topic."""

from __future__ import annotations

import base64
import json
import logging
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from support.clip import real_photo

from edge_agent.app.objects_step import ObjectsStep
from edge_agent.core.camera_source import Frame
from edge_agent.core.config import parse_config
from edge_agent.core.schema import Detection

SCHEMAS = Path(__file__).resolve().parents[2] / "edge_agent" / "schemas"


def cfg_for(state: Path, snapshot: bool = False) -> Any:
    return parse_config(
        f"""[device]
state_dir = "{state}"
[output]
mode = "objects"
snapshot = {str(snapshot).lower()}
[tracker]
min_hits = 1
anchor = "center"
[[lines]]
name = "gate"
points = [[0.5, 0.0], [0.5, 1.0]]
in_side = "left"
"""
    )


def walk_across(step: ObjectsStep, sent: list[tuple[str, dict[str, Any]]], confs: list[float]) -> None:
    img = real_photo("sample_0.jpg")
    for k, conf in enumerate(confs):
        x = 20 + 20 * k
        det = Detection(box=(x, 80.0, x + 50.0, 130.0), label="square", class_id=1, confidence=conf)
        frame = Frame(image=img, ts_mono=time.monotonic(), ts_wall=time.time(), seq=k, source="t")
        step.on_frame(frame, [det], lambda t, b: sent.append((t, b)) is None)


def test_ended_carries_the_best_confidence_crop_and_validates(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema", reason="dev extra")
    step = ObjectsStep(cfg_for(tmp_path, snapshot=True))
    sent: list[tuple[str, dict[str, Any]]] = []
    confs = [0.6, 0.7, 0.95, 0.8, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6]
    walk_across(step, sent, confs)
    step.stop(lambda t, b: sent.append((t, b)) is None)
    objects = [b for t, b in sent if t.endswith("/objects")]
    assert [b["event"] for b in objects] == ["appeared", "line_crossed", "ended"]
    ended = objects[-1]
    assert ended["best_confidence"] == 0.95
    crop = cv2.imdecode(
        np.frombuffer(base64.b64decode(ended["snapshot_jpeg_b64"]), np.uint8), cv2.IMREAD_COLOR
    )
    assert crop is not None and 45 <= crop.shape[1] <= 60 and 45 <= crop.shape[0] <= 60
    validator = jsonschema.Draft202012Validator(json.loads((SCHEMAS / "object.json").read_text()))
    counts_validator = jsonschema.Draft202012Validator(json.loads((SCHEMAS / "counts.json").read_text()))
    for b in objects:
        validator.validate({**b, "id": "a" * 32, "seq": 1, "boot": 1})
    (counts,) = [b for t, b in sent if t.endswith("/counts")]
    counts_validator.validate({**counts, "id": "a" * 32, "seq": 1, "boot": 1})
    assert counts["lines"]["gate"] == {"in": 1, "out": 0, "total_in": 1, "total_out": 0}


def test_the_checkpoint_continues_counts_and_a_corrupt_one_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    step = ObjectsStep(cfg_for(tmp_path))
    sent: list[tuple[str, dict[str, Any]]] = []
    walk_across(step, sent, [0.9] * 12)
    step.stop(lambda t, b: sent.append((t, b)) is None)
    saved = json.loads((tmp_path / "object-counts.json").read_text())
    assert saved["totals"]["lines"]["gate"] == {"in": 1, "out": 0}
    again = ObjectsStep(cfg_for(tmp_path))
    assert again.events.totals["lines"]["gate"]["in"] == 1  # continued, not from zero
    (tmp_path / "object-counts.json").write_text('{"interval_start": 1, "totals": 7}')
    with caplog.at_level(logging.ERROR):
        fresh = ObjectsStep(cfg_for(tmp_path))
    assert fresh.events.totals["lines"]["gate"]["in"] == 0
    assert any(
        "counts start from zero" in r.getMessage() and "object-counts.json" in r.getMessage()
        for r in caplog.records
    )

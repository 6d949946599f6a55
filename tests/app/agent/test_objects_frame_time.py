"""``infer --track`` and ``run`` count a file source alike (issue 36: they counted differently on the
same clip, frame times vs the wall clock). Both now time a file's frames by the file: a video by
frame index / its rate, a folder by index / camera.fps (infer --fps; 10 unset). The clip (the
objects-mode clip: 5 crossers, one hidden right after the line, 2 dwellers of 3.0 s, a passer-by of
1.1 s) is read by ``run`` as fast as the machine infers it (no camera.fps pacing), so on the wall
clock a 30-frame dwell lasted well under the zone's min_dwell_s and nobody entered."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import cv2
import pytest
from support.clip import REPO
from support.objects import FPS, GEOMETRY, make_clip
from support.world import agent_toml

from edge_agent.app.cli.main import main

# dwell (the zone's min_dwell_s 1.5 of GEOMETRY) and hysteresis (zone_exit_frames), both timed
TRACKER = "[tracker]\nzone_exit_frames = 3\nlost_frames = 30\n"
KEYS = ("event", "object_id", "line", "direction", "zone", "dwell_s", "duration_s")


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("clip")
    cam = d / "cam"
    cam.mkdir()
    make_clip(cam)
    frames = sorted(cam.glob("*.jpg"))
    first = cv2.imread(str(frames[0]))
    video = d / "clip.avi"
    writer = cv2.VideoWriter(
        str(video), cv2.VideoWriter_fourcc(*"MJPG"), FPS, (first.shape[1], first.shape[0])
    )
    if writer.isOpened():
        for f in frames:
            writer.write(cv2.imread(str(f)))
        writer.release()
    return {"folder": cam, "video": video}


def config(tmp_path: Path, source: Path) -> Path:
    cfg = tmp_path / "agent.toml"
    cfg.write_text(
        agent_toml(
            tmp_path / "state",
            source,
            REPO / "models" / "demo-detector.onnx",
            extra=GEOMETRY + TRACKER,
            detector={"conf_threshold": 0.5},
            output={"mode": "objects", "counts_interval_s": 3600},
        )
    )
    return cfg


def events(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [tuple(r.get(k) for k in KEYS) for r in rows if r.get("event")]


@pytest.mark.parametrize("kind", ["folder", "video"])
def test_infer_track_and_run_report_the_same_events_and_counts_on_a_file(
    clip: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    source = clip[kind]
    if not source.exists():
        pytest.skip("this OpenCV build cannot write MJPG/AVI")
    cfg = config(tmp_path, source)
    assert main(["infer", str(source), "--track", "--json", "--config", str(cfg)]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    preview, summary = events(out[:-1]), out[-1]["summary"]

    assert main(["run", "--config", str(cfg)]) == 0
    with sqlite3.connect(tmp_path / "state" / "outbox.db") as con:
        rows = [(t, json.loads(p)) for t, p in con.execute("SELECT topic, payload FROM messages ORDER BY id")]
    device = events([b for t, b in rows if t.endswith("/objects")])
    final = [b for t, b in rows if t.endswith("/counts")][-1]

    # what the clip holds: both find it, with the 10 fps dwell times (27 intervals after min_hits)
    crossings = [e[3] for e in preview if e[0] == "line_crossed"]
    assert crossings == ["in", "out", "in", "out", "in"]
    assert [e[5] for e in preview if e[0] == "zone_left"] == [2.7, 2.7]
    # and the device's messages are the preview's events, one for one, with the same times
    assert device == preview
    assert final["lines"]["gate"]["total_in"] == summary["lines"]["gate"]["total_in"] == 3
    assert final["lines"]["gate"]["total_out"] == summary["lines"]["gate"]["total_out"] == 2
    assert final["zones"]["bay"]["total_entered"] == summary["zones"]["bay"]["total_entered"] == 2

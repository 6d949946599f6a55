"""``edge-agent infer --track --save`` on the objects clip, and ``edge-agent track`` (MOTChallenge in/out)
with its one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import cli
from support.objects import FPS, GEOMETRY, make_clip

from edge_agent.core.objects.mot import parse_detections
from edge_agent.errors import EdgeAgentError


def test_infer_track_prints_the_events_and_saves_annotated_frames(tmp_path: Path) -> None:
    cam = tmp_path / "cam"
    cam.mkdir()
    clip = make_clip(cam)
    cfg = tmp_path / "c.toml"
    cfg.write_text(GEOMETRY)
    out = tmp_path / "out"
    r = cli(
        "infer",
        str(cam),
        "--track",
        "--config",
        str(cfg),
        "--fps",
        str(FPS),
        "--save",
        str(out),
        "--json",
        "--conf",
        "0.5",
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    events = [x for x in lines if "event" in x]
    assert [e["direction"] for e in events if e["event"] == "line_crossed"] == [
        "in",
        "out",
        "in",
        "out",
        "in",
    ]
    left = [e for e in events if e["event"] == "zone_left"]
    # frame time here is exactly frame / fps: 30 frames inside, reported from the 3rd -> 2.7 s
    assert [e["dwell_s"] for e in left] == [2.7, 2.7]
    summary = lines[-1]["summary"]
    assert summary["frames"] == clip["frames"]
    assert summary["lines"]["gate"]["total_in"] == 3 and summary["zones"]["bay"]["total_entered"] == 2
    saved = sorted(out.glob("*.jpg"))
    assert len(saved) == clip["frames"]
    # the last frame shows the line (magenta), the zone outline (orange) and the counts label
    img = cv2.imread(str(saved[-1]))
    mid_x = int(0.5 * 319)
    assert np.abs(img[40, mid_x].astype(int) - (255, 0, 255)).max() < 90
    assert np.abs(img[int(0.62 * 239), 160].astype(int) - (0, 200, 255)).max() < 90
    # a frame with a tracked object has its id box drawn (colour differs from the plain input)
    plain = cv2.imread(str(cam / "0008.jpg"))
    assert np.abs(cv2.imread(str(saved[8])).astype(int) - plain.astype(int)).max() > 100


def test_track_command_writes_motchallenge_tracks(tmp_path: Path) -> None:
    det = tmp_path / "det.txt"
    rows = []
    for f in range(1, 21):
        rows.append(f"{f},-1,{10 + 5 * f},50,40,80,0.9")
        rows.append(f"{f},-1,{300 - 5 * f},60,40,80,0.8")
    det.write_text("\n".join(rows) + "\n")
    out = tmp_path / "tracks.txt"
    r = cli("track", "-d", str(det), "-o", str(out), timeout=300)
    assert r.returncode == 0, r.stderr
    got = [line.split(",") for line in out.read_text().splitlines()]
    assert len(got) == 40 and {g[1] for g in got} == {"1", "2"}
    assert all(g[7:] == ["-1", "-1", "-1"] for g in got)
    first = [g for g in got if g[0] == "1"]
    assert sorted(float(g[2]) for g in first) == [15.0, 295.0]


@pytest.mark.parametrize(
    "content, expected",
    [
        ("1,-1,10,20\n", "det.txt:1: 4 columns"),
        ("1,-1,x,2,3,4,5\n", "det.txt:1:"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_track_command_bad_input_is_one_line(tmp_path: Path, content: object, expected: str) -> None:
    det = tmp_path / "det.txt"
    if isinstance(content, bytes):
        det.write_bytes(content)
    else:
        det.write_text(str(content))
    r = cli("track", "-d", str(det), "-o", str(tmp_path / "t.txt"), timeout=300)
    assert r.returncode != 0
    assert expected in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=60), max_size=5))
def test_parse_detections_only_ever_raises_its_own_error(lines: list[str]) -> None:
    try:
        out = parse_detections(lines, "x")
    except EdgeAgentError:
        return
    for frame, dets in out.items():
        assert frame >= 1 and all(d[2] > d[0] and d[3] > d[1] for d in dets)


@pytest.mark.parametrize(
    "geometry, expected",
    [
        (
            '[[zones]]\nname = "a"\npolygon = [[0.1, 0.1], [0.9, 0.9], [0.9, 0.1], [0.1, 0.9]]',
            "zones.0.polygon",
        ),
        ('[[lines]]\nname = "a"\npoints = [[0.1, 0.1], [0.1, 0.1]]', "lines.0.points"),
        (
            '[[lines]]\nname = "a"\npoints = [[0.1, 0.1], [0.5, 0.1]]\n' * 2,
            "lines.1.name = 'a' is used twice",
        ),
    ],
)
def test_config_check_refuses_bad_geometry_in_one_line(tmp_path: Path, geometry: str, expected: str) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[detector]\nmodel = "x.onnx"\n{geometry}\n')
    r = cli("config", "check", "--config", str(cfg), timeout=300)
    assert r.returncode != 0
    err = r.stderr.strip()
    assert expected in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_mot_bench_smoke() -> None:
    """One cell of tests/bench/bench_mot.py (TUD-Campus, low noise, one seed); the bench packages
    are not project dependencies, so this skips unless they are installed (see docs/objects.md)."""
    pytest.importorskip("motmetrics", reason="bench only: pip install motmetrics 'supervision==0.25.1'")
    sv = pytest.importorskip("supervision", reason="bench only: pip install 'supervision==0.25.1'")
    if not hasattr(sv, "ByteTrack"):
        pytest.skip("supervision >= 0.26 has no ByteTrack; the bench needs 0.25.1")
    bench = Path(__file__).resolve().parents[2] / "bench" / "bench_mot.py"
    r = subprocess.run([sys.executable, str(bench), "--smoke"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (row,) = [line for line in r.stdout.splitlines() if line.startswith("| TUD-Campus | low")]
    ours_idf1 = float(row.split("|")[3].split()[0])  # "mean (min..max) / peer ..."
    assert ours_idf1 > 0.7


def test_infer_track_reads_a_video_at_its_own_frame_rate(tmp_path: Path) -> None:
    cam = tmp_path / "cam"
    cam.mkdir()
    make_clip(cam)
    video = tmp_path / "clip.avi"
    frames = sorted(cam.glob("*.jpg"))
    first = cv2.imread(str(frames[0]))
    writer = cv2.VideoWriter(
        str(video), cv2.VideoWriter_fourcc(*"MJPG"), FPS, (first.shape[1], first.shape[0])
    )
    if not writer.isOpened():
        pytest.skip("this OpenCV build cannot write MJPG/AVI")
    for f in frames:
        writer.write(cv2.imread(str(f)))
    writer.release()
    cfg = tmp_path / "c.toml"
    cfg.write_text(GEOMETRY)
    r = cli("infer", str(video), "--track", "--config", str(cfg), "--json", "--conf", "0.5", timeout=300)
    assert r.returncode == 0, r.stderr
    events = [json.loads(x) for x in r.stdout.splitlines()]
    assert [e["direction"] for e in events if e.get("event") == "line_crossed"] == [
        "in",
        "out",
        "in",
        "out",
        "in",
    ]
    assert [e["dwell_s"] for e in events if e.get("event") == "zone_left"] == [2.7, 2.7]  # the video's 10 fps
    assert events[-1]["summary"]["frames"] == len(frames)


def test_infer_track_save_into_the_input_folder_is_refused_and_leaves_it_alone(tmp_path: Path) -> None:
    cam = tmp_path / "cam"
    cam.mkdir()
    img = cv2.imread(str(Path(__file__).resolve().parents[3] / "models" / "samples" / "sample_1.jpg"))
    for n in range(3):
        cv2.imwrite(str(cam / f"{n}.jpg"), img)
    before = {p.name: p.read_bytes() for p in cam.iterdir()}
    r = cli("infer", str(cam), "--track", "--save", str(cam), timeout=300)
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, r.stderr
    assert "is the folder of the input" in r.stderr
    assert {p.name: p.read_bytes() for p in cam.iterdir()} == before  # nothing went beside them

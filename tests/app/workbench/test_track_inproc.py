"""``edge-agent infer --track`` and ``edge-agent track`` in process (``cli.main`` with capsys, so
mutation testing credits them). The scene: 64x64 frames, a 16 px square crossing a vertical line
left to right and back (4 px a frame) while a second one sits in a zone; make_square_detector finds
each exactly, so every event, dwell time and count is known. The subprocess forms (the real clip,
the demo detector) are in tests/app/workbench/test_track_cli.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from support.models import bright_scene, make_square_detector

from edge_agent.app.cli.main import main

XS = list(range(0, 49, 4))  # 13 positions; the square's centre crosses x = 32 between frames 6 and 7
GEOMETRY = """[[lines]]
name = "gate"
points = [[0.5, 0.0], [0.5, 0.6]]
in_side = "left"
[[zones]]
name = "bay"
polygon = [[0.0, 0.6], [1.0, 0.6], [1.0, 1.0], [0.0, 1.0]]
min_dwell_s = 1.0
"""


def scene(x: int, sitter: bool = True) -> np.ndarray:
    return bright_scene(64, 64, [(x, 4, 16)] + ([(24, 44, 16)] if sitter else []))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("track")
    cam = d / "cam"
    cam.mkdir()
    for i, x in enumerate(XS + XS[::-1]):  # 26 frames, 000..025
        cv2.imwrite(str(cam / f"{i:03d}.png"), scene(x))
    cfg = d / "c.toml"
    cfg.write_text(GEOMETRY)
    return {"det": make_square_detector(d / "square.onnx"), "cam": cam, "cfg": cfg}


def track(capsys: pytest.CaptureFixture[str], w: dict[str, Path], *args: str) -> tuple[int, list[Any], str]:
    rc = main(["infer", "--track", "--json", "-m", str(w["det"]), "--conf", "0.6", *args])
    out, err = capsys.readouterr()
    # one compact JSON object a line (what `jq -c` and line-based log shippers expect)
    assert all(line == json.dumps(json.loads(line), separators=(",", ":")) for line in out.splitlines())
    return rc, [json.loads(line) for line in out.splitlines()], err


def short(events: list[Any]) -> list[tuple[Any, ...]]:
    return [
        (e["frame"], e["event"], e["object_id"], e.get("line") or e.get("zone"), e.get("direction"))
        for e in events
        if "event" in e
    ]


def test_the_events_the_counts_and_the_summary_of_a_crossing_and_a_dweller(
    capsys: pytest.CaptureFixture[str], world: dict[str, Path]
) -> None:
    rc, lines, err = track(capsys, world, "--config", str(world["cfg"]), str(world["cam"]))
    assert rc == 0 and "error" not in err
    assert short(lines) == [
        ("002", "appeared", 1, None, None),  # min_hits = 3: reported on the third frame
        ("002", "appeared", 2, None, None),
        ("007", "line_crossed", 1, "gate", "in"),
        ("012", "zone_entered", 2, "bay", None),  # after min_dwell_s = 1.0 s at 10 fps
        ("020", "line_crossed", 1, "gate", "out"),
        ("end", "ended", 1, None, None),
        ("end", "zone_left", 2, "bay", None),
        ("end", "ended", 2, None, None),
    ]
    by = {(e["event"], e["object_id"], e.get("direction")): e for e in lines if "event" in e}
    assert by[("line_crossed", 1, "in")]["ts"] == 0.7 and by[("line_crossed", 1, "in")]["label"] == "square"
    assert by[("line_crossed", 1, "in")]["box"] == [27.5, 4.0, 43.5, 20.0]
    assert by[("line_crossed", 1, "out")]["ts"] == 2.0
    assert by[("zone_left", 2, None)]["dwell_s"] == 2.3 and by[("ended", 2, None)]["duration_s"] == 2.5
    assert by[("ended", 1, None)]["best_box"] == [0.0, 4.0, 16.0, 20.0]
    assert by[("ended", 1, None)]["ts"] == 2.5
    # what is printed is the event as queued, without the app's internal keys (the best crop)
    assert set(by[("ended", 1, None)]) == {
        "frame", "event", "object_id", "label", "confidence", "box", "ts", "duration_s", "first_seen",
        "last_seen", "classes", "best_confidence", "best_box",
    }  # fmt: skip
    assert lines[-1] == {
        "summary": {
            "frames": 26,
            "objects": 2,
            "lines": {"gate": {"in": 1, "out": 1, "total_in": 1, "total_out": 1}},
            "zones": {"bay": {"entered": 1, "total_entered": 1, "occupancy": 0}},
        }
    }


def test_fps_sets_the_frame_times_so_the_dwell_times(
    capsys: pytest.CaptureFixture[str], world: dict[str, Path]
) -> None:
    rc, lines, _ = track(capsys, world, "-c", str(world["cfg"]), "--fps", "5", str(world["cam"]))
    assert rc == 0
    by = {(e["event"], e["object_id"]): e for e in lines if "event" in e and e.get("direction") != "out"}
    # twice as long a frame: the zone's 1.0 s minimum is reached on frame 8, not 12; 25 frames = 5.0 s
    assert by[("zone_entered", 2)]["frame"] == "008" and by[("zone_entered", 2)]["ts"] == 1.6
    assert by[("line_crossed", 1)]["ts"] == 1.4
    assert by[("zone_left", 2)]["dwell_s"] == 4.6 and by[("ended", 1)]["duration_s"] == 5.0


def test_the_text_output_names_each_event_and_ends_with_the_summary_line(
    capsys: pytest.CaptureFixture[str], world: dict[str, Path]
) -> None:
    rc = main(
        [
            "infer",
            "--track",
            "-m",
            str(world["det"]),
            "--conf",
            "0.6",
            "--config",
            str(world["cfg"]),
            str(world["cam"]),
        ]
    )
    out = capsys.readouterr().out.splitlines()
    assert rc == 0
    assert out == [
        "002  #1 square  appeared",
        "002  #2 square  appeared",
        "007  #1 square  crossed gate in",
        "012  #2 square  entered bay",
        "020  #1 square  crossed gate out",
        "end  #1 square  ended after 2.5 s, best 1.0",
        "end  #2 square  left bay after 2.3 s",
        "end  #2 square  ended after 2.5 s, best 1.0",
        "26 frames, 2 objects; line gate: in 1 out 1; zone bay: entered 1",
    ]


def test_frames_go_in_name_order_and_without_config_there_are_no_lines_or_zones(
    capsys: pytest.CaptureFixture[str], world: dict[str, Path], tmp_path: Path
) -> None:
    cam = tmp_path / "cam"
    cam.mkdir()
    # written right to left, named left to right: name order is what counts, not file order
    for i, x in reversed(list(enumerate(XS))):
        cv2.imwrite(str(cam / f"f{i:02d}.png"), scene(x, sitter=False))
    cfg = tmp_path / "c.toml"
    cfg.write_text(GEOMETRY)
    rc, lines, _ = track(capsys, world, "--config", str(cfg), str(cam))
    assert rc == 0 and short(lines)[1] == ("f07", "line_crossed", 1, "gate", "in")
    rc, lines, _ = track(capsys, world, str(cam))
    assert rc == 0 and [e["event"] for e in lines if "event" in e] == ["appeared", "ended"]
    assert lines[-1] == {"summary": {"frames": 13, "objects": 1, "lines": {}, "zones": {}}}


def test_the_tracker_section_of_the_config_reaches_the_tracker(
    capsys: pytest.CaptureFixture[str], world: dict[str, Path], tmp_path: Path
) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(GEOMETRY + "[tracker]\nmin_hits = 5\nnew_track = 0.99\n")
    rc, lines, _ = track(capsys, world, "--config", str(cfg), str(world["cam"]))
    assert rc == 0 and short(lines)[:2] == [
        ("004", "appeared", 1, None, None),
        ("004", "appeared", 2, None, None),
    ]
    # the square moves 4 px a frame (IoU 0.6): a first association needing 0.7 loses it again and again
    cfg.write_text(GEOMETRY + "[tracker]\nmatch_iou = 0.7\n")
    rc, lines, _ = track(capsys, world, "--config", str(cfg), str(world["cam"]))
    assert rc == 0 and lines[-1]["summary"]["objects"] == 9  # the sitter and 8 pieces of the mover
    cfg.write_text(GEOMETRY + "[tracker]\nnew_track = 1.0\nhigh = 1.0\n")
    rc, lines, _ = track(capsys, world, "--conf", "0.99", "--config", str(cfg), str(world["cam"]))
    assert rc == 0 and lines[-1]["summary"]["objects"] == 2


def test_save_writes_one_annotated_frame_per_input_and_never_over_an_input(
    capsys: pytest.CaptureFixture[str], world: dict[str, Path], tmp_path: Path
) -> None:
    cam = tmp_path / "cam"
    cam.mkdir()
    for i, x in enumerate(XS[:5]):
        cv2.imwrite(str(cam / f"{i}.jpg"), scene(x, sitter=False))
    before = {p.name: p.read_bytes() for p in cam.iterdir()}
    cfg = tmp_path / "c.toml"
    cfg.write_text(GEOMETRY)
    out = tmp_path / "out" / "deep"
    rc, _, _ = track(capsys, world, "--config", str(cfg), "--save", str(out), str(cam))
    assert rc == 0 and sorted(p.name for p in out.iterdir()) == [f"{i}.jpg" for i in range(5)]
    # the line is drawn (magenta) on every frame; the input is black there (row 34: below the
    # counts legend, which takes the top 31 rows of a frame this small)
    for i in range(5):
        img = cv2.imread(str(out / f"{i}.jpg"))
        assert img.shape == (64, 64, 3) and np.abs(img[34, 32].astype(int) - (255, 0, 255)).max() < 90
    rc, _, err = track(capsys, world, "--config", str(cfg), "--save", str(cam), str(cam))
    assert rc == 1 and f"--save {cam}: is the folder of the input" in err
    assert {p.name: p.read_bytes() for p in cam.iterdir()} == before


def test_a_bad_frame_is_one_line_the_rest_is_tracked_and_the_exit_is_1(
    capsys: pytest.CaptureFixture[str], world: dict[str, Path], tmp_path: Path
) -> None:
    cam = tmp_path / "cam"
    cam.mkdir()
    for i, x in enumerate(XS[:4]):
        cv2.imwrite(str(cam / f"{i}.png"), scene(x, sitter=False))
    (cam / "2b.png").write_bytes(b"not a png")
    rc, lines, err = track(capsys, world, str(cam))
    assert rc == 1 and lines[-1]["summary"]["frames"] == 4 and lines[-1]["summary"]["objects"] == 1
    assert len(err.splitlines()) == 1 and err.startswith(f"edge-agent infer: error: {cam / '2b.png'}")


def test_a_frame_that_cannot_be_saved_is_one_line_and_exit_1(
    capsys: pytest.CaptureFixture[str], world: dict[str, Path], tmp_path: Path
) -> None:
    cam = tmp_path / "cam"
    cam.mkdir()
    for i, x in enumerate(XS[:3]):
        cv2.imwrite(str(cam / f"{i}.png"), scene(x, sitter=False))
    out = tmp_path / "out"
    out.mkdir()
    (out / "1.jpg").mkdir()  # a folder where frame 1's picture would go
    (out / "1_1.jpg").mkdir()
    (out / "1.jpg" / "x").write_text("keep")
    rc, lines, err = track(capsys, world, "--save", str(out), str(cam))
    assert lines[-1]["summary"]["frames"] == 3
    assert rc == 1 and len(err.splitlines()) == 1 and err.startswith("edge-agent infer: error: ")
    assert sorted(p.name for p in out.iterdir()) == ["0.jpg", "1.jpg", "1_1.jpg", "2.jpg"]


def test_a_video_and_images_given_together_are_all_tracked(
    capsys: pytest.CaptureFixture[str], world: dict[str, Path], tmp_path: Path
) -> None:
    video = tmp_path / "a.avi"
    write_video(video, 10.0, [scene(x, sitter=False) for x in XS[:5]])
    imgs = []
    for i, x in enumerate(XS[5:8]):
        imgs.append(tmp_path / f"b{i}.png")
        cv2.imwrite(str(imgs[-1]), scene(x, sitter=False))
    rc, lines, _ = track(capsys, world, str(video), *map(str, imgs))
    assert rc == 0 and lines[-1]["summary"] == {"frames": 8, "objects": 1, "lines": {}, "zones": {}}


@pytest.mark.parametrize("fps, duration", [(1.0, 12.0), (1000.0, 0.012)])
def test_a_videos_own_rate_is_used_from_1_to_1000_fps(
    capsys: pytest.CaptureFixture[str], world: dict[str, Path], tmp_path: Path, fps: float, duration: float
) -> None:
    video = tmp_path / "v.avi"
    write_video(video, fps, [scene(x, sitter=False) for x in XS])
    if cv2.VideoCapture(str(video)).get(cv2.CAP_PROP_FPS) != fps:
        pytest.skip(f"this OpenCV build does not keep a rate of {fps} fps in an AVI")
    rc, lines, _ = track(capsys, world, str(video))
    # 13 frames: 12 intervals of 1 s, or of 1 ms (the 25 fps fallback would say 0.48)
    assert rc == 0 and [e["duration_s"] for e in lines if e.get("event") == "ended"] == [duration]


def test_no_frames_is_one_line_and_exit_1(
    capsys: pytest.CaptureFixture[str], world: dict[str, Path], tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    rc = main(["infer", "--track", "-m", str(world["det"]), str(tmp_path / "empty")])
    out, err = capsys.readouterr()
    assert (
        rc == 1
        and err == f"edge-agent infer: error: no images or video frames found in {tmp_path / 'empty'}\n"
    )
    assert out == "0 frames, 0 objects\n"
    (tmp_path / "empty2").mkdir()
    assert (
        main(["infer", "--track", "-m", str(world["det"]), str(tmp_path / "empty"), str(tmp_path / "empty2")])
        == 1
    )
    err = capsys.readouterr().err
    assert (
        err
        == f"edge-agent infer: error: no images or video frames found in {tmp_path / 'empty'}, {tmp_path / 'empty2'}\n"
    )


def write_video(path: Path, fps: float, frames: list[np.ndarray]) -> None:
    w = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), fps, (64, 64))
    if not w.isOpened():
        pytest.skip("this OpenCV build cannot write MJPG/AVI")
    for f in frames:
        w.write(f)
    w.release()


def test_a_video_runs_at_its_own_frame_rate_and_its_frames_are_numbered(
    capsys: pytest.CaptureFixture[str], world: dict[str, Path], tmp_path: Path
) -> None:
    video = tmp_path / "clip.avi"
    write_video(video, 5.0, [scene(x) for x in XS + XS[::-1]])
    out = tmp_path / "out"
    rc, lines, _ = track(
        capsys, world, "--config", str(world["cfg"]), "--fps", "50", "--save", str(out), str(video)
    )
    assert rc == 0 and lines[-1]["summary"]["frames"] == 26
    by = {(e["event"], e["object_id"]): e for e in lines if "event" in e}
    # 5 fps from the container (not --fps): as test_fps_sets_the_frame_times_so_the_dwell_times
    assert by[("zone_entered", 2)]["frame"] == "clip_000008" and by[("zone_left", 2)]["dwell_s"] == 4.6
    assert sorted(p.name for p in out.iterdir()) == [f"clip_{i:06d}.jpg" for i in range(26)]


def test_a_file_that_is_no_video_is_one_line(
    capsys: pytest.CaptureFixture[str], world: dict[str, Path], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"\0" * 100)
    rc, lines, err = track(capsys, world, str(bad))
    assert rc == 1 and lines[-1]["summary"]["frames"] == 0
    assert err == f"edge-agent infer: error: {bad}: cannot open as a video\n"


def test_max_pixels_bounds_video_frames_and_images(
    capsys: pytest.CaptureFixture[str], world: dict[str, Path], tmp_path: Path
) -> None:
    video = tmp_path / "clip.avi"
    write_video(video, 10.0, [scene(x) for x in XS[:3]])
    rc, lines, err = track(capsys, world, "--max-pixels", str(64 * 64 - 1), str(video))
    assert rc == 1 and lines[-1]["summary"]["frames"] == 0
    assert err.startswith(f"edge-agent infer: error: {video}: frames of 64x64 pixels (")
    assert err.endswith("(max_pixels); not decoded\n")
    rc, lines, _ = track(capsys, world, "--max-pixels", str(64 * 64), str(video))
    assert rc == 0 and lines[-1]["summary"]["frames"] == 3
    img = tmp_path / "one.png"
    cv2.imwrite(str(img), scene(0))
    rc, lines, err = track(capsys, world, "--max-pixels", str(64 * 64 - 1), str(img))
    assert rc == 1 and lines[-1]["summary"]["frames"] == 0 and "(max_pixels); not decoded" in err


# ---- edge-agent track: MOTChallenge detections in, tracks out


def mot(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, rows: list[str], *args: str
) -> tuple[int, list[list[str]], str]:
    det = tmp_path / "det.txt"
    det.write_text("\n".join(rows) + "\n")
    out = tmp_path / "tracks.txt"
    rc = main(["track", "-d", str(det), "-o", str(out), *args])
    err = capsys.readouterr().err
    got = [line.split(",") for line in out.read_text().splitlines()] if out.exists() else []
    return rc, got, err


def ids(got: list[list[str]]) -> list[str]:
    return [g[1] for g in got]


def test_track_writes_each_frames_tracks_and_says_how_many(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rows = [f"{f},-1,{10 + 5 * f},50,40,80,0.9" for f in range(1, 6)] + ["7,-1,40,50,40,80,0.9"]
    rc, got, err = mot(capsys, tmp_path, rows)
    assert rc == 0
    assert got[0] == ["1", "1", "15.00", "50.00", "40.00", "80.00", "0.900", "-1", "-1", "-1"]
    assert [g[0] for g in got] == ["1", "2", "3", "4", "5", "7"] and set(ids(got)) == {"1"}
    assert err.startswith("7 frames, 1 tracks, ") and err.endswith(
        f" ms/frame -> {tmp_path / 'tracks.txt'}\n"
    )


def test_track_of_an_empty_file_writes_an_empty_tracks_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rc, got, err = mot(capsys, tmp_path, [])
    assert rc == 0 and got == [] and (tmp_path / "tracks.txt").read_text() == ""
    assert err.startswith("0 frames, 0 tracks, ")


def test_track_flags_reach_the_tracker(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    steady = [f"{f},-1,100,50,40,80,0.5" for f in (1, 2, 3, 6)]
    assert ids(mot(capsys, tmp_path, steady)[1]) == ["1"] * 4  # default lost_frames 30 keeps it
    # frames 4 and 5 missed: removed after 1 lost frame, the new sighting at 6 is not yet confirmed
    assert ids(mot(capsys, tmp_path, steady, "--lost-frames", "1")[1]) == ["1", "1", "1"]
    assert ids(mot(capsys, tmp_path, steady, "--lost-frames", "2")[1]) == ["1", "1", "1", "1"]
    assert mot(capsys, tmp_path, steady, "--new-track", "0.6")[1] == []
    assert ids(mot(capsys, tmp_path, steady, "--new-track", "0.5")[1]) == ["1"] * 4
    # a detection of another class at the same place continues the track unless --per-class
    classes = [f"{f},-1,100,50,40,80,0.9,{f % 2}" for f in (1, 2)]
    assert ids(mot(capsys, tmp_path, classes)[1]) == ["1", "1"]
    assert ids(mot(capsys, tmp_path, classes, "--per-class")[1]) == ["1"]  # 2 not yet confirmed
    # a box moved by half its width: IoU 1/3
    moved = ["1,-1,100,50,40,80,0.9", "2,-1,120,50,40,80,0.9"]
    assert ids(mot(capsys, tmp_path, moved, "--match-iou", "0.3")[1]) == ["1", "1"]
    assert ids(mot(capsys, tmp_path, moved, "--match-iou", "0.34")[1]) == ["1"]  # 2 not yet confirmed
    # a weak detection (0.25) continues a track through the second association only while >= --low
    weak = ["1,-1,100,50,40,80,0.9", "2,-1,100,50,40,80,0.25"]
    assert ids(mot(capsys, tmp_path, weak)[1]) == ["1", "1"]
    assert ids(mot(capsys, tmp_path, weak, "--low", "0.26")[1]) == ["1"]
    assert ids(mot(capsys, tmp_path, weak, "--low", "0.25")[1]) == ["1", "1"]


def test_track_high_decides_the_first_association(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # at 0.875 a detection is in the first association by default (IoU 1/3 x 0.875 >= 0.2); with
    # --high 0.9 it is low, and the second association's fixed IoU gate (0.5) refuses IoU 1/3
    rows = ["1,-1,100,50,40,80,0.9", "2,-1,120,50,40,80,0.875"]
    assert ids(mot(capsys, tmp_path, rows)[1]) == ["1", "1"]
    assert ids(mot(capsys, tmp_path, rows, "--high", "0.9")[1]) == ["1"]
    assert ids(mot(capsys, tmp_path, rows, "--high", "0.875")[1]) == ["1", "1"]


@pytest.mark.parametrize(
    "content, expected",
    [
        ("1,-1,10,20\n", "det.txt:1: 4 columns"),
        (b"\xff\xfe", "det.txt: not UTF-8 text (a MOTChallenge det.txt is CSV text)"),
    ],
)
def test_track_bad_input_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: object, expected: str
) -> None:
    det = tmp_path / "det.txt"
    det.write_bytes(content if isinstance(content, bytes) else str(content).encode())
    rc = main(["track", "-d", str(det), "-o", str(tmp_path / "t.txt")])
    err = capsys.readouterr().err
    assert rc == 1 and expected in err and len(err.splitlines()) == 1


def test_track_unreadable_and_unwritable_files_are_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rc = main(["track", "-d", str(tmp_path / "none.txt"), "-o", str(tmp_path / "t.txt")])
    err = capsys.readouterr().err
    assert (
        rc == 1
        and err
        == f"edge-agent track: error: {tmp_path / 'none.txt'}: cannot read: No such file or directory\n"
    )
    det = tmp_path / "det.txt"
    det.write_text("1,-1,10,20,30,40,0.9\n")
    rc = main(["track", "-d", str(det), "-o", str(tmp_path / "no" / "t.txt")])
    err = capsys.readouterr().err
    assert (
        rc == 1
        and err
        == f"edge-agent track: error: {tmp_path / 'no' / 't.txt'}: cannot write: No such file or directory\n"
    )


@pytest.mark.parametrize("missing", ["-d", "-o"])
def test_track_needs_its_detections_and_its_output(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, missing: str
) -> None:
    args = {"-d": str(tmp_path / "det.txt"), "-o": str(tmp_path / "t.txt")}
    del args[missing]
    with pytest.raises(SystemExit) as e:
        main(["track", *[x for kv in args.items() for x in kv]])
    assert e.value.code == 2 and "the following arguments are required" in capsys.readouterr().err


def test_a_classifier_given_with_track_is_said_to_be_unused_and_not_run(
    capsys: pytest.CaptureFixture[str], world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Object events carry the detector's classes only (as on a device in objects mode): running
    the classifier on every crop would cost its time for nothing."""
    from edge_agent.inference import pipeline

    rc, plain, _ = track(capsys, world, "--config", str(world["cfg"]), str(world["cam"]))
    seen: list[object] = []
    real = pipeline.run_cascade

    def recording(img: Any, det: Any, cls: Any, *a: Any, **kw: Any) -> Any:
        seen.append(cls)
        return real(img, det, cls, *a, **kw)

    monkeypatch.setattr(pipeline, "run_cascade", recording)
    classifier = Path(__file__).resolve().parents[3] / "models" / "demo-classifier.onnx"
    rc2, with_cls, err = track(
        capsys, world, "--config", str(world["cfg"]), "--classifier", str(classifier), str(world["cam"])
    )
    assert rc == rc2 == 0 and with_cls == plain
    assert seen and all(c is None for c in seen)
    assert "edge-agent infer: warning: --classifier is not used with --track: " in err


CAMERAS = """[[cameras]]
id = "north"
source = "/srv/north"
[[cameras]]
id = "south"
source = "/srv/south"
classes = ["nothing-like-a-square"]
[[lines]]
name = "gate"
camera = "north"
points = [[0.5, 0.0], [0.5, 0.6]]
in_side = "left"
[[lines]]
name = "other"
camera = "south"
points = [[0.5, 0.0], [0.5, 0.6]]
"""


def test_camera_picks_that_cameras_scene_from_a_file_of_cameras(
    capsys: pytest.CaptureFixture[str], world: dict[str, Path], tmp_path: Path
) -> None:
    cfg = tmp_path / "cams.toml"
    cfg.write_text(CAMERAS)
    rc, lines, _ = track(capsys, world, "--config", str(cfg), "--camera", "north", str(world["cam"]))
    assert rc == 0 and lines[-1]["summary"]["lines"] == {
        "gate": {"in": 1, "out": 1, "total_in": 1, "total_out": 1}
    }
    # several cameras and none named: one line naming them; an unknown one: the same
    for extra, expected in (
        ([], "has cameras north, south: pick one with --camera ID"),
        (
            ["--camera", "west"],
            "--camera 'west': " + str(cfg) + " has no such camera (its cameras: north, south)",
        ),
    ):
        rc = main(
            ["infer", "--track", "-m", str(world["det"]), "--config", str(cfg), *extra, str(world["cam"])]
        )
        err = capsys.readouterr().err
        assert rc != 0 and expected in err and "Traceback" not in err


def test_a_cameras_classes_filter_what_it_tracks(
    capsys: pytest.CaptureFixture[str], world: dict[str, Path], tmp_path: Path
) -> None:
    labels = tmp_path / "labels.txt"
    labels.write_text("square\nnothing-like-a-square\n")
    cfg = tmp_path / "cams.toml"
    cfg.write_text(CAMERAS)
    rc, lines, _ = track(
        capsys, world, "--labels", str(labels), "--config", str(cfg), "--camera", "south", str(world["cam"])
    )
    assert rc == 0 and lines[-1]["summary"]["objects"] == 0  # every square dropped by south's classes


def test_track_with_a_config_runs_its_detector_at_its_threshold_and_classes(
    capsys: pytest.CaptureFixture[str], world: dict[str, Path], tmp_path: Path
) -> None:
    """The preview ran the bundled demo detector at 0.25 whatever [detector] said: it showed
    objects the device never reports. Now the file's detector, conf and classes; options win."""
    cfg = tmp_path / "c.toml"

    def run(detector: str, *args: str) -> tuple[int, list[Any], str]:
        cfg.write_text(GEOMETRY + detector)
        rc = main(["infer", "--track", "--json", "--config", str(cfg), *args, str(world["cam"])])
        out, err = capsys.readouterr()
        return rc, [json.loads(line) for line in out.splitlines()], err

    rc, lines, _ = run(f'[detector]\nmodel = "{world["det"]}"\nconf_threshold = 0.6\n')
    assert rc == 0 and lines[-1]["summary"]["objects"] == 2  # the file's square detector
    rc, lines, _ = run(f'[detector]\nmodel = "{world["det"]}"\nconf_threshold = 1.0\n')
    assert rc == 0 and lines[-1]["summary"]["objects"] == 0  # its threshold, not the default 0.25
    rc, lines, _ = run(f'[detector]\nmodel = "{world["det"]}"\nconf_threshold = 1.0\n', "--conf", "0.6")
    assert rc == 0 and lines[-1]["summary"]["objects"] == 2  # a threshold typed here wins
    rc, lines, _ = run(f'[detector]\nmodel = "{world["det"]}"\nconf_threshold = 0.6\nclasses = ["car"]\n')
    assert rc == 1 or lines[-1]["summary"]["objects"] == 0  # its classes: no square kept
    rc, _, err = run(f'[detector]\nmodel = "{tmp_path / "gone.onnx"}"\n')
    assert rc == 1 and "gone.onnx" in err  # the file's model is the one opened

"""``edge-agent demo`` (README's main job) and ``edge-agent run`` in process (``cli.main`` with
capsys, so mutation testing credits them): what a stranger sees, where the demo's queue and status
go, and that ``--frames``/``--max-frames``/``--loop`` reach the loop. The subprocess forms are in
tests/cli and tests/app/cli/test_runtime_imports.py."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.world import agent_toml

from edge_agent.app.cli.main import main
from edge_agent.app.cli.run_cmd import demo_config

REPO = Path(__file__).resolve().parents[3]
MODELS = REPO / "models"
SAMPLES = sorted((MODELS / "samples").glob("*.jpg"))


@pytest.fixture(autouse=True)
def _keep_signal_handlers() -> Iterator[None]:
    """run and demo install the service's SIGTERM/SIGINT/SIGHUP handlers in this process."""
    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    yield
    for s, h in old.items():
        signal.signal(s, h)


def rows(db: Path) -> list[tuple[str, str]]:
    con = sqlite3.connect(db)
    try:
        return [
            (str(t), bytes(p).decode())
            for t, p in con.execute("SELECT topic, payload FROM messages ORDER BY id")
        ]
    finally:
        con.close()


def test_demo_prints_its_setup_one_line_per_frame_and_the_queue_in_its_state_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "demo"
    assert main(["demo", "--state-dir", str(state), "--frames", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"edge-agent demo: camera = {MODELS / 'samples'}"
    assert out[1] == f"  detector = {MODELS / 'demo-detector-int8.onnx'}"
    assert out[2] == f"  classifier = {MODELS / 'demo-classifier-int8.onnx'}"
    assert out[3] == f"  queue = {state / 'outbox.db'} (MQTT off: results wait there for a broker)"
    frames = [line for line in out if " found " in line]
    assert [f.split()[0] for f in frames] == [p.name for p in SAMPLES[:3]]
    assert any(f.split()[1] != "0" for f in frames)  # the demo detector finds something
    (summary,) = [line for line in out if f"{len(frames)} frames, " in line]
    assert re.fullmatch(
        r"\d+ frames, [\d.]+ fps, median latency [\d.]+ ms \(pre [\d.]+, infer [\d.]+.*\)", summary
    )
    stats = json.loads(out[-1].removeprefix("queue stats: "))
    assert stats["boot"] == 1 and stats["disk_full"] is False  # a new queue: this run's boot only
    stats = json.loads(next(line for line in out if line.startswith("queue stats: "))[len("queue stats: ") :])
    assert stats["pending"] == 3
    # the queue and the status are in the state dir, nowhere else
    queued = rows(state / "outbox.db")
    assert len(queued) == 3 and all(json.loads(p)["device_id"] == "demo" for _, p in queued)
    assert json.loads((state / "status.json").read_text())["frames"] == 3


def test_demo_without_frames_takes_each_sample_once_and_stops(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--state-dir", str(tmp_path / "d")]) == 0
    frames = [line.split()[0] for line in capsys.readouterr().out.splitlines() if " found " in line]
    assert frames == [p.name for p in SAMPLES]


def test_demo_with_loop_replays_the_samples_until_frames_is_reached(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = len(SAMPLES) + 2
    assert main(["demo", "--state-dir", str(tmp_path / "d"), "--loop", "--frames", str(n)]) == 0
    frames = [line.split()[0] for line in capsys.readouterr().out.splitlines() if " found " in line]
    assert frames == [p.name for p in SAMPLES] + [p.name for p in SAMPLES[:2]]


def test_the_demo_config_is_the_bundled_models_on_the_samples_without_a_broker(tmp_path: Path) -> None:
    cfg = demo_config(tmp_path, loop=False)
    assert cfg.mqtt.enabled is False
    assert cfg.output.mode == "every_frame"  # every frame printed, not only changes
    assert (cfg.camera.source, cfg.camera.loop) == (str(MODELS / "samples"), False)
    assert demo_config(tmp_path, loop=True).camera.loop is True
    assert cfg.detector is not None and cfg.detector.model == str(MODELS / "demo-detector-int8.onnx")
    assert cfg.detector.conf_threshold == 0.4
    assert cfg.classifier is not None and cfg.classifier.crop_padding == 0.15
    assert (cfg.queue.path, cfg.health.status_file) == (
        str(tmp_path / "outbox.db"),
        str(tmp_path / "status.json"),
    )
    assert cfg.device.id == "demo" and cfg.device.state_dir == str(tmp_path)


def test_run_takes_max_frames_from_the_command_line(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    cfg = tmp_path / "c.toml"
    cfg.write_text(agent_toml(state, MODELS / "samples", MODELS / "demo-detector-int8.onnx"))
    assert main(["run", "--config", str(cfg), "--max-frames", "2"]) == 0
    assert len(rows(state / "outbox.db")) == 2


def test_run_without_a_detector_is_one_error_naming_the_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    cfg = tmp_path / "c.toml"
    cfg.write_text(agent_toml(state, MODELS / "samples", None))
    assert main(["run", "--config", str(cfg), "--max-frames", "1"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(cfg) in err[0] and "detector" in err[0]
    assert not (state / "outbox.db").exists()


def test_each_demo_line_shows_the_queued_detections_their_classes_and_the_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "demo"
    assert main(["demo", "--state-dir", str(state)]) == 0
    printed = [line for line in capsys.readouterr().out.splitlines() if " found " in line]
    queued = [json.loads(p) for _, p in rows(state / "outbox.db")]
    assert len(printed) == len(queued) == len(SAMPLES)
    classified = 0
    for line, body in zip(printed, queued):
        dets = body["detections"]
        what = []
        for d in dets:
            cls = d.get("classification")
            classified += cls is not None
            what.append(f"{d['label']}{'/' + cls['label'] if cls else ''} {d['confidence']:.2f}")
        name = Path(body["image"]).name
        assert (
            line
            == f"{name:<18} {len(dets):2d} found  {body['timings_ms']['total']:6.1f} ms  {', '.join(what)}"
        )
    assert classified > 0  # the bundled classifier labels the crops: "circle/red 0.91"


def test_a_state_dir_that_cannot_hold_the_queue_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["demo", "--state-dir", str(afile), "--frames", "1"]) == 1
    err = capsys.readouterr().err
    assert (
        err
        == f"edge-agent demo: error: --state-dir {afile}: is a file, expected a folder for the demo's queue\n"
    )
    assert main(["demo", "--state-dir", str(afile / "sub"), "--frames", "1"]) == 1
    err = capsys.readouterr().err
    assert (
        err
        == f"edge-agent demo: error: --state-dir {afile / 'sub'}: cannot create the folder: Not a directory\n"
    )
    if os.geteuid() == 0:
        return  # root may write in any folder: the access check below cannot refuse one
    shut = tmp_path / "shut"
    shut.mkdir()
    shut.chmod(0o500)
    try:
        assert main(["demo", "--state-dir", str(shut), "--frames", "1"]) == 1
    finally:
        shut.chmod(0o700)
    err = capsys.readouterr().err
    assert (
        err
        == f"edge-agent demo: error: --state-dir {shut}: not writable by this user; choose another folder\n"
    )
    assert list(shut.iterdir()) == []


def test_a_nested_state_dir_is_created_and_a_second_demo_adds_to_its_queue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "a" / "b"
    assert main(["demo", "--state-dir", str(state), "--frames", "1"]) == 0
    assert len(rows(state / "outbox.db")) == 1
    assert main(["demo", "--state-dir", str(state), "--frames", "2"]) == 0
    assert len(rows(state / "outbox.db")) == 3


def test_the_demo_falls_back_to_the_fp32_models_and_runs_without_a_classifier(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An install with only the FP32 files (the INT8 ones are made by `make demo-int8`)."""
    from edge_agent.app.cli import assets

    fp32 = tmp_path / "fp32"
    fp32.mkdir()
    for name in ("demo-detector.onnx", "demo-classifier.onnx", "samples"):
        (fp32 / name).symlink_to(MODELS / name)
    monkeypatch.setattr(assets, "_CANDIDATES", (fp32,))
    cfg = demo_config(tmp_path / "s", loop=False)
    assert cfg.detector.model == str(fp32 / "demo-detector.onnx")
    assert cfg.classifier is not None and cfg.classifier.model == str(fp32 / "demo-classifier.onnx")
    (fp32 / "demo-classifier.onnx").unlink()
    assert demo_config(tmp_path / "s", loop=False).classifier is None
    assert main(["demo", "--state-dir", str(tmp_path / "s"), "--frames", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == f"  detector = {fp32 / 'demo-detector.onnx'}" and out[2].startswith("  queue = ")
    found = [line for line in out if " found " in line]
    assert len(found) == 2 and any(line.split()[1] != "0" for line in found)
    shown = [d for line in found for d in line.split(" ms  ")[1].split(", ") if d]
    assert shown and all(re.fullmatch(r"(circle|square|triangle) [01]\.\d\d", d) for d in shown), shown


def test_run_reloads_the_config_file_it_was_given_on_sighup(tmp_path: Path) -> None:
    import threading
    import time

    state = tmp_path / "state"
    state.mkdir()
    cfg = tmp_path / "c.toml"
    paced = {"camera": "fps = 20.0\nloop = true\n"}
    cfg.write_text(agent_toml(state, MODELS / "samples", MODELS / "demo-detector-int8.onnx", **paced))
    db = state / "outbox.db"

    def count() -> int:
        try:
            return len(rows(db))
        except sqlite3.Error:
            return 0

    def swap() -> None:
        deadline = time.monotonic() + 60
        while count() < 1 and time.monotonic() < deadline:
            time.sleep(0.01)  # polling a condition (the first row queued), not a timed wait
        cfg.write_text(agent_toml(state, MODELS / "samples", MODELS / "demo-detector.onnx", **paced))
        os.kill(os.getpid(), signal.SIGHUP)

    t = threading.Thread(target=swap)
    t.start()
    try:
        assert main(["run", "--config", str(cfg), "--max-frames", "60"]) == 0
    finally:
        t.join()
    models = [json.dumps(json.loads(p)["models"]) for _, p in rows(db)]
    assert "demo-detector-int8" in models[0] and "demo-detector-int8" not in models[-1]
    assert "demo-detector" in models[-1]


def test_the_demo_queue_goes_to_edge_agent_demo_in_the_current_folder_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--frames", "1"]) == 0
    assert f"  queue = {tmp_path / 'edge-agent-demo' / 'outbox.db'} " in capsys.readouterr().out
    assert len(rows(tmp_path / "edge-agent-demo" / "outbox.db")) == 1


def test_demo_into_a_folder_it_cannot_write_is_one_line_before_anything_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # /proc/sys: a folder that exists and that even root cannot write (a 0500 folder would not do:
    # root writes anywhere its file system lets it)
    target = Path("/proc/sys")
    if os.access(target, os.W_OK):
        pytest.skip("/proc/sys is writable here: no folder to test an unwritable state dir with")
    assert main(["demo", "--state-dir", str(target), "--frames", "1"]) != 0
    out, err = capsys.readouterr()
    assert (
        err.strip()
        == "edge-agent demo: error: --state-dir /proc/sys: not writable by this user; choose another folder"
    )
    assert out == ""  # nothing loaded, nothing printed

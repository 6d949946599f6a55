"""``edge-agent demo`` (README's main job) and ``edge-agent run`` in process (``cli.main`` with
capsys, so mutation testing credits them): what a stranger sees, where the demo's queue and status
go, and that ``--frames``/``--max-frames``/``--loop`` reach the loop. The subprocess forms are in
tests/cli and tests/app/test_runtime_imports.py."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.world import agent_toml

from edge_agent.app.cli import main
from edge_agent.app.run_cmd import demo_config

REPO = Path(__file__).resolve().parents[2]
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
    assert any(f"{len(frames)} frames, " in line and "median latency" in line for line in out)
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

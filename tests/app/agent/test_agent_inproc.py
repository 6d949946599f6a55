"""The agent loop in process (``Agent(cfg).run()`` on a folder camera and the test-built models), so
mutation testing credits these tests to the loop's code (a ``python -m edge_agent`` subprocess is
invisible to it): every field of a queued result, the counters of frames, results, errors and
rejections, ``max_frames``, the output mode, pacing, the watchdog and status lines on a real
NOTIFY_SOCKET, the status snapshot, SIGHUP reloads (a failed one keeps the models), Prometheus and
an MQTT part that cannot start (counted, inference goes on)."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import signal
import socket
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Optional

import cv2
import numpy as np
import pytest
from support import free_port, wait_until
from support.models import make_bright_detector, make_format_detector
from support.mqtt import Broker, Collector
from support.world import PtySensor, agent_toml, make_world, run_agent, running

from edge_agent.adapters.camera.capture import Camera
from edge_agent.adapters.outbox.outbox import Outbox
from edge_agent.app.agent.agent import Agent, Parts
from edge_agent.app.agent.modelset import ModelSet
from edge_agent.app.agent.objects_step import ObjectsStep
from edge_agent.core.camera.source_spec import Frame
from edge_agent.core.config.schema import Config, parse_config
from edge_agent.core.vision.defaults import NO_SCORE_FRAMES, NO_SCORE_LEVEL
from edge_agent.errors import ModelError, QueueError, QueueFullError
from edge_agent.inference.pipeline import Detector, DetectOutput, Prepared


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """4 scenes (0..3 red squares, 256x128), the bright detector and the colour classifier."""
    return make_world(tmp_path_factory.mktemp("world"))


def config_text(
    state: Path,
    source: Path,
    det: Path,
    *,
    cls: Optional[Path] = None,
    loop: bool = False,
    interval: float = 0.0,
    mode: str = "every_frame",
    conf: float = 0.6,
    extra: str = "",
    output: str = "",
    updates: bool = False,
) -> str:
    return agent_toml(
        state,
        source,
        det,
        extra=extra,
        device={"id": "cam-9"},
        camera={"loop": loop, "interval_s": interval},
        detector={"conf_threshold": conf},
        classifier={"model": str(cls)} if cls else None,
        mqtt={"topic_prefix": "site7"},
        queue={"path": str(state / "q.db")},
        output=f'mode = "{mode}"\n{output}',
        model_update={"enabled": updates},
    )


def make_cfg(tmp_path: Path, world: dict[str, Path], **kw: Any) -> Config:
    return parse_config(config_text(tmp_path / "state", world["camera"], world["det"], **kw))


def queued(cfg: Config) -> list[tuple[str, dict[str, Any]]]:
    box = Outbox.from_config(cfg.queue)
    try:
        return [(m.topic, json.loads(m.payload)) for m in box.claim(1000)]
    finally:
        box.close()


# ---- one run, every field -----------------------------------------------------------------------


def test_every_result_is_queued_with_every_field_and_counted(
    tmp_path: Path, world: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    cfg = make_cfg(tmp_path, world, cls=world["cls"], output="snapshot = true\nsnapshot_max_bytes = 4000")
    bodies: list[dict[str, Any]] = []
    agent = Agent(cfg, on_result=bodies.append)
    with caplog.at_level(logging.INFO, logger="edge_agent.app.agent.agent"):
        assert run_agent(agent) == 0
    (ready,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ready in ")]
    assert (
        f"camera {world['camera']}, detector det.onnx@" in ready and "provider CPUExecutionProvider" in ready
    )
    assert "stopped after 4 frames, 4 results queued, 0 errors" in [r.getMessage() for r in caplog.records]
    assert [b["image"] for b in bodies] == ["000.png", "001.png", "002.png", "003.png"]
    sha = hashlib.sha256(world["det"].read_bytes()).hexdigest()
    frames = [b["frame"] for b in bodies]
    assert frames == list(range(frames[0], frames[0] + 4))
    for n, b in enumerate(bodies):
        assert len(b["detections"]) == n  # one per red square, classified red
        assert all(d["label"] == "bright" and d["classification"]["label"] == "red" for d in b["detections"])
        assert (b["device_id"], b["width"], b["height"], b["event"]) == ("cam-9", 256, 128, "every_frame")
        assert b["models"]["detector"]["sha256"] == sha and "classifier" in b["models"]
        assert b["ts_mono"] > 0 and b["ts_mono"] == round(b["ts_mono"], 6)
        assert abs(b["captured_at"] - b["ts"]) < 30 and "clock_synced" in b
        assert b["timings_ms"]["total"] > 0 and b["timings_ms"]["age"] >= 0
        assert "sensor" not in b  # no sensor configured
        jpeg = base64.b64decode(b["snapshot_jpeg_b64"])
        assert len(jpeg) <= 4000
        img = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
        assert img is not None and img.shape[1] / img.shape[0] == 2
    # one of each in the queue, on the configured prefix, byte for byte what on_result saw
    assert queued(cfg) == [("site7/cam-9/detections", b) for b in bodies]
    assert (agent.frames, agent.emitted, agent.errors, agent.rejected) == (4, 4, 0, 0)
    st = agent.last_status
    assert st is not None and st["state"] == "stopped"
    assert (st["frames"], st["results"], st["errors"], st["reloads"], st["reload_failures"]) == (
        4,
        4,
        0,
        0,
        0,
    )
    assert st["queue"]["pending"] == 4
    assert st["broker"]["state"] == "disabled" and st["camera"]["state"] == "stopped"
    assert st["models"] == bodies[0]["models"] and "CPU" in st["provider"]
    assert {"total", "age"} <= set(st["latency_ms"]) and st["warnings"] == []
    assert (
        agent.ready_s is not None and 0 < agent.ready_s <= st["uptime_s"] + 0.05
    )  # uptime_s is rounded to 0.1 s
    on_disk = json.loads((tmp_path / "state" / "status.json").read_text())
    assert on_disk["state"] == "stopped" and on_disk["frames"] == 4 and on_disk["results"] == 4


@pytest.mark.parametrize(
    ("enabled", "given", "want"), [(True, False, True), (False, False, False), (True, True, False)]
)
def test_model_updates_run_when_enabled_and_the_models_come_from_the_config(
    tmp_path: Path, world: dict[str, Path], enabled: bool, given: bool, want: bool
) -> None:
    cfg = make_cfg(tmp_path, world, updates=enabled)
    agent = Agent(cfg, max_frames=1, models=ModelSet.from_config(cfg) if given else None)
    assert run_agent(agent) == 0
    assert (agent.updates is not None) is want
    assert agent.last_status is not None
    block = agent.last_status["model_update"]
    assert (block is not None) is want
    if want:
        assert block["state"] and "receiver" in block


def test_objects_mode_queues_object_events_and_the_final_counts_at_stop(
    tmp_path: Path, world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    real_on_frame = ObjectsStep.on_frame

    def slow_tracking(self: ObjectsStep, *args: Any) -> None:
        time.sleep(0.02)  # a tracker that takes 20 ms a frame (many objects on a slow board)
        real_on_frame(self, *args)

    monkeypatch.setattr(ObjectsStep, "on_frame", slow_tracking)
    extra = """[tracker]
min_hits = 1
[[lines]]
name = "gate"
points = [[0.5, 0.0], [0.5, 1.0]]
"""
    cfg = make_cfg(tmp_path, world, mode="objects", extra=extra)
    agent = Agent(cfg)
    assert run_agent(agent) == 0
    rows = queued(cfg)
    objects = [b for t, b in rows if t == "site7/cam-9/objects"]
    counts = [b for t, b in rows if t == "site7/cam-9/counts"]
    assert not [t for t, _ in rows if t.endswith("/detections")]  # objects mode: no per-frame results
    assert objects[0]["event"] == "appeared" and objects[0]["frame"] >= 0
    # the objects still tracked when the camera ended: ended by stop(), with no frame
    ended = [b for b in objects if b["event"] == "ended"]
    assert ended and all("frame" not in b for b in ended[-2:])
    assert len(counts) == 1 and "gate" in counts[0]["lines"]
    assert agent.emitted == len(rows) and agent.objects is not None and agent.objects.sent == len(rows)
    # the tracking step's time is part of the status latency, in ms
    assert agent.last_status is not None and 20 <= agent.last_status["latency_ms"]["track"] < 10_000


@pytest.mark.parametrize(("classes", "classified"), [(["dim"], False), (["bright"], True), ([], True)])
def test_the_classifier_classes_key_picks_the_detections_whose_crops_are_classified(
    tmp_path: Path, world: dict[str, Path], classes: list[str], classified: bool
) -> None:
    # a two-class detector ({0: 'dim', 1: 'bright'}) whose every box in these scenes is 'bright'
    det = make_format_detector(tmp_path / "det2.onnx", fmt="yolov5", swap_classes=True)
    cfg = parse_config(
        agent_toml(
            tmp_path / "state",
            world["camera"],
            det,
            detector={"conf_threshold": 0.5},
            classifier={"model": str(world["cls"]), "classes": classes},
        )
    )
    bodies: list[dict[str, Any]] = []
    assert run_agent(Agent(cfg, on_result=bodies.append)) == 0
    dets = [d for b in bodies for d in b["detections"]]
    assert len(dets) == 6 and {d["label"] for d in dets} == {"bright"}  # 0 + 1 + 2 + 3 squares
    assert all(("classification" in d) is classified for d in dets)


def test_without_snapshot_or_classifier_the_result_has_neither(
    tmp_path: Path, world: dict[str, Path]
) -> None:
    cfg = make_cfg(tmp_path, world)
    bodies: list[dict[str, Any]] = []
    assert run_agent(Agent(cfg, on_result=bodies.append)) == 0
    assert len(bodies) == 4
    assert all("snapshot_jpeg_b64" not in b and set(b["models"]) == {"detector"} for b in bodies)
    assert all("classification" not in d for b in bodies for d in b["detections"])


@pytest.mark.parametrize("n", [1, 3, 6])
def test_max_frames_stops_after_exactly_that_many(tmp_path: Path, world: dict[str, Path], n: int) -> None:
    cfg = make_cfg(tmp_path, world, loop=True)
    agent = Agent(cfg, max_frames=n)
    assert run_agent(agent) == 0
    assert agent.frames == agent.emitted == n
    assert len(queued(cfg)) == n


def test_the_journal_says_when_the_camera_source_ended_the_run(
    tmp_path: Path, world: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    # an operator reading why a file/folder agent stopped: the source ran out, not --max-frames
    with caplog.at_level(logging.INFO, logger="edge_agent.app.agent.agent"):
        assert run_agent(Agent(make_cfg(tmp_path / "a", world))) == 0
    said = [r.getMessage() for r in caplog.records if r.name == "edge_agent.app.agent.agent"]
    assert said.count("camera source ended") == 1
    assert said.index("camera source ended") < said.index(
        "stopped after 4 frames, 4 results queued, 0 errors"
    )
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="edge_agent.app.agent.agent"):
        assert run_agent(Agent(make_cfg(tmp_path / "b", world, loop=True), max_frames=2)) == 0
    said = [r.getMessage() for r in caplog.records if r.name == "edge_agent.app.agent.agent"]
    assert "camera source ended" not in said and "stopped after 2 frames, 2 results queued, 0 errors" in said


def test_event_mode_queues_the_first_result_and_the_changes_only(
    tmp_path: Path, world: dict[str, Path]
) -> None:
    cam = tmp_path / "cam"
    cam.mkdir()
    for i, n in enumerate([1, 1, 1, 2, 2, 1]):
        (cam / f"{i:03d}.png").write_bytes((world["camera"] / f"{n:03d}.png").read_bytes())
    cfg = parse_config(config_text(tmp_path / "state", cam, world["det"], mode="event"))
    bodies: list[dict[str, Any]] = []
    agent = Agent(cfg, on_result=bodies.append)
    assert run_agent(agent) == 0
    assert agent.frames == 6
    assert [(b["image"], b["event"]) for b in bodies] == [
        ("000.png", "first"),
        ("003.png", "change"),
        ("005.png", "change"),
    ]
    assert agent.emitted == 3


def test_interval_s_paces_the_frames(tmp_path: Path, world: dict[str, Path]) -> None:
    cfg = make_cfg(tmp_path, world, interval=0.3)  # longer than the loop's 0.25 s turn
    reads: list[float] = []

    class Timed(Camera):
        def read(self, timeout_s: Optional[float] = 1.0) -> Optional[Frame]:
            frame = super().read(timeout_s)
            if frame is not None:
                reads.append(time.monotonic())
            return frame

    agent = Agent(cfg, camera=Timed(cfg.camera))
    assert run_agent(agent) == 0
    assert agent.frames == 4
    gaps = np.diff(reads)
    assert gaps.min() >= 0.29, gaps  # the loop takes one frame per interval, not as fast as it can


# ---- errors are counted, never swallowed ------------------------------------------------------------


class FailingDetector(Detector):
    """A real detector whose ``fail_on``-th inference (1-based) raises, like a runtime error."""

    fail_on: frozenset[int] = frozenset()

    def detect_prepared(self, prep: Prepared, keep_raw: bool = False) -> DetectOutput:
        self.calls = getattr(self, "calls", 0) + 1
        if self.calls in self.fail_on:
            raise ModelError("inference failed: test")
        return super().detect_prepared(prep, keep_raw)


def test_a_model_error_drops_the_frame_and_is_counted(
    tmp_path: Path, world: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    cfg = make_cfg(tmp_path, world)
    base = ModelSet.from_config(cfg)
    det = FailingDetector(base.detector.model, base.detector.params)
    det.fail_on = frozenset({2, 3})
    bodies: list[dict[str, Any]] = []
    agent = Agent(cfg, models=ModelSet(det), on_result=bodies.append)
    with caplog.at_level(logging.ERROR, logger="edge_agent.app.agent.agent"):
        assert run_agent(agent) == 0
    assert [b["image"] for b in bodies] == ["000.png", "003.png"]
    assert (agent.frames, agent.emitted, agent.errors) == (2, 2, 2)  # each error counted
    assert agent.last_status is not None and agent.last_status["errors"] == 2
    # the first failed frame is named by its number; the next is counted, not logged (a model
    # failing on every frame logged a line per frame: LogThrottle, the 250th says how many)
    first = bodies[0]["frame"]
    assert [r.getMessage() for r in caplog.records] == [f"frame {first + 1}: inference failed: test"]


class UnpreparableDetector(Detector):
    """A real detector that cannot prepare its second frame (in the prefetch thread or in the loop)."""

    def prepare(self, image_bgr: Any, ring: Any = None) -> Prepared:
        self.calls = getattr(self, "calls", 0) + 1
        if self.calls in (2, 3):  # the prefetch thread's try, then the loop's own
            raise ModelError("cannot prepare: test")
        return super().prepare(image_bgr, ring)


def test_a_frame_the_prefetch_thread_cannot_prepare_is_counted_and_the_loop_goes_on(
    tmp_path: Path, world: dict[str, Path]
) -> None:
    cfg = make_cfg(tmp_path, world)
    base = ModelSet.from_config(cfg)
    agent = Agent(cfg, models=ModelSet(UnpreparableDetector(base.detector.model, base.detector.params)))
    assert run_agent(agent) == 0  # free-running: prepared in the prefetch thread; a stall fails here
    assert (agent.frames, agent.emitted, agent.errors) == (3, 3, 1)


def test_a_full_queue_is_a_rejection_and_a_disk_error_an_error(
    tmp_path: Path, world: dict[str, Path], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = make_cfg(tmp_path, world)
    real_put = Outbox.put
    calls: list[int] = []

    def put(self: Outbox, topic: str, payload: dict[str, Any], tally: Any = None) -> str:
        calls.append(1)
        if len(calls) == 2:
            raise QueueFullError("queue full: test")
        if len(calls) == 3:
            raise QueueError("disk error: test")
        return real_put(self, topic, payload, tally)

    monkeypatch.setattr(Outbox, "put", put)
    bodies: list[dict[str, Any]] = []
    agent = Agent(cfg, on_result=bodies.append)
    with caplog.at_level(logging.ERROR, logger="edge_agent.app.agent.agent"):
        assert run_agent(agent) == 0
    assert [b["image"] for b in bodies] == ["000.png", "003.png"]  # on_result: queued ones only
    assert (agent.frames, agent.emitted, agent.rejected, agent.errors) == (4, 2, 1, 1)
    assert agent.last_status is not None and agent.last_status["errors"] == 1
    lines = [r.getMessage() for r in caplog.records if "not queued" in r.getMessage()]
    # the third result (frame 002.png) is the one lost to the disk error, named by its frame number
    assert lines == [f"result of frame {bodies[0]['frame'] + 2} not queued: disk error: test"]


def test_queue_step_names_a_non_result_message_by_its_event(
    tmp_path: Path, world: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    agent = Agent(make_cfg(tmp_path, world))

    class Broken:
        def put(self, topic: str, body: dict[str, Any], tally: Any = None) -> str:
            raise QueueError("disk error: test")

    class Full:
        def put(self, topic: str, body: dict[str, Any], tally: Any = None) -> str:
            raise QueueFullError("queue full: test")

    with caplog.at_level(logging.ERROR, logger="edge_agent.app.agent.agent"):
        assert agent._queue(Broken(), "t", {"event": "ended"}) is False  # type: ignore[arg-type]
        assert agent._queue(Broken(), "t", {}) is False  # type: ignore[arg-type]
        assert agent._queue(Full(), "t", {"event": "ended"}) is False  # type: ignore[arg-type]
        assert agent._queue(Full(), "t", {"event": "ended"}) is False  # type: ignore[arg-type]
    assert [r.getMessage() for r in caplog.records] == [
        "ended message not queued: disk error: test",
        "counts message not queued: disk error: test",  # the objects mode's counts carry no event
    ]  # a rejection is logged by the outbox, once per streak
    assert (agent.errors, agent.rejected, agent.emitted) == (2, 2, 0)  # each rejection counted
    # a disk error on every message: the first line, then every 250th with the count, never one each
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="edge_agent.app.agent.agent"):
        for _ in range(999):
            agent._queue(Broken(), "t", {"event": "ended"})  # type: ignore[arg-type]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4 and agent.errors == 2 + 999  # 1000 ended in all: lines at 250 .. 1000
    assert lines[-1].startswith("ended message not queued: disk error: test (1000 refused for ")


# ---- health figures ---------------------------------------------------------------------------------


class Scored:
    """A model set stand-in for the health step: only ``detector.last_max_score`` is read."""

    def __init__(self, score: Optional[float]) -> None:
        self.detector = type("D", (), {})()
        if score is not None:
            self.detector.last_max_score = score


def test_the_no_score_warning_starts_at_exactly_the_streak_and_a_score_ends_it(
    tmp_path: Path, world: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    agent = Agent(make_cfg(tmp_path, world))
    with caplog.at_level(logging.WARNING, logger="edge_agent.app.agent.agent"):
        for _ in range(NO_SCORE_FRAMES - 1):
            agent.pipelines[0].account(Scored(NO_SCORE_LEVEL), {"total": 1.0})  # type: ignore[arg-type]
        assert agent.warnings() == [] and not caplog.records
        agent.pipelines[0].account(Scored(0.0), {"total": 1.0})  # type: ignore[arg-type]
        assert len(agent.warnings()) == 1 and f"for {NO_SCORE_FRAMES} consecutive" in agent.warnings()[0]
        agent.pipelines[0].account(Scored(0.0), {"total": 1.0})  # type: ignore[arg-type]
    # logged once, when the streak reaches the limit, with the warning of the status
    assert [r.getMessage() for r in caplog.records] == [
        f"detector: no score above {NO_SCORE_LEVEL:g} for {NO_SCORE_FRAMES} consecutive frames (a model that "
        "cannot score, or a camera seeing nothing); check with `edge-agent infer`"
    ]
    assert f"for {NO_SCORE_FRAMES + 1} consecutive" in agent.warnings()[0]
    agent.pipelines[0].account(Scored(NO_SCORE_LEVEL * 1.01), {"total": 1.0})  # type: ignore[arg-type]
    assert agent.warnings() == []
    agent.pipelines[0].account(Scored(None), {"total": 1.0})  # type: ignore[arg-type]  # no score known: no streak
    assert agent.pipelines[0].no_score_streak == 0
    assert agent.frames == NO_SCORE_FRAMES + 3


def test_a_detector_that_cannot_score_is_warned_about_in_the_status(tmp_path: Path) -> None:
    cam = tmp_path / "cam"
    cam.mkdir()
    cv2.imwrite(str(cam / "black.png"), np.zeros((64, 64, 3), np.uint8))
    cfg = parse_config(
        config_text(tmp_path / "state", cam, make_bright_detector(tmp_path / "d.onnx"), loop=True)
    )
    agent = Agent(cfg, max_frames=NO_SCORE_FRAMES)
    assert run_agent(agent) == 0
    assert agent.last_status is not None
    assert len(agent.last_status["warnings"]) == 1 and "no score" in agent.last_status["warnings"][0]


def test_fps_and_median_latency(tmp_path: Path, world: dict[str, Path]) -> None:
    agent = Agent(make_cfg(tmp_path, world))
    assert agent.fps() == 0.0 and agent.latency_ms() == {}
    agent.pipelines[0].frame_times.extend([10.0])
    assert agent.fps() == 0.0
    agent.pipelines[0].frame_times.extend([10.5, 11.0])
    assert agent.fps() == 2.0
    agent.pipelines[0].frame_times.clear()
    agent.pipelines[0].frame_times.extend([5.0, 5.0])
    assert agent.fps() == 0.0
    agent.pipelines[0].latency.extend(
        [{"total": 3.0, "pre": 7.0}, {"total": 1.234}, {"total": 2.0}, {"total": 9.0}]
    )
    # the upper median of each key over the window; a key missing from a frame counts as 0
    assert agent.latency_ms() == {"total": 3.0, "pre": 0.0}
    agent.pipelines[0].latency.clear()
    agent.pipelines[0].latency.extend([{"total": 1.234}, {"total": 1.234}, {"total": 5.0}])
    assert agent.latency_ms() == {"total": 1.23}


def test_the_status_before_a_run_is_empty_and_fresh_after(tmp_path: Path, world: dict[str, Path]) -> None:
    agent = Agent(make_cfg(tmp_path, world), max_frames=2)
    assert agent.current_status() == {} and agent.current_status(fresh=True) == {}
    assert run_agent(agent) == 0
    last = agent.current_status()
    assert last == agent.last_status and last is not agent.last_status  # a copy
    assert last["state"] == "stopped" and last["frames"] == 2


# ---- systemd --------------------------------------------------------------------------------------


def notify_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "n.sock"))
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "n.sock"))
    return sock


def datagrams(sock: socket.socket) -> list[str]:
    got: list[str] = []
    while True:
        try:
            got.extend(sock.recv(65536, socket.MSG_DONTWAIT).decode().split("\n"))
        except BlockingIOError:
            return got


def test_watchdog_pings_follow_their_interval_and_status_lines_carry_the_figures(
    tmp_path: Path, world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    sock = notify_socket(tmp_path, monkeypatch)
    monkeypatch.setenv("WATCHDOG_USEC", str(600_000_000))  # a ping every 300 s: one, at the start
    cfg = make_cfg(tmp_path, world, loop=True)
    try:
        t0 = time.monotonic()
        assert run_agent(Agent(cfg, max_frames=20)) == 0
        took = time.monotonic() - t0
        got = datagrams(sock)
    finally:
        sock.close()
    assert got[0] == "STATUS=loading and warming up the models"
    assert any(g.startswith("STATUS=models warm: det.onnx@") for g in got)
    assert got.count("WATCHDOG=1") == 1
    # the status timer: at READY, at the loop's first turn, at the end (+ one per 2 s)
    ticks = len([g for g in got if g.startswith("STATUS=") and " fps, " in g])
    assert 3 <= ticks <= 3 + int(took / 2.0), (ticks, took)
    assert got.index("READY=1") < got.index("WATCHDOG=1") < got.index("STOPPING=1")
    status = [g for g in got if g.startswith("STATUS=") and " fps, queue " in g]
    assert status[0].startswith("STATUS=0.0 fps, queue 0, broker disabled, camera ")
    assert status[-1].startswith("STATUS=") and ", queue 20, broker disabled, camera stopped" in status[-1]


def test_sigterm_and_sigint_stop_the_loop_and_sighup_asks_for_a_reload(
    tmp_path: Path, world: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="edge_agent.app.agent.agent")
    agent = Agent(make_cfg(tmp_path, world))
    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        agent.install_signal_handlers()
        os.kill(os.getpid(), signal.SIGHUP)
        wait_until(agent.reload_requested.is_set, 5, "the reload request")
        assert not agent.stop_event.is_set()
        for sig in (signal.SIGINT, signal.SIGTERM):
            agent.stop_event.clear()
            os.kill(os.getpid(), sig)
            wait_until(agent.stop_event.is_set, 5, f"stop on {sig.name}")
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    said = [r.getMessage() for r in caplog.records]
    assert "signal SIGINT: stopping" in said and "signal SIGTERM: stopping" in said


# ---- SIGHUP reload ----------------------------------------------------------------------------------


def reload_and_wait(agent: Agent, loop: threading.Thread) -> None:
    """SIGHUP's request, then wait until the loop has acted on it: the loop clears the request,
    reloads, then infers a frame, so two more frames after the request mean the reload is done
    (whatever its outcome: a failure shows at once, not at a timeout; so does a loop that died)."""
    n = agent.frames
    agent.reload_requested.set()
    wait_until(
        lambda: not loop.is_alive() or (not agent.reload_requested.is_set() and agent.frames >= n + 2),
        30,
        "the reload",
    )
    assert loop.is_alive(), "the loop ended during the reload"


def test_reload_swaps_models_and_keys_and_a_failed_one_keeps_the_running_models(
    tmp_path: Path, world: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="edge_agent.app.agent.agent")
    path = tmp_path / "config.toml"
    state = tmp_path / "state"
    path.write_text(config_text(state, world["camera"], world["det"], loop=True))
    from edge_agent.app.cli.configfile import load_config

    bodies: list[dict[str, Any]] = []
    agent = Agent(load_config(path), path, on_result=bodies.append)
    with running(agent) as t:
        wait_until(lambda: agent.frames >= 2, 30, "frames")
        first = agent.models
        # a truncated model: counted, logged, the running models stay
        bad = tmp_path / "broken.onnx"
        bad.write_bytes(world["det"].read_bytes()[:100])
        path.write_text(config_text(state, world["camera"], bad, loop=True))
        reload_and_wait(agent, t)
        assert agent.reload_failures == 1
        assert agent.models is first and agent.reloads == 0 and agent.cfg.detector.model == str(world["det"])
        # a config without a detector model: refused the same way
        no_model = config_text(state, world["camera"], world["det"], loop=True)
        path.write_text(no_model.replace(f'model = "{world["det"]}"\n', ""))
        reload_and_wait(agent, t)
        assert agent.reload_failures == 2
        assert agent.models is first and agent.reloads == 0
        # a new detector (96 px input), a higher threshold and a classifier: all applied
        det2 = make_bright_detector(tmp_path / "det2.onnx", imgsz=96)
        path.write_text(config_text(state, world["camera"], det2, cls=world["cls"], loop=True, conf=0.7))
        reload_and_wait(agent, t)
        assert agent.reloads == 1
        assert agent.models is not first and agent.models is not None
        assert agent.cfg.detector.model == str(det2) and agent.cfg.detector.conf_threshold == 0.7
        assert agent.cfg.classifier is not None and agent.models.classifier is not None
        assert agent.pipelines[0].camera is not None and agent.pipelines[0].camera.decode_target == (96, 96)
        n = len(bodies)
        wait_until(lambda: len(bodies) >= n + 3, 30, "results after the reload")
    # frames the prefetch thread prepared for the old model's input are prepared again, not failed
    assert agent.errors == 0
    sha2 = hashlib.sha256(det2.read_bytes()).hexdigest()
    assert bodies[0]["models"]["detector"]["sha256"] != sha2
    assert bodies[-1]["models"]["detector"]["sha256"] == sha2 and "classifier" in bodies[-1]["models"]
    st = agent.last_status
    assert st is not None and (st["reloads"], st["reload_failures"]) == (1, 2)
    said = [r.getMessage() for r in caplog.records]
    failed = [m for m in said if m.startswith("reload failed, keeping the running models: ")]
    assert len(failed) == 2 and "broken.onnx" in failed[0] and str(path) in failed[1]
    assert any(m.startswith("reloaded: detector det2.onnx@") for m in said)


def test_reload_without_a_config_file_rebuilds_from_the_running_config(
    tmp_path: Path, world: dict[str, Path]
) -> None:
    agent = Agent(make_cfg(tmp_path, world))
    agent._reload()
    first = agent.models
    agent._reload()
    assert agent.reloads == 2 and agent.reload_failures == 0
    assert first is not None and agent.models is not None and agent.models is not first


# ---- the optional parts: Prometheus, MQTT ----------------------------------------------------------


def test_prometheus_serves_the_live_figures(tmp_path: Path, world: dict[str, Path]) -> None:
    port = free_port()
    cfg = make_cfg(tmp_path, world, extra=f"prometheus_port = {port}")
    pages: list[str] = []

    def scrape(body: dict[str, Any]) -> None:
        if body["image"] == "002.png":
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                pages.append(r.read().decode())

    agent = Agent(cfg, on_result=scrape)
    assert run_agent(agent) == 0
    assert agent.errors == 0
    assert len(pages) == 1 and 'device="cam-9"' in pages[0]
    # fresh at the scrape: 3 frames inferred (the third result is being queued), 2 queued
    frames = [ln for ln in pages[0].splitlines() if ln.startswith("edge_agent_frames_total{")]
    assert len(frames) == 1 and float(frames[0].split()[-1]) == 3, frames
    with pytest.raises(OSError):  # stopped with the agent
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)


def test_a_prometheus_port_in_use_is_an_error_and_inference_goes_on(
    tmp_path: Path, world: dict[str, Path]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        cfg = make_cfg(tmp_path, world, extra=f"prometheus_port = {taken.getsockname()[1]}")
        agent = Agent(cfg)
        assert run_agent(agent) == 0
    assert agent.errors == 1 and agent.frames == agent.emitted == 4


def test_an_mqtt_part_that_cannot_start_is_an_error_and_results_queue_locally(
    tmp_path: Path, world: dict[str, Path]
) -> None:
    text = config_text(tmp_path / "state", world["camera"], world["det"]).replace(
        "[mqtt]\nenabled = false\n",
        f'[mqtt]\nhost = "127.0.0.1"\nport = 1\nusername = "u"\npassword_file = "{tmp_path / "nope"}"\n',
    )
    cfg = parse_config(text)
    assert cfg.mqtt.enabled
    agent = Agent(cfg)
    agent.errors = 5  # counted on top of what is there
    assert run_agent(agent) == 0
    assert agent.errors == 6 and agent.emitted == 4 and len(queued(cfg)) == 4
    assert agent.last_status is not None and agent.last_status["broker"]["state"] == "disabled"


def test_an_unreachable_broker_leaves_the_results_queued_and_stops_the_sync(
    tmp_path: Path, world: dict[str, Path]
) -> None:
    text = config_text(tmp_path / "state", world["camera"], world["det"]).replace(
        "[mqtt]\nenabled = false\n",
        f'[mqtt]\nhost = "127.0.0.1"\nport = {free_port()}\nreconnect_min_s = 0.1\nreconnect_max_s = 0.2\n',
    )
    cfg = parse_config(text)
    agent = Agent(cfg)
    assert run_agent(agent) == 0
    assert agent.errors == 0 and agent.emitted == 4 and len(queued(cfg)) == 4
    st = agent.last_status
    assert (
        st is not None and st["broker"]["state"] == "disconnected" and st["broker"]["connect_attempts"] >= 1
    )


def test_the_status_between_ticks_is_built_fresh_with_the_running_parts(
    tmp_path: Path, world: dict[str, Path]
) -> None:
    cfg = make_cfg(tmp_path, world)
    agent = Agent(cfg)

    class Sync:
        def stats(self) -> dict[str, Any]:
            return {"state": "connected", "acked": 9}

    box = Outbox.from_config(cfg.queue)
    try:
        agent.pipelines[0].camera = Camera(cfg.camera)
        agent._parts = Parts(box, Sync(), None)  # type: ignore[arg-type]
        # before the first tick (MQTT's connect message): built now, "running"
        first = agent.current_status()
        assert first["state"] == "running" and first["broker"] == {"state": "connected", "acked": 9}
        agent.last_status = {**first, "state": "draining", "frames": 77}
        assert agent.current_status()["frames"] == 77  # between ticks: the last one
        fresh = agent.current_status(fresh=True)
        assert fresh["state"] == "draining" and fresh["frames"] == 0  # built now, the same state
        # the pipeline's camera is in both (a fresh snapshot is what a Prometheus scrape serves)
        assert first["camera"] == fresh["camera"] == agent.pipelines[0].camera.stats()
        assert fresh["camera"] is not None and "state" in fresh["camera"]
    finally:
        box.close()


def test_with_a_broker_every_result_is_delivered_before_run_returns(
    tmp_path: Path, world: dict[str, Path], broker: Broker
) -> None:
    text = config_text(tmp_path / "state", world["camera"], world["det"]).replace(
        "[mqtt]\nenabled = false\n",
        f'[mqtt]\nhost = "127.0.0.1"\nport = {broker.port}\nreconnect_min_s = 0.1\nreconnect_max_s = 0.2\n',
    )
    cfg = parse_config(text)
    col = Collector(broker.port, "site7/#", client_id="inproc-collector")
    try:
        # the first result waits for the sync to connect: the rest is left to the final drain
        first: list[int] = []

        def on_result(_body: dict[str, Any]) -> None:
            if not first:
                first.append(1)
                wait_until(lambda: agent.current_status(fresh=True)["broker"]["state"] == "connected", 30)

        agent = Agent(cfg, on_result=on_result)
        assert run_agent(agent, 60) == 0  # the connect wait (30 s) and the drain (10 s) inside
        # drained before run() returned: nothing left queued
        assert queued(cfg) == []
        col.wait_until(
            lambda c: len(c.on_topic("/detections")) == 4, 30, 'len(c.on_topic("/detections")) == 4'
        )
        assert sorted(m["image"] for m in col.on_topic("/detections")) == [f"{i:03d}.png" for i in range(4)]
        statuses = col.on_topic("/status")
        assert statuses and statuses[0]["device_id"] == "cam-9"
    finally:
        col.close()
    st = agent.last_status
    assert st is not None and st["broker"]["acked"] >= 4 and agent.errors == 0


def test_trigger_only_takes_a_frame_per_trigger_not_a_stream(tmp_path: Path, world: dict[str, Path]) -> None:
    pty = PtySensor(tmp_path / "tty")  # temp=21.5 every 0.1 s: "temp > 20" becomes true once
    cfg = make_cfg(
        tmp_path,
        world,
        loop=True,
        extra=f'[sensor]\nport = "{pty.link}"\nprotocol = "kv"\ntrigger = "temp > 20"\n',
    )
    bodies: list[dict[str, Any]] = []
    agent = Agent(cfg, on_result=bodies.append)
    try:
        with running(agent, 5):  # a stop is honoured while the loop waits for a trigger
            wait_until(lambda: agent.frames >= 1, 30, "the triggered frame")
            wait_until(
                lambda: agent.current_status(fresh=True)["sensor"]["readings"] >= 6, 30, "more readings"
            )
    finally:
        pty.close()
    assert agent.frames == 1 and len(bodies) == 1
    assert bodies[0]["sensor"] == {"temp": 21.5, "hum": 40}


def test_sensor_readings_are_queued_through_the_agent_when_published(
    tmp_path: Path, world: dict[str, Path]
) -> None:
    pty = PtySensor(tmp_path / "tty")
    cfg = make_cfg(
        tmp_path, world, loop=True, extra=f'[sensor]\nport = "{pty.link}"\nprotocol = "kv"\npublish = true\n'
    )
    agent = Agent(cfg)
    try:
        with running(agent):
            wait_until(
                lambda: agent.frames > 0 and agent.current_status(fresh=True)["sensor"]["readings"] >= 2, 30
            )
    finally:
        pty.close()
    sensors = [b for topic, b in queued(cfg) if topic == "site7/cam-9/sensors"]
    assert sensors and sensors[0]["reading"] == {"temp": 21.5, "hum": 40}

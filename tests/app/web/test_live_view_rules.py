"""The live view without a running agent (issue 36: in process, so mutation testing reaches it):
frames handed to its observer as the loop would, a moved clock instead of waiting. What is kept
only while someone watches, which tracks are shown, the cached JPEG and when it is encoded again,
and boxes in full-frame pixels landing on a frame decoded smaller."""

from __future__ import annotations

import threading
import types
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from support.clip import REPO, SAMPLES
from support.world import agent_toml

from edge_agent.app.agent.agent import Agent
from edge_agent.app.agent.output_steps import ObjectsOutput
from edge_agent.app.web import live_view
from edge_agent.app.web.live_view import WATCH_S, Latest, LiveView, annotate, counts_copy
from edge_agent.app.workbench.annotate import draw_detections
from edge_agent.app.workbench.annotate_tracks import draw_tracks
from edge_agent.core.camera.source_spec import Frame
from edge_agent.core.config.schema import parse_config
from edge_agent.core.objects.tracker import Track
from edge_agent.core.vision.results import Detection

LINE = "points = [[0.5, 0.0], [0.5, 1.0]]"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(live_view, "time", types.SimpleNamespace(monotonic=c.monotonic))
    monkeypatch.setattr(live_view, "FIRST_FRAME_WAIT_S", 0.01)
    return c


def agent(tmp: Path, mode: str) -> Agent:
    extra = f'[[lines]]\nname = "door"\n{LINE}\n' if mode == "objects" else ""
    text = agent_toml(
        tmp / "state", SAMPLES, REPO / "models" / "demo-detector.onnx", extra=extra, output={"mode": mode}
    )
    (tmp / "a.toml").write_text(text)
    return Agent(parse_config(text), tmp / "a.toml")


def frame(seq: int, value: int = 80, full: tuple[int, int] | None = None) -> Frame:
    return Frame(np.full((60, 80, 3), value, np.uint8), 0.0, 0.0, seq, "test", full_size=full)


def decoded(jpeg: bytes) -> Any:
    return cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)


def test_a_frame_is_kept_only_while_someone_watches(tmp_path: Path, clock: Clock) -> None:
    a = agent(tmp_path, "every_frame")
    live = LiveView(2.0)
    on_frame = live.observer(a.pipelines[0])
    cam = a.pipelines[0].id
    on_frame(None, frame(1), [])  # type: ignore[arg-type]
    assert live.latest == {} and live.kept == 0  # nobody asked yet
    assert live.jpeg(cam) is None  # the first request: no frame within the wait
    assert live.watched_until[cam] == clock.now + WATCH_S
    clock.now += WATCH_S  # the last moment still watched
    on_frame(None, frame(2), [])  # type: ignore[arg-type]
    assert live.kept == 1 and live.latest[cam].frame.seq == 2 and live.latest[cam].tracks is None
    clock.now += 0.001  # past it: the frame is let go, nothing new kept
    on_frame(None, frame(3), [])  # type: ignore[arg-type]
    assert live.latest == {} and live.kept == 1


def test_the_jpeg_is_cached_within_the_rate_and_encoded_again_for_a_new_frame(
    tmp_path: Path, clock: Clock
) -> None:
    a = agent(tmp_path, "every_frame")
    live = LiveView(2.0)  # at most one encoding per 0.5 s
    assert live.min_interval_s == 0.5
    on_frame = live.observer(a.pipelines[0])
    cam = a.pipelines[0].id
    live.watched_until[cam] = clock.now + 60
    on_frame(None, frame(1, 40), [])  # type: ignore[arg-type]
    seq, first = live.jpeg(cam) or (0, b"")
    assert seq == 1 and live.encoded == 1
    assert abs(int(decoded(first)[30, 40, 0]) - 40) <= 2  # the frame itself
    on_frame(None, frame(2, 200), [])  # type: ignore[arg-type]
    clock.now += 0.499
    assert live.jpeg(cam) == (1, first) and live.encoded == 1  # a faster poll: the cached picture
    clock.now += 0.001
    seq, second = live.jpeg(cam) or (0, b"")
    assert seq == 2 and live.encoded == 2 and abs(int(decoded(second)[30, 40, 0]) - 200) <= 2
    clock.now += 5
    assert live.jpeg(cam) == (2, second) and live.encoded == 2  # no new frame: not encoded again


class Looked(dict):  # type: ignore[type-arg]
    """``LiveView.latest`` that tells when the request first looked for the camera's frame."""

    def __init__(self) -> None:
        super().__init__()
        self.looked = threading.Event()

    def get(self, key: Any, default: Any = None) -> Any:
        self.looked.set()
        return super().get(key, default)


def test_a_first_request_waits_for_the_frame_the_loop_hands_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = agent(tmp_path, "every_frame")
    live = LiveView(2.0)
    looked = Looked()
    live.latest = looked
    on_frame = live.observer(a.pipelines[0])
    cam = a.pipelines[0].id
    monkeypatch.setattr(live_view, "FIRST_FRAME_WAIT_S", 30.0)

    def feed() -> None:  # the loop's next frame, once the request found none
        looked.looked.wait(30)
        on_frame(None, frame(5), [])

    feeder = threading.Thread(target=feed)
    feeder.start()
    got = live.jpeg(cam)
    feeder.join()
    assert got is not None and got[0] == 5 and live.kept == 1


def _quality(jpeg: bytes) -> int:
    """The first luminance quantizer of the JPEG's DQT: 6 at libjpeg quality 80, 2 at 95."""
    at = jpeg.index(b"\xff\xdb")
    return jpeg[at + 5]


def test_every_frame_kept_is_counted_and_encoded_at_quality_80(tmp_path: Path, clock: Clock) -> None:
    a = agent(tmp_path, "every_frame")
    live = LiveView(2.0)
    on_frame = live.observer(a.pipelines[0])
    cam = a.pipelines[0].id
    live.watched_until[cam] = clock.now + 60
    for seq in (1, 2, 3):
        on_frame(None, frame(seq), [])  # type: ignore[arg-type]
    assert live.kept == 3 and live.latest[cam].frame.seq == 3
    _, jpeg = live.jpeg(cam) or (0, b"")
    assert _quality(jpeg) == 6


def test_objects_mode_keeps_the_confirmed_tracks_labelled_and_the_counts(
    tmp_path: Path, clock: Clock
) -> None:
    a = agent(tmp_path, "objects")
    pipe = a.pipelines[0]
    step = pipe.output
    assert isinstance(step, ObjectsOutput)
    tracker = step.objects.tracker
    box = (10.0, 10.0, 30.0, 40.0)
    tracker.tracks = [
        Track(1, box, 0.9, 0, 0, 1, confirmed=True),
        Track(2, box, 0.8, 5, 0, 1, confirmed=True),  # a class no detection of this frame has
        Track(3, box, 0.7, 0, 0, 1),  # not confirmed yet
        Track(4, box, 0.6, 0, 0, 1, confirmed=True, lost=True),
    ]
    events = step.objects.events
    events.totals["lines"]["door"]["in"] = 4
    live = LiveView(2.0)
    live.watched_until[pipe.id] = clock.now + 1
    dets = [Detection("person", 0, 0.9, box)]
    live.observer(pipe)(None, frame(1), dets)  # type: ignore[arg-type]
    kept = live.latest[pipe.id]
    assert kept.tracks == [(1, "person", box, 0.9), (2, "5", box, 0.8)]
    assert [ln.name for ln in kept.lines] == ["door"] and list(kept.zones) == []
    assert kept.totals == {"lines": {"door": {"in": 4, "out": 0}}, "zones": {}}
    assert kept.occupancy == {}
    events.totals["lines"]["door"]["in"] = 5  # the loop counts on: the kept copy does not change
    assert kept.totals["lines"]["door"]["in"] == 4


def test_boxes_in_full_frame_pixels_land_on_a_frame_decoded_smaller() -> None:
    f = frame(1, 0, full=(160, 240))  # the camera sent 160x240, decoded 80x60: x / 2, y / 4
    det = Detection("person", 0, 0.9, (40.0, 80.0, 120.0, 200.0))
    got = annotate(Latest(f, [det]))
    want = draw_detections(f.image, [Detection("person", 0, 0.9, (20.0, 20.0, 60.0, 50.0))])
    assert np.array_equal(got, want) and got.any()
    rows = [(7, "person", (40.0, 80.0, 120.0, 200.0), 0.9)]
    totals: dict[str, Any] = {"lines": {}, "zones": {}}
    tracked = annotate(Latest(f, [det], tracks=rows, totals=totals))  # type: ignore[arg-type]
    assert np.array_equal(
        tracked, draw_tracks(f.image, [(7, "person", (20.0, 20.0, 60.0, 50.0), 0.9)], (), (), totals, {})
    )
    assert not np.array_equal(tracked, got)  # a track's box, not a detection's
    # tracks without counts (not objects mode) draw the detections
    assert np.array_equal(annotate(Latest(f, [det], tracks=rows)), want)


def test_counts_copy_is_a_copy_two_levels_down() -> None:
    totals = {"lines": {"door": {"in": 1, "out": 2}}, "zones": {"pen": {"entered": 3}}}
    got = counts_copy(totals)
    assert got == totals
    got["lines"]["door"]["in"] = 9
    got["zones"]["new"] = {}
    assert totals == {"lines": {"door": {"in": 1, "out": 2}}, "zones": {"pen": {"entered": 3}}}

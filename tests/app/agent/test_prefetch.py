"""The prefetch thread in process: frames handed over in order, each prepared with the models current
when it was read, gated frames never prepared, the read of a live camera timed from the loop's
measured busy time (EMA) minus the preparation time, and a clean close."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Optional

import numpy as np
import pytest

from edge_agent.app.agent import prefetch as prefetch_mod
from edge_agent.app.agent.prefetch import EMA, MARGIN_S, Prefetch
from edge_agent.core.camera.source_spec import Frame
from edge_agent.errors import ModelError


class FakeCamera:
    """Hands out ``n`` frames, then nothing (a short wait, like a camera between frames)."""

    def __init__(self, n: int, drop_stale: bool = False) -> None:
        self.frames = [
            Frame(image=np.full((4, 4, 3), i, np.uint8), ts_mono=float(i), ts_wall=0.0, seq=i, source="f")
            for i in range(n)
        ]
        self.drop_stale = drop_stale
        self.finished = False  # a live camera: it may send again

    def read(self, timeout_s: float = 0.25) -> Optional[Frame]:
        if self.frames:
            return self.frames.pop(0)
        time.sleep(0.01)
        return None


class FakeDetector:
    def __init__(self, name: str, clock: Optional[Clock] = None, cost: float = 0.0) -> None:
        self.name = name
        self.clock = clock
        self.cost = cost
        self.prepared: list[int] = []
        self.fail: set[int] = set()
        self.error: Exception = ModelError("cannot prepare: test")

    def prepare(self, image: Any, ring: Any = None) -> tuple[str, int]:
        if int(image[0, 0, 0]) in self.fail:
            raise self.error
        if self.clock is not None:
            self.clock.now += self.cost
            self.cost *= 2
        self.prepared.append(int(image[0, 0, 0]))
        return (self.name, int(image[0, 0, 0]))


class FakeModels:
    def __init__(self, name: str, **kw: Any) -> None:
        self.detector = FakeDetector(name, **kw)


class Clock:
    """prefetch's ``time`` module: a monotonic clock the test (or a fake prepare) moves."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now


def take(p: Prefetch, n: int) -> list[Any]:
    got = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        item = p.get(0.25)
        if item is not None:
            got.append(item)
    return got


def test_frames_are_handed_over_in_order_prepared_with_the_current_models() -> None:
    cam = FakeCamera(4)
    current = {"ms": FakeModels("a")}
    p = Prefetch(cam, lambda: current["ms"])  # type: ignore[arg-type,return-value]
    try:
        first = take(p, 1)
        current["ms"] = FakeModels("b")  # a reload: what is read from now on uses the new models
        rest = take(p, 3)
    finally:
        p.close()
    assert not p.thread.is_alive()
    items = first + rest
    assert [f.seq for f, _, _ in items] == [0, 1, 2, 3]
    for f, prepared, ms in items:
        assert prepared == (ms.detector.name, f.seq)
    assert items[0][2].detector.name == "a" and items[-1][2].detector.name == "b"
    assert p.get(0.05) is None


def test_frames_the_gate_refuses_are_never_prepared() -> None:
    ms = FakeModels("a")
    seen: list[int] = []

    def gate(f: Frame) -> bool:
        seen.append(f.seq)
        return f.seq % 2 == 0

    p = Prefetch(FakeCamera(6), lambda: ms, gate)  # type: ignore[arg-type,return-value]
    try:
        items = take(p, 3)
        wait = time.monotonic() + 5
        while len(seen) < 6 and time.monotonic() < wait:
            time.sleep(0.01)
    finally:
        p.close()
    assert [f.seq for f, _, _ in items] == [0, 2, 4]
    assert seen == [0, 1, 2, 3, 4, 5] and ms.detector.prepared == [0, 2, 4]


@pytest.mark.parametrize(
    ("drop_stale", "paced", "want"),
    [(True, None, True), (False, None, False), (True, False, False), (False, True, True)],
)
def test_a_live_camera_is_paced_unless_told(drop_stale: bool, paced: Optional[bool], want: bool) -> None:
    p = Prefetch(FakeCamera(0, drop_stale), lambda: FakeModels("a"), paced=paced)  # type: ignore[arg-type,return-value]
    p.close()
    assert p.paced is want


def test_the_preparation_time_is_an_ema(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(prefetch_mod, "time", clock)
    ms = FakeModels("a", clock=clock, cost=0.1)  # 0.1 s, then 0.2 s
    p = Prefetch(FakeCamera(2), lambda: ms, paced=False)  # type: ignore[arg-type,return-value]
    try:
        assert p.get(30) is not None
        assert p._prep_s == pytest.approx(0.1)
        assert p.get(30) is not None
        assert p._prep_s == pytest.approx((1 - EMA) * 0.1 + EMA * 0.2)
    finally:
        monkeypatch.undo()
        p.close()


def bare(clock: Clock, paced: bool = True) -> Prefetch:
    """A Prefetch without its thread, to drive ``get`` and ``_wait_for_turn`` by hand."""
    p = Prefetch.__new__(Prefetch)
    p.paced = paced
    p.q = queue.Queue(maxsize=1)
    p._taken = threading.Event()
    p.ended = threading.Event()
    p._taken_at = None
    p._busy_s = None
    p._prep_s = None
    waits: list[float] = []
    p.stop = type("S", (), {"wait": lambda _self, d: waits.append(d), "is_set": lambda _self: False})()  # type: ignore[assignment]
    p.waits = waits  # type: ignore[attr-defined]
    return p


def test_get_measures_the_loops_busy_time_between_hand_offs(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock(10.0)
    monkeypatch.setattr(prefetch_mod, "time", clock)
    p = bare(clock)
    p.q.put("one")  # type: ignore[arg-type]
    assert p.get(0) == "one"
    assert p._busy_s is None and p._taken_at == 10.0 and p._taken.is_set()  # nothing to measure yet
    clock.now = 10.5
    p.q.put("two")  # type: ignore[arg-type]
    assert p.get(0) == "two"
    assert p._busy_s == pytest.approx(0.5) and p._taken_at == 10.5
    clock.now = 10.8
    p.q.put("three")  # type: ignore[arg-type]
    p.get(0)
    assert p._busy_s == pytest.approx((1 - EMA) * 0.5 + EMA * 0.3)
    busy = p._busy_s
    clock.now = 11.0
    assert p.get(0) is None  # the loop idles: the next busy time starts at the next hand-off
    assert p._taken_at is None and p._busy_s == pytest.approx((1 - EMA) * busy + EMA * 0.2)


def test_a_live_read_waits_until_one_preparation_before_the_loop_is_free(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock(100.0)
    monkeypatch.setattr(prefetch_mod, "time", clock)
    p = bare(clock)
    p._wait_for_turn()  # nothing measured yet: read at once
    p._taken_at, p._busy_s = 100.0, 0.5
    p._wait_for_turn()  # no preparation time yet: the margin only
    p._prep_s = 0.1
    p._wait_for_turn()
    assert p.waits == pytest.approx([0.5 - MARGIN_S, 0.5 - 0.15 - MARGIN_S])  # type: ignore[attr-defined]
    clock.now = 100.5  # already late: no wait
    p._wait_for_turn()
    p.paced = False
    clock.now = 100.0
    p._wait_for_turn()  # a file or folder: never waits
    assert len(p.waits) == 2  # type: ignore[attr-defined]


@pytest.mark.parametrize("error", [ModelError("ours"), ValueError("numpy's"), MemoryError()])
def test_a_frame_that_cannot_be_prepared_is_handed_over_unprepared(error: Exception) -> None:
    """Any error, not only the project's: a dead prefetch thread would stall the loop while it
    still pings the watchdog (never restarted)."""
    ms = FakeModels("a")
    ms.detector.fail = {1}
    ms.detector.error = error
    p = Prefetch(FakeCamera(3), lambda: ms)  # type: ignore[arg-type,return-value]
    try:
        items = take(p, 3)
    finally:
        p.close()
    # the loop prepares frame 1 again itself and counts the error; the thread lives on
    assert [(f.seq, prep) for f, prep, _ in items] == [(0, ("a", 0)), (1, None), (2, ("a", 2))]


class GappyCamera(FakeCamera):
    """A live camera between frames: nothing, a frame, nothing, a frame; records read timeouts."""

    def __init__(self) -> None:
        super().__init__(2)
        self.timeouts: list[Optional[float]] = []
        self.turn = 0

    def read(self, timeout_s: Optional[float] = 0.25) -> Optional[Frame]:  # type: ignore[override]
        self.timeouts.append(timeout_s)
        self.turn += 1
        if self.turn % 2 == 1:  # nothing this time
            time.sleep(0.01)
            return None
        return super().read()


def test_the_thread_survives_empty_reads_and_reads_with_a_short_timeout() -> None:
    cam = GappyCamera()
    p = Prefetch(cam, lambda: FakeModels("a"))  # type: ignore[arg-type,return-value]
    try:
        # a daemon named for thread dumps; a 1-deep hand-off: at most one prepared frame waits
        assert p.thread.name == "prefetch" and p.thread.daemon and p.q.maxsize == 1
        items = take(p, 2)
    finally:
        p.close()
    assert [f.seq for f, _, _ in items] == [0, 1]
    # short reads: close() is noticed within one read
    assert cam.timeouts and all(t is not None and 0 < t <= 0.25 for t in cam.timeouts)


def test_a_paced_prefetch_hands_over_every_frame() -> None:
    p = Prefetch(FakeCamera(4, drop_stale=True), lambda: FakeModels("a"))  # type: ignore[arg-type,return-value]
    try:
        assert p.paced
        items = take(p, 4)
    finally:
        p.close()
    assert [f.seq for f, _, _ in items] == [0, 1, 2, 3]


@pytest.mark.parametrize("taken", [0, 1])
def test_close_ends_the_thread_while_a_frame_waits_untaken(taken: int) -> None:
    p = Prefetch(FakeCamera(3), lambda: FakeModels("a"))  # type: ignore[arg-type,return-value]
    take(p, taken)
    deadline = time.monotonic() + 10
    while p.q.empty() and time.monotonic() < deadline:  # the next frame is prepared and waits
        time.sleep(0.01)
    time.sleep(0.1)  # the thread now blocks in its hand-off (a full queue or the wait for a take)
    p.close()
    assert not p.thread.is_alive()


def test_a_finished_camera_ends_the_thread_after_the_last_frame_is_handed_over() -> None:
    """A file/folder source: the frame still being prepared when the camera finishes is handed
    over first; then ``ended`` is set and ``get`` answers None at once, not after its timeout."""
    cam = FakeCamera(2)
    models = FakeModels("a")
    real_prepare = models.detector.prepare

    def prepare(image: Any, ring: Any = None) -> tuple[str, int]:
        time.sleep(0.3)  # preparing takes longer than the loop's 0.25 s wait
        return real_prepare(image)

    models.detector.prepare = prepare  # type: ignore[method-assign]

    real_read = cam.read

    def read(timeout_s: float = 0.25) -> Optional[Frame]:
        frame = real_read(timeout_s)
        cam.finished = not cam.frames  # finished as soon as the last frame was read
        return frame

    cam.read = read  # type: ignore[method-assign]
    p = Prefetch(cam, lambda: models)  # type: ignore[arg-type,return-value]
    try:
        got = [p.get(0.25) for _ in range(8)]
        items = [g for g in got if g is not None]
        assert [f.seq for f, _, _ in items] == [0, 1]
        assert p.ended.is_set()
        p.thread.join(2)
        assert not p.thread.is_alive()
        t0 = time.monotonic()
        assert p.get(5.0) is None and time.monotonic() - t0 < 1.0
    finally:
        p.close()


def test_a_gate_that_raises_lets_the_frame_through_and_the_thread_lives_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Raised in the thread, the error ended it: the loop then waited for frames forever."""
    ms = FakeModels("a")

    def gate(f: Frame) -> bool:
        if f.seq in (1, 2):
            raise ValueError("bad frame for the background model")
        return f.seq != 3

    p = Prefetch(FakeCamera(5), lambda: ms, gate)  # type: ignore[arg-type,return-value]
    try:
        items = take(p, 4)
    finally:
        p.close()
    assert [f.seq for f, _, _ in items] == [0, 1, 2, 4]
    assert p.gate_errors == 2
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == [
        "motion gate failed on frame 1 (1 so far), frame inferred: bad frame for the background model"
    ]

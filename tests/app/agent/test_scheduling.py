"""The several-camera step on its own, with fake pipelines: when frames run as one batch, what each
frame's timings say, what reaches each camera, and when the loop waits (the agent tests run it
for real: test_agent_cameras.py; these pin what they cannot see, found by mutation testing)."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any, Optional

import pytest

from edge_agent.app.agent import scheduling
from edge_agent.app.agent.scheduling import ManyCameras, batch_size
from edge_agent.errors import ModelError


def models(dynamic: bool = True, providers: tuple[str, ...] = ("CPUExecutionProvider",)) -> Any:
    model = SimpleNamespace(dynamic_batch=dynamic, info=SimpleNamespace(providers=list(providers)))
    return SimpleNamespace(
        detector=SimpleNamespace(model=model), classifier="the-classifier", classify_ids=[3], crop_padding=0.2
    )


@pytest.mark.parametrize(
    ("max_batch", "cameras", "dynamic", "providers", "expected"),
    [
        (4, 4, True, ("CPUExecutionProvider",), 4),
        (2, 2, True, ("CPUExecutionProvider",), 2),  # the smallest batch that is a batch
        (4, 2, True, ("CPUExecutionProvider",), 2),  # never wider than the cameras
        (2, 8, True, ("CPUExecutionProvider",), 2),  # never wider than max_batch
        (1, 4, True, ("CPUExecutionProvider",), 1),  # max_batch = 1 turns it off
        (0, 4, True, ("CPUExecutionProvider",), 1),
        (4, 1, True, ("CPUExecutionProvider",), 1),  # one camera: nothing to batch with
        (4, 4, False, ("CPUExecutionProvider",), 1),  # a fixed batch axis of 1
        (4, 4, True, ("TensorrtExecutionProvider", "CUDAExecutionProvider"), 1),  # an engine per size
    ],
)
def test_batch_size(
    max_batch: int, cameras: int, dynamic: bool, providers: tuple[str, ...], expected: int
) -> None:
    assert batch_size(models(dynamic, providers), max_batch, cameras) == expected


class Pipe:
    """A camera pipeline's face towards the scheduler: one frame ready (or none), what it was given."""

    def __init__(self, name: str, item: Optional[tuple[Any, Any, Any]], weight: int = 1) -> None:
        self.view = SimpleNamespace(weight=weight, id=name)
        self.item = item
        self.finished: list[tuple[Any, ...]] = []
        self.failed: list[tuple[Any, ...]] = []
        self.processed: list[tuple[Any, ...]] = []

    @property
    def ready(self) -> bool:
        return self.item is not None

    def next(self, timeout_s: float) -> Optional[tuple[Any, Any, Any]]:
        item, self.item = self.item, None
        return item

    def ended(self) -> bool:
        return False

    def process(self, *item: Any) -> None:
        self.processed.append(item)

    def finish(self, *args: Any) -> None:
        self.finished.append(args)

    def infer_failed(self, *args: Any) -> None:
        self.failed.append(args)


def frame(ts: float) -> Any:
    return SimpleNamespace(ts_mono=ts)


def test_a_batch_splits_its_run_time_and_keeps_each_frames_age_and_classifier(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    m = models()
    a = Pipe("a", (frame(99.5), SimpleNamespace(pre_ms=3.0), m))
    b = Pipe("b", (frame(99.9), None, m))  # not prepared ahead: no preprocessing time of its own
    calls: list[tuple[Any, ...]] = []

    def infer_frames(*args: Any) -> list[tuple[Any, dict[str, float], float]]:
        calls.append(args)
        return [(["det-a"], {"infer": 1.0}, 0.7), (["det-b"], {"infer": 1.0}, 0.4)]

    clock = iter([100.0, 100.2])  # the run took 200 ms for two frames
    monkeypatch.setattr(scheduling, "infer_frames", infer_frames)
    monkeypatch.setattr(scheduling.time, "monotonic", lambda: next(clock))
    many = ManyCameras([a, b], threading.Event(), max_batch=4)
    many._run_batch([(a, a.item), (b, b.item)])
    (args,) = calls
    assert args[2:] == (m.detector, "the-classifier", [3], 0.2)  # the cascade as configured
    (fa,), (fb,) = a.finished, b.finished
    assert fa[1] == ["det-a"] and fa[3] is m and fa[4] == 0.7
    assert fb[1] == ["det-b"] and fb[4] == 0.4
    assert fa[2]["total"] == pytest.approx(100.0 + 3.0) and fb[2]["total"] == pytest.approx(100.0)
    assert fa[2]["age"] == pytest.approx(500.0) and fb[2]["age"] == pytest.approx(100.0)
    assert fa[2]["batch"] == fb[2]["batch"] == 2.0
    assert (many.batches, many.batched_frames) == (1, 2)


def test_a_failed_batch_is_each_cameras_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    m = models()
    a, b = Pipe("a", (frame(1.0), None, m)), Pipe("b", (frame(1.0), None, m))
    boom = ModelError("the run failed")

    def infer_frames(*args: Any) -> Any:
        raise boom

    monkeypatch.setattr(scheduling, "infer_frames", infer_frames)
    many = ManyCameras([a, b], threading.Event(), max_batch=4)
    many._run_batch([(a, a.item), (b, b.item)])
    assert [f[1] for f in a.failed + b.failed] == [boom, boom] and not a.finished
    assert many.batches == 0


class Wake(threading.Event):
    def __init__(self) -> None:
        super().__init__()
        self.waits = 0

    def wait(self, timeout: Optional[float] = None) -> bool:
        self.waits += 1
        return False


def test_the_step_waits_only_when_no_camera_had_a_frame() -> None:
    idle = Wake()
    many = ManyCameras([Pipe("a", None), Pipe("b", None)], idle, max_batch=1)
    assert many.step(None) is None and idle.waits == 1
    # a frame was there but dropped as stale: the next one is due at once, no sleep
    dropped = Wake()

    class Stale(Pipe):
        def next(self, timeout_s: float) -> None:
            self.item = None
            return None

    many = ManyCameras([Stale("a", (frame(0.0), None, None)), Pipe("b", None)], dropped, max_batch=1)
    assert many.step(None) is None and dropped.waits == 0


def test_the_step_batches_the_ready_prepared_frames_of_the_current_models_and_runs_the_rest_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    m, old = models(), models()
    prep = SimpleNamespace(pre_ms=0.0)
    pipes = [
        Pipe("a", (frame(1.0), prep, m)),
        Pipe("b", (frame(1.0), prep, m)),
        Pipe("c", (frame(1.0), None, m)),  # not prepared: run on its own
        Pipe("d", (frame(1.0), prep, old)),  # prepared for the models before a reload: on its own
        Pipe("e", None),  # nothing ready
    ]
    ran: list[list[str]] = []

    def infer_frames(frames: Any, prepared: Any, *rest: Any) -> list[tuple[Any, dict[str, float], float]]:
        ran.append([f.name for f in frames])
        return [([], {}, 0.0) for _ in frames]

    for p in pipes:
        if p.item is not None:
            p.item[0].name = p.view.id
    monkeypatch.setattr(scheduling, "infer_frames", infer_frames)
    many = ManyCameras(pipes, threading.Event(), max_batch=8)  # type: ignore[arg-type]
    assert many.step(m) is True
    assert [sorted(r) for r in ran] == [["a", "b"]] and (many.batches, many.batched_frames) == (1, 2)
    assert [p.view.id for p in pipes if p.finished] == ["a", "b"]
    assert sorted(p.view.id for p in pipes if p.processed) == ["c", "d"]  # each on its own, not lost
    assert all(not p.ready for p in pipes)  # every ready camera had its turn in this one step
    # a second batch adds to the counts
    pipes[0].item, pipes[1].item = (frame(2.0), prep, m), (frame(2.0), prep, m)
    pipes[0].item[0].name, pipes[1].item[0].name = "a", "b"
    assert many.step(m) is True and (many.batches, many.batched_frames) == (2, 4)


def test_the_step_takes_one_frame_without_models_or_within_a_limit() -> None:
    m = models()
    pipes = [Pipe(n, (frame(1.0), SimpleNamespace(pre_ms=0.0), m)) for n in "abc"]
    many = ManyCameras(pipes, threading.Event(), max_batch=8)  # type: ignore[arg-type]
    assert many.step(None) is True  # models not loaded yet: one frame, processed as it is
    assert sum(len(p.processed) for p in pipes) == 1 and sum(p.ready for p in pipes) == 2
    assert many.step(m, limit=1) is True  # --max-frames with one frame left: that one only
    assert sum(len(p.processed) for p in pipes) == 2 and sum(p.ready for p in pipes) == 1


def test_a_dropped_frame_gives_the_turn_to_the_next_camera_in_the_same_step() -> None:
    class Stale(Pipe):
        def next(self, timeout_s: float) -> None:
            assert timeout_s == 0  # never waits for a frame: the step takes what is ready
            self.item = None
            return None

    m = models()
    stale, live = Stale("a", (frame(0.0), None, m), weight=9), Pipe("b", (frame(1.0), None, m))
    many = ManyCameras([stale, live], threading.Event(), max_batch=1)  # type: ignore[list-item]
    assert many.step(m) is True and len(live.processed) == 1


def test_the_step_ends_when_every_camera_has_ended() -> None:
    class Ended(Pipe):
        def ended(self) -> bool:
            return True

    wake = Wake()
    many = ManyCameras([Ended("a", None), Ended("b", None)], wake, max_batch=1)  # type: ignore[list-item]
    assert many.step(None) is False and wake.waits == 0

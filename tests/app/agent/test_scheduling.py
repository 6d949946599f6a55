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

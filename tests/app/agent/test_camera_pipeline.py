"""The camera pipeline in process: its frame observers and its output step, chosen once.

``Agent(cfg).run()`` on the 4-scene folder camera (scene n holds n red squares, so frame n has n
detections) with the test-built models, as tests/app/agent/test_agent_inproc.py.
"""

from __future__ import annotations

import logging
import typing
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support.world import agent_toml, make_world, run_agent

from edge_agent.adapters.camera.capture import Camera
from edge_agent.app.agent import output_steps
from edge_agent.app.agent.agent import Agent
from edge_agent.app.agent.camera_pipeline import CameraPipeline
from edge_agent.app.agent.output_steps import (
    OUTPUT_STEPS,
    EventStep,
    EveryFrameStep,
    ObjectsOutput,
    OutputStep,
)
from edge_agent.core.camera.source_spec import Frame
from edge_agent.core.config.cameras import camera_views
from edge_agent.core.config.outputs import OutputConfig
from edge_agent.core.config.schema import Config, parse_config
from edge_agent.core.vision.results import Detection


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_world(tmp_path_factory.mktemp("world"))


def make_cfg(tmp_path: Path, world: dict[str, Path], mode: str = "every_frame") -> Config:
    state = tmp_path / "state"
    return parse_config(
        agent_toml(
            state,
            world["camera"],
            world["det"],
            device={"id": "cam-9"},
            detector={"conf_threshold": 0.6},
            queue={"path": str(state / "q.db")},
            output=f'mode = "{mode}"\n',
        )
    )


Seen = list[tuple[Camera, Frame, list[Detection]]]


# ---- frame observers ----------------------------------------------------------------------------


def test_an_observer_sees_each_processed_frame_with_its_camera_and_detections(
    tmp_path: Path, world: dict[str, Path]
) -> None:
    bodies: list[dict[str, Any]] = []
    agent = Agent(make_cfg(tmp_path, world), on_result=bodies.append)
    seen: Seen = []
    agent.add_frame_observer(lambda camera, frame, dets: seen.append((camera, frame, list(dets))))
    assert run_agent(agent) == 0
    pipe = agent.pipelines[0]
    assert agent.frames == 4 and len(seen) == 4  # once per processed frame
    assert all(camera is pipe.camera for camera, _, _ in seen)
    assert [f.seq for _, f, _ in seen] == [b["frame"] for b in bodies]  # the frame of each result
    assert [f.name for _, f, _ in seen] == ["000.png", "001.png", "002.png", "003.png"]
    # the detections of the frame, after inference: the same as in its result
    assert [len(d) for _, _, d in seen] == [0, 1, 2, 3]
    assert [[d.to_json() for d in dets] for _, _, dets in seen] == [b["detections"] for b in bodies]
    assert pipe.observer_errors == 0


def test_an_observer_that_raises_is_logged_once_counted_and_the_loop_goes_on(
    tmp_path: Path, world: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    agent = Agent(make_cfg(tmp_path, world))
    calls: list[int] = []

    def broken(camera: Camera, frame: Frame, dets: list[Detection]) -> None:
        calls.append(frame.seq)
        raise RuntimeError("a view's bug")

    after: list[int] = []
    agent.add_frame_observer(broken)
    agent.add_frame_observer(lambda camera, frame, dets: after.append(frame.seq))
    with caplog.at_level(logging.ERROR, logger="edge_agent.app.agent.agent"):
        assert run_agent(agent) == 0
    # every frame inferred and queued, each failure counted, the next observer still called
    assert (agent.frames, agent.emitted, agent.errors) == (4, 4, 0)
    assert len(calls) == 4 and after == calls
    assert agent.pipelines[0].observer_errors == 4
    failed = [r for r in caplog.records if "frame observer" in r.getMessage()]
    assert len(failed) == 1 and f"on frame {calls[0]}" in failed[0].getMessage()
    assert failed[0].exc_info is not None and "a view's bug" in str(failed[0].exc_info[1])


def test_without_an_observer_the_notify_step_is_never_entered(
    tmp_path: Path, world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    entered: list[int] = []
    monkeypatch.setattr(CameraPipeline, "_notify", lambda self, frame, dets: entered.append(frame.seq))
    agent = Agent(make_cfg(tmp_path, world))
    assert run_agent(agent) == 0
    assert agent.frames == 4 and entered == []  # the empty list is the whole cost
    assert agent.pipelines[0].observers == []


def test_an_observer_added_to_the_agent_is_on_every_pipeline(tmp_path: Path, world: dict[str, Path]) -> None:
    agent = Agent(make_cfg(tmp_path, world))

    def fn(camera: Camera, frame: Frame, dets: list[Detection]) -> None:
        pass

    agent.add_frame_observer(fn)
    assert len(agent.pipelines) == 1 and agent.pipelines[0].observers == [fn]


# ---- output steps -------------------------------------------------------------------------------


def test_every_config_mode_has_one_step_and_the_pipeline_takes_it(
    tmp_path: Path, world: dict[str, Path]
) -> None:
    modes = typing.get_args(typing.get_type_hints(OutputConfig)["mode"])
    assert sorted(OUTPUT_STEPS) == sorted(modes)
    want = {"every_frame": EveryFrameStep, "event": EventStep, "objects": ObjectsOutput}
    assert want == OUTPUT_STEPS
    for mode, cls in want.items():
        agent = Agent(make_cfg(tmp_path / mode, world, mode))
        assert type(agent.pipelines[0].output) is cls and cls.name == mode
        assert (agent.objects is not None) is (mode == "objects")
    assert (
        EveryFrameStep(make_cfg(tmp_path, world), Agent(make_cfg(tmp_path, world))).policy.mode
        == "every_frame"
    )
    assert EventStep(make_cfg(tmp_path, world), Agent(make_cfg(tmp_path, world))).policy.mode == "event"


def test_the_output_step_is_chosen_once_at_start_not_per_frame(
    tmp_path: Path, world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[OutputStep] = []
    frames: list[int] = []
    stopped: list[int] = []

    class Counting(EveryFrameStep):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            built.append(self)

        def on_frame(self, frame: Frame, *args: Any) -> None:
            frames.append(frame.seq)
            super().on_frame(frame, *args)

        def stop(self) -> None:
            stopped.append(len(frames))
            super().stop()

    monkeypatch.setitem(output_steps.OUTPUT_STEPS, "every_frame", Counting)
    bodies: list[dict[str, Any]] = []
    cfg = make_cfg(tmp_path, world)
    agent = Agent(cfg, on_result=bodies.append)
    assert len(built) == 1 and agent.pipelines[0].output is built[0]
    cfg.output.mode = "objects"  # read at start only: the running step stays the chosen one
    assert run_agent(agent) == 0
    assert len(built) == 1 and len(frames) == 4 and stopped == [4]  # stopped once, after the frames
    assert [b["frame"] for b in bodies] == frames and {b["event"] for b in bodies} == {"every_frame"}


# ---- the config reaches the step; a reload reaches the frame in flight --------------------------


def test_the_event_step_keeps_the_configured_heartbeat(tmp_path: Path, world: dict[str, Path]) -> None:
    """``[output] heartbeat_s`` reaches the event step's policy: the same empty picture is sent
    again after 5 s, not after the default 60 s (a step built without it passed every other test)."""
    cfg = parse_config(
        agent_toml(tmp_path / "s", world["camera"], world["det"], output='mode = "event"\nheartbeat_s = 5\n')
    )
    step = EventStep(cfg, typing.cast(Any, None))
    assert [step.policy.decide(t, []).emit for t in (0.0, 1.0, 4.9)] == [True, False, False]
    late = step.policy.decide(5.1, [])
    assert late.emit and late.reason == "heartbeat"


def test_a_frame_prepared_before_a_reload_is_inferred_on_the_new_models_unprepared(
    tmp_path: Path, world: dict[str, Path]
) -> None:
    """The prefetch thread prepared the frame for the old model's input size; after a SIGHUP swap
    it is inferred on the new set, from the raw frame."""
    import threading
    from types import SimpleNamespace

    old, new, prepared = object(), object(), object()
    owner = SimpleNamespace(
        models=new, updates=None, sensor=None, stop_event=threading.Event(), put=None, count_error=None
    )
    pipe = CameraPipeline(camera_views(make_cfg(tmp_path, world))[0], typing.cast(Any, owner))
    calls: list[tuple[object, object]] = []
    pipe.infer = lambda frame, p, models: calls.append((p, models))  # type: ignore[method-assign,assignment,return-value]
    frame = typing.cast(Frame, SimpleNamespace(seq=1))
    pipe.process(frame, typing.cast(Any, prepared), typing.cast(Any, old))
    pipe.process(frame, typing.cast(Any, prepared), typing.cast(Any, new))
    assert calls == [(None, new), (prepared, new)]


def bare_pipe(tmp_path: Path, world: dict[str, Path]) -> CameraPipeline:
    owner = SimpleNamespace(
        models=None, updates=None, sensor=None, stop_event=None, put=None, count_error=None
    )
    return CameraPipeline(camera_views(make_cfg(tmp_path, world))[0], typing.cast(Any, owner))


def test_a_stale_frame_is_judged_on_its_age_and_its_cameras_interval_and_counted(
    tmp_path: Path, world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from edge_agent.app.agent import camera_pipeline

    pipe = bare_pipe(tmp_path, world)
    pipe.camera = typing.cast(Any, SimpleNamespace(fps_in=10.0, drop_stale=True, has_frame=True))
    monkeypatch.setattr(camera_pipeline.time, "monotonic", lambda: 1000.0)
    old = typing.cast(Frame, SimpleNamespace(ts_mono=1000.0 - 0.25))  # 2.5 intervals of 100 ms
    fresh = typing.cast(Frame, SimpleNamespace(ts_mono=1000.0 - 0.15))  # 1.5 intervals
    assert pipe._stale(old) and pipe.dropped_stale == 1
    assert not pipe._stale(old) and pipe.dropped_stale == 1  # never twice running
    assert not pipe._stale(fresh) and pipe.dropped_stale == 1
    assert pipe._stale(old) and pipe.dropped_stale == 2
    # no rate known yet (0 fps) or a single camera (drop_stale off): never dropped
    pipe.camera = typing.cast(Any, SimpleNamespace(fps_in=0.0, drop_stale=True, has_frame=True))
    assert not pipe._stale(old) and not pipe._stale(old)
    pipe.camera = typing.cast(Any, SimpleNamespace(fps_in=0.5, drop_stale=True, has_frame=True))
    assert not pipe._stale(old)  # 0.5 fps: an interval of 2 s, the frame is young
    very_old = typing.cast(Frame, SimpleNamespace(ts_mono=1000.0 - 5.0))
    assert pipe._stale(very_old) and pipe.dropped_stale == 3  # a slow camera's frames go stale too
    pipe._dropped_last = False
    pipe.camera = typing.cast(Any, SimpleNamespace(fps_in=10.0, drop_stale=False, has_frame=True))
    assert not pipe._stale(old) and pipe.dropped_stale == 3


def test_a_frames_timings_say_its_wall_time_with_preparation_and_its_age(
    tmp_path: Path, world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from edge_agent.app.agent import camera_pipeline

    pipe = bare_pipe(tmp_path, world)
    clock = iter([100.0, 100.04, 200.0, 200.01])
    monkeypatch.setattr(camera_pipeline.time, "monotonic", lambda: next(clock))
    seen: list[tuple[Any, ...]] = []

    def infer_frame(*args: Any) -> tuple[list[Detection], dict[str, float]]:
        seen.append(args)
        return [], {"infer": 30.0}

    monkeypatch.setattr(camera_pipeline, "infer_frame", infer_frame)
    models = typing.cast(
        Any, SimpleNamespace(detector="det", classifier="cls", classify_ids=[2], crop_padding=0.1)
    )
    prepared = typing.cast(Any, SimpleNamespace(pre_ms=5.0))
    frame = typing.cast(Frame, SimpleNamespace(ts_mono=99.9, seq=1))
    got = pipe.infer(frame, prepared, models)
    assert got is not None and seen[0][1:] == ("det", "cls", [2], 0.1, prepared)
    assert got[1]["total"] == pytest.approx(40.0 + 5.0) and got[1]["age"] == pytest.approx(100.0)
    got = pipe.infer(frame, None, models)  # prepared on the loop: no preparation time ahead
    assert got is not None and got[1]["total"] == pytest.approx(10.0) and seen[1][-1] is None


def test_the_cameras_figures_are_rounded_as_the_status_schema_shows_them(
    tmp_path: Path, world: dict[str, Path]
) -> None:
    pipe = bare_pipe(tmp_path, world)
    pipe.camera = typing.cast(
        Any,
        SimpleNamespace(
            stats=lambda: {
                "source": "s",
                "kind": "folder",
                "state": "streaming",
                "fps": 9.0,
                "reconnects": 0,
                "last_error": None,
            }
        ),
    )
    pipe.frame_times.extend([0.0, 0.3, 0.6, 0.9])  # 3 intervals in 0.9 s: 3.333.. fps
    pipe.motion_checked, pipe.motion_passed = 3, 2
    pipe.latency.extend([{"age": 12.34}, {"age": 50.06}, {"infer": 1.0}])
    s = pipe.stats()
    assert s["fps"] == 3.33 and s["motion_ratio"] == 0.667 and s["skipped_motion"] == 1
    assert s["frame_age_ms"] == 50.1  # the median of the ages (the upper one of two)

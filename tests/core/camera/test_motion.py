"""Motion gating: the detector on real frames (still scene with sensor noise, a real object walking
through, masks), the gate's heartbeat and after-motion frames, the [motion] config, and the loop
running inference only when the gate says so."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from support.clip import real_photo, static_clip, walk
from support.models import make_bright_detector
from support.world import offline_config, run_agent

from edge_agent.app.agent.agent import Agent
from edge_agent.core.camera.motion import MotionDetector, MotionGate, MotionParams, mask_image
from edge_agent.core.config.schema import parse_config
from edge_agent.errors import ConfigError


def motion_flags(frames: list[np.ndarray], params: MotionParams | None = None) -> list[bool]:
    det = MotionDetector(params)
    return [det.update(f).motion for f in frames]


def test_a_still_scene_with_sensor_noise_is_not_motion() -> None:
    frames = static_clip(real_photo("sample_0.jpg"), 60, sigma=4.0)
    assert not any(motion_flags(frames))


def test_a_real_object_walking_through_is_motion_and_the_empty_scene_after_is_not() -> None:
    bg = real_photo("sample_0.jpg")
    obj = real_photo("sample_3.jpg")[60:180, 100:160]  # a 60x120 crop of another real photo
    frames, _ = walk(bg, obj, y=60, enter=10, stay=10, leave=10)
    frames += static_clip(bg, 60, seed=5)
    flags = motion_flags(frames)
    assert not any(flags[:10])  # empty
    assert all(flags[11:20])  # walking in
    assert all(flags[30:39])  # walking out
    # gone: once the background has forgotten the object's ghost, the scene is quiet again
    assert not any(flags[-20:])


def test_a_mask_hides_motion_inside_it() -> None:
    bg = real_photo("sample_0.jpg")
    obj = real_photo("sample_3.jpg")[60:180, 100:160]
    frames, _ = walk(bg, obj, y=60, enter=10, stay=10, leave=10)
    # the object's whole path (y 60..180 of 240) masked
    mask = ((0.0, 0.2), (1.0, 0.2), (1.0, 0.8), (0.0, 0.8))
    assert not any(motion_flags(frames, MotionParams(masks=(mask,))))
    keep = mask_image((mask,), (160, 120))
    assert keep is not None and keep[60, 80] == 0 and keep[5, 80] == 255


def test_min_area_ignores_a_small_change() -> None:
    bg = real_photo("sample_0.jpg")
    frames = static_clip(bg, 20)
    speck = frames[10].copy()
    cv2.circle(speck, (160, 120), 3, (255, 255, 255), -1)  # ~0.04 % of the frame
    frames[10] = speck
    assert not any(motion_flags(frames))
    assert any(motion_flags(frames, MotionParams(min_area=0.0001)))


def test_lights_switching_on_is_one_new_scene_not_a_minute_of_motion() -> None:
    bg = real_photo("sample_0.jpg")
    dark = (bg * 0.4).astype(np.uint8)  # night; then the light comes on
    frames = static_clip(dark, 10, seed=3) + static_clip(bg, 30, seed=4)
    flags = motion_flags(frames)
    assert flags[10] and not any(flags[11:])  # the switch frame runs the detector, then quiet
    # without relearning, the background needs ~1/alpha frames to catch up: motion all along
    assert all(motion_flags(frames, MotionParams(lightning_threshold=1.0))[10:30])


def test_gate_runs_on_motion_after_motion_and_on_the_heartbeat() -> None:
    g = MotionGate(max_idle_s=10.0, frames_after=2)
    seq = [(0.0, False), (1.0, False), (2.0, True), (3.0, False), (4.0, False), (5.0, False), (14.0, False)]
    got = [g.decide(t, m).reason for t, m in seq]
    assert got == ["first", None, "motion", "after_motion", "after_motion", None, "heartbeat"]
    assert g.skipped == 2 and g.runs == 5


def test_motion_config_is_validated() -> None:
    cfg = parse_config("[motion]\nenabled = true\nmasks = [[[0, 0], [0.5, 0], [0.5, 0.5]]]\n")
    assert cfg.motion.enabled and cfg.motion.masks[0][1] == (0.5, 0.0)
    with pytest.raises(ConfigError, match=r"motion\.masks.*at least 3"):
        parse_config("[motion]\nmasks = [[[0, 0], [1, 1]]]\n")
    with pytest.raises(ConfigError, match=r"motion\.masks.*outside 0\.\.1"):
        parse_config("[motion]\nmasks = [[[0, 0], [2, 0], [0, 1]]]\n")
    with pytest.raises(ConfigError, match=r"motion\.threshold"):
        parse_config("[motion]\nthreshold = 0\n")


@pytest.mark.parametrize(
    ("enabled", "interval"),
    [(True, 0.0), (True, 0.005), (False, 0.0)],
    ids=["gated-prefetch", "gated-paced", "ungated"],
)
def test_the_loop_infers_only_when_the_gate_opens(tmp_path: Path, enabled: bool, interval: float) -> None:
    """Free-running (the gate sits in the prefetch thread) and paced by interval_s (in the loop)."""
    bg = real_photo("sample_0.jpg")
    obj = real_photo("sample_3.jpg")[60:180, 100:160]
    still = static_clip(bg, 20, seed=1)
    walking, _ = walk(bg, obj, y=60, enter=5, stay=5, leave=5, seed=2)
    cam = tmp_path / "cam"
    cam.mkdir()
    for i, f in enumerate(still + walking):
        cv2.imwrite(str(cam / f"{i:04d}.png"), f)
    cfg = offline_config(
        tmp_path,
        cam,
        make_bright_detector(tmp_path / "det.onnx"),
        camera=f"interval_s = {interval}",
        extra=f"[motion]\nenabled = {str(enabled).lower()}\nframes_after = 2",
    )
    seen: list[str] = []
    agent = Agent(cfg, on_result=lambda body: seen.append(body["image"]))
    assert run_agent(agent) == 0
    total = len(still) + len(walking)
    if not enabled:
        assert agent.frames == total
        return
    assert agent.motion is not None
    inferred = [int(Path(name).stem) for name in seen]
    # the still part: only the first frame (no heartbeat within 60 s); the walk: inferred
    assert [i for i in inferred if i < 20] == [0]
    assert {i for i in inferred if i >= 20} >= set(range(25, 40))  # in view from frame 25 to 39
    assert agent.motion.stats()["skipped"] == total - agent.frames

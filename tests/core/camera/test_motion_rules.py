"""Motion rules pinned one by one (each of these was once broken without a test failing): every
``[motion]`` key reaches the detector and the gate, the pixel threshold, the largest-region rule
(not the sum of all changed pixels), the lightning relearn, ``frames_after``, the boundaries of
``min_area`` and the gate's arguments. Synthetic flat frames at the analysis width (160 px) so the
expected areas can be computed."""

from __future__ import annotations

import numpy as np
import pytest

from edge_agent.core.camera.motion import (
    MotionDetector,
    MotionFilter,
    MotionGate,
    MotionParams,
    MotionResult,
    mask_image,
)
from edge_agent.core.config.schema import MotionConfig, parse_config

W, H = 160, 120


def flat(level: int, shape: tuple[int, int] = (H, W)) -> np.ndarray:
    return np.full((*shape, 3), level, np.uint8)


def with_squares(level: int, squares: list[tuple[int, int, int]], value: int) -> np.ndarray:
    """A flat frame with ``value``-grey squares (x, y, side) on it."""
    img = flat(level)
    for x, y, s in squares:
        img[y : y + s, x : x + s] = value
    return img


def run(frames: list[np.ndarray], params: MotionParams | None = None) -> list[MotionResult]:
    det = MotionDetector(params)
    return [det.update(f) for f in frames]


def test_every_motion_key_reaches_the_detector_and_the_gate() -> None:
    cfg = parse_config(
        "[motion]\nenabled = true\nthreshold = 41\nmin_area = 0.013\nwidth = 96\nalpha = 0.3\n"
        "lightning_threshold = 0.55\nmax_idle_s = 7.5\nframes_after = 3\n"
        "masks = [[[0, 0], [0.5, 0], [0.5, 0.5]]]\n"
    )
    f = MotionFilter(cfg.motion)
    assert f.detector.p == MotionParams(
        threshold=41,
        min_area=0.013,
        width=96,
        alpha=0.3,
        lightning_threshold=0.55,
        masks=(((0.0, 0.0), (0.5, 0.0), (0.5, 0.5)),),
    )
    assert (f.gate.max_idle_s, f.gate.frames_after) == (7.5, 3)


def test_the_gate_defaults_are_the_config_defaults() -> None:
    cfg, gate, params = MotionConfig(), MotionGate(), MotionParams()
    assert (gate.max_idle_s, gate.frames_after) == (cfg.max_idle_s, cfg.frames_after)
    assert (params.threshold, params.min_area, params.width, params.alpha, params.lightning_threshold) == (
        cfg.threshold,
        cfg.min_area,
        cfg.width,
        cfg.alpha,
        cfg.lightning_threshold,
    )


@pytest.mark.parametrize(("threshold", "motion"), [(25, True), (39, True), (41, False), (60, False)])
def test_threshold_is_the_grey_level_change_that_counts(threshold: int, motion: bool) -> None:
    """A 40-level change over a large square: motion below a threshold of 40, none above it."""
    frames = [flat(100), with_squares(100, [(40, 30, 40)], 140)]
    cfg = parse_config(f"[motion]\nenabled = true\nthreshold = {threshold}\nframes_after = 0\n").motion
    f = MotionFilter(cfg)
    assert [f.check(img, float(i)) for i, img in enumerate(frames)] == [True, motion]
    assert run(frames, MotionParams(threshold=threshold))[1].motion is motion


def test_the_largest_region_counts_not_the_sum_of_all_changed_pixels() -> None:
    """Two equal squares far apart: ``area`` is one square, ``changed`` both; a min_area between
    the two is no motion, one below a single square is."""
    two = [flat(100), with_squares(100, [(10, 10, 12), (120, 80, 12)], 250)]
    one = [flat(100), with_squares(100, [(10, 10, 12)], 250)]
    r2, r1 = run(two, MotionParams(min_area=1e-6))[1], run(one, MotionParams(min_area=1e-6))[1]
    assert 0.0 < r2.area < 0.05
    assert r2.area == pytest.approx(r1.area)  # the largest region, not the sum
    assert r2.changed == pytest.approx(2 * r1.changed)
    assert r1.changed == pytest.approx(r1.area)  # one region: all changed pixels are in it
    between = (r1.area + r2.changed) / 2
    assert run(two, MotionParams(min_area=between))[1].motion is False
    assert run(two, MotionParams(min_area=r1.area / 2))[1].motion is True
    # one big and one small region: the big one decides, whatever the small one's size
    mixed = run(
        [flat(100), with_squares(100, [(10, 10, 30), (130, 90, 6)], 250)], MotionParams(min_area=1e-6)
    )
    big = run([flat(100), with_squares(100, [(10, 10, 30)], 250)], MotionParams(min_area=1e-6))
    assert mixed[1].area == pytest.approx(big[1].area)


def test_min_area_is_inclusive_at_its_boundary() -> None:
    frames = [flat(100), with_squares(100, [(40, 30, 20)], 250)]
    exact = run(frames, MotionParams(min_area=1e-6))[1].area
    assert run(frames, MotionParams(min_area=exact))[1].motion is True
    assert run(frames, MotionParams(min_area=exact * 1.001))[1].motion is False


def test_a_still_frame_is_not_motion_even_with_the_smallest_min_area() -> None:
    res = run([flat(100), flat(100)], MotionParams(min_area=0.0))
    assert res[1] == MotionResult(True, 0.0, 0.0)  # area 0 >= 0, but no crash on no region at all


def test_results_of_the_first_frame_and_of_a_new_scene() -> None:
    det = MotionDetector()
    assert det.update(flat(40)) == MotionResult(False, 0.0, 0.0)
    lit = det.update(flat(200))  # the whole frame changed: a new scene
    assert lit == MotionResult(True, 1.0, 1.0)


@pytest.mark.parametrize(("lightning", "after"), [(0.8, False), (1.0, True)])
def test_lightning_threshold_from_the_config(lightning: float, after: bool) -> None:
    """Lights on: with relearning the frame after the switch is quiet; with 1 (never) the old
    background keeps reporting motion."""
    cfg = parse_config(f"[motion]\nenabled = true\nlightning_threshold = {lightning}\nframes_after = 0\n")
    f = MotionFilter(cfg.motion)
    frames = [flat(40), flat(40), flat(200), flat(200), flat(200)]
    runs = [f.check(img, float(i)) for i, img in enumerate(frames)]
    assert runs[:3] == [True, False, True]
    assert runs[3:] == [after, after]


def test_relearned_background_sees_an_object_in_the_very_next_frame() -> None:
    frames = [flat(40), flat(200), with_squares(200, [(40, 30, 30)], 20)]
    res = run(frames)
    assert res[1].motion and res[1].changed == 1.0
    assert res[2].motion is True and res[2].area == pytest.approx(res[2].changed)


def test_a_slow_light_drift_is_followed_by_the_background() -> None:
    """alpha makes the background follow slow changes: +1 grey level a frame for 80 frames (80
    levels in all, far above the threshold) is never motion."""
    res = run([flat(60 + i) for i in range(80)])
    assert not any(r.motion for r in res)
    assert max(r.changed for r in res) == 0.0


def test_a_resolution_change_starts_a_new_background() -> None:
    det = MotionDetector()
    det.update(flat(100))
    assert det.update(flat(100, (90, 160))) == MotionResult(False, 0.0, 0.0)
    assert det.update(with_squares(100, [(40, 30, 30)], 250)[:90]).motion is True


def test_grey_frames_and_very_wide_frames_are_analysed() -> None:
    det = MotionDetector()
    assert det.small_grey(np.full((240, 320), 7, np.uint8)).shape == (120, 160)
    assert det.small_grey(np.full((1, 640, 3), 7, np.uint8)).shape == (1, 160)
    assert det.small_grey(np.full((30, 80, 3), 7, np.uint8)).shape == (30, 80)  # never upscaled


@pytest.mark.parametrize("frames_after", [0, 1, 3])
def test_frames_after_from_the_config(frames_after: int) -> None:
    """One frame with an object, then the still scene again: exactly ``frames_after`` more runs."""
    cfg = parse_config(f"[motion]\nenabled = true\nframes_after = {frames_after}\n").motion
    f = MotionFilter(cfg)
    still, moved = flat(100), with_squares(100, [(40, 30, 30)], 250)
    frames = [still, still, moved, *([still] * 8)]
    runs = [f.check(img, float(i)) for i, img in enumerate(frames)]
    assert runs == [True, False, True, *([True] * frames_after), *([False] * (8 - frames_after))]
    assert f.stats() == {"inferred": 2 + frames_after, "skipped": 9 - frames_after}


def test_the_gate_keeps_the_heartbeat_time_and_returns_plain_booleans() -> None:
    g = MotionGate(max_idle_s=10.0, frames_after=0)
    got = [g.decide(t, False) for t in (0.0, 5.0, 10.0, 11.0, 19.0, 20.0)]
    assert [d.reason for d in got] == ["first", None, "heartbeat", None, None, "heartbeat"]
    assert [d.run for d in got] == [True, False, True, False, False, True]
    assert all(d.run is False for d in got if d.reason is None)


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_the_gate_refuses_a_non_positive_idle(bad: float) -> None:
    with pytest.raises(ValueError, match=rf"max_idle_s must be > 0, got {bad}"):
        MotionGate(max_idle_s=bad)


def test_the_gate_takes_small_idles_and_zero_frames_after() -> None:
    assert MotionGate(max_idle_s=0.5, frames_after=0).max_idle_s == 0.5
    with pytest.raises(ValueError, match=r"frames_after must be >= 0, got -1"):
        MotionGate(frames_after=-1)


def test_mask_edges_land_on_the_right_pixels() -> None:
    right = mask_image((((0.5, 0.0), (1.0, 0.0), (1.0, 1.0), (0.5, 1.0)),), (11, 11))
    assert right is not None
    assert (right[:, :5] == 255).all() and (right[:, 5:] == 0).all()
    bottom = mask_image((((0.0, 0.5), (1.0, 0.5), (1.0, 1.0), (0.0, 1.0)),), (11, 11))
    assert bottom is not None
    assert (bottom[:5] == 255).all() and (bottom[5:] == 0).all()
    assert mask_image((), (11, 11)) is None


def test_downscaling_averages_sensor_noise_away() -> None:
    """INTER_AREA: shrinking 3x averages 9 pixels, so per-pixel noise (sigma 40 here) drops about
    3x before the blur; point sampling would keep it (measured: 3.7 vs 11 grey levels after the
    blur), and noise would look like motion."""
    rng = np.random.default_rng(0)
    noise = np.clip(rng.normal(128, 40, (360, 480)), 0, 255).astype(np.uint8)
    small = MotionDetector().small_grey(np.dstack([noise] * 3))
    assert small.shape == (120, 160)
    assert float(small.std()) < 6.0

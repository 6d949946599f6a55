"""``Tracker.update`` split into named stages gives exactly what the one-function update gave
(issue 30): the same tracks, ids, boxes, scores, classes, matched detections, removals, next id and
Kalman state, frame by frame, on hypothesis' scenes and on long seeded ones (the pre-split update
is kept in tests/support/tracker_reference.py)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.tracker_reference import ReferenceTracker

from edge_agent.core.objects import tracker
from edge_agent.core.objects.tracker import Track, Tracker, TrackerParams

# the reference is the update before issue 36 added the lost-track weight, the duplicate removal
# and lost tracks in the second association (tested in test_tracker_lost.py): all off here (a
# weight of 1, IoU never > 1)
_OLD = {"lost_weight": 1.0, "dup_iou": 1.0, "lost_low": False}
PARAMS = (
    TrackerParams(**_OLD),
    TrackerParams(optimal=False, **_OLD),
    TrackerParams(per_class=True, **_OLD),
    TrackerParams(fuse_score=False, **_OLD),
    TrackerParams(lost_frames=2, **_OLD),
    TrackerParams(high=0.6, low=0.05, new_track=0.7, **_OLD),
)


def seen(t: Track) -> tuple[Any, ...]:
    return (t.track_id, t.box, t.score, t.class_id, t.label_id, dict(t.classes), t.det_index, t.hits)


def state(tr: Tracker) -> tuple[Any, ...]:
    tracks = [(*seen(t), t.first_frame, t.last_frame, t.confirmed, t.lost) for t in tr.tracks]
    return (tr.frame, tr.next_id, tracks, [seen(t) for t in tr.removed])


def same_step(a: Tracker, b: Tracker, boxes: Any, scores: Any, classes: Optional[Any]) -> None:
    out_a, out_b = a.update(boxes, scores, classes), b.update(boxes, scores, classes)
    assert [seen(t) for t in out_a] == [seen(t) for t in out_b]
    assert state(a) == state(b)
    for name in ("_x", "_v", "_ppp", "_ppv", "_pvv"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name


box = st.tuples(st.floats(-50, 400), st.floats(-50, 400), st.floats(-5, 120), st.floats(-5, 120)).map(
    lambda b: (b[0], b[1], b[0] + b[2], b[1] + b[3])
)  # some empty or inverted: filtered out
detection = st.tuples(box, st.floats(0, 1), st.integers(0, 2))


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(PARAMS),
    st.lists(st.lists(detection, max_size=8), min_size=1, max_size=25),
    st.booleans(),
)
def test_the_split_update_equals_the_one_function_update(
    params: TrackerParams, frames: list[list[tuple[Any, float, int]]], with_classes: bool
) -> None:
    split, ref = Tracker(params), ReferenceTracker(params)
    for dets in frames:
        boxes = np.array([d[0] for d in dets], dtype=np.float64).reshape(-1, 4)
        scores = np.array([d[1] for d in dets], dtype=np.float64)
        classes = np.array([d[2] for d in dets], dtype=np.int64) if with_classes else None
        same_step(split, ref, boxes, scores, classes)
    assert [seen(t) for t in split.end_all()] == [seen(t) for t in ref.end_all()]


def scene(seed: int, frames: int = 150, n: int = 14) -> list[tuple[Any, Any, Any]]:
    """Moving boxes seen 80 % of the time, a confidence spread, false positives, a broken box now
    and then (empty, NaN)."""
    rng = np.random.default_rng(seed)
    pos, vel = rng.uniform(0, 600, (n, 2)), rng.normal(0, 5, (n, 2))
    size = rng.uniform(20, 90, (n, 2))
    out = []
    for f in range(frames):
        pos += vel
        vis = rng.random(n) > 0.2
        b = np.concatenate([pos, pos + size], 1)[vis] + rng.normal(0, 2, (int(vis.sum()), 4))
        k = int(rng.integers(0, 3))
        fp = rng.uniform(0, 600, (k, 2))
        b = np.concatenate([b, np.concatenate([fp, fp + 30], 1)])
        s = np.concatenate([rng.beta(3, 2, int(vis.sum())), rng.uniform(0, 0.5, k)])
        if f % 17 == 3 and len(b):
            b[0, 2] = b[0, 0] - 1
        if f % 23 == 5 and len(b):
            b[-1, 1] = np.nan
        out.append((b, s, rng.integers(0, 3, len(b)) if seed % 2 else None))
    return out


@pytest.mark.parametrize("params", PARAMS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_long_seeded_scenes_are_identical(params: TrackerParams, seed: int) -> None:
    split, ref = Tracker(params), ReferenceTracker(params)
    for b, s, c in scene(seed):
        same_step(split, ref, b, s, c)


def test_the_lost_cap_drops_the_same_oldest_tracks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracker, "MAX_LOST", 2)  # both read it from the tracker module
    params = TrackerParams(lost_frames=50, **_OLD)
    split, ref = Tracker(params), ReferenceTracker(params)
    capped = 0
    for b, s, c in scene(3):
        same_step(split, ref, b, s, c)
        capped += sum(split.frame - t.last_frame <= params.lost_frames for t in split.removed)
        assert sum(t.lost for t in split.tracks) <= 2
    assert capped > 0  # the cap, not only the age, removed tracks

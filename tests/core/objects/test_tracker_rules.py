"""The tracker's numbers and rules a user meets: the filtered boxes (against a textbook 8x8 Kalman
filter), the score gates at their boundaries, which track keeps which id, and the class counts."""

from __future__ import annotations

import numpy as np
import pytest

from edge_agent.core.objects import tracker as tmod
from edge_agent.core.objects.tracker import (
    STD_POS,
    STD_VEL,
    Tracker,
    TrackerParams,
    assign,
    greedy_match,
    iou_matrix,
    optimal_match,
)


def box(x: float, y: float = 100, w: float = 100, h: float = 100) -> list[float]:
    return [x, y, x + w, y + h]


class ReferenceKalman:
    """The constant-velocity filter of ByteTrack/BoT-SORT in its plain matrix form: state (cx, cy, w,
    h, vcx, vcy, vw, vh), noise standard deviations as fractions of the box size (w, h, w, h; at
    least 1 px), the measurement noise scaled by the measured box, and a lost track's size velocity
    frozen. The tracker splits it into four 2-state filters; the numbers must be the same."""

    F = np.block([[np.eye(4), np.eye(4)], [np.zeros((4, 4)), np.eye(4)]])
    H = np.hstack([np.eye(4), np.zeros((4, 4))])

    def __init__(self, xyxy: list[float]) -> None:
        z = self._xywh(xyxy)
        s = self._scale(z)
        self.x = np.concatenate([z, np.zeros(4)])
        self.P = np.diag(np.concatenate([(2 * STD_POS * s) ** 2, (10 * STD_VEL * s) ** 2]))
        self.lost = False

    @staticmethod
    def _xywh(b: list[float]) -> np.ndarray:
        x1, y1, x2, y2 = (float(v) for v in b)
        return np.array([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1])

    @staticmethod
    def _scale(s: np.ndarray) -> np.ndarray:
        w, h = max(s[2], 1.0), max(s[3], 1.0)
        return np.array([w, h, w, h])

    def predict(self) -> None:
        if self.lost:
            self.x[6:] = 0.0
        s = self._scale(self.x[:4])
        q = np.diag(np.concatenate([(STD_POS * s) ** 2, (STD_VEL * s) ** 2]))
        self.x = self.F @ self.x
        self.P = self.F @ self.P @ self.F.T + q

    def correct(self, xyxy: list[float]) -> None:
        z = self._xywh(xyxy)
        r = np.diag((STD_POS * self._scale(z)) ** 2)
        s = self.H @ self.P @ self.H.T + r
        k = self.P @ self.H.T @ np.linalg.inv(s)
        self.x = self.x + k @ (z - self.H @ self.x)
        self.P = (np.eye(8) - k @ self.H) @ self.P
        self.lost = False

    def box(self) -> list[float]:
        cx, cy, w, h = self.x[:4]
        return [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]


def test_filtered_boxes_are_the_textbook_kalman_filter_s() -> None:
    """Three objects far apart (one match each), growing and moving with noise, with frames where
    each is missed (lost, then re-found): every reported box is the 8x8 filter's estimate. Integer
    boxes with odd sizes, a flat (non-square) object and a sub-pixel-wide one are in the mix."""
    rng = np.random.default_rng(7)
    tr = Tracker(TrackerParams(lost_frames=10))
    starts = [(0.0, 0.0, 40.0, 90.0), (1000.0, 0.0, 200.0, 30.0), (0.0, 1000.0, 0.5, 1.5)]
    vel = [(3.0, 1.0, 0.8, 1.1), (-2.0, 4.0, 1.5, -0.2), (0.05, 0.02, 0.01, 0.02)]
    missed = {0: {5, 6, 11}, 1: {8}, 2: {3, 4}}
    refs: list[ReferenceKalman] = []
    for f in range(18):
        dets: list[list[float]] = []
        who: list[int] = []
        for o, ((x, y, w, h), (vx, vy, vw, vh)) in enumerate(zip(starts, vel)):
            if f in missed[o]:
                continue
            noise = 1.5 if w > 5 else 0.01
            x1, y1 = x + vx * f + rng.normal(0, noise), y + vy * f + rng.normal(0, noise)
            bw, bh = w + vw * f + rng.normal(0, noise / 3), h + vh * f
            b = [x1, y1, x1 + bw, y1 + bh]
            if o == 0:  # whole pixels, odd sizes: the centre falls between two pixels
                b = [
                    round(x1),
                    round(y1),
                    round(x1) + 2 * round(bw / 2) + 1,
                    round(y1) + 2 * round(bh / 2) + 1,
                ]
            dets.append(b)
            who.append(o)
        if f == 0:
            refs = [ReferenceKalman(d) for d in dets]
        else:
            for r in refs:
                r.predict()
        out = tr.update(dets, [0.9] * len(dets))
        got = {t.track_id: t for t in out}
        assert sorted(got) == sorted(o + 1 for o in who)  # ids 1, 2, 3 throughout
        for k, o in enumerate(who):
            t = got[o + 1]
            assert t.det_index == k
            if f > 0:
                refs[o].correct(dets[k])
            else:
                assert list(t.box) == [float(v) for v in dets[k]]  # the first sighting as detected
            assert list(t.box) == pytest.approx(refs[o].box(), rel=1e-9, abs=1e-9), (f, o)
        for o in set(range(3)) - set(who):
            refs[o].lost = True
            assert all(t.track_id != o + 1 for t in out)


def test_a_new_tracker_has_removed_nothing_and_hands_out_id_1_next() -> None:
    tr = Tracker()
    assert tr.removed == [] and tr.next_id == 1 and tr.tracks == []


def test_ids_are_handed_out_in_confirmation_order_and_never_reused() -> None:
    tr = Tracker()
    tr.update([box(0)], [0.9])  # frame 1: confirmed at once, id 1
    tr.update([box(0), box(500)], [0.9, 0.9])
    out = tr.update([box(0), box(500)], [0.9, 0.9])  # the second sighting confirms: id 2
    tr.update([box(0), box(500), box(1000)], [0.9] * 3)
    out = tr.update([box(0), box(500), box(1000)], [0.9] * 3)
    assert [(t.track_id, t.det_index) for t in out] == [(1, 0), (2, 1), (3, 2)]
    assert tr.next_id == 4


def test_first_frame_tracks_carry_their_detection_index_frame_and_class() -> None:
    """A detection filtered out (below ``low``) still counts in the indices the tracks point at."""
    tr = Tracker()
    out = tr.update([box(0), box(300), box(600, h=50)], [0.05, 0.9, 0.8], [4, 2, 7])
    assert [(t.track_id, t.det_index, t.class_id, t.first_frame, t.last_frame, t.hits) for t in out] == [
        (1, 1, 2, 1, 1, 1),
        (2, 2, 7, 1, 1, 1),
    ]
    assert out[1].box == (600.0, 100.0, 700.0, 150.0)
    tr.update([box(600, h=50)], [0.9], [7])
    assert [(t.det_index, t.lost) for t in tr.tracks] == [(-1, True), (0, False)]
    assert tr.tracks[1].hits == 2 and tr.tracks[1].first_frame == 1 and tr.tracks[1].last_frame == 2


def test_a_batch_of_one_is_taken_like_flat_arrays() -> None:
    """Scores and classes straight from a [1, N] model output: the same tracks as flat lists."""
    b = np.array([box(0), box(300)])
    tr1, tr2 = Tracker(), Tracker()
    a = tr1.update(b, [0.9, 0.8], [1, 2])
    c = tr2.update(b[None], np.array([[0.9, 0.8]]), np.array([[1, 2]]))
    assert [(t.track_id, t.class_id, t.score) for t in a] == [(t.track_id, t.class_id, t.score) for t in c]
    assert [t.class_id for t in c] == [1, 2]


def test_boxes_without_area_non_finite_or_below_low_never_continue_a_track() -> None:
    p = TrackerParams()
    bad = [
        ([0, 100, 0, 200], 0.9),  # no width
        ([0, 100, 100, 100], 0.9),  # no height
        ([100, 100, 0, 200], 0.9),  # x2 < x1
        ([0, 200, 100, 100], 0.9),  # y2 < y1
        ([0, 100, float("nan"), 200], 0.9),
        (box(0), p.low - 1e-6),
    ]
    for b, s in bad:
        tr = Tracker()
        tr.update([box(0)], [0.9])
        assert tr.update([b], [s]) == [], (b, s)
        assert tr.tracks[0].lost


def test_a_non_finite_box_does_not_take_the_frame_s_good_boxes_with_it() -> None:
    tr = Tracker()
    tr.update([box(0), box(500)], [0.9, 0.9])
    out = tr.update([[0, 0, float("inf"), 10], box(0), box(500)], [0.9, 0.9, 0.9])
    assert [(t.track_id, t.det_index) for t in out] == [(1, 1), (2, 2)]


def test_a_detection_at_exactly_low_continues_a_track_and_at_exactly_high_is_a_high_one() -> None:
    p = TrackerParams()
    tr = Tracker()
    tr.update([box(0)], [0.9])
    assert [t.track_id for t in tr.update([box(0)], [p.low])] == [1]
    # at exactly `high` it is a first-association (high) detection: it can start a track too when
    # new_track allows
    tr = Tracker(TrackerParams(new_track=p.high))
    tr.update([box(0)], [0.9])
    tr.update([box(0), box(500)], [0.9, p.high])
    assert [t.track_id for t in tr.update([box(0), box(500)], [0.9, p.high])] == [1, 2]


def test_a_detection_at_exactly_new_track_starts_one() -> None:
    p = TrackerParams()
    tr = Tracker()
    tr.update([], [])
    tr.update([box(0)], [p.new_track])
    assert [t.track_id for t in tr.update([box(0)], [p.new_track])] == [1]


def test_one_detection_on_the_high_boundary_goes_to_one_track_only() -> None:
    """Two neighbours, one detection scoring exactly ``high`` near both: the first association
    gives it to the closer; the other track must not take the same detection in the second one."""
    p = TrackerParams()
    tr = Tracker()
    tr.update([box(0), box(20)], [0.9, 0.9])
    out = tr.update([box(5)], [p.high])
    assert [(t.track_id, t.det_index) for t in out] == [(1, 0)]


def test_score_fusion_decides_a_weak_overlap() -> None:
    """IoU 1/3 with a 0.5 score: fused (0.17) it is under the 0.2 gate, plain IoU is over it."""
    for fuse, expected in ((True, []), (False, [1])):
        tr = Tracker(TrackerParams(fuse_score=fuse))
        tr.update([box(0)], [0.9])
        assert [t.track_id for t in tr.update([box(50)], [0.5])] == expected, fuse


def test_greedy_matching_takes_the_best_pair_first_optimal_the_best_total() -> None:
    """Tracks at x 0 and 40; detections at 5 (IoU 0.90 / 0.48) and -15 (0.74 / 0.29): greedy gives
    track 1 the detection at 5, the optimal assignment gives it the one at -15."""
    for optimal, d1 in ((False, 0), (True, 1)):
        tr = Tracker(TrackerParams(optimal=optimal))
        tr.update([box(0), box(40)], [0.9, 0.9])
        out = tr.update([box(5), box(-15)], [0.9, 0.9])
        assert {t.track_id: t.det_index for t in out} == {1: d1, 2: 1 - d1}, optimal


def test_per_class_tracks_continue_with_their_own_class_in_every_association() -> None:
    p = TrackerParams(per_class=True)
    tr = Tracker(p)
    tr.update([box(0)], [0.9], [3])
    assert [t.track_id for t in tr.update([box(2)], [0.9], [3])] == [1]  # first association
    assert [t.track_id for t in tr.update([box(4)], [p.low], [3])] == [1]  # second (low score)
    tr.update([box(6), box(500)], [0.9, 0.9], [3, 5])  # a new object, class 5
    out = tr.update([box(8), box(500)], [0.9, 0.9], [3, 5])  # third (its second sighting)
    assert [(t.track_id, t.class_id) for t in out] == [(1, 3), (2, 5)]


def test_a_class_agnostic_track_keeps_its_first_class_and_counts_every_class_seen() -> None:
    """The label is the class seen most often; a tie keeps the class seen first."""
    tr = Tracker()
    tr.update([box(0), box(500)], [0.9, 0.9], [1, 1])
    tr.update([box(0), box(500)], [0.9, 0.9], [0, 0])
    a, b = tr.tracks
    assert (a.class_id, a.label_id, dict(a.classes), a.hits) == (1, 1, {1: 1, 0: 1}, 2)
    tr.update([box(0), box(500)], [0.9, 0.9], [1, 0])
    assert (b.class_id, b.label_id, dict(b.classes), b.hits) == (1, 0, {1: 1, 0: 2}, 3)


def test_without_lost_low_a_lost_track_is_not_refound_by_a_low_score_detection() -> None:
    """ByteTrack's second association is for tracks still tracked (an occlusion starting), not for
    lost ones: a weak detection where a lost track was gives no track (the default re-finds it:
    test_tracker_lost.py)."""
    p = TrackerParams(lost_low=False)
    tr = Tracker(p)
    tr.update([box(0)], [0.9])
    tr.update([], [])
    assert tr.update([box(0)], [p.low]) == [] and tr.tracks[0].lost


def test_a_blip_listed_before_a_track_does_not_drop_it() -> None:
    tr = Tracker()
    tr.update([], [])
    tr.update([box(0), box(500)], [0.9, 0.9])  # two unconfirmed tracks
    assert [t.track_id for t in tr.update([box(500)], [0.9])] == [1]  # the first was a blip
    assert [t.track_id for t in tr.update([box(500)], [0.9])] == [1]
    assert len(tr.tracks) == 1 and tr.next_id == 2


def test_an_object_seen_from_frame_two_on_is_one_track() -> None:
    """Its second sighting confirms the unconfirmed track; it must not also start another."""
    tr = Tracker()
    tr.update([], [])
    for _ in range(6):
        out = tr.update([box(0)], [0.9])
    assert [t.track_id for t in out] == [1] and len(tr.tracks) == 1 and tr.next_id == 2


def test_a_lost_track_is_kept_exactly_lost_frames_frames() -> None:
    tr = Tracker(TrackerParams(lost_frames=3))
    for _ in range(5):
        tr.update([box(0)], [0.9])
    for _ in range(3):
        tr.update([], [])
        assert tr.removed == []
    assert [t.track_id for t in tr.update([box(0)], [0.9])] == [1]  # 3 frames missed: re-found
    for _ in range(3):
        tr.update([], [])
    tr.update([], [])  # the 4th missed frame
    assert [t.track_id for t in tr.removed] == [1] and tr.tracks == []


def test_the_lost_cap_drops_the_track_unseen_longest_and_reports_every_removal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Track 1 (created first) was seen last; track 2 was lost earlier: the cap drops 2. A track
    expiring by ``lost_frames`` in the same update as a cap drop is reported too."""
    monkeypatch.setattr(tmod, "MAX_LOST", 1)
    tr = Tracker(TrackerParams(lost_frames=3))
    tr.update([box(0), box(500), box(1000)], [0.9] * 3)  # ids 1, 2, 3
    tr.update([box(0), box(1000)], [0.9] * 2)  # 2 lost (one lost: under the cap)
    tr.update([box(0), box(1000)], [0.9] * 2)
    tr.update([box(1000)], [0.9])  # 1 lost too: two lost, the cap drops 2 (unseen longest)
    assert [t.track_id for t in tr.removed] == [2]
    assert sorted(t.track_id for t in tr.tracks) == [1, 3]

    tr = Tracker(TrackerParams(lost_frames=3))
    tr.update([box(0), box(500), box(1000)], [0.9] * 3)
    for _ in range(3):
        tr.update([box(500), box(1000)], [0.9] * 2)  # 1 lost, alone under the cap
    tr.update([], [])  # 1 expires; 2 and 3 are lost at once: the cap drops one of them
    assert len(tr.removed) == 2 and tr.removed[0].track_id == 1
    assert len(tr.tracks) == 1


def test_whole_pixel_boxes_are_filtered_in_floating_point() -> None:
    tr = Tracker()
    tr.update([[0, 0, 11, 11]], [0.9])
    (t,) = tr.update([[0, 0, 11, 11]], [0.9])  # odd sizes: the centre is at 5.5
    assert t.box == (0.0, 0.0, 11.0, 11.0)


def test_a_box_without_area_never_becomes_a_track_even_on_the_first_frame() -> None:
    tr = Tracker()
    assert tr.update([[5, 5, 5, 50], [5, 5, 50, 5]], [0.9, 0.9]) == [] and tr.tracks == []


def test_confirming_a_track_leaves_no_duplicate_behind() -> None:
    tr = Tracker()
    tr.update([], [])
    tr.update([box(0)], [0.9])
    tr.update([box(0)], [0.9])  # the second sighting confirms it
    assert len(tr.tracks) == 1 and tr.tracks[0].confirmed


def test_greedy_mode_tracks_a_lone_object() -> None:
    tr = Tracker(TrackerParams(optimal=False))
    for f in range(5):
        assert [t.track_id for t in tr.update([box(10 * f)], [0.9])] == [1]


def test_iou_matrix_edges() -> None:
    assert iou_matrix(np.zeros((0, 4)), np.zeros((3, 4))).shape == (0, 3)
    assert iou_matrix(np.zeros((2, 4)), np.zeros((0, 4))).shape == (2, 0)
    assert iou_matrix(np.zeros((0, 4)), np.zeros((0, 4))).shape == (0, 0)
    a = np.array([[0, 0, 10, 10], [0, 0, 0.5, 0.5], [3, 3, 3, 3]], float)
    b = np.array([[20, 0, 30, 10], [0, 20, 10, 30], [0.25, 0, 0.75, 0.5], [3, 3, 3, 3]], float)
    got = iou_matrix(a, b)
    assert got[0, :2].tolist() == [0.0, 0.0]  # side by side, one axis overlapping: no overlap
    assert got[1, 2] == pytest.approx(1 / 3)  # sub-pixel boxes
    assert got[2, 3] == 0.0 and got.dtype == np.float64  # two boxes without area: no overlap


def test_greedy_takes_the_best_pair_first() -> None:
    sim = np.array([[0.9, 0.8], [0.7, 0.0]])
    assert greedy_match(sim, 0.5) == [(0, 0)]
    assert greedy_match(sim, 0.9) == [(0, 0)]  # a pair at exactly the gate is taken
    assert greedy_match(np.array([[0.6]]), 0.5) == [(0, 0)]
    assert greedy_match(np.zeros((0, 3)), 0.5) == []


def test_optimal_assignment_on_larger_crowds_is_the_best_total() -> None:
    import itertools

    rng = np.random.default_rng(11)
    for _ in range(25):
        n, m = int(rng.integers(2, 7)), int(rng.integers(2, 7))
        sim = np.round(rng.uniform(0, 1, (n, m)), 2)
        got = optimal_match(sim, 0.0)
        k = min(n, m)
        best = max(
            sum(sim[r, c] for r, c in zip(rows, cols))
            for rows in itertools.combinations(range(n), k)
            for cols in itertools.permutations(range(m), k)
        )
        assert sum(sim[r, c] for r, c in got) == pytest.approx(best) and len(got) == k


def test_a_pair_at_exactly_the_gate_is_matched_by_every_solver() -> None:
    for solve in (assign, optimal_match, greedy_match):
        assert solve(np.array([[0.5]]), 0.5) == [(0, 0)], solve
        assert sorted(solve(np.array([[0.5, 0.2], [0.5, 0.5]]), 0.5)) == [(0, 0), (1, 1)], solve

"""Multi-object tracker of the ByteTrack class in plain numpy (pure; no I/O).

ByteTrack (Zhang et al. 2022) in short: predict every track with a constant-velocity Kalman
filter; match the *high*-confidence detections to all tracks (tracked and recently lost) by IoU;
match the *low*-confidence detections to the tracks still unmatched (this is what keeps an occluded
person's id: its score drops, the box stays); a new track needs a confident detection and a second
sighting to be confirmed; a lost track is kept for ``lost_frames`` frames so it can be re-found.

Two simplifications, both measured against supervision's ByteTrack in tests/bench/bench_mot.py:

- The Kalman filter state is (cx, cy, w, h) plus velocities with diagonal process/measurement noise
  (the BoT-SORT parameterisation). With a block-diagonal transition and diagonal noises the 8x8
  filter splits *exactly* into four independent 2-state filters (position, velocity), so the whole
  filter is a handful of vectorised array operations over all tracks instead of 8x8 matrix products
  per track.
- Assignment is optimal (Hungarian, shortest augmenting path, ``optimal_match``) but solved per
  connected group of boxes that overlap a track (``assign``): scipy is not a runtime dependency, and
  objects apart from each other cost one comparison, so only a crowd pays the O(n^3) solver.
  ``TrackerParams(optimal=False)`` is greedy by IoU instead (measured: fewer ID switches with optimal).
  The matching lives in core.assignment (re-exported here: ``assign``, ``greedy_match``,
  ``optimal_match``, ``iou_matrix``).

Three additions, measured against supervision's and Ultralytics' ByteTrack on 10 seeds per cell:
the first association weighs a lost track's similarity by ``lost_weight`` (0.85), so a live track
keeps its person's box rather than a lost copy drifting over it; and ByteTrack's duplicate removal
(a live and a lost track overlapping > ``dup_iou`` are one object; the younger goes); and lost
tracks take part in the second (low-score) association too.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, NamedTuple, Optional, Tuple

import numpy as np
import numpy.typing as npt

from edge_agent.core.config.scene import TrackerConfig
from edge_agent.core.objects.assignment import FloatArray, assign, greedy_match, iou_matrix, optimal_match

__all__ = [
    "MAX_LOST",
    "Track",
    "Tracker",
    "TrackerParams",
    "assign",
    "greedy_match",
    "iou_matrix",
    "optimal_match",
]

MAX_LOST = 1000  # lost tracks kept at most (the oldest are dropped first): bounds memory and cost

# the noise model of ByteTrack/BoT-SORT: standard deviations as fractions of the box size
STD_POS = 1.0 / 20
# velocity 1/240 (theirs 1/160): a steadier velocity carries an occluded person's box on (bench_mot.py,
# TUD-Stadtmitte mid noise, seeds 0-29: IDF1 0.70 -> 0.74 with lost_low and lost_weight 0.85)
STD_VEL = 1.0 / 240
_EPS = 1e-9  # a gated pair's similarity floor: a pair past the gate stays a candidate once weighed


_CFG = TrackerConfig()


@dataclass(frozen=True)
class TrackerParams:
    """ByteTrack's defaults (match_thresh 0.8, buffer 30) with track_thresh 0.3 and score fusion (tuned in bench_mot.py)."""

    # the [tracker] config's defaults and descriptions (core/config/scene.py) hold for these too
    high: float = _CFG.high
    low: float = _CFG.low
    new_track: float = _CFG.new_track
    match_iou: float = _CFG.match_iou
    low_match_iou: float = 0.5  # second association (low-score detections)
    new_match_iou: float = 0.3  # an unconfirmed track's second sighting
    lost_frames: int = _CFG.lost_frames
    per_class: bool = _CFG.per_class
    fuse_score: bool = _CFG.fuse_score
    optimal: bool = True  # optimal assignment per group of overlapping boxes; False: greedy by IoU
    lost_weight: float = 0.85  # stage 1 weighs a lost track's similarity by this: a tracked one first
    dup_iou: float = 0.85  # a tracked and a lost track overlapping more are one object: the younger goes
    lost_low: bool = True  # lost tracks in the second (low-score) association too; ByteTrack: False


@dataclass
class Track:
    """One tracked object. ``box`` is the filtered x1, y1, x2, y2 of the last update."""

    track_id: int
    box: Tuple[float, float, float, float]
    score: float
    class_id: int
    first_frame: int
    last_frame: int
    hits: int = 1
    confirmed: bool = False
    lost: bool = False
    classes: Counter[int] = field(default_factory=Counter)
    det_index: int = -1  # index of the detection matched on the current frame, -1 if none

    @property
    def label_id(self) -> int:
        """The class seen most often (a class-agnostic track may flicker between two)."""
        return self.classes.most_common(1)[0][0] if self.classes else self.class_id


def _to_xywh(boxes: FloatArray) -> FloatArray:
    out = np.empty_like(boxes)
    out[:, 2:] = boxes[:, 2:] - boxes[:, :2]
    out[:, :2] = boxes[:, :2] + out[:, 2:] / 2
    return out


def _to_xyxy(s: FloatArray) -> FloatArray:
    half = np.maximum(s[:, 2:], 1e-3) / 2
    out = np.empty_like(s)
    out[:, :2] = s[:, :2] - half
    out[:, 2:] = s[:, :2] + half
    return out


def _noise_scale(s: FloatArray) -> FloatArray:
    """Per coordinate (cx, cy, w, h): the box dimension its noise scales with (w, h, w, h)."""
    wh = np.maximum(s[:, 2:4], 1.0)
    out: FloatArray = np.concatenate([wh, wh], axis=1)
    return out


class _Detections(NamedTuple):
    """One frame's detections as arrays, and the valid ones by score (indices into them)."""

    boxes: FloatArray  # (N, 4) x1, y1, x2, y2
    scores: FloatArray  # (N,)
    classes: npt.NDArray[np.int64]  # (N,)
    high: npt.NDArray[np.intp]  # valid, score >= high
    low: npt.NDArray[np.intp]  # valid, low <= score < high


class Tracker:
    """ByteTrack for one camera. ``update`` once per processed frame; not thread-safe.

    The Kalman state of all tracks lives in (N, 4) arrays: position ``x``, velocity ``v`` and the
    three distinct entries of each coordinate's 2x2 covariance (``ppp``, ``ppv``, ``pvv``).
    """

    def __init__(self, params: Optional[TrackerParams] = None) -> None:
        self.params = params or TrackerParams()
        self.frame = 0
        self._next_id = 1
        self.tracks: List[Track] = []
        self._x = np.zeros((0, 4))
        self._v = np.zeros((0, 4))
        self._ppp = np.zeros((0, 4))
        self._ppv = np.zeros((0, 4))
        self._pvv = np.zeros((0, 4))
        self.removed: List[Track] = []  # tracks dropped by the last update (for the lifecycle)

    @property
    def next_id(self) -> int:
        return self._next_id

    def _predict(self) -> None:
        """Stage 0: forget the last frame's detections; move every track one frame on."""
        for t in self.tracks:
            t.det_index = -1
        if not self.tracks:
            return
        sc = _noise_scale(self._x)
        q_p, q_v = (STD_POS * sc) ** 2, (STD_VEL * sc) ** 2
        # a lost track's size velocity is frozen (as ByteTrack zeroes vh): boxes must not grow away
        lost = np.array([t.lost for t in self.tracks])
        self._v[lost, 2:] = 0.0
        self._x = self._x + self._v
        self._ppp = self._ppp + 2 * self._ppv + self._pvv + q_p
        self._ppv = self._ppv + self._pvv
        self._pvv = self._pvv + q_v

    def _correct(self, idx: npt.NDArray[np.intp], z: FloatArray) -> None:
        r = (STD_POS * _noise_scale(z)) ** 2
        ppp, ppv = self._ppp[idx], self._ppv[idx]
        s = ppp + r
        kp, kv = ppp / s, ppv / s
        y = z - self._x[idx]
        self._x[idx] += kp * y
        self._v[idx] += kv * y
        self._pvv[idx] -= kv * ppv
        self._ppv[idx] = (1 - kp) * ppv
        self._ppp[idx] = (1 - kp) * ppp

    def _add(self, z: FloatArray) -> None:
        sc = _noise_scale(z)
        self._x = np.concatenate([self._x, z])
        self._v = np.concatenate([self._v, np.zeros_like(z)])
        self._ppp = np.concatenate([self._ppp, (2 * STD_POS * sc) ** 2])
        self._ppv = np.concatenate([self._ppv, np.zeros_like(z)])
        self._pvv = np.concatenate([self._pvv, (10 * STD_VEL * sc) ** 2])

    def _keep(self, keep: List[int]) -> None:
        k = np.asarray(keep, dtype=np.intp)
        self._x, self._v = self._x[k], self._v[k]
        self._ppp, self._ppv, self._pvv = self._ppp[k], self._ppv[k], self._pvv[k]
        self.tracks = [self.tracks[i] for i in keep]

    def _match(self, sim: FloatArray, min_sim: float) -> List[Tuple[int, int]]:
        return assign(sim, min_sim) if self.params.optimal else greedy_match(sim, min_sim)

    def _sim(self, t_idx: List[int], boxes: FloatArray, classes: npt.NDArray[np.int64]) -> FloatArray:
        if not t_idx or not len(boxes):
            return np.zeros((len(t_idx), len(boxes)))  # most frames: stages 2 and 3 have nothing to do
        sim = iou_matrix(_to_xyxy(self._x[t_idx]), boxes)
        if self.params.per_class and sim.size:
            tc = np.array([self.tracks[i].class_id for i in t_idx])
            sim = np.where(tc[:, None] == classes[None, :], sim, 0.0)
        return sim

    def update(
        self, boxes: npt.ArrayLike, scores: npt.ArrayLike, classes: Optional[npt.ArrayLike] = None
    ) -> List[Track]:
        """Feed one frame's detections (x1,y1,x2,y2; score; class id); returns the confirmed tracks
        matched on this frame, each with ``det_index`` = the index of its detection."""
        self.frame += 1
        d = self._detections(boxes, scores, classes)
        self._predict()
        matched: Dict[int, int] = {}  # track position -> detection index, in the order matched
        pool, rest_high = self._match_high(d, matched)
        self._match_low(d, pool, matched)
        self._match_unconfirmed(d, rest_high, matched)
        self._apply_matches(d, matched)
        self._age_unmatched(matched)
        self._birth(d, rest_high, matched)
        self._drop_duplicates()
        return [t for t in self.tracks if t.confirmed and t.last_frame == self.frame]

    def _detections(
        self, boxes: npt.ArrayLike, scores: npt.ArrayLike, classes: Optional[npt.ArrayLike]
    ) -> _Detections:
        """The frame's arrays, and the valid detections (score >= low, a positive finite box) split
        into high and low score."""
        p = self.params
        b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
        sc = np.asarray(scores, dtype=np.float64).reshape(-1)
        cl = np.zeros(len(b), np.int64) if classes is None else np.asarray(classes, np.int64).reshape(-1)
        ok = (sc >= p.low) & (b[:, 2] > b[:, 0]) & (b[:, 3] > b[:, 1]) & np.isfinite(b).all(axis=1)
        idx_all = np.nonzero(ok)[0]
        return _Detections(b, sc, cl, idx_all[sc[idx_all] >= p.high], idx_all[sc[idx_all] < p.high])

    def _match_high(self, d: _Detections, matched: Dict[int, int]) -> Tuple[List[int], List[int]]:
        """Stage 1: confirmed tracks (tracked or lost) x high-score detections; returns that pool
        of tracks and the high-score detections left."""
        p = self.params
        pool = [i for i, t in enumerate(self.tracks) if t.confirmed]
        sim = self._sim(pool, d.boxes[d.high], d.classes[d.high])
        if p.fuse_score and sim.size:
            sim = sim * d.scores[d.high][None, :]
        if sim.size:
            # a tracked track before a lost one: both past the gate, a lost track's similarity
            # counts lost_weight times (measured in bench_mot.py: a lost copy of a person kept
            # taking their box from the live track, an ID switch each time)
            lost = np.array([self.tracks[i].lost for i in pool])
            weight = np.where(lost, p.lost_weight, 1.0)[:, None]
            sim = np.where(sim >= p.match_iou, weight * sim + _EPS, 0.0)
        for r, c in self._match(sim, _EPS):
            matched[pool[r]] = int(d.high[c])
        used = set(matched.values())
        return pool, [int(i) for i in d.high if int(i) not in used]

    def _match_low(self, d: _Detections, pool: List[int], matched: Dict[int, int]) -> None:
        """Stage 2: the confirmed tracks left over, lost ones too, x low-score detections. ByteTrack
        leaves lost tracks out; a person coming out from behind another is first seen partly, at a
        low score, and that sighting re-finds their lost track (measured in bench_mot.py, with
        STD_VEL 1/240: IDF1 and MOTA up in every cell; without it the person got a new id a few frames later)."""
        left = [i for i in pool if i not in matched and (self.params.lost_low or not self.tracks[i].lost)]
        for r, c in self._match(self._sim(left, d.boxes[d.low], d.classes[d.low]), self.params.low_match_iou):
            matched[left[r]] = int(d.low[c])

    def _match_unconfirmed(self, d: _Detections, rest_high: List[int], matched: Dict[int, int]) -> None:
        """Stage 3: unconfirmed tracks (seen once) x the high-score detections stage 1 left."""
        fresh = [i for i, t in enumerate(self.tracks) if not t.confirmed]
        rh = np.asarray(rest_high, dtype=np.intp)
        for r, c in self._match(self._sim(fresh, d.boxes[rh], d.classes[rh]), self.params.new_match_iou):
            matched[fresh[r]] = int(rh[c])

    def _apply_matches(self, d: _Detections, matched: Dict[int, int]) -> None:
        """Correct the matched tracks' filters with their detections; a second sighting confirms."""
        if not matched:
            return
        t_idx = np.fromiter(matched.keys(), dtype=np.intp)
        d_idx = np.fromiter(matched.values(), dtype=np.intp)
        self._correct(t_idx, _to_xywh(d.boxes[d_idx]))
        filtered = _to_xyxy(self._x[t_idx])
        for k, (ti, di) in enumerate(zip(t_idx.tolist(), d_idx.tolist())):
            self._sighted(self.tracks[ti], filtered[k], float(d.scores[di]), int(d.classes[di]), di)

    def _sighted(self, t: Track, box: FloatArray, score: float, cls: int, det_index: int) -> None:
        """A matched track takes its filtered box, the detection's score and class; a second
        sighting confirms it (ids are handed out on confirmation: blips never use one up)."""
        t.box = (float(box[0]), float(box[1]), float(box[2]), float(box[3]))
        t.score = score
        t.class_id = cls if self.params.per_class or not t.classes else t.class_id
        t.classes[cls] += 1
        t.last_frame = self.frame
        t.hits += 1
        t.lost = False
        if not t.confirmed:
            t.confirmed = True
            t.track_id = self._next_id
            self._next_id += 1
        t.det_index = det_index

    def _age_unmatched(self, matched: Dict[int, int]) -> None:
        """Tracks not matched: unconfirmed ones die, confirmed ones are lost, old lost ones removed
        (and the oldest beyond MAX_LOST)."""
        keep: List[int] = []
        self.removed = []
        for i, t in enumerate(self.tracks):
            if i in matched:
                keep.append(i)
            elif not t.confirmed:
                continue  # a one-frame blip: never reported, so not "removed" either
            elif self.frame - t.last_frame > self.params.lost_frames:
                self.removed.append(t)
            else:
                t.lost = True
                keep.append(i)
        self._keep(self._cap_lost(keep))

    def _cap_lost(self, keep: List[int]) -> List[int]:
        """``keep`` without the oldest lost tracks beyond MAX_LOST (they are removed)."""
        lost = [i for i in keep if self.tracks[i].lost]
        if len(lost) <= MAX_LOST:
            return keep
        lost.sort(key=lambda i: self.tracks[i].last_frame)
        drop = set(lost[: len(lost) - MAX_LOST])
        self.removed += [self.tracks[i] for i in drop]
        return [i for i in keep if i not in drop]

    def _birth(self, d: _Detections, rest_high: List[int], matched: Dict[int, int]) -> None:
        """Stage 4: new tracks from the confident high-score detections no stage matched
        (confirmed at once on the very first frame)."""
        used = set(matched.values())
        new = [i for i in rest_high if i not in used and d.scores[i] >= self.params.new_track]
        if not new:
            return
        self._add(_to_xywh(d.boxes[new]))
        first = self.frame == 1
        for i in new:
            box = d.boxes[i]
            cls = int(d.classes[i])
            t = Track(
                self._next_id if first else 0,
                (float(box[0]), float(box[1]), float(box[2]), float(box[3])),
                float(d.scores[i]),
                cls,
                self.frame,
                self.frame,
                confirmed=first,
                det_index=i,
            )
            t.classes[cls] += 1
            self._next_id += int(first)
            self.tracks.append(t)

    def _drop_duplicates(self) -> None:
        """ByteTrack's ``remove_duplicate_stracks``: a confirmed track matched now and a lost one
        overlapping by more than ``dup_iou`` are one object followed twice (a person missed for a
        few frames got a new track while the old one waited); the one followed for less time is
        removed. Only a live track born after the lost one was last seen can be its copy: two
        tracks once seen together are two people (TUD-Stadtmitte: one behind another).
        Measured on TUD-Campus (bench_mot.py): without it the two took the person's box in turns."""
        conf = [i for i, t in enumerate(self.tracks) if t.confirmed]
        now = [i for i in conf if not self.tracks[i].lost]
        lost = [i for i in conf if self.tracks[i].lost]
        if not now or not lost:
            return
        boxes = _to_xyxy(self._x)
        drop: set[int] = set()
        for r, c in zip(*np.nonzero(iou_matrix(boxes[now], boxes[lost]) > self.params.dup_iou)):
            a, b = self.tracks[now[r]], self.tracks[lost[c]]
            if a.first_frame <= b.last_frame:
                continue  # both were seen on one frame, on two boxes: two objects, now overlapping
            drop.add(lost[c] if a.last_frame - a.first_frame > b.last_frame - b.first_frame else now[r])
        if drop:
            self.removed += [self.tracks[i] for i in sorted(drop)]
            self._keep([i for i in range(len(self.tracks)) if i not in drop])

    def end_all(self) -> List[Track]:
        """Stop: every confirmed track ends now (the lifecycle reports their end)."""
        ended = [t for t in self.tracks if t.confirmed]
        self._keep([])
        return ended

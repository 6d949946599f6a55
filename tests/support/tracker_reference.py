"""The tracker's ``update`` as it was before it was split into named stages (issue 30), kept
verbatim as the reference the split one is compared with (tests/core/objects/test_tracker_split.py).
Only the module-level names are qualified (``tracker.MAX_LOST``, ``tracker.Track``...), so a test
that patches ``tracker.MAX_LOST`` patches both."""

from __future__ import annotations

from typing import Optional

import numpy as np
import numpy.typing as npt

from edge_agent.core.objects import tracker


class ReferenceTracker(tracker.Tracker):
    """``Tracker`` with the pre-split ``_predict`` and ``update`` (106 lines, one function); the
    helpers the split left alone (``_correct``, ``_add``, ``_keep``, ``_match``, ``_sim``) are shared."""

    def _predict(self) -> None:
        if not self.tracks:
            return
        sc = tracker._noise_scale(self._x)
        q_p, q_v = (tracker.STD_POS * sc) ** 2, (tracker.STD_VEL * sc) ** 2
        # a lost track's size velocity is frozen (as ByteTrack zeroes vh): boxes must not grow away
        lost = np.array([t.lost for t in self.tracks])
        self._v[lost, 2:] = 0.0
        self._x = self._x + self._v
        self._ppp = self._ppp + 2 * self._ppv + self._pvv + q_p
        self._ppv = self._ppv + self._pvv
        self._pvv = self._pvv + q_v

    def update(
        self, boxes: npt.ArrayLike, scores: npt.ArrayLike, classes: Optional[npt.ArrayLike] = None
    ) -> list[tracker.Track]:
        """Feed one frame's detections (x1,y1,x2,y2; score; class id); returns the confirmed tracks
        matched on this frame, each with ``det_index`` = the index of its detection."""
        p = self.params
        self.frame += 1
        b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
        sc = np.asarray(scores, dtype=np.float64).reshape(-1)
        cl = np.zeros(len(b), np.int64) if classes is None else np.asarray(classes, np.int64).reshape(-1)
        ok = (sc >= p.low) & (b[:, 2] > b[:, 0]) & (b[:, 3] > b[:, 1]) & np.isfinite(b).all(axis=1)
        idx_all = np.nonzero(ok)[0]
        high = idx_all[sc[idx_all] >= p.high]
        low = idx_all[sc[idx_all] < p.high]
        for t in self.tracks:
            t.det_index = -1
        self._predict()
        matched: dict[int, int] = {}  # track position -> detection index

        # 1: confirmed tracks (tracked or lost) x high-score detections
        pool = [i for i, t in enumerate(self.tracks) if t.confirmed]
        sim1 = self._sim(pool, b[high], cl[high])
        if p.fuse_score and sim1.size:
            sim1 = sim1 * sc[high][None, :]
        for r, c in self._match(sim1, p.match_iou):
            matched[pool[r]] = int(high[c])
        used = set(matched.values())
        rest_high = [int(d) for d in high if int(d) not in used]
        # 2: still-tracked (not lost) confirmed tracks left over x low-score detections
        pool2 = [i for i in pool if i not in matched and not self.tracks[i].lost]
        for r, c in self._match(self._sim(pool2, b[low], cl[low]), p.low_match_iou):
            matched[pool2[r]] = int(low[c])
        # 3: unconfirmed tracks (seen once) x the remaining high-score detections
        fresh = [i for i, t in enumerate(self.tracks) if not t.confirmed]
        rh = np.asarray(rest_high, dtype=np.intp)
        for r, c in self._match(self._sim(fresh, b[rh], cl[rh]), p.new_match_iou):
            matched[fresh[r]] = int(rh[c])
        used = set(matched.values())

        if matched:
            t_idx = np.fromiter(matched.keys(), dtype=np.intp)
            d_idx = np.fromiter(matched.values(), dtype=np.intp)
            self._correct(t_idx, tracker._to_xywh(b[d_idx]))
            filtered = tracker._to_xyxy(self._x[t_idx])
            for k, (ti, di) in enumerate(zip(t_idx.tolist(), d_idx.tolist())):
                t = self.tracks[ti]
                t.box = (
                    float(filtered[k, 0]),
                    float(filtered[k, 1]),
                    float(filtered[k, 2]),
                    float(filtered[k, 3]),
                )
                t.score = float(sc[di])
                t.class_id = int(cl[di]) if p.per_class or not t.classes else t.class_id
                t.classes[int(cl[di])] += 1
                t.last_frame = self.frame
                t.hits += 1
                t.lost = False
                if not t.confirmed:  # ids are handed out on confirmation: blips never use one up
                    t.confirmed = True
                    t.track_id = self._next_id
                    self._next_id += 1
                t.det_index = di

        # tracks not matched: unconfirmed ones die, confirmed ones are lost, old lost ones removed
        keep: list[int] = []
        self.removed = []
        for i, t in enumerate(self.tracks):
            if i in matched:
                keep.append(i)
            elif not t.confirmed:
                continue  # a one-frame blip: never reported, so not "removed" either
            elif self.frame - t.last_frame > p.lost_frames:
                self.removed.append(t)
            else:
                t.lost = True
                keep.append(i)
        lost = [i for i in keep if self.tracks[i].lost]
        if len(lost) > tracker.MAX_LOST:
            lost.sort(key=lambda i: self.tracks[i].last_frame)
            drop = set(lost[: len(lost) - tracker.MAX_LOST])
            self.removed += [self.tracks[i] for i in drop]
            keep = [i for i in keep if i not in drop]
        self._keep(keep)

        # 4: new tracks from confident leftovers (confirmed at once on the very first frame)
        new = [d for d in rest_high if d not in used and sc[d] >= p.new_track]
        if new:
            self._add(tracker._to_xywh(b[new]))
            for d in new:
                box = b[d]
                first = self.frame == 1
                t = tracker.Track(
                    self._next_id if first else 0,
                    (float(box[0]), float(box[1]), float(box[2]), float(box[3])),
                    float(sc[d]),
                    int(cl[d]),
                    self.frame,
                    self.frame,
                    confirmed=first,
                    det_index=d,
                )
                t.classes[int(cl[d])] += 1
                self._next_id += int(first)
                self.tracks.append(t)
        return [t for t in self.tracks if t.confirmed and t.last_frame == self.frame]

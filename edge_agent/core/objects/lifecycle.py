"""Object lifecycle (pure): tracks in, object events and interval counts out.

Per track: ``appeared`` once it has been seen on ``min_hits`` frames (a one-frame false positive is
never reported), ``zone_entered`` / ``zone_left`` / ``line_crossed`` as :mod:`edge_agent.core.objects.zones`
decides, and ``ended`` when the tracker drops it (duration, classes seen, best confidence). Counts
per line (in/out) and zone (entered, occupancy) accumulate for ``counts_interval_s`` and are then
reported as one counts body, with the totals since the counters were created.

The counters are plain data (:meth:`ObjectEvents.count_state` / :meth:`restore_counts`; as named
integers: core.objects.count_keys) so the app stores them and a restart continues them.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from edge_agent.core.config.schema import LineConfig, TrackerConfig, ZoneConfig
from edge_agent.core.objects.tracker import Track
from edge_agent.core.objects.zones import (
    LineState,
    ZoneState,
    anchor_point,
    as_points,
    line_step,
    point_in_polygon,
    zone_end,
    zone_step,
)

MAX_COUNT = 10**12  # a restored counter above this is a corrupt checkpoint, not traffic


@dataclass
class _Obj:
    track_id: int
    first_ts: float
    last_ts: float
    reported: bool = False
    best_conf: float = 0.0
    best_box: Tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    classes: Counter[str] = field(default_factory=Counter)
    lines: Dict[str, LineState] = field(default_factory=dict)
    zones: Dict[str, ZoneState] = field(default_factory=dict)
    best_image: object = None  # the frame crop at the best confidence (app: optional snapshot)


def _zero_counts(
    zones: Sequence[ZoneConfig], lines: Sequence[LineConfig]
) -> Dict[str, Dict[str, Dict[str, int]]]:
    return {
        "lines": {ln.name: {"in": 0, "out": 0} for ln in lines},
        "zones": {z.name: {"entered": 0} for z in zones},
    }


class ObjectEvents:
    """One camera's objects. ``update`` per frame with the tracker's output; not thread-safe."""

    def __init__(
        self,
        tracker_cfg: TrackerConfig,
        zones: Sequence[ZoneConfig],
        lines: Sequence[LineConfig],
        counts_interval_s: float,
        now: float,
    ) -> None:
        self.cfg = tracker_cfg
        self.zones = list(zones)
        self.lines = list(lines)
        self._zone_polys = {z.name: as_points(z.polygon) for z in zones}
        self._line_pts = {ln.name: as_points(ln.points) for ln in lines}
        self.interval_s = counts_interval_s
        self.objects: Dict[int, _Obj] = {}
        self.interval = _zero_counts(zones, lines)
        self.totals = _zero_counts(zones, lines)
        self.interval_start = now

    def set_scene(self, zones: Sequence[ZoneConfig], lines: Sequence[LineConfig]) -> None:
        """Zones and lines replaced while running (the page's editor): the counters of a name kept
        go on, a new name starts at 0, a removed one is dropped; where a kept zone or line moved,
        each object's side or inside state starts afresh (a move is not a crossing)."""
        old_z = {z.name: z.polygon for z in self.zones}
        old_l = {ln.name: (ln.points, ln.in_side) for ln in self.lines}
        new_z = {z.name: z.polygon for z in zones}
        new_l = {ln.name: (ln.points, ln.in_side) for ln in lines}
        for obj in self.objects.values():
            for name in [n for n in obj.lines if new_l.get(n) != old_l.get(n)]:
                del obj.lines[name]
            for name in [n for n in obj.zones if new_z.get(n) != old_z.get(n)]:
                del obj.zones[name]
        self.zones, self.lines = list(zones), list(lines)
        self._zone_polys = {z.name: as_points(z.polygon) for z in zones}
        self._line_pts = {ln.name: as_points(ln.points) for ln in lines}
        for part in ("interval", "totals"):
            fresh, old = _zero_counts(zones, lines), getattr(self, part)
            for kind in ("lines", "zones"):
                for name in fresh[kind]:
                    fresh[kind][name].update(old[kind].get(name, {}))
            setattr(self, part, fresh)

    # ---- per frame ----------------------------------------------------------------------------
    def update(
        self,
        ts: float,
        tracks: Sequence[Track],
        removed: Sequence[Track],
        frame_wh: Tuple[int, int],
        label_of: Callable[[int], str],
        crop: Optional[Callable[[Tuple[float, float, float, float]], object]] = None,
    ) -> List[Dict[str, Any]]:
        """Events of this frame, in order. ``ts`` is the frame time in seconds (wall clock)."""
        events: List[Dict[str, Any]] = []
        w, h = frame_wh
        for t in tracks:
            obj = self.objects.get(t.track_id)
            if obj is None:
                obj = self.objects[t.track_id] = _Obj(t.track_id, ts, ts)
            label = label_of(t.class_id)
            obj.last_ts = ts
            obj.classes[label] += 1
            if t.score > obj.best_conf:
                obj.best_conf, obj.best_box = t.score, t.box
                if crop is not None:
                    obj.best_image = crop(t.box)
            if not obj.reported:
                if t.hits < self.cfg.min_hits:
                    continue
                obj.reported = True
                events.append(self._event("appeared", obj, t, label, ts))
            p = anchor_point(t.box, w, h, self.cfg.anchor)
            for ln in self.lines:
                if ln.classes and label not in ln.classes:
                    continue
                a, b = self._line_pts[ln.name]
                st = obj.lines.setdefault(ln.name, LineState())
                direction = line_step(st, p, a, b, self.cfg.line_margin, 1 if ln.in_side == "right" else -1)
                if direction is not None:
                    self.interval["lines"][ln.name][direction] += 1
                    self.totals["lines"][ln.name][direction] += 1
                    events.append(
                        {
                            **self._event("line_crossed", obj, t, label, ts),
                            "line": ln.name,
                            "direction": direction,
                        }
                    )
            for z in self.zones:
                if z.classes and label not in z.classes:
                    continue
                zst = obj.zones.setdefault(z.name, ZoneState())
                inside = point_in_polygon(p, self._zone_polys[z.name])
                got = zone_step(zst, inside, ts, z.min_dwell_s, self.cfg.zone_exit_frames)
                if got is not None:
                    events.append(self._zone_event(got, obj, t, label, ts, z.name))
        for t in removed:
            events.extend(self._end(t, t.last_frame, ts))
        return events

    def end_all(self, tracks: Sequence[Track], ts: float) -> List[Dict[str, Any]]:
        """The agent stops: every object still tracked ends now."""
        events: List[Dict[str, Any]] = []
        for t in tracks:
            events.extend(self._end(t, t.last_frame, ts))
        return events

    def _end(self, t: Track, _last_frame: int, ts: float) -> List[Dict[str, Any]]:
        obj = self.objects.pop(t.track_id, None)
        if obj is None or not obj.reported:
            return []
        label = obj.classes.most_common(1)[0][0] if obj.classes else ""
        events = []
        for name, zst in obj.zones.items():
            got = zone_end(zst)
            if got is not None:
                events.append(self._zone_event(got, obj, t, label, obj.last_ts, name))
        ended = self._event("ended", obj, t, label, ts)
        ended.update(
            duration_s=round(obj.last_ts - obj.first_ts, 3),
            first_seen=obj.first_ts,
            last_seen=obj.last_ts,
            classes=dict(obj.classes),
            best_confidence=round(obj.best_conf, 4),
            best_box=[round(v, 1) for v in obj.best_box],
        )
        if obj.best_image is not None:
            ended["_best_image"] = obj.best_image  # the app encodes it (or drops it) before queueing
        events.append(ended)
        return events

    def _zone_event(
        self, got: Tuple[str, float], obj: _Obj, t: Track, label: str, ts: float, zone: str
    ) -> Dict[str, Any]:
        kind, dwell = got
        if kind == "entered":
            self.interval["zones"][zone]["entered"] += 1
            self.totals["zones"][zone]["entered"] += 1
        return {**self._event(f"zone_{kind}", obj, t, label, ts), "zone": zone, "dwell_s": round(dwell, 3)}

    @staticmethod
    def _event(kind: str, obj: _Obj, t: Track, label: str, ts: float) -> Dict[str, Any]:
        return {
            "event": kind,
            "object_id": obj.track_id,
            "label": label,
            "confidence": round(t.score, 4),
            "box": [round(v, 1) for v in t.box],
            "ts": ts,
        }

    # ---- counts -------------------------------------------------------------------------------
    def occupancy(self) -> Dict[str, int]:
        """Objects currently counted inside each zone."""
        occ = {z.name: 0 for z in self.zones}
        for obj in self.objects.values():
            for name, zst in obj.zones.items():
                if zst.entered and name in occ:
                    occ[name] += 1
        return occ

    def counts_is_due(self, now: float) -> bool:
        """An interval has ended (and there is something to count)."""
        return now - self.interval_start >= self.interval_s and bool(self.lines or self.zones)

    def counts_due(self, now: float) -> Optional[Dict[str, Any]]:
        """The counts body when an interval has ended (then a new one starts), else None."""
        return self.take_counts(now) if self.counts_is_due(now) else None

    def take_counts(self, now: float) -> Dict[str, Any]:
        occ = self.occupancy()
        body: Dict[str, Any] = {
            "from": self.interval_start,
            "to": now,
            "lines": {
                n: {
                    **c,
                    "total_in": self.totals["lines"][n]["in"],
                    "total_out": self.totals["lines"][n]["out"],
                }
                for n, c in self.interval["lines"].items()
            },
            "zones": {
                n: {**c, "total_entered": self.totals["zones"][n]["entered"], "occupancy": occ[n]}
                for n, c in self.interval["zones"].items()
            },
        }
        self.interval = _zero_counts(self.zones, self.lines)
        self.interval_start = now
        return body

    def count_state(self) -> Dict[str, Any]:
        """What a checkpoint must hold so a restart neither loses nor repeats counts."""
        return {"interval_start": self.interval_start, "interval": self.interval, "totals": self.totals}

    def restore_counts(self, state: Any) -> Optional[str]:
        """Continue from a checkpoint; names no longer configured are dropped, new ones start at 0.
        Returns why the state was refused (then nothing is restored), or None."""
        try:
            start = float(state["interval_start"])
            if not math.isfinite(start):
                return "interval_start is not finite"
            parts = {}
            for part in ("interval", "totals"):
                fresh = _zero_counts(self.zones, self.lines)
                for kind in ("lines", "zones"):
                    for name, counters in fresh[kind].items():
                        old = state[part][kind].get(name, {})
                        for key in counters:
                            v = old.get(key, 0)
                            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= MAX_COUNT:
                                return f"{part}.{kind}.{name}.{key} = {v!r} is not a count"
                            counters[key] = v
                parts[part] = fresh
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            return f"not a count checkpoint ({type(exc).__name__}: {exc})"
        self.interval_start = start
        self.interval, self.totals = parts["interval"], parts["totals"]
        return None

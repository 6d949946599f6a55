"""Objects-mode counters as named integers and the operations on them that ride with a message.

The outbox stores the counters in the same SQLite transaction as the rows whose ``put()`` carried
them (docs/objects.md): a ``line_crossed`` or ``zone_entered`` event carries ``add 1`` to its total
and to its interval counter, a counts message carries ``set 0`` for every interval counter and the
new interval start. A row that is never stored takes its operations with it, so the stored totals
are exactly the crossings whose events were committed, across every boot and every kill -9.

A ``[[cameras]]`` camera's counters carry its id as a first element (``["gate","totals",...]``), so
two cameras' "door" lines never add up; the single ``[camera]`` keeps the names it always had.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Tuple

from edge_agent.core.objects.lifecycle import ObjectEvents

Op = Tuple[str, str, int]  # ("add" | "set", counter name, value)
START = json.dumps(["interval_start_ms"])
_COUNTED = {"line_crossed": ("lines", "line"), "zone_entered": ("zones", "zone")}


def key(part: str, kind: str, name: str, counter: str, camera: Optional[str] = None) -> str:
    """``["totals","lines","gate","in"]``: unambiguous whatever characters a line's name holds
    (a named camera's: ``["cam1","totals","lines","gate","in"]``)."""
    parts = [part, kind, name, counter] if camera is None else [camera, part, kind, name, counter]
    return json.dumps(parts, ensure_ascii=False, separators=(",", ":"))


def start_key(camera: Optional[str] = None) -> str:
    return START if camera is None else json.dumps(["interval_start_ms", camera], ensure_ascii=False)


def _counter(ev: Mapping[str, Any]) -> Optional[Tuple[str, str, str]]:
    counted = _COUNTED.get(str(ev.get("event")))
    if counted is None:
        return None
    kind, field = counted
    return kind, str(ev[field]), str(ev["direction"]) if kind == "lines" else "entered"


def event_ops(ev: Mapping[str, Any], camera: Optional[str] = None) -> List[Op]:
    """What an event adds to the counters (nothing for one that counts nothing)."""
    c = _counter(ev)
    if c is None:
        return []
    return [("add", key("totals", *c, camera=camera), 1), ("add", key("interval", *c, camera=camera), 1)]


def uncount(events: ObjectEvents, ev: Mapping[str, Any]) -> None:
    """The event was not queued: take back what :meth:`ObjectEvents.update` counted for it."""
    c = _counter(ev)
    if c is None:
        return
    kind, name, counter = c
    for part in (events.totals, events.interval):
        slot = part[kind].get(name)
        if slot is not None and slot.get(counter, 0) > 0:
            slot[counter] -= 1


def _ms(ts: float) -> int:
    return int(round(ts * 1000)) if math.isfinite(ts) and 0 <= ts < 1e13 else 0


def reset_ops(events: ObjectEvents, camera: Optional[str] = None) -> List[Op]:
    """A counts message was taken: its interval starts again from zero (``set``, not ``add``)."""
    ops: List[Op] = [("set", start_key(camera), _ms(events.interval_start))]
    for kind, names in events.interval.items():
        for name, counters in names.items():
            ops += [("set", key("interval", kind, name, c, camera), v) for c, v in counters.items()]
    return ops


def seed_ops(events: ObjectEvents, camera: Optional[str] = None) -> List[Op]:
    """Every counter as it is now (the one-time import of the old JSON checkpoint)."""
    ops = reset_ops(events, camera)
    for kind, names in events.totals.items():
        for name, counters in names.items():
            ops += [("set", key("totals", kind, name, c, camera), v) for c, v in counters.items()]
    return ops


def state_from(flat: Mapping[str, int], now: float, camera: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """The stored counters (of ``camera``) in :meth:`ObjectEvents.restore_counts`' shape; None when
    none is stored. A name that is not one of ours is ignored; values are checked by ``restore_counts``."""
    state: Dict[str, Any] = {"interval": {"lines": {}, "zones": {}}, "totals": {"lines": {}, "zones": {}}}
    found = False
    start = start_key(camera)
    for name, value in flat.items():
        if name == start:
            state["interval_start"] = value / 1000.0
            found = True
            continue
        try:
            parts = json.loads(name)
        except ValueError:
            continue
        if camera is not None:  # ours start with the camera's id
            if not (isinstance(parts, list) and len(parts) == 5 and parts[0] == camera):
                continue
            parts = parts[1:]
        if (
            isinstance(parts, list)
            and len(parts) == 4
            and all(isinstance(p, str) for p in parts)
            and parts[0] in state
            and parts[1] in ("lines", "zones")
        ):
            part, kind, obj, counter = parts
            state[part][kind].setdefault(obj, {})[counter] = value
            found = True
    if not found:
        return None
    state.setdefault("interval_start", now)
    return state

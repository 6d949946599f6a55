"""The model store's state (``models/active.json``), the trial, and update outcomes (pure).

``active.json`` is the only switch between model versions, and it is read at every start: a
damaged one must be one clear line naming the field, never a ``KeyError`` three modules later.
So it is parsed once, here, into :class:`StoreState`; everything else reads typed fields.
Version ids are path parts under ``models/versions/``: a ``..`` in one is refused here too.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

from edge_agent.core.updates.package import rate_collapsed
from edge_agent.errors import ModelError

_VID = re.compile(r"^[A-Za-z0-9_.+-]{1,200}$")  # <name>-<version>-<sha8>, as Manifest.version_id


class Outcome(str, enum.Enum):
    """What one install or rollback did. The values are what ``result.json``, the status topic's
    ``model_update.last.outcome`` and the CLI print: a str enum keeps them byte-identical."""

    SWITCHED = "switched"  # a new version is active (on trial)
    REFUSED = "refused"  # nothing changed: bad package, signature, version or gate
    UNCHANGED = "unchanged"  # nothing to do: already running, or the rollback's target is gone
    ROLLED_BACK = "rolled_back"  # the previous version (or the config's model) is active again

    def __str__(self) -> str:  # "switched", not "Outcome.SWITCHED" (format() too, on 3.12+)
        return str(self.value)


@dataclass
class Trial:
    """A version on probation after its switch (docs/model-updates.md, "Switch, trial, rollback")."""

    vid: str
    since: float  # unix time of the switch
    running: bool = False  # an agent runs it now; still set at a start = that agent died
    baseline_rate: Optional[float] = None  # the previous model's detections per frame
    forced: bool = False  # switched past a failed gate

    def to_json(self) -> Dict[str, Any]:
        return {
            "vid": self.vid,
            "since": self.since,
            "running": self.running,
            "baseline_rate": self.baseline_rate,
            "forced": self.forced,
        }


@dataclass(frozen=True)
class Verdict:
    passed: bool  # True: the trial is over and the model stays; False: roll it back
    reason: str


@dataclass
class TrialWatch:
    """The running agent's judgement of a :class:`Trial`, frame by frame. Pure: the agent's loop
    feeds it detection counts and acts on the one verdict it ever returns."""

    trial: Trial
    started: float  # time.monotonic() when the model began its trial in this process
    frames: int = 0
    detections: int = 0
    done: bool = False

    def observe(
        self, detections: int, now: float, trial_s: float, min_frames: int, collapse_ratio: float
    ) -> Optional[Verdict]:
        if self.done:
            return None
        self.frames += 1
        self.detections += detections
        rate = self.detections / self.frames
        base = self.trial.baseline_rate
        if base is not None and rate_collapsed(base, rate, self.frames, min_frames, collapse_ratio):
            self.done = True
            return Verdict(
                False,
                f"detection rate collapsed: {rate:.2f}/frame over {self.frames} frames, "
                f"the previous model had {base:.2f}/frame (collapse_ratio {collapse_ratio:g})",
            )
        if now - self.started >= trial_s and self.frames >= min_frames:
            self.done = True
            return Verdict(
                True, f"{self.frames} frames in {now - self.started:.0f}s, {rate:.2f} detections/frame"
            )
        return None


@dataclass
class Highest:
    """The anti-rollback mark: the highest version ever switched to, and the package that set it."""

    version: str
    vid: Optional[str]

    def to_json(self) -> Dict[str, Any]:
        return {"version": self.version, "vid": self.vid}


MAX_ROLLED_BACK = 32  # remembered rolled-back versions; the oldest is forgotten first


@dataclass
class RolledBack:
    """A version rolled back on this device: refused over MQTT until a newer one is installed."""

    version: str
    vid: Optional[str]
    reason: str
    at: float

    def to_json(self) -> Dict[str, Any]:
        return {"version": self.version, "vid": self.vid, "reason": self.reason, "at": self.at}


@dataclass
class StoreState:
    current: Optional[str] = None  # active version id; None = the config's model
    history: List[Optional[str]] = field(default_factory=list)  # previous ones, oldest first
    trial: Optional[Trial] = None
    highest: Optional[Highest] = None  # absent in stores from before anti-rollback
    last: Optional[Dict[str, Any]] = None  # the last install/rollback event, as published
    rolled_back: List[RolledBack] = field(default_factory=list)  # oldest first, bounded
    updated_at: Optional[float] = None
    extra: Dict[str, Any] = field(default_factory=dict)  # keys of a newer agent, kept as they are

    def kept(self) -> List[Optional[str]]:
        """The versions the device keeps on disk: the active one and its history."""
        return [self.current, *self.history]

    def on_trial(self, vid: Optional[str]) -> Optional[Trial]:
        return self.trial if self.trial is not None and self.trial.vid == vid else None

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = dict(self.extra)
        out.update(
            current=self.current,
            history=list(self.history),
            trial=self.trial.to_json() if self.trial is not None else None,
            last=self.last,
            updated_at=self.updated_at,
        )
        if self.highest is not None:
            out["highest"] = self.highest.to_json()
        if self.rolled_back:
            out["rolled_back"] = [r.to_json() for r in self.rolled_back[-MAX_ROLLED_BACK:]]
        return out

    def remember_rollback(self, entry: RolledBack) -> None:
        """``entry`` refused from now on (one entry per version, the newest reason kept)."""
        self.rolled_back = [r for r in self.rolled_back if r.version != entry.version]
        self.rolled_back = [*self.rolled_back, entry][-MAX_ROLLED_BACK:]

    @classmethod
    def from_json(cls, data: object, source: str) -> StoreState:
        """``data`` as ``json.loads`` gave it; ModelError names ``source`` and the bad field."""
        if not isinstance(data, dict):
            raise ModelError(f"{source}: expected a JSON object, got {type(data).__name__}")
        known = ("current", "history", "trial", "highest", "last", "rolled_back", "updated_at")
        history = data.get("history", [])
        if not isinstance(history, list):
            raise ModelError(f"{source}: history: expected a list of version ids, got {_show(history)}")
        return cls(
            current=_vid(data.get("current"), source, "current", optional=True),
            history=[_vid(h, source, f"history[{i}]", optional=True) for i, h in enumerate(history)],
            trial=_trial(data.get("trial"), source),
            highest=_highest(data.get("highest"), source),
            last=_obj(data.get("last"), source, "last"),
            rolled_back=_rolled_back(data.get("rolled_back", []), source),
            updated_at=_num(data.get("updated_at"), source, "updated_at", optional=True),
            extra={k: v for k, v in data.items() if k not in known},
        )


def _show(value: object) -> str:
    return repr(value)[:60]


def _vid(value: object, source: str, name: str, optional: bool = False) -> Optional[str]:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not _VID.fullmatch(value) or set(value) == {"."}:
        raise ModelError(
            f"{source}: {name}: expected a version id (letters, digits, _.+-){' or null' if optional else ''}, "
            f"got {_show(value)}"
        )
    return value


def _num(value: object, source: str, name: str, optional: bool = False) -> Optional[float]:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ModelError(
            f"{source}: {name}: expected a number{' or null' if optional else ''}, got {_show(value)}"
        )
    return float(value)


def _bool(value: object, source: str, name: str) -> bool:
    if not isinstance(value, bool):
        raise ModelError(f"{source}: {name}: expected true or false, got {_show(value)}")
    return value


def _obj(value: object, source: str, name: str) -> Optional[Dict[str, Any]]:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ModelError(f"{source}: {name}: expected an object or null, got {_show(value)}")
    return dict(value)


def _trial(value: object, source: str) -> Optional[Trial]:
    raw = _obj(value, source, "trial")
    if raw is None:
        return None
    vid = _vid(raw.get("vid"), source, "trial.vid")
    since = _num(raw.get("since"), source, "trial.since")
    assert vid is not None and since is not None
    return Trial(
        vid=vid,
        since=since,
        running=_bool(raw.get("running", False), source, "trial.running"),
        baseline_rate=_num(raw.get("baseline_rate"), source, "trial.baseline_rate", optional=True),
        forced=_bool(raw.get("forced", False), source, "trial.forced"),
    )


def _highest(value: object, source: str) -> Optional[Highest]:
    raw = _obj(value, source, "highest")
    if raw is None:
        return None
    version = raw.get("version")
    if not isinstance(version, str) or not version:
        raise ModelError(f"{source}: highest.version: expected a version string, got {_show(version)}")
    return Highest(version=version, vid=_vid(raw.get("vid"), source, "highest.vid", optional=True))


def _rolled_back(value: object, source: str) -> List[RolledBack]:
    if not isinstance(value, list):
        raise ModelError(f"{source}: rolled_back: expected a list, got {_show(value)}")
    out = []
    for i, item in enumerate(value[-MAX_ROLLED_BACK:]):
        raw = _obj(item, source, f"rolled_back[{i}]") or {}
        version, reason = raw.get("version"), raw.get("reason", "")
        if not isinstance(version, str) or not 0 < len(version) <= 50:
            raise ModelError(f"{source}: rolled_back[{i}].version: expected a version, got {_show(version)}")
        if not isinstance(reason, str):
            raise ModelError(f"{source}: rolled_back[{i}].reason: expected a string, got {_show(reason)}")
        at = _num(raw.get("at", 0), source, f"rolled_back[{i}].at")
        assert at is not None
        vid = _vid(raw.get("vid"), source, f"rolled_back[{i}].vid", optional=True)
        out.append(RolledBack(version=version, vid=vid, reason=reason[:300], at=at))
    return out


def event(
    outcome: Outcome,
    detail: str,
    origin: str,
    at: float,
    version: Optional[Mapping[str, str]] = None,
    gate: Optional[Dict[str, Any]] = None,
    signer: Optional[int] = None,
) -> Dict[str, Any]:
    """One install/rollback event, as ``result.json``, ``active.json``'s ``last`` and the status
    topic carry it (docs/model-updates.md); the field names live here only."""
    return {
        "outcome": outcome.value,  # a plain str: the event dict is JSON as it is
        "detail": detail,
        "version": dict(version) if version is not None else None,
        "origin": origin,
        "at": at,
        "gate": gate,
        "signed_by_key": signer,
    }

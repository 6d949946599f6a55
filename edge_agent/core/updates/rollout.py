"""Staged rollout rules (``edge-agent model rollout``), pure: who the canaries are, what a
device's status says about one rollout, when a rollout moves on and when it halts.

Kept apart from the I/O (app/updates/rollout_run.py drives MQTT and the collector's database)
so that the rules a fleet's safety depends on -- "the rest only after every canary passed its
trial", "halt after K failures" -- are tested without a broker, and a resumed rollout decides
exactly as the one whose process died would have (the decision is a function of the recorded
verdicts only).
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence

_CANARY = re.compile(r"^(\d{1,7})(%?)$")


class Verdict(str, enum.Enum):
    """One device's verdict on one rollout, as stored (``rollout_verdicts.verdict``)."""

    SWITCHED = "switched"  # gate passed, the version runs, on trial
    PASSED = "passed"  # switched and its trial ended without a rollback (or it already ran it)
    REFUSED = "refused"  # at the begin (signature, targets, rolled back, space) or by the gate
    ROLLED_BACK = "rolled_back"  # switched, then rolled back (trial, crash, damaged files)

    def __str__(self) -> str:
        return str(self.value)


FINAL = (Verdict.PASSED, Verdict.REFUSED, Verdict.ROLLED_BACK)
FAILED = (Verdict.REFUSED, Verdict.ROLLED_BACK)


@dataclass(frozen=True)
class CanarySpec:
    """``--canary N`` (devices) or ``--canary P%`` (of the group, rounded up, at least 1)."""

    count: int
    percent: bool

    def __str__(self) -> str:
        return f"{self.count}{'%' if self.percent else ''}"

    def how_many(self, members: int) -> int:
        if self.percent:
            return min(members, max(1, math.ceil(members * self.count / 100)))
        return min(members, self.count)


def parse_canary(text: str) -> CanarySpec:
    """ValueError naming the value and what is expected."""
    m = _CANARY.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"--canary {text[:40]!r}: expected a number of devices (2) or a percentage (10%)")
    n, pct = int(m.group(1)), bool(m.group(2))
    if n < 1 or (pct and n > 100):
        raise ValueError(f"--canary {text!r}: expected 1..N devices or 1%..100%")
    return CanarySpec(n, pct)


def plan_stages(members: Sequence[str], canary: CanarySpec, wave: int) -> List[List[str]]:
    """Stage 0: the canaries, the first of the sorted member ids (the same on every run and
    resume); then the rest in waves of ``wave`` devices (0: all of them at once)."""
    ids = sorted(set(members))
    n = canary.how_many(len(ids))
    rest = ids[n:]
    size = wave if wave > 0 else max(1, len(rest))
    return [ids[:n], *[rest[i : i + size] for i in range(0, len(rest), size)]]


def verdict_of(status: Mapping[str, Any], transfer_id: str, vid: str) -> Optional[tuple[Verdict, str]]:
    """What a device's status body (its retained ``<prefix>/<device>/status``) says about the
    package ``vid`` sent as ``transfer_id``: a verdict and its detail, or None (no word yet).

    The order matters: a device already running ``vid`` refuses the begin as not newer, which is a
    success for a rollout; a rollback of ``vid`` is named by its version id whatever its origin
    (the trial, a crash at the next start, `model rollback`)."""
    mu = status.get("model_update")
    if not isinstance(mu, dict):
        return None
    cur, last, transfer = _part(mu, "current"), _part(mu, "last"), _part(mu, "transfer")
    trial = mu.get("trial") if isinstance(mu.get("trial"), dict) else None
    detail = str(last.get("detail", ""))[:500]
    if cur.get("id") == vid:
        if trial is not None and trial.get("vid") == vid:
            return Verdict.SWITCHED, detail or f"{vid} on trial"
        return Verdict.PASSED, f"{vid} runs, its trial is over"
    version = _part(last, "version")
    if last.get("outcome") == "rolled_back" and version.get("name") == vid:
        return Verdict.ROLLED_BACK, detail
    if last.get("origin") == f"mqtt:{transfer_id}" and last.get("outcome") == "refused":
        return Verdict.REFUSED, detail
    if transfer.get("transfer_id") == transfer_id and transfer.get("refused"):
        return Verdict.REFUSED, str(transfer["refused"])[:500]
    return None


def _part(body: Mapping[str, Any], key: str) -> Dict[str, Any]:
    value = body.get(key)
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class Decision:
    """What to do next: ``state`` "halted" (``reason``), "done", or the stage to be in."""

    state: str  # "running", "halted", "done"
    stage: int
    reason: str = ""


def decide(stages: Sequence[Sequence[str]], verdicts: Mapping[str, Verdict], halt_after: int) -> Decision:
    """The next step from the newest verdict of every device (``verdicts``): halt when
    ``halt_after`` devices refused or rolled back, or when a canary did (the rest starts only
    after every canary passed); else the first stage not yet finished."""
    failed = sorted(d for s in stages for d in s if verdicts.get(d) in FAILED)
    canary_failed = [d for d in stages[0] if verdicts.get(d) in FAILED] if stages else []
    if len(failed) >= halt_after or canary_failed:
        who = ", ".join(f"{d} {verdicts[d]}" for d in failed)
        why = "canary failed" if canary_failed else f"{len(failed)} failed (--halt-after {halt_after})"
        return Decision("halted", _current(stages, verdicts), f"{why}: {who}")
    for i, stage in enumerate(stages):
        if i == 0:
            if any(verdicts.get(d) is not Verdict.PASSED for d in stage):
                return Decision("running", 0)
        elif any(verdicts.get(d) not in FINAL for d in stage):
            return Decision("running", i)
    return Decision("done", len(stages) - 1 if stages else 0)


def _current(stages: Sequence[Sequence[str]], verdicts: Mapping[str, Verdict]) -> int:
    """The last stage any device of which has a verdict (where a halt happened)."""
    at = 0
    for i, stage in enumerate(stages):
        if any(d in verdicts for d in stage):
            at = i
    return at


def waiting(stage: Sequence[str], verdicts: Mapping[str, Verdict]) -> Dict[str, str]:
    """Devices of ``stage`` without a final verdict: device -> what it is waiting for."""
    out = {}
    for d in stage:
        v = verdicts.get(d)
        if v is None:
            out[d] = "no answer"
        elif v is Verdict.SWITCHED:
            out[d] = "on trial"
    return out

"""Driving one staged rollout: read the members' statuses, store their verdicts, push the next
stage or halt (the rules: core/updates/rollout.py; the state: adapters/collector/rollouts.py).

Every step starts from what the database and the devices' *retained* status topics say, never
from memory: a rollout whose operator process died is resumed by running a step again
(``model rollout --resume ID``), which sees the same retained statuses, stores only the
verdicts not stored yet, and re-pushes a stage whose push was cut off under the same transfer
id (the devices skip the chunks they have).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import paho.mqtt.client as mqtt

from edge_agent.adapters.collector import rollouts
from edge_agent.adapters.collector.rollouts import Rollout, VerdictRow
from edge_agent.app.updates.push import _connect, push_package
from edge_agent.core.updates.rollout import (
    FINAL,
    CanarySpec,
    Verdict,
    decide,
    plan_stages,
    verdict_of,
    waiting,
)
from edge_agent.errors import ModelError, SyncError

if TYPE_CHECKING:
    from edge_agent.adapters.collector.db import CollectorDb
    from edge_agent.core.config.schema import Config

SETTLE_S = 1.0  # after the SUBACK: the retained statuses of every member arrive within it
POLL_S = 0.5


class StatusWatch:
    """The newest status body of each member device (retained, then live)."""

    def __init__(self, cfg: Config, members: set[str]) -> None:
        self.members = members
        self.bodies: dict[str, dict[str, Any]] = {}  # the newest of each device
        self._new: list[tuple[str, dict[str, Any]]] = []  # every body since the last drain, in order
        self._lock = threading.Lock()
        self._subscribed = threading.Event()
        self._client = _connect(cfg, "watch")
        self._client.on_message = self._on_message
        self._client.on_subscribe = lambda *a: self._subscribed.set()
        self._client.subscribe(f"{cfg.mqtt.topic_prefix.strip('/')}/+/status", qos=1)

    def _on_message(self, client: mqtt.Client, userdata: object, msg: mqtt.MQTTMessage) -> None:
        try:
            body = json.loads(msg.payload.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return
        dev = body.get("device_id") if isinstance(body, dict) else None
        # the topic's device, not the body's claim, and only members: one device cannot answer for another
        if dev in self.members and msg.topic.split("/")[-2] == dev:
            with self._lock:
                self.bodies[str(dev)] = body
                self._new.append((str(dev), body))

    def settle(self, timeout_s: float = 10.0) -> None:
        if not self._subscribed.wait(timeout_s):
            raise SyncError(f"the broker did not acknowledge the status subscription within {timeout_s:g} s")
        time.sleep(SETTLE_S)

    def drain(self) -> list[tuple[str, dict[str, Any]]]:
        """Every body that arrived since the last call, in order, then the newest of every
        device again: a device on trial for less than a poll still shows "switched", and one
        whose stage was just pushed is judged on the status it had (it may run the version)."""
        with self._lock:
            new, self._new = self._new, []
            return [*new, *sorted(self.bodies.items())]

    def close(self) -> None:
        self._client.disconnect()
        self._client.loop_stop()


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def start(
    db: CollectorDb,
    pkg: Path,
    group: str,
    members: list[str],
    canary: CanarySpec,
    halt_after: int,
    wave: int,
) -> Rollout:
    """A new rollout, recorded before anything is sent (its id is then the handle to resume)."""
    from edge_agent.adapters.updates.package_file import PackageReader

    with PackageReader(pkg) as r:
        m = r.manifest
    if group not in m.for_groups and not set(members) <= set(m.for_devices):
        outside = sorted(set(members) - set(m.for_devices))
        raise ModelError(
            f"{pkg}: its signed manifest names neither group {group!r} nor devices {outside[:5]}: "
            f"they would refuse it (repack with `model pack --for-group {group}`)"
        )
    now = time.time()
    ro = Rollout(
        id=f"r{uuid.uuid4().hex[:10]}",
        created=now,
        updated=now,
        package=str(pkg.resolve()),
        package_sha256=sha256_of(pkg),
        name=m.name,
        version=m.version,
        vid=m.version_id,
        group=group,
        canary=str(canary),
        halt_after=halt_after,
        wave=wave,
        stages=plan_stages(members, canary, wave),
        state="running",
        stage=0,
        pushed=-1,
    )
    rollouts.create(db, ro)
    return ro


def newest(rows: list[VerdictRow]) -> dict[str, Verdict]:
    """Each device's verdict now: the newest row, a final one over ``switched`` at the same time."""
    out: dict[str, tuple[float, int, Verdict]] = {}
    for v in rows:
        ver = Verdict(v.verdict)
        key = (v.at, 1 if ver in FINAL else 0, ver)
        if v.device not in out or key[:2] >= out[v.device][:2]:
            out[v.device] = key
    return {d: k[2] for d, k in out.items()}


def record(
    db: CollectorDb, ro: Rollout, bodies: list[tuple[str, dict[str, Any]]], say: Callable[[str], None]
) -> None:
    """Store the verdict each pushed device's statuses show, once per device and verdict."""
    for dev, body in bodies:
        stage = ro.stage_of(dev)
        if stage is None or stage > max(ro.pushed, ro.stage):
            continue  # not sent to it (yet): whatever it runs is not this rollout's doing
        tid = ro.transfer_id(stage)
        found = verdict_of(body, tid, ro.vid)
        if found is None:
            continue
        verdict, detail = found
        row = VerdictRow(ro.id, dev, stage, tid, verdict.value, detail, time.time())
        if rollouts.add_verdict(db, row):
            say(f"{dev}: {verdict}: {detail}")


def step(
    db: CollectorDb,
    cfg: Config,
    ro: Rollout,
    pkg: Path,
    *,
    wait: bool,
    timeout_s: float,
    say: Callable[[str], None],
) -> Rollout:
    """Advance ``ro`` as far as the verdicts allow; with ``wait`` until it is done, halted or
    ``timeout_s`` passed, else one pass (record, push what is due, return)."""
    members = {d for s in ro.stages for d in s}
    watch = StatusWatch(cfg, members)
    deadline = time.monotonic() + timeout_s
    try:
        watch.settle()
        while True:
            record(db, ro, watch.drain(), say)
            verdicts = newest(rollouts.verdicts(db, ro.id))
            d = decide(ro.stages, verdicts, ro.halt_after)
            if d.state != "running":
                ro.state, ro.stage = d.state, d.stage
                ro.reason = _why(db, ro, d.reason) if d.state == "halted" else None
                rollouts.update(db, ro)
                return ro
            if d.stage > ro.pushed:
                todo = [x for x in ro.stages[d.stage] if x not in verdicts]
                say(f"stage {d.stage}{' (canaries)' if d.stage == 0 else ''}: pushing to {', '.join(todo)}")
                ro.stage = d.stage  # first: a push cut off half way is judged as sent at the resume
                rollouts.update(db, ro)
                push_package(cfg, pkg, todo, None, transfer_id=ro.transfer_id(d.stage))
                ro.pushed = d.stage
                rollouts.update(db, ro)
                continue  # record again: a device that had it already answers at once
            if not wait or time.monotonic() >= deadline:
                ro.stage = d.stage
                rollouts.update(db, ro)
                return ro
            time.sleep(POLL_S)
    finally:
        watch.close()


def _why(db: CollectorDb, ro: Rollout, reason: str) -> str:
    """The decision's reason and, for every failed device, what it said."""
    details = {
        v.device: v.detail for v in rollouts.verdicts(db, ro.id) if v.verdict in ("refused", "rolled_back")
    }
    return "; ".join([reason, *(f"{dev}: {text[:300]}" for dev, text in sorted(details.items()))])


def pending(ro: Rollout, db: CollectorDb) -> dict[str, str]:
    """The devices of the current stage still without a final verdict (for the CLI's message)."""
    verdicts = newest(rollouts.verdicts(db, ro.id))
    return waiting(ro.stages[ro.stage], verdicts) if ro.stages else {}


def package_for(ro: Rollout, given: Optional[Path]) -> Path:
    """The package to resume with: ``given`` or the recorded path, only if its sha256 is the
    recorded one (another file under the same name is not this rollout's package)."""
    pkg = given if given is not None else Path(ro.package)
    if not pkg.is_file():
        raise ModelError(f"{pkg}: no such package file (rollout {ro.id} was started with {ro.package})")
    if sha256_of(pkg) != ro.package_sha256:
        raise ModelError(
            f"{pkg}: not the package of rollout {ro.id} (sha256 {ro.package_sha256[:16]}... expected)"
        )
    return pkg

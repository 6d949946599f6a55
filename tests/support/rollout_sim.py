"""Simulated rollout devices: the REAL model receiver (ModelReceiver: persistent session, signed
begin, chunk hashes, the inbox) and a retained status carrying the agent's ``model_update``
block, built with the agent's own ``build_status`` (schemas/status.json validates it).

Only the install is played: instead of gating, a device does what its ``behaviour`` says --
"pass" (switched, on trial for ``trial_s``, then passed), "refuse" (the gate's refusal),
"rollback" (switched, then rolled back by its trial) or "silent" (receives, never answers).
Five real agents (a model run each, a gate on the sample images) are too heavy for the 2-core
test machine; one real agent as the canary plus these speaks the same MQTT to the rollout.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Optional

import paho.mqtt.client as mqtt
import pytest

from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.adapters.updates.package_file import PackageReader
from edge_agent.adapters.updates.receiver import ModelReceiver
from edge_agent.app.cli.configfile import load_config
from edge_agent.core.messages.status import build_status
from edge_agent.core.updates.store_state import Outcome, event
from support import cli, wait_until
from support.collector import sqlite_url
from support.updates import write_config

MEMBERS = [f"cam-{i}" for i in range(1, 6)]  # the group of the rollout tests, sorted: cam-1 the canary


def with_login(cfg: Path, user: str, password_file: Optional[Path]) -> Path:
    """``cfg`` logging in as ``user`` with role user names (nothing changed without a file)."""
    if password_file is not None:
        text = cfg.read_text()
        assert "[mqtt]\n" in text
        login = f'[mqtt]\nusername = "{user}"\npassword_file = "{password_file}"\nrole_usernames = true\n'
        cfg.write_text(text.replace("[mqtt]\n", login, 1))
    return cfg


# an empty outbox's stats (the schema requires every field)
QUEUE: dict[str, Any] = {
    **dict.fromkeys(
        ("pending", "inflight", "unflushed", "bytes", "seq", "dropped", "expired", "rejected"), 0
    ),
    **dict.fromkeys(("salvaged", "lost", "corrupt_files", "crashes", "seq_skipped"), 0),
    "oldest": None,
    "boot": 1,
    "disk_full": False,
}


class SimDevice:
    def __init__(
        self,
        root: Path,
        port: int,
        device: str,
        pub: str,
        behaviour: str,
        trial_s: float = 0.5,
        password_file: Optional[Path] = None,
    ):
        """``password_file``: an enrolled broker's (`fleet enroll`): the receiver logs in as
        ``<device>-model`` and the status as ``<device>``, as a real agent with role_usernames."""
        root.mkdir(parents=True, exist_ok=True)
        extra = f'[model_update]\ntrusted_keys = ["{pub}"]\ngroups = ["fleet-a"]'
        self.cfg = load_config(
            with_login(write_config(root, port=port, device=device, extra=extra), device, password_file)
        )
        self.device, self.behaviour, self.trial_s = device, behaviour, trial_s
        state = Path(self.cfg.device.state_dir)
        self.inbox = state / "inbox"
        self.transfers = state / "transfers"
        self.received: list[str] = []  # transfer ids whose package arrived complete
        self.statuses: list[dict[str, Any]] = []  # every status published
        self.current: dict[str, Any] = {"id": None, "model": "demo-detector.onnx"}
        self.trial: Optional[dict[str, Any]] = None
        self.last: Optional[dict[str, Any]] = None
        self.transfer: Optional[dict[str, Any]] = None
        self._lock = threading.Lock()
        self.pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=device)
        if password_file is not None:
            self.pub.username_pw_set(device, password_file.read_text().strip())
        self.pub.connect("127.0.0.1", port)
        self.pub.loop_start()
        self.rx = ModelReceiver(self.cfg, self.transfers, self.inbox, self._progress)
        self.rx.start()

    # ---- the agent's side, played ------------------------------------------------------------
    def _progress(self, info: Optional[dict[str, Any]]) -> None:
        self.transfer = info
        if info and info.get("complete"):
            threading.Thread(target=self._install, args=(info["transfer_id"],), daemon=True).start()
        self.publish()

    def _install(self, tid: str) -> None:
        pkg = self.inbox / f"{tid}.pkg"
        with PackageReader(pkg) as r:
            m = r.manifest
        self.received.append(tid)
        origin, now = f"mqtt:{tid}", time.time()
        if self.behaviour == "silent":
            return
        if self.behaviour == "refuse":
            self.last = event(
                Outcome.REFUSED, "gate on 3 probe images: REFUSED: recall 0.0 (sim)", origin, now, m.summary()
            )
            self.publish()
            return
        vid = m.version_id
        self.current = {**m.summary(), "id": vid, "created_at": m.created_at}
        self.trial = {"vid": vid, "since": now, "running": True, "baseline_rate": 1.0, "forced": False}
        self.last = event(Outcome.SWITCHED, "gate passed (sim)", origin, now, m.summary())
        self.publish()
        time.sleep(self.trial_s)
        self.trial = None
        if self.behaviour == "rollback":
            self.current = {"id": None, "model": "demo-detector.onnx"}
            self.last = event(
                Outcome.ROLLED_BACK,
                f"{vid} -> config model: detection rate collapsed (sim)",
                "agent",
                time.time(),
                {"name": vid},
            )
        self.publish()

    def publish(self) -> None:
        now = time.time()
        mu = {
            "current": self.current,
            "history": [],
            "trial": self.trial,
            "last": self.last,
            "state": "idle",
            "errors": 0,
            "transfer": self.transfer,
            "ring_frames": None,
            "receiver": self.rx.snapshot() if hasattr(self, "rx") else {"alive": False},
        }
        body = build_status(
            device_id=self.device,
            version="sim",
            state="running",
            ts=now,
            started_at=now,
            uptime_s=0.0,
            ready_s=0.1,
            pid=0,
            counters={},
            fps=0.0,
            latency_ms={},
            queue=QUEUE,
            broker=None,
            camera=None,
            sensor=None,
            provider=None,
            models={"detector": self._detector()},
            clock_synced=True,
            model_update=mu,
        )
        with self._lock:
            self.statuses.append(body)
            self.pub.publish(
                f"edge/{self.device}/status", json.dumps(body), qos=1, retain=True
            ).wait_for_publish(10)

    def _detector(self) -> dict[str, str]:
        sha = self.current.get("detector_sha256") or "0" * 64  # the config's model: any hash
        return {"id": self.current.get("id") or "demo-detector", "sha256": sha, "quantization": "int8"}

    def stop(self) -> None:
        self.rx.stop()
        self.pub.disconnect()
        self.pub.loop_stop()


# ---- the rollout tests' helpers --------------------------------------------------------------
def new_db(tmp_path: Path) -> str:
    """A fresh SQLite collector database, migrated."""
    url = sqlite_url(tmp_path / "fleet.db")
    db = CollectorDb(url)
    db.migrate()  # what `edge-agent collect` does at its start
    db.close()
    return url


def pg_db(request: pytest.FixtureRequest) -> str:
    """An emptied, migrated database of the module's PostgreSQL (skips without PostgreSQL)."""
    pg = request.getfixturevalue("postgres")
    db = CollectorDb(pg.url)
    db.conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    db.migrate()
    db.close()
    return str(pg.url)


def rollout(url: str, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """`edge-agent model rollout ARGS --db URL` as a child process."""
    return cli("model", "rollout", *args, "--db", url, quiet=False, timeout=timeout)


def members_args(members: list[str] = MEMBERS) -> list[str]:
    return [a for m in members for a in ("--member", m)]


def start_sims(
    tmp_path: Path, port: int, pub: str, behaviours: dict[str, str], sims: list[SimDevice], **kw: Any
) -> dict[str, SimDevice]:
    """A simulated device per ``behaviours`` entry (added to ``sims``, stopped by the fixture),
    subscribed and with its first retained status out."""
    out = {}
    for dev, how in behaviours.items():
        s = SimDevice(tmp_path / f"sim-{dev}", port, dev, pub, how, **kw)
        sims.append(s)
        out[dev] = s
    wait_until(
        lambda: all(s.rx.subscribed.is_set() for s in out.values()), what="the simulated receivers subscribed"
    )
    for s in out.values():
        s.publish()  # its first retained status: running the config's model
    return out


def rollout_id(out: str) -> str:
    """The id from the first `rollout rXXXX: ...` line."""
    line = next(x for x in out.splitlines() if x.startswith("rollout r"))
    return line.split()[1].rstrip(":")

"""The running agent's side of model updates: load with rollback, the inbox, MQTT, the trial.

One worker thread does the slow things (gate, staging, rollback) so the inference loop never
waits on them and keeps pinging the watchdog; the loop only hands it frames' detection counts.

Trial: after a switch the new model is "on trial" for ``trial_s``. It is rolled back when it
does not load (at the switch or at any later start), when the agent ends uncleanly while it is on
trial (a crash, systemd's watchdog kill, a power cut: the trial's ``running`` flag is still set at
the next start), or when its detections per frame collapse below ``collapse_ratio`` x the old one's.
"""

from __future__ import annotations

import fcntl
import json
import logging
import math
import os
import queue
import stat
import threading
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from edge_agent.adapters.host.durable import write_durable
from edge_agent.adapters.runtime.planner import ProviderPlanner
from edge_agent.adapters.updates.cancels import MARK, drop_marks, refused_as_cancelled
from edge_agent.adapters.updates.frame_ring import FrameRing
from edge_agent.adapters.updates.package_file import PRIVATE_DIR_MODE, make_dir, tighten_dir
from edge_agent.app.agent.modelset import ModelSet
from edge_agent.app.updates import switch as model_switch
from edge_agent.core.config.schema import Config
from edge_agent.core.updates.store_state import Outcome, TrialWatch
from edge_agent.errors import EdgeAgentError

if TYPE_CHECKING:
    from edge_agent.adapters.updates.receiver import ModelReceiver

log = logging.getLogger("edge_agent.model_update")
INBOX_POLL_S = 1.0
MAX_ATTEMPTS = 2


def inbox_dir(cfg: Config) -> Path:
    mu = cfg.model_update
    return Path(mu.inbox) if mu.inbox else model_switch.store_for(cfg).root / "inbox"


def pid_file(cfg: Config) -> Path:
    return model_switch.store_for(cfg).root / "agent.pid"


_RUN_LOCKS: dict[str, int] = {}  # lock path -> fd held for this process's lifetime


def hold_run_lock(cfg: Config) -> None:
    """One agent per state directory, decided *before* the start-up repairs: a second
    ``edge-agent run`` must not read the first one's trial as an unclean end and roll its model back
    on disk (issue 22). An flock dies with its process, so a crash never leaves a stale lock."""
    store = model_switch.store_for(cfg)
    path = str(store.root / "run.lock")
    if path in _RUN_LOCKS:
        return
    try:
        store.ensure()
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o640)
    except OSError as exc:  # a read-only state dir: nothing will be written anyway
        log.debug("run lock %s not taken: %s", path, exc)
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        try:
            other = f" (pid {int(pid_file(cfg).read_text().strip())})"
        except (OSError, ValueError):
            other = ""
        raise EdgeAgentError(
            f"{cfg.device.state_dir}: another edge-agent run uses this state directory{other}; stop it first"
        ) from None
    _RUN_LOCKS[path] = fd


def release_run_lock(cfg: Config) -> None:
    fd = _RUN_LOCKS.pop(str(model_switch.store_for(cfg).root / "run.lock"), None)
    if fd is not None:
        os.close(fd)


def _arrival(path: Path) -> float:
    """A package's place in the queue, oldest first. lstat, and a file gone since the listing
    sorts last: a dangling symlink (refused as not a regular file when its turn comes) or a
    package removed meanwhile must not fail the whole scan at every poll."""
    try:
        return path.lstat().st_mtime
    except OSError:
        return math.inf


class ModelUpdates:
    def __init__(self, cfg: Config, request_reload: Callable[[], None]) -> None:
        from edge_agent.adapters.updates import signing

        signing.check_keys(cfg.model_update.trusted_keys)  # a typo'd key fails the start, not an install
        self.cfg = cfg
        self.store = model_switch.store_for(cfg)
        self.inbox = inbox_dir(cfg)
        self.request_reload = request_reload
        self.publish: Optional[Callable[[], Any]] = None
        mu = cfg.model_update
        self.ring = FrameRing(self.store.root / "ring", mu.ring_frames, mu.ring_interval_s, mu.ring_max_age_h)
        self.state = "idle"
        self.transfer: Optional[dict[str, Any]] = None
        self._jobs: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._receiver: Optional[ModelReceiver] = None
        self.receiver_off: Optional[str] = None  # why MQTT delivery is off (the status shows it)
        self._recent: deque[int] = deque(maxlen=300)  # detections per frame of the running model
        self._watch: Optional[TrialWatch] = None  # the trial of the model this process runs
        self._started = False
        self._in_progress: Optional[Path] = None  # the request file of the install running now
        self.errors = 0  # jobs the worker failed (logged each; the status shows the count)
        self._planner: Optional[ProviderPlanner] = None  # made by the first build_models

    # ---- loading ----------------------------------------------------------------------------
    def build_models(self, cfg: Config) -> ModelSet:
        """The active version's models; a version that fails to load is rolled back, then the next."""
        self.cfg = cfg
        if not self._started:
            hold_run_lock(cfg)
            self._started = True
            self.store.clean_staging()
            state = self.store.state()
            trial = state.on_trial(state.current)
            if trial is not None and trial.running:
                model_switch.rollback(
                    cfg,
                    "the agent ended uncleanly while it was on trial (crash, watchdog kill or power cut)",
                    origin="agent",
                )
        # the host is read once: a rollback's retry, a reload and a switch all plan on this one
        self._planner = self._planner or ProviderPlanner.detect()
        while True:
            vid = self.store.state().current
            try:
                if vid:
                    self.store.verify(vid)
                effective = model_switch.effective_config(cfg, vid, self.store)
                models = ModelSet.from_config(effective, self._planner)
                break
            except EdgeAgentError as exc:
                if not vid:
                    raise
                model_switch.rollback(cfg, f"does not load: {exc}", origin="agent")
        self._begin_trial(vid)
        return models

    def _begin_trial(self, vid: Optional[str]) -> None:
        self._recent.clear()
        self._watch = None
        if self.store.state().on_trial(vid) is None:
            return  # no trial: nothing to write (and a read-only state dir is no error here)
        with self.store.locked():
            state = self.store.state()
            trial = state.on_trial(vid)
            if trial is None:
                return
            trial.running = True
            self.store.save(state)
        self._watch = TrialWatch(trial, started=time.monotonic())
        log.info("model %s on trial for %.0fs", vid, self.cfg.model_update.trial_s)

    # ---- the loop's hooks (loop thread: cheap only) -----------------------------------------
    def on_frame(self, detections: int) -> None:
        """The trial's per-frame count (``app.frame_steps.feed_model_updates`` writes the ring)."""
        self._recent.append(detections)
        w = self._watch
        if w is None:
            return
        mu = self.cfg.model_update
        v = w.observe(detections, time.monotonic(), mu.trial_s, mu.trial_min_frames, mu.collapse_ratio)
        if v is not None:
            self._jobs.put(("confirm", w.trial.vid) if v.passed else ("rollback", (w.trial.vid, v.reason)))

    def detection_rate(self) -> Optional[float]:
        r = list(self._recent)
        return sum(r) / len(r) if len(r) >= 10 else None

    # ---- worker -----------------------------------------------------------------------------
    def start(self, publish: Optional[Callable[[], Any]] = None) -> None:
        self.publish = publish
        try:
            self.store.ensure()
            make_dir(self.inbox, PRIVATE_DIR_MODE)
            if not self.cfg.model_update.inbox:  # a configured inbox keeps the mode its owner chose
                tighten_dir(self.inbox, PRIVATE_DIR_MODE)
            write_durable(pid_file(self.cfg), f"{os.getpid()}\n".encode())
        except OSError as exc:  # inference does not depend on updates: run without them
            log.error(
                "model updates disabled: %s or %s is not writable (%s)", self.store.root, self.inbox, exc
            )
            return
        self._thread = threading.Thread(target=self._work, name="model-updates", daemon=True)
        self._thread.start()
        mu = self.cfg.model_update
        if not (self.cfg.mqtt.enabled and mu.mqtt):
            self.receiver_off = "off (mqtt.enabled or model_update.mqtt is false)"
        elif not mu.trusted_keys:
            # secure by default: anyone who can publish on the broker must not replace the model
            self.receiver_off = "off: model_update.trusted_keys is empty (MQTT packages must be signed)"
            log.warning("model updates over MQTT %s; see docs/threat-model.md", self.receiver_off)
        else:
            from edge_agent.adapters.updates.receiver import ModelReceiver

            self._receiver = ModelReceiver(
                self.cfg, self.store.root / "transfers", self.inbox, self._on_transfer
            )
            try:
                self._receiver.start()
            except (EdgeAgentError, OSError) as exc:
                log.error("model updates over MQTT disabled: %s", exc)
                self.receiver_off = f"off: {exc}"
                self._receiver = None

    def stop(self) -> None:
        """A clean stop: the trial is not held against the model at the next start."""
        self._stop.set()
        self._jobs.put(("stop", None))  # wakes the worker now, not at its next inbox poll
        if self._receiver is not None:
            self._receiver.stop()
        if self._thread is not None:
            self._thread.join(10)
        req = self._in_progress
        if req is not None:  # stopped cleanly mid-gate: that attempt does not count as a crash
            try:
                data = json.loads(req.read_text(encoding="utf-8"))
                data["attempts"] = max(0, int(data.get("attempts", 1)) - 1)
                write_durable(req, json.dumps(data).encode())
            except (OSError, ValueError) as exc:
                log.debug("request %s not rewritten: %s", req, exc)
        try:
            pid_file(self.cfg).unlink(missing_ok=True)
            with self.store.locked():
                state = self.store.state()
                if state.trial is not None:
                    state.trial.running = False
                    self.store.save(state)
        except (OSError, EdgeAgentError) as exc:
            log.error("model store not updated at stop: %s", exc)
        release_run_lock(self.cfg)

    def _work(self) -> None:
        from edge_agent.adapters.host.probes import lower_thread_priority

        # the gate's onnxruntime threads are created here and inherit this nice value: the
        # inference loop (and its watchdog pings) keeps the CPU while a candidate is compared
        lower_thread_priority(10)
        while not self._stop.is_set():
            try:
                kind, arg = self._jobs.get(timeout=INBOX_POLL_S)
            except queue.Empty:
                kind, arg = "scan", None
            try:
                if self._receiver is not None:
                    self._receiver.ensure_alive()
                if kind == "scan":
                    self.scan_inbox()
                elif kind == "rollback":
                    vid, reason = arg
                    res = model_switch.rollback(self.cfg, reason, origin="agent", only_if_current=vid)
                    if res["outcome"] == Outcome.ROLLED_BACK:
                        self.request_reload()
                    self._publish_status()
                elif kind == "confirm":
                    self._confirm(arg)
            except Exception as exc:  # noqa: BLE001 - the worker must outlive any one bad package
                self.errors += 1
                log.error("model update: %s: %s", type(exc).__name__, exc)

    def _confirm(self, vid: str) -> None:
        with self.store.locked():
            state = self.store.state()
            if state.on_trial(vid) is not None:
                state.trial = None
                self.store.save(state)
        self._watch = None
        log.info("model %s passed its trial", vid)
        self._publish_status()

    def scan_inbox(self) -> None:
        if not self.inbox.is_dir():
            return
        drop_marks(self.inbox)
        for pkg in sorted(self.inbox.glob("*.pkg"), key=_arrival):
            if self._stop.is_set():
                return
            self._take(pkg)

    def _owner_problem(self, path: Path) -> Optional[str]:
        """A package or request someone else put into the inbox is not ours to install: a regular
        file owned by the agent's user (or root, who could replace the agent anyway), else why not."""
        try:
            st = path.lstat()
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return f"{path.name} is not a regular file"
        if st.st_uid not in (os.getuid(), 0):
            return (
                f"{path.name} is owned by uid {st.st_uid}, not by the agent's uid {os.getuid()} "
                "(or root): refused, only the service's user may drop packages into the inbox"
            )
        return None

    def _take(self, pkg: Path) -> None:
        req_file = pkg.with_suffix(".request.json")
        problem = self._owner_problem(pkg) or self._owner_problem(req_file)
        req: dict[str, Any] = {}
        if problem is None:
            try:
                data = json.loads(req_file.read_text(encoding="utf-8")) if req_file.exists() else {}
                req = data if isinstance(data, dict) else {}
            except (OSError, ValueError):
                req = {}
        attempts = int(req.get("attempts", 0)) + 1 if isinstance(req.get("attempts", 0), int) else 1
        req["attempts"] = attempts
        origin = str(req.get("origin", f"inbox:{pkg.name}"))[:100]
        # a cancel marked on disk is refused before the gate, a restart (kill -9) after it included
        problem = problem or refused_as_cancelled(self.inbox, pkg, req)
        if problem is None and attempts > MAX_ATTEMPTS:
            problem = f"{pkg.name}: the agent died twice while installing it"
        if problem is not None:
            result = model_switch.record(self.store, origin, None, Outcome.REFUSED, problem)
        else:
            write_durable(req_file, json.dumps(req).encode())  # survives a crash inside the gate
            self.state = "gating"
            self._in_progress = req_file
            self._publish_status()
            try:
                result = model_switch.install(
                    self.cfg,
                    pkg,
                    # "force" from a request only counts when a local command wrote it
                    force=bool(req.get("force")) and origin == "cli",
                    origin=origin,
                    baseline_rate=self.detection_rate(),
                    require_signature=origin.startswith("mqtt:"),
                    allow_downgrade=bool(req.get("allow_downgrade")) and origin == "cli",
                    allow_rolled_back=bool(req.get("allow_rolled_back")) and origin == "cli",
                    planner=self._planner,  # the gate loads its models on the running agent's plans
                    cancelled=lambda: refused_as_cancelled(self.inbox, pkg, req) is not None,
                )
            except Exception as exc:  # noqa: BLE001 - the true reason, once; never "died twice"
                why = f"{pkg.name}: {type(exc).__name__}: {exc}"
                result = model_switch.record(self.store, origin, None, Outcome.REFUSED, why)
            finally:
                self._in_progress = None
        try:
            write_durable(pkg.with_suffix(".result.json"), json.dumps(result, indent=1).encode())
        finally:
            pkg.unlink(missing_ok=True)
            req_file.unlink(missing_ok=True)
            pkg.with_suffix(MARK).unlink(missing_ok=True)
            self.state = "idle"
        if result["outcome"] == Outcome.SWITCHED:
            self.request_reload()
        self._publish_status()

    def _on_transfer(self, info: Optional[dict[str, Any]]) -> None:
        self.transfer = info
        if info and info.get("complete"):
            self._jobs.put(("scan", None))  # in the inbox now: no need to wait for the next poll
        self._publish_status()

    def _publish_status(self) -> None:
        """The status (with this block) out at once on each step; the event itself is in the store."""
        if self.publish is not None:
            try:
                self.publish()
            except Exception as exc:  # noqa: BLE001 - status is best-effort, the update is not
                log.debug("status publish failed: %s", exc)

    # ---- status -----------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """The ``model_update`` block of the status file and the MQTT status topic."""
        try:
            info = model_switch.describe(self.cfg)
        except EdgeAgentError as exc:
            info = {"error": str(exc)}
        info["state"] = self.state
        info["errors"] = self.errors
        info["transfer"] = self.transfer
        info["ring_frames"] = len(self.ring.files()) if self.ring.enabled else None
        rec = self._receiver
        info["receiver"] = rec.snapshot() if rec is not None else {"alive": False, "off": self.receiver_off}
        return info

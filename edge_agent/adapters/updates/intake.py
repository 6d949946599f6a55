"""The model receiver's message handling (adapters.updates.receiver is its MQTT side): a signed
begin, chunks checked against their signed hashes, the free-space floor, assembly into the inbox.

The order is the point. A ``begin`` carries the package's signed manifest; nothing is written to
disk before its signature verifies with a trusted key and its *signed* target fields name this
device (or one of its groups), its board and an agent this old or older, and its version was not
rolled back here. A chunk is written only for such a transfer, only when its sha256 is the one the
signed plan lists for its index, and only while the state filesystem keeps the floor free (the
outbox lives there too: 100 MiB of chunks on a 64 MiB state disk made it drop 456 of 1,245
results). Anything else is counted under its kind, logged through a
:class:`~edge_agent.core.messages.log_throttle.LogThrottle` (the first, then every 100th) and
acknowledged, never redelivered forever.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional, Tuple

from edge_agent.adapters.host.durable import move_durable, write_durable
from edge_agent.adapters.updates import signing
from edge_agent.adapters.updates.cancels import check_cancel, inbox_commitment, mark_cancelled
from edge_agent.adapters.updates.package_file import PRIVATE_DIR_MODE, make_dir, tighten_dir
from edge_agent.adapters.updates.store import ModelStore, device_target, downgrade_reason
from edge_agent.adapters.updates.transfers import (
    FILE_MODE,
    Refused,
    Transfer,
    assemble_package,
    load_transfer,
    mark_done,
    read_done,
    remove_path,
)
from edge_agent.core.config.schema import Config
from edge_agent.core.messages.log_throttle import LogThrottle
from edge_agent.core.updates.binding import (
    MAX_SIGNED_BEGIN,
    SignedBegin,
    parse_signed_begin,
    rolled_back_problem,
    target_problem,
)
from edge_agent.core.updates.package import (
    MAX_CHUNK,
    Manifest,
    check_transfer_id,
    missing_ranges,
    parse_manifest,
)
from edge_agent.errors import EdgeAgentError

log = logging.getLogger("edge_agent.model_mqtt")
PROGRESS_EVERY_S = 1.0
DONE_KEEP = 50
MAX_TRANSFERS = 4  # transfers kept on disk at once; the least recently active is dropped first
TRANSFER_MAX_AGE_S = 24 * 3600.0  # a transfer silent this long is abandoned and deleted
MIB = 1 << 20
# what a refusal is counted as, besides "refused" (the status's model_update.receiver shows each)
KINDS = ("unsigned", "not_for_device", "rolled_back", "unknown_transfer", "bad_chunk", "low_space")

FreeSpace = Callable[[Path], Tuple[int, int]]  # directory -> (bytes free to us, filesystem size)


def free_space(path: Path) -> tuple[int, int]:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


def transfer_floor(cfg: Config, workdir: Path, fs_size: int) -> int:
    """Bytes the transfers leave free on their filesystem: the larger of ``transfer_min_free_mb``
    and ``transfer_min_free_percent`` of it, plus the outbox's reserve when the outbox lives there."""
    mu = cfg.model_update
    floor = max(int(mu.transfer_min_free_mb * MIB), int(fs_size * mu.transfer_min_free_percent / 100))
    with contextlib.suppress(OSError):
        queue_dir = Path(cfg.queue.path).resolve().parent
        if os.stat(queue_dir).st_dev == os.stat(workdir).st_dev:
            floor += cfg.queue.reserve_bytes
    return floor


class TransferIntake:
    def __init__(
        self,
        cfg: Config,
        workdir: Path,
        inbox: Path,
        on_progress: Callable[[Optional[dict[str, Any]]], None],
        space: FreeSpace = free_space,
    ) -> None:
        self.cfg = cfg
        self.dir = workdir
        self.inbox = inbox
        self.on_progress = on_progress
        self.space = space
        self.cap = int(cfg.model_update.max_package_mb * 1e6)
        # the chunks of every transfer on disk together: two packages' worth, whatever the count
        self.storage_cap = 2 * self.cap
        self.completed: list[str] = []
        self.counts = dict.fromkeys(
            ("messages", "refused", "failed", "discarded_at_start", "restarts", *KINDS), 0
        )
        self.last_error: Optional[str] = None
        self._transfers: dict[str, Transfer] = {}
        self._lock = threading.RLock()
        self._last_progress = 0.0
        self._last_refusal = 0.0
        self._throttle = LogThrottle()
        self.bases: list[str] = []
        self.cancelled: set[str] = set()  # complete transfers the sender cancelled (agent side refuses)

    # ---- life cycle ---------------------------------------------------------------------------
    def load(self) -> None:
        """Directories (0700 whatever the umask) and the transfers a reboot interrupted, each
        validated like a new begin: a bad one is deleted with one log line, never a crash."""
        make_dir(self.dir, PRIVATE_DIR_MODE)
        make_dir(self.inbox, PRIVATE_DIR_MODE)
        with contextlib.suppress(OSError):
            tighten_dir(self.dir, PRIVATE_DIR_MODE)
        with self._lock:
            for p in sorted(self.dir.iterdir()):
                if p.name == "done.json":
                    continue
                try:
                    self._transfers[p.name] = load_transfer(p, self._verified)
                except Exception as exc:  # noqa: BLE001 - a damaged file must not stop the agent
                    self.counts["discarded_at_start"] += 1
                    log.error("model transfer state %s discarded: %s", p, exc)
                    remove_path(p)
            self._expire(time.time())

    def finish_loaded(self) -> None:
        for tid in list(self._transfers):  # transfers whose last chunk landed just before a cut
            self._guarded(f"transfer {tid}", functools.partial(self._maybe_finish, tid))

    def counters(self) -> dict[str, Any]:
        with self._lock:
            return {**self.counts, "transfers": len(self._transfers), "last_error": self.last_error}

    # ---- messages -----------------------------------------------------------------------------
    def handle(self, topic: str, payload: bytes) -> None:
        """One message, from paho's thread (or a test): never raises."""
        self._guarded(f"message on {str(topic)[:120]!r}", lambda: self._dispatch(topic, payload))

    def _guarded(self, what: str, fn: Callable[[], None]) -> None:
        """No exception leaves: paho's thread (and every later chunk) must outlive any message,
        and a callback that returns is a message acknowledged, so a poison one is not redelivered."""
        with self._lock:
            self.counts["messages"] += 1
        try:
            fn()
        except Refused as exc:
            self._count("refused", f"{what}: {exc}", exc.kind)
        except Exception as exc:  # noqa: BLE001 - MemoryError included
            self._count("failed", f"{what}: {type(exc).__name__}: {exc}")

    def _count(self, kind: str, line: str, sub: Optional[str] = None) -> None:
        with self._lock:
            self.counts[kind] += 1
            if sub in KINDS:
                self.counts[sub] += 1
            self.last_error = line[:300]
            text = self._throttle.line(sub or kind, f"model transfer: {kind} {line[:300]}")
        if text is not None:
            log.error("%s", text)

    def _dispatch(self, topic: str, payload: bytes) -> None:
        for b in self.bases:
            if topic == f"{b}/begin":
                self._begin(bytes(payload))
                return
            if topic.startswith(f"{b}/cancel/"):
                try:
                    tid = check_transfer_id(topic[len(b) + 8 :])
                except ValueError as exc:
                    raise Refused(str(exc)) from None
                self._cancel(tid, bytes(payload))
                return
            if topic.startswith(f"{b}/chunk/"):
                parts = topic[len(b) + 7 :].split("/")
                if len(parts) != 2 or not (parts[1].isascii() and parts[1].isdigit()) or len(parts[1]) > 9:
                    raise Refused("expected .../chunk/<transfer id>/<index>")
                if len(payload) > MAX_CHUNK:
                    raise Refused(f"chunk of {len(payload)} bytes > {MAX_CHUNK}")
                try:
                    tid = check_transfer_id(parts[0])
                except ValueError as exc:
                    raise Refused(str(exc)) from None
                self._chunk(tid, int(parts[1]), bytes(payload))
                return
        raise Refused("not a model-transfer topic")

    def _verified(self, payload: bytes) -> tuple[SignedBegin, Manifest]:
        """A begin's bytes -> the begin and its manifest, or Refused under its kind. Everything here
        runs before a byte is written: format, signature, target fields, rolled-back versions."""
        try:
            begin = parse_signed_begin(payload)
        except ValueError as exc:
            raise Refused(str(exc), "unsigned") from None
        src = f"transfer {begin.transfer_id}"
        if not self.cfg.model_update.trusted_keys:  # the agent starts no receiver without keys
            raise Refused(f"{src}: no trusted_keys: nothing from MQTT is installed", "unsigned")
        try:
            signing.verify(begin.manifest_data, begin.signature, self.cfg.model_update.trusted_keys, src)
            m = parse_manifest(begin.manifest_data, src)
        except EdgeAgentError as exc:
            raise Refused(str(exc), "unsigned") from None
        if m.transfer is None:
            raise Refused(f"{src}: the signed manifest has no transfer plan (chunk hashes): repack it")
        if m.transfer.size > self.cap:
            raise Refused(
                f"{src}: package body is {m.transfer.size} bytes > max_package_mb ({self.cap} bytes)"
            )
        problem = target_problem(m, device_target(self.cfg), network=True)
        if problem:
            raise Refused(f"{src}: {m.name} {m.version} {problem}", "not_for_device")
        store = ModelStore(self.cfg.device.state_dir)
        state = store.state()
        # a signed older build or a rolled-back version, replayed under any transfer id
        problem = rolled_back_problem(state, m) or downgrade_reason(store, state, m)
        if problem:
            raise Refused(f"{src}: {problem}", "rolled_back")
        return begin, m

    def _report_refusal(self, payload: bytes, reason: str) -> None:
        """Tell the sender (status topic) why its begin was refused; at most once a second."""
        now = time.monotonic()
        if now - self._last_refusal < PROGRESS_EVERY_S:
            return
        self._last_refusal = now
        tid: Optional[str] = None
        with contextlib.suppress(Exception):
            if len(payload) <= MAX_SIGNED_BEGIN:
                tid = check_transfer_id(str(json.loads(payload.decode("utf-8"))["transfer_id"]))
        self.on_progress({"transfer_id": tid, "refused": reason})

    def _begin(self, payload: bytes) -> None:
        try:
            begin, m = self._verified(payload)
        except Refused as exc:
            self._report_refusal(payload, str(exc))
            raise
        tid = begin.transfer_id
        plan = m.transfer
        assert plan is not None
        with self._lock:
            if tid in self._done():
                return  # a redelivered begin of a transfer already handed to the inbox
            now = time.time()
            old = self._transfers.get(tid)
            d = self.dir / tid
            if old is not None:
                if old.begin.manifest_data == begin.manifest_data:
                    old.active_at = now  # a re-push resumes from the chunks on disk
                    self._maybe_finish(tid)
                    return
                # same id, another package: the chunks on disk belong to another file
                self._drop(tid, "a new begin with other content replaced it")
            self._expire(now)
            self._make_room(plan.size)
            self._check_floor(plan.size + len(payload), f"transfer {tid} ({plan.size} bytes)")
            make_dir(d / "chunks", PRIVATE_DIR_MODE)
            write_durable(d / "begin.json", payload, FILE_MODE)
            self._transfers[tid] = Transfer(begin, m, active_at=now)
            log.info(
                "model transfer %s: %s %s, %d bytes in %d chunks",
                tid,
                m.name,
                m.version,
                plan.size,
                plan.count,
            )
        self._maybe_finish(tid)

    def _cancel(self, tid: str, payload: bytes) -> None:
        with self._lock:
            t = self._transfers.get(tid)
            check_cancel(tid, payload, t.begin.cancel_sha256 if t else inbox_commitment(self.inbox, tid))
            if t is not None:
                self._drop(tid, "cancelled by its sender")
                mark_done(self.dir, tid, DONE_KEEP)  # the chunks still queued for it: acknowledged, dropped
            else:  # on disk before the cancel is acknowledged: a restart must not install it
                mark_cancelled(self.inbox, tid, payload)
                self.cancelled.add(tid)
                log.warning("model transfer %s cancelled by its sender: it will not be installed", tid)
        self.on_progress({"transfer_id": tid, "cancelled": True})

    def _check_floor(self, need: int, what: str) -> None:
        free, size = self.space(self.dir)
        floor = transfer_floor(self.cfg, self.dir, size)
        if free - need < floor:
            raise Refused(
                f"{what}: {free} bytes free on the state filesystem, storing {need} more would leave less "
                f"than the {floor}-byte floor kept for the queue (model_update.transfer_min_free_mb / "
                "_percent); re-push when there is room",
                "low_space",
            )

    def _make_room(self, size: int) -> None:
        """Drop the least recently active transfers until ``size`` more bytes fit the caps."""
        while self._transfers and (
            len(self._transfers) >= MAX_TRANSFERS
            or sum(t.plan.size for t in self._transfers.values()) + size > self.storage_cap
        ):
            oldest = min(self._transfers, key=lambda k: self._transfers[k].active_at)
            self._drop(
                oldest, f"room for a new transfer ({MAX_TRANSFERS} transfers / {self.storage_cap} bytes)"
            )

    def _expire(self, now: float) -> None:
        for tid, t in list(self._transfers.items()):
            if now - t.active_at > TRANSFER_MAX_AGE_S:
                self._drop(tid, f"no chunk for {TRANSFER_MAX_AGE_S / 3600:.0f} h")

    def _drop(self, tid: str, why: str) -> None:
        log.warning("model transfer %s dropped: %s", tid, why)
        self._transfers.pop(tid, None)
        remove_path(self.dir / tid)

    def _chunk(self, tid: str, idx: int, data: bytes) -> None:
        with self._lock:
            t = self._transfers.get(tid)
            if t is None:
                if tid in self._done():
                    return  # a redelivered chunk of a finished transfer
                raise Refused(
                    f"chunk {idx} of transfer {tid}, which has no verified begin: dropped", "unknown_transfer"
                )
            plan = t.plan
            if idx >= plan.count or len(data) != plan.chunk_len(idx):
                raise Refused(
                    f"transfer {tid}: chunk {idx} of {len(data)} bytes; the signed plan has {plan.count} "
                    f"chunks, this one of {plan.chunk_len(min(idx, plan.count - 1))} bytes",
                    "bad_chunk",
                )
            t.active_at = time.time()
            if idx in t.have:
                return  # a redelivery, or a re-push after a lost broker session: already on disk
            if hashlib.sha256(data).hexdigest() != plan.chunks[idx]:
                raise Refused(f"transfer {tid}: chunk {idx} does not match its signed sha256", "bad_chunk")
            self._check_floor(len(data), f"transfer {tid}: chunk {idx}")
            write_durable(self.dir / tid / "chunks" / str(idx), data, FILE_MODE)
            t.have.add(idx)
        self._maybe_finish(tid)

    # ---- completion -------------------------------------------------------------------------
    def _done(self) -> list[str]:
        return read_done(self.dir)

    def _maybe_finish(self, tid: str) -> None:
        with self._lock:
            t = self._transfers.get(tid)
            if t is None:
                return
            total = t.plan.count
            if len(t.have) < total:
                now = time.monotonic()
                if now - self._last_progress >= PROGRESS_EVERY_S or len(t.have) <= 1:
                    self._last_progress = now
                    info = {
                        "transfer_id": tid,
                        "name": f"{t.manifest.name}-{t.manifest.version}",
                        "received": len(t.have),
                        "chunks": total,
                        "bytes": t.plan.size,
                        "missing": missing_ranges(t.have, total),
                    }
                    self.on_progress(info)
                return
            try:
                self._assemble(tid, t)
            finally:
                self._transfers.pop(tid, None)
                remove_path(self.dir / tid)

    def _assemble(self, tid: str, t: Transfer) -> None:
        pkg = assemble_package(self.dir / tid, t)
        # no "force" here: a sender is anyone on the broker; only a signed manifest or a local
        # command may switch past the gate (docs/threat-model.md)
        req = {"origin": f"mqtt:{tid}"}
        if t.begin.cancel_sha256 is not None:  # a cancel may still stop it before the switch
            req["cancel_sha256"] = t.begin.cancel_sha256
        write_durable(self.inbox / f"{tid}.request.json", json.dumps(req).encode(), FILE_MODE)
        move_durable(pkg, self.inbox / f"{tid}.pkg", FILE_MODE)
        mark_done(self.dir, tid, DONE_KEEP)
        self.completed.append(tid)
        log.info(
            "model transfer %s complete (%d chunks, each sha256 ok): handed to the inbox", tid, t.plan.count
        )
        self.on_progress(
            {"transfer_id": tid, "received": t.plan.count, "chunks": t.plan.count, "complete": True}
        )

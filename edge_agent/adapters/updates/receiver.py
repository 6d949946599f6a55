"""Model packages over MQTT: a chunked, resumable QoS 1 transfer, received into the inbox.

Topics (``<p>`` = ``mqtt.topic_prefix``): ``<p>/<device>/model/begin`` and
``<p>/<device>/model/chunk/<transfer>/<index>``, and the same under ``<p>/groups/<group>/model/``
for a fleet. ``begin`` is JSON ``{transfer_id, size, sha256, chunks, chunk_size}``; a chunk is raw
bytes. The receiver keeps a persistent session (``clean_session=False``, a fixed client id) so the
broker queues what arrives while the device is off, and writes every chunk to its own file
(:func:`~edge_agent.adapters.host.durable.write_durable`) *inside* ``on_message``: paho sends the PUBACK after the callback returns, so a
chunk acknowledged is a chunk on disk, and one lost to a kill -9 is redelivered.

The transfers on disk (directories, ``done.json``, assembly) are adapters.model_transfer_disk.

Everything here is untrusted (anyone who can publish on the broker): a begin is validated before
any number in it sizes anything (:func:`~edge_agent.core.updates.package.parse_begin`), a chunk is
stored only for a begun transfer and only at its exact length, the transfers on disk are capped in
count and bytes and expire, and no exception from a message leaves the callback: a bad message is
counted, logged in one line and acknowledged (never redelivered forever). Whatever arrives is only
a candidate: the agent installs it only when it is signed by a trusted key (docs/threat-model.md).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import paho.mqtt.client as mqtt

from edge_agent.adapters.host.durable import move_durable, write_durable
from edge_agent.adapters.mqtt.connect import login, read_password, suback_problems, tls_context
from edge_agent.adapters.updates.package_file import PRIVATE_DIR_MODE, make_dir, tighten_dir
from edge_agent.adapters.updates.transfers import (
    FILE_MODE,
    Refused,
    Transfer,
    assemble_chunks,
    load_transfer,
    mark_done,
    read_done,
    remove_path,
)
from edge_agent.core.config.schema import Config
from edge_agent.core.updates.package import (
    MAX_BEGIN_BYTES,
    MAX_CHUNK,
    TransferBegin,
    check_transfer_id,
    missing_ranges,
    parse_begin,
)

if TYPE_CHECKING:
    from paho.mqtt.client import Client, ConnectFlags, MQTTMessage
    from paho.mqtt.properties import Properties
    from paho.mqtt.reasoncodes import ReasonCode

    Props = Optional[Properties]  # a callback's MQTT 5 properties

log = logging.getLogger("edge_agent.model_mqtt")
PROGRESS_EVERY_S = 1.0
DONE_KEEP = 50
MAX_TRANSFERS = 4  # transfers kept on disk at once; the least recently active is dropped first
TRANSFER_MAX_AGE_S = 24 * 3600.0  # a transfer silent this long is abandoned and deleted


def model_topics(prefix: str, device_id: str, groups: list[str]) -> list[str]:
    p = prefix.strip("/")
    return [f"{p}/{device_id}/model"] + [f"{p}/groups/{g}/model" for g in groups]


class ModelReceiver:
    def __init__(
        self,
        cfg: Config,
        workdir: Path,
        inbox: Path,
        on_progress: Callable[[Optional[dict[str, Any]]], None],
        client_id: Optional[str] = None,
    ) -> None:
        self.cfg = cfg
        self.dir = workdir
        self.inbox = inbox
        self.on_progress = on_progress
        self.client_id = client_id or f"{cfg.device.id}-model"
        self.bases = model_topics(cfg.mqtt.topic_prefix, cfg.device.id, cfg.model_update.groups)
        self.cap = int(cfg.model_update.max_package_mb * 1e6)
        # the chunks of every transfer on disk together: two packages' worth, whatever the count
        self.storage_cap = 2 * self.cap
        self.completed: list[str] = []
        self.counts = {"messages": 0, "refused": 0, "failed": 0, "discarded_at_start": 0, "restarts": 0}
        self.last_error: Optional[str] = None
        self._transfers: dict[str, Transfer] = {}
        self._lock = threading.RLock()
        self._last_progress = 0.0
        self._last_refusal = 0.0
        self._client: Optional[mqtt.Client] = None
        self._stopping = False
        # set once the broker granted every subscription (SUBACK): from then on a push reaches us
        self.subscribed = threading.Event()

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
                    self._load_one(p)
                except Exception as exc:  # noqa: BLE001 - a damaged file must not stop the agent
                    self.counts["discarded_at_start"] += 1
                    log.error("model transfer state %s discarded: %s", p, exc)
                    remove_path(p)
            self._expire(time.time())

    def _load_one(self, p: Path) -> None:
        self._transfers[p.name] = load_transfer(p, self.cap)

    def start(self) -> None:
        self.load()
        self._connect()
        for tid in list(self._transfers):  # transfers whose last chunk landed just before a cut
            self._guarded(f"transfer {tid}", functools.partial(self._maybe_finish, tid))

    def ensure_alive(self) -> bool:
        """Supervision (called by the update worker): paho's network thread restarted if it ended
        for any reason, counted in ``restarts``. True when it had to."""
        if self._client is None or self._stopping or self.alive():
            return False
        log.error("model receiver: its MQTT thread ended; restarting it")
        with contextlib.suppress(Exception):
            self._client.loop_stop()
        self._connect()
        with self._lock:
            self.counts["restarts"] += 1
        return True

    def _connect(self) -> None:
        m = self.cfg.mqtt
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=self.client_id, clean_session=False)
        user = login(m, "model")
        if user is not None:
            c.username_pw_set(user, read_password(m))
        ctx = tls_context(m)
        if ctx is not None:
            c.tls_set_context(ctx)
        c.reconnect_delay_set(int(m.reconnect_min_s), int(m.reconnect_max_s))
        c.on_connect = self._on_connect
        c.on_message = self._on_message
        c.on_subscribe = self._on_subscribe
        c.connect_async(m.host, m.port, m.keepalive_s)
        c.loop_start()
        self._client = c

    def stop(self) -> None:
        self._stopping = True  # before the thread ends: supervision must not restart it
        if self._client is not None:
            self._client.disconnect()
            self._client.loop_stop()
            self._client = None

    def alive(self) -> bool:
        """paho's network thread runs (the status snapshot shows it)."""
        thread = getattr(self._client, "_thread", None)  # paho keeps no public handle on it
        return bool(thread is not None and thread.is_alive())

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "alive": self.alive(),
                **self.counts,
                "transfers": len(self._transfers),
                "last_error": self.last_error,
            }

    # ---- paho thread ------------------------------------------------------------------------
    def _on_connect(
        self, client: Client, userdata: object, flags: ConnectFlags, reason: ReasonCode, props: Props
    ) -> None:
        if reason.is_failure:
            log.warning("model receiver: broker refused: %s", reason)
            return
        self.subscribed.clear()
        client.subscribe([(f"{b}/#", 1) for b in self.bases])

    def _on_subscribe(
        self, client: Client, userdata: object, mid: int, reasons: list[ReasonCode], props: Props
    ) -> None:
        # The SUBACK alone tells a refused filter (a broker ACL: no update ever arrives) or a grant
        # cut to QoS 0 (`max_qos 0`: the broker keeps nothing for the offline device, so a package
        # sent while it is away never completes). Either is shown in the status, not only logged.
        filters = [f"{b}/#" for b in self.bases]
        refused, qos0 = suback_problems(filters, reasons)
        if refused:
            with self._lock:
                self.last_error = "broker refused the subscription to " + ", ".join(refused)
            log.warning("model receiver: %s", self.last_error)
            return
        if qos0:
            with self._lock:
                self.last_error = (
                    f"broker granted only QoS 0 for {', '.join(qos0)}: chunks sent while the device "
                    "is offline are not kept for it (raise the broker's max_qos to 1)"
                )
            log.warning("model receiver: %s", self.last_error)
        self.subscribed.set()

    def _on_message(self, client: Client, userdata: object, msg: MQTTMessage) -> None:
        self.handle(msg.topic, msg.payload)

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
            self._count("refused", f"{what}: {exc}")
        except Exception as exc:  # noqa: BLE001 - MemoryError included
            self._count("failed", f"{what}: {type(exc).__name__}: {exc}")

    def _count(self, kind: str, line: str) -> None:
        with self._lock:
            self.counts[kind] += 1
            self.last_error = line[:300]
        log.error("model transfer: %s %s", kind, line[:300])

    def _dispatch(self, topic: str, payload: bytes) -> None:
        for b in self.bases:
            if topic == f"{b}/begin":
                try:
                    begin = parse_begin(bytes(payload), self.cap)
                except ValueError as exc:
                    self._report_refusal(bytes(payload), str(exc))
                    raise Refused(str(exc)) from None
                self._begin(begin)
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

    def _report_refusal(self, payload: bytes, reason: str) -> None:
        """Tell the sender (status topic) why its begin was refused; at most once a second."""
        now = time.monotonic()
        if now - self._last_refusal < PROGRESS_EVERY_S:
            return
        self._last_refusal = now
        tid: Optional[str] = None
        with contextlib.suppress(Exception):
            raw = json.loads(payload[:MAX_BEGIN_BYTES].decode("utf-8"))
            tid = check_transfer_id(str(raw["transfer_id"]))
        self.on_progress({"transfer_id": tid, "refused": reason})

    def _begin(self, begin: TransferBegin) -> None:
        tid = begin.transfer_id
        with self._lock:
            if tid in self._done():
                return  # a redelivered begin of a transfer already handed to the inbox
            now = time.time()
            old = self._transfers.get(tid)
            d = self.dir / tid
            if old is not None:
                same = (old.begin.sha256, old.begin.size, old.begin.chunk_size)
                if same == (begin.sha256, begin.size, begin.chunk_size):
                    old.active_at = now  # a re-push resumes from the chunks on disk
                    self._maybe_finish(tid)
                    return
                # same id, different content or chunking: the chunks on disk belong to another file
                self._drop(tid, "a new begin with other content replaced it")
            self._expire(now)
            self._make_room(begin.size)
            make_dir(d / "chunks", PRIVATE_DIR_MODE)
            write_durable(d / "begin.json", begin.model_dump_json().encode(), FILE_MODE)
            self._transfers[tid] = Transfer(begin, active_at=now)
            log.info("model transfer %s: %d bytes in %d chunks", tid, begin.size, begin.chunks)
        self._maybe_finish(tid)

    def _make_room(self, size: int) -> None:
        """Drop the least recently active transfers until ``size`` more bytes fit the caps."""
        while self._transfers and (
            len(self._transfers) >= MAX_TRANSFERS
            or sum(t.begin.size for t in self._transfers.values()) + size > self.storage_cap
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
                raise Refused(f"chunk {idx} of transfer {tid} without its begin: not stored")
            if idx >= t.begin.chunks or len(data) != t.begin.chunk_len(idx):
                raise Refused(
                    f"transfer {tid}: chunk {idx} of {len(data)} bytes; the begin says {t.begin.chunks} "
                    f"chunks, this one of {t.begin.chunk_len(min(idx, t.begin.chunks - 1))} bytes"
                )
            t.active_at = time.time()
            if idx in t.have:
                return  # a redelivery, or a re-push after a lost broker session: already on disk
            write_durable(self.dir / tid / "chunks" / str(idx), data, FILE_MODE)
            t.have.add(idx)
        self._maybe_finish(tid)

    # ---- completion -------------------------------------------------------------------------
    def _done(self) -> list[str]:
        return read_done(self.dir)

    def _mark_done(self, tid: str) -> None:
        mark_done(self.dir, tid, DONE_KEEP)

    def _maybe_finish(self, tid: str) -> None:
        with self._lock:
            t = self._transfers.get(tid)
            if t is None:
                return
            total = t.begin.chunks
            if len(t.have) < total:
                now = time.monotonic()
                if now - self._last_progress >= PROGRESS_EVERY_S or len(t.have) == 1:
                    self._last_progress = now
                    info = {
                        "transfer_id": tid,
                        "name": t.begin.name,
                        "received": len(t.have),
                        "chunks": total,
                        "bytes": t.begin.size,
                        "missing": missing_ranges(t.have, total),
                    }
                    self.on_progress(info)
                return
            try:
                self._assemble(tid, self.dir / tid, t.begin)
            finally:
                self._transfers.pop(tid, None)
                remove_path(self.dir / tid)

    def _assemble(self, tid: str, d: Path, begin: TransferBegin) -> None:
        pkg, digest, size = assemble_chunks(d, begin)
        if digest != begin.sha256 or size != begin.size:
            self._mark_done(tid)
            self._refused(
                tid,
                f"assembled package has sha256 {digest[:16]}... / {size} bytes, "
                f"begin said {begin.sha256[:16]}... / {begin.size} bytes",
            )
            return
        # no "force" here: a sender is anyone on the broker; only a signed manifest or a local
        # command may switch past the gate (docs/threat-model.md)
        req = {"origin": f"mqtt:{tid}"}
        write_durable(self.inbox / f"{tid}.request.json", json.dumps(req).encode(), FILE_MODE)
        move_durable(pkg, self.inbox / f"{tid}.pkg", FILE_MODE)
        self._mark_done(tid)
        self.completed.append(tid)
        log.info("model transfer %s complete (%d bytes, sha256 ok): handed to the inbox", tid, size)
        self.on_progress(
            {"transfer_id": tid, "received": begin.chunks, "chunks": begin.chunks, "complete": True}
        )

    def _refused(self, tid: str, reason: str) -> None:
        self._count("refused", f"transfer {tid}: {reason}")
        self.on_progress({"transfer_id": tid, "refused": reason})

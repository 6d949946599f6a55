"""Model packages over MQTT: a chunked, resumable QoS 1 transfer, received into the inbox.

Topics (``<p>`` = ``mqtt.topic_prefix``): ``<p>/<device>/model/begin`` and
``<p>/<device>/model/chunk/<transfer>/<index>``, and the same under ``<p>/groups/<group>/model/``
for a fleet. ``begin`` is JSON ``{transfer_id, size, sha256, chunks, chunk_size, force}``; a chunk
is raw bytes. The receiver keeps a persistent session (``clean_session=False``, a fixed client id)
so the broker queues what arrives while the device is off, and writes every chunk to its own file
(temp + fsync + rename) *inside* ``on_message``: paho sends the PUBACK after the callback returns,
so a chunk acknowledged is a chunk on disk, and one lost to a kill -9 is redelivered. After a
reboot the transfer continues from the chunk files; the sha256 of the whole is checked at the end.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

import paho.mqtt.client as mqtt

from edge_agent.adapters.mqtt_sync import read_password, tls_context
from edge_agent.adapters.package_file import fsync_dir, write_durable
from edge_agent.core.config import Config
from edge_agent.core.model_package import missing_ranges

log = logging.getLogger("edge_agent.model_mqtt")
PROGRESS_EVERY_S = 1.0
DONE_KEEP = 50


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
        self.completed: list[str] = []
        self._lock = threading.RLock()
        self._last_progress = 0.0
        self._client: Any = None

    def start(self) -> None:
        m = self.cfg.mqtt
        self.dir.mkdir(parents=True, exist_ok=True)
        self.inbox.mkdir(parents=True, exist_ok=True)
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=self.client_id, clean_session=False)
        if m.username is not None:
            c.username_pw_set(m.username, read_password(m))
        ctx = tls_context(m)
        if ctx is not None:
            c.tls_set_context(ctx)
        c.reconnect_delay_set(int(m.reconnect_min_s), int(m.reconnect_max_s))
        c.on_connect = self._on_connect
        c.on_message = self._on_message
        c.connect_async(m.host, m.port, m.keepalive_s)
        c.loop_start()
        self._client = c
        for d in sorted(self.dir.iterdir()):  # transfers interrupted by a reboot
            if d.is_dir() and (d / "begin.json").exists():
                self._maybe_finish(d.name)

    def stop(self) -> None:
        if self._client is not None:
            self._client.disconnect()
            self._client.loop_stop()
            self._client = None

    # ---- paho thread ------------------------------------------------------------------------
    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        if reason.is_failure:
            log.warning("model receiver: broker refused: %s", reason)
            return
        client.subscribe([(f"{b}/#", 1) for b in self.bases])

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        try:
            for b in self.bases:
                if msg.topic == f"{b}/begin":
                    self._begin(json.loads(msg.payload.decode("utf-8")))
                elif msg.topic.startswith(f"{b}/chunk/"):
                    tid, idx = msg.topic[len(b) + 7 :].split("/", 1)
                    self._chunk(tid, int(idx), bytes(msg.payload))
        except (ValueError, KeyError, OSError) as exc:
            # one bad message must not kill paho's thread (and with it every later chunk)
            log.error("model transfer: bad message on %s: %s", msg.topic, exc)

    def _safe_tid(self, tid: str) -> str:
        if not tid or not all(ch.isalnum() or ch in "-_" for ch in tid) or len(tid) > 64:
            raise ValueError(f"transfer id {tid[:70]!r}: expected up to 64 of [A-Za-z0-9_-]")
        return tid

    def _begin(self, begin: dict[str, Any]) -> None:
        tid = self._safe_tid(str(begin["transfer_id"]))
        with self._lock:
            if tid in self._done():
                return  # a redelivered begin of a transfer already handed to the inbox
            size, chunks = int(begin["size"]), int(begin["chunks"])
            if size > self.cap:
                self._finish_refused(tid, f"package is {size} bytes > max_package_mb ({self.cap} bytes)")
                return
            if chunks <= 0 or chunks * int(begin["chunk_size"]) < size:
                raise ValueError(f"begin of {tid}: {chunks} chunks cannot hold {size} bytes")
            d = self.dir / tid
            try:
                old = json.loads((d / "begin.json").read_text())
            except (OSError, ValueError):
                old = None
            key = ("sha256", "size", "chunk_size")
            if old is not None and any(old.get(k) != begin.get(k) for k in key):
                # same id, different content or chunking: the chunks on disk belong to another file
                shutil.rmtree(d, ignore_errors=True)
            (d / "chunks").mkdir(parents=True, exist_ok=True)
            if not (d / "begin.json").exists():
                write_durable(d / "begin.json", json.dumps(begin).encode())
                log.info("model transfer %s: %d bytes in %d chunks", tid, size, chunks)
        self._maybe_finish(tid)

    def _chunk(self, tid: str, idx: int, data: bytes) -> None:
        tid = self._safe_tid(tid)
        with self._lock:
            if tid in self._done():
                return
            d = self.dir / tid / "chunks"
            d.mkdir(parents=True, exist_ok=True)
            try:
                begin = json.loads((d.parent / "begin.json").read_text())
                ok = 0 <= idx < int(begin["chunks"]) and len(data) <= int(begin["chunk_size"])
            except (OSError, ValueError):  # a chunk ahead of its begin: only the size cap applies
                ok = idx >= 0 and sum(1 for _ in d.iterdir()) * len(data) <= self.cap
            if not ok:
                raise ValueError(
                    f"transfer {tid}: chunk {idx} ({len(data)} bytes) outside the transfer or cap"
                )
            if (d / str(idx)).exists():
                return  # a redelivery, or a re-push after a lost broker session: already on disk
            tmp = d / f".{idx}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, d / str(idx))
            fsync_dir(d)
        self._maybe_finish(tid)

    # ---- completion -------------------------------------------------------------------------
    def _done(self) -> list[str]:
        try:
            return list(json.loads((self.dir / "done.json").read_text()))
        except (OSError, ValueError):
            return []

    def _mark_done(self, tid: str) -> None:
        done = [*self._done(), tid][-DONE_KEEP:]
        write_durable(self.dir / "done.json", json.dumps(done).encode())

    def _maybe_finish(self, tid: str) -> None:
        with self._lock:
            d = self.dir / tid
            try:
                begin = json.loads((d / "begin.json").read_text())
            except (OSError, ValueError):
                return
            total = int(begin["chunks"])
            have = {int(p.name) for p in (d / "chunks").iterdir() if p.name.isdigit()}
            info = {
                "transfer_id": tid,
                "name": begin.get("name"),
                "received": len(have & set(range(total))),
                "chunks": total,
                "bytes": int(begin["size"]),
                "missing": missing_ranges(have, total)[:20],
            }
            if info["received"] < total:
                now = time.monotonic()
                if now - self._last_progress >= PROGRESS_EVERY_S or info["received"] == 1:
                    self._last_progress = now
                    self.on_progress(info)
                return
            self._assemble(tid, d, begin)

    def _assemble(self, tid: str, d: Path, begin: dict[str, Any]) -> None:
        pkg = d / "package.pkg"
        h = hashlib.sha256()
        with open(pkg, "wb") as out:
            for i in range(int(begin["chunks"])):
                block = (d / "chunks" / str(i)).read_bytes()
                h.update(block)
                out.write(block)
            out.flush()
            os.fsync(out.fileno())
        size = pkg.stat().st_size
        if h.hexdigest() != begin["sha256"] or size != int(begin["size"]):
            self._finish_refused(
                tid,
                f"assembled package has sha256 {h.hexdigest()[:16]}... / {size} bytes, "
                f"begin said {str(begin['sha256'])[:16]}... / {begin['size']} bytes",
            )
            return
        req = {"origin": f"mqtt:{tid}", "force": bool(begin.get("force", False))}
        write_durable(self.inbox / f"{tid}.request.json", json.dumps(req).encode())
        try:
            os.replace(pkg, self.inbox / f"{tid}.pkg")
        except OSError:  # inbox on another filesystem
            shutil.copyfile(pkg, self.inbox / f".{tid}.pkg.partial")
            os.replace(self.inbox / f".{tid}.pkg.partial", self.inbox / f"{tid}.pkg")
        fsync_dir(self.inbox)
        self._mark_done(tid)
        shutil.rmtree(d, ignore_errors=True)
        self.completed.append(tid)
        log.info("model transfer %s complete (%d bytes, sha256 ok): handed to the inbox", tid, size)
        self.on_progress(
            {"transfer_id": tid, "received": begin["chunks"], "chunks": begin["chunks"], "complete": True}
        )

    def _finish_refused(self, tid: str, reason: str) -> None:
        log.error("model transfer %s refused: %s", tid, reason)
        self._mark_done(tid)
        shutil.rmtree(self.dir / tid, ignore_errors=True)
        self.on_progress({"transfer_id": tid, "refused": reason})

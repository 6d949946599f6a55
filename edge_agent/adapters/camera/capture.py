"""Camera: a capture thread over a frame source, handing out only the newest frame.

Inference is slower than most cameras; reading frames only when the detector is free would hand
it images that sat seconds in the driver's buffer. So a thread reads continuously into a 1-slot
holder and the loop always gets the newest frame (older ones are dropped and counted). Files and
folders are replays, not live, so there the thread waits for the consumer instead of dropping.

A stall (read errors, no new frame for ``stall_timeout_s``, the same bytes over and over, the
device vanishing) closes the source and reopens it with capped exponential backoff; ``state`` and
the counters in :meth:`Camera.stats` make that visible to the health/status output.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from typing import Any, Literal, Optional

import cv2
import numpy as np

from edge_agent.adapters.camera.backends import FrameSource, FrameSourceFactory, build_source_factory
from edge_agent.adapters.host.probes import lower_thread_priority
from edge_agent.core.camera.source_spec import Frame, SourceKind, classify_source, redact_source
from edge_agent.core.config.schema import CameraConfig
from edge_agent.core.messages.log_throttle import DEVICE_EVERY, LogThrottle
from edge_agent.core.queue.backoff import backoff_delay
from edge_agent.errors import CameraError, ImageError

log = logging.getLogger(__name__)

State = Literal["starting", "streaming", "reconnecting", "ended", "failed"]


class LatestFrame:
    """A 1-slot holder: ``put`` replaces an unread frame (counted in ``dropped``), ``get`` takes it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._frame: Optional[Frame] = None
        self._closed = False
        self.dropped = 0

    def put(self, frame: Frame, block: bool = False) -> bool:
        """Store ``frame``; with ``block`` wait until the slot is empty. False if closed meanwhile."""
        with self._cond:
            if block:
                while self._frame is not None and not self._closed:
                    self._cond.wait(0.5)
            if self._closed:
                return False
            if self._frame is not None:
                self.dropped += 1
            self._frame = frame
            self._cond.notify_all()
            return True

    def get(self, timeout_s: Optional[float]) -> Optional[Frame]:
        """Take the frame, waiting up to ``timeout_s``; after close, the last frame then None at once."""
        with self._cond:
            self._cond.wait_for(lambda: self._frame is not None or self._closed, timeout_s)
            frame, self._frame = self._frame, None
            self._cond.notify_all()
            return frame

    @property
    def empty(self) -> bool:
        with self._cond:
            return self._frame is None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class Camera:
    """Threaded camera over ``cfg.source`` (or an injected frame source factory).

    ``drop_stale``: keep only the newest frame (default: True for live sources, False for
    files/folders). ``repeat_limit``: identical consecutive frames from a live source that count as
    a frozen stream. ``max_reconnects``: give up ("failed") after that many failed reopen attempts
    in a row (None: retry forever, right for a service).
    """

    def __init__(
        self,
        cfg: CameraConfig,
        *,
        source_factory: Optional[FrameSourceFactory] = None,
        drop_stale: Optional[bool] = None,
        repeat_limit: int = 100,
        reconnect_min_s: float = 0.5,
        max_reconnects: Optional[int] = None,
    ) -> None:
        self.cfg = cfg
        # the model input (h, w), set by the agent: frames >= 2x its letterbox are decoded at 1/2..1/8
        # (JPEG) or resized to it right after decoding (video, V4L2, GStreamer): core/camera/decode_size.py
        self.decode_target: Optional[tuple[int, int]] = None
        self.granted: Optional[dict[str, object]] = None
        if source_factory is None:
            self._factory, self.kind = build_source_factory(cfg, lambda: self.decode_target)
        else:
            self._factory = source_factory
            src = cfg.source
            self.kind = classify_source(src) if not isinstance(src, bool) else SourceKind.DEVICE_INDEX
        self.name = redact_source(cfg.source)
        self.drop_stale = (not self.kind.finite) if drop_stale is None else drop_stale
        self.repeat_limit = repeat_limit
        self.reconnect_min_s = min(reconnect_min_s, cfg.reconnect_max_s)
        self.max_reconnects = max_reconnects
        self._slot = LatestFrame()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()
        self._state: State = "starting"
        self._seq = 0
        self.frames = 0
        self.reconnects = 0
        self.open_failures = 0
        self.errors = 0
        self.skipped = 0
        self._refusals = LogThrottle(DEVICE_EVERY)  # refused frames: the first, then every 250th
        self.last_error: Optional[str] = None
        self._last_frame_mono: Optional[float] = None
        self._fps = 0.0
        self._dt = 0.0  # the mean interval between frames (an EMA), 0 before two frames

    # ---- public API -------------------------------------------------------------------------
    @property
    def state(self) -> State:
        return self._state

    @property
    def finished(self) -> bool:
        """No frame will ever come again (ended/failed/stopped) and none is waiting."""
        return self._state in ("ended", "failed") and self._slot.empty

    def start(self) -> None:
        """Open the source and start the capture thread.

        A file/folder that cannot be opened raises CameraError now; a live source that is not there
        yet (USB camera still enumerating, RTSP server booting) is retried in the background.
        Once only: a second start raises before it opens anything (a second capture thread would
        hold the device twice and put two streams into one slot). After :meth:`stop` it starts
        again, with the source opened anew and a fresh slot.
        """
        self._fresh_start()
        source: Optional[FrameSource] = None
        try:
            source = self._factory()
        except (CameraError, OSError, cv2.error) as exc:
            if self.kind.finite:
                self._set_state("failed", str(exc))
                raise CameraError(f"camera {self.name!r}: {exc}") from None
            self._record_error(str(exc))
            self.open_failures += 1
            self._set_state("reconnecting")
            log.warning("camera %s not available yet (%s); retrying in the background", self.name, exc)
        self._thread = threading.Thread(target=self._run, args=(source,), name="camera", daemon=True)
        self._thread.start()

    def _fresh_start(self) -> None:
        """Refuse a second start; after a stop, start from a fresh slot with the stop flag down."""
        if self._thread is None:
            return
        if not self._stop.is_set():
            raise CameraError(f"camera {self.name!r}: already started")
        if self._thread.is_alive():  # stop() gave up on a read stuck in a driver
            raise CameraError(f"camera {self.name!r}: still stopping (its capture thread has not ended)")
        self._stop.clear()
        self._slot = LatestFrame()
        self._thread = None
        self._set_state("starting")

    def read(self, timeout_s: Optional[float] = 1.0) -> Optional[Frame]:
        """The newest frame not yet read, waiting up to ``timeout_s``.

        None means a timeout, or the end: check :attr:`finished` to tell them apart.
        """
        return self._slot.get(timeout_s)

    @property
    def fps_in(self) -> float:
        """Frames/s the source delivers (a moving average; 0 before two frames)."""
        return self._fps

    @property
    def has_frame(self) -> bool:
        """A frame is waiting, not read yet."""
        return not self._slot.empty

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the thread and release the source (a read stuck in a driver is abandoned after timeout_s)."""
        self._stop.set()
        self._slot.close()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.warning("camera %s: capture thread did not stop within %.1fs", self.name, timeout_s)

    def stats(self) -> dict[str, Any]:
        """Health counters: JSON-ready, cheap, safe to call from any thread."""
        with self._lock:
            age = (
                None if self._last_frame_mono is None else round(time.monotonic() - self._last_frame_mono, 3)
            )
            return {
                "source": self.name,
                "kind": self.kind.value,
                "state": self._state,
                "frames": self.frames,
                "dropped": self._slot.dropped,
                "reconnects": self.reconnects,
                "open_failures": self.open_failures,
                "errors": self.errors,
                "skipped": self.skipped,
                "last_error": self.last_error,
                "last_frame_age_s": age,
                "fps": round(self._fps, 2),
                **({"granted": self.granted} if self.granted else {}),
            }

    def __enter__(self) -> Camera:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- capture thread -----------------------------------------------------------------------
    def _set_state(self, state: State, error: Optional[str] = None) -> None:
        with self._lock:
            self._state = state
            if error is not None:
                self.last_error = error

    def _record_error(self, msg: str) -> None:
        with self._lock:
            self.errors += 1
            self.last_error = msg

    def _run(self, source: Optional[FrameSource]) -> None:
        lower_thread_priority()  # decode in inference's idle gaps, not in its way
        try:
            self._capture(source)
        finally:
            self._slot.close()

    def _capture(self, source: Optional[FrameSource]) -> None:
        attempts = 0 if source is not None else 1
        lost_at = time.monotonic() if source is None else None
        while not self._stop.is_set():
            if source is None:
                if self.max_reconnects is not None and attempts > self.max_reconnects:
                    self._set_state("failed")
                    log.error("camera %s: giving up after %d reconnect attempts", self.name, attempts - 1)
                    return
                delay = backoff_delay(attempts, self.reconnect_min_s, self.cfg.reconnect_max_s)
                if attempts and self._stop.wait(delay):
                    return
                try:
                    source = self._factory()
                except Exception as exc:  # noqa: BLE001 -- any reopen failure is retried (see _stream_or_reason)
                    attempts += 1
                    self.open_failures += 1
                    self._record_error(str(exc))
                    log.warning(
                        "camera %s: reopen failed (%s), next try in %.1fs",
                        self.name,
                        exc,
                        backoff_delay(attempts, self.reconnect_min_s, self.cfg.reconnect_max_s),
                    )
                    continue
                if lost_at is not None:
                    log.info(
                        "camera %s: reopened after %.1fs (%d attempts)",
                        self.name,
                        time.monotonic() - lost_at,
                        attempts,
                    )
                attempts = 0
            self.granted = getattr(source, "granted", None)
            reason = self._stream_or_reason(source)
            source = None
            if reason is None:
                return  # ended, stopped, or a finite source failed
            self.reconnects += 1
            self._record_error(reason)
            self._set_state("reconnecting")
            log.warning("camera %s: %s; reconnecting", self.name, reason)
            lost_at = time.monotonic()
            attempts = 1

    def _stream_or_reason(self, source: FrameSource) -> Optional[str]:
        """:meth:`_stream`, then close the source; an unexpected error is a lost stream.

        Any exception (a decoder bug, a library's own error type) that ended this thread would
        leave the state at "streaming" and the loop waiting for frames forever while it still
        pings the watchdog. A live source reconnects instead; a file or folder has failed.
        """
        try:
            reason = self._stream(source)
        except Exception as exc:  # noqa: BLE001 -- see above
            reason = f"unexpected {type(exc).__name__} while reading: {exc}"
            if self.kind.finite:
                self._record_error(reason)
                self._set_state("failed")
                log.error("camera %s: %s; giving up on this source", self.name, reason)
                reason = None
        try:
            source.close()
        except Exception as exc:  # noqa: BLE001 -- a failing close must not end the thread either
            log.warning("camera %s: close failed: %s", self.name, exc)
        return reason

    def _stream(self, source: FrameSource) -> Optional[str]:
        """Read until the source ends (None) or is lost (the reason)."""
        live = not source.finite
        last_new = time.monotonic()
        last_digest: Optional[int] = None
        repeats = 0
        while not self._stop.is_set():
            try:
                img = source.read()
            except ImageError as exc:
                self.skipped += 1
                self._record_error(str(exc))
                # one line per refused part was 280 lines in 14 s of a bad MJPEG stream
                line = self._refusals.line(self.name, f"camera {self.name}: {exc}")
                if line is not None:
                    log.warning("%s", line)
                continue
            except (CameraError, OSError, cv2.error) as exc:
                return f"read failed: {exc}"
            now = time.monotonic()
            if img is None:
                if not live:
                    self._set_state("ended")
                    log.info("camera %s: end of stream after %d frames", self.name, self.frames)
                    return None
                self._record_error("read returned no frame")
                if now - last_new >= self.cfg.stall_timeout_s:
                    return f"no new frame for {now - last_new:.1f}s"
                self._stop.wait(0.02)
                continue
            if live:
                digest = zlib.crc32(np.ascontiguousarray(img).data)
                if digest == last_digest:
                    repeats += 1
                    if repeats >= self.repeat_limit or now - last_new >= self.cfg.stall_timeout_s:
                        return f"stream frozen: the same frame {repeats + 1} times"
                else:
                    repeats, last_digest, last_new = 0, digest, now
            self._deliver(img, source, now)
        return None

    def _deliver(self, img: np.ndarray, source: FrameSource, now: float) -> None:
        self._seq += 1
        frame = Frame(
            image=img,
            ts_mono=now,
            ts_wall=time.time(),
            seq=self._seq,
            source=self.name,
            name=getattr(source, "current_name", None),
            full_size=getattr(source, "full_size", None),
            ts_media=getattr(source, "media_ts", None),
        )
        with self._lock:
            if self._last_frame_mono is not None:
                dt = now - self._last_frame_mono
                if dt > 0:
                    # the rate of the mean interval, not a mean of 1/dt: frames read in bursts (a
                    # capture thread that was not scheduled for a while) made 1/dt average ~50x the
                    # true rate, and the stale rule of several cameras drops by this interval
                    self._dt = dt if self._dt == 0 else 0.9 * self._dt + 0.1 * dt
                    self._fps = 1.0 / self._dt
            self._last_frame_mono = now
            self.frames += 1
            if self._state != "streaming":
                if self._state == "reconnecting":
                    log.info("camera %s: recovered, streaming again", self.name)
                self._state = "streaming"
        self._slot.put(frame, block=not self.drop_stale)

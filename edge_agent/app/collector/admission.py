"""Which device ids the collector takes, and how often a failing message is tried.

Anyone who can publish can make up device ids: 10^5 made-up ids became 10^5 device rows and
`fleet status` took 10.3 s. With ``enrolled_file`` (written by ``edge-agent fleet enroll``) only
the enrolled ids are taken; without it, at most ``new_devices_max`` new ids per interval. A message
of a refused id is rejected (acknowledged), it makes no device row.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Optional

from edge_agent.errors import ConfigError

log = logging.getLogger("edge_agent.collector")
ENROLLED_MAX_BYTES = 64 * 1024 * 1024


def read_enrolled(path: Path) -> set[str]:
    """The device ids of an enrolled file ``{"version": 1, "devices": {"<id>": {...}}, ...}``
    (only the "devices" keys are read); ConfigError naming the file and the problem."""
    from edge_agent.core.messages.fleet import DEVICE_RE

    try:
        if path.stat().st_size > ENROLLED_MAX_BYTES:
            raise ConfigError(f"enrolled_file {path}: larger than {ENROLLED_MAX_BYTES} bytes")
        data = json.loads(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"enrolled_file {path}: cannot read it: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"enrolled_file {path}: not JSON: {str(exc)[:120]}") from None
    devices = data.get("devices") if isinstance(data, dict) else None
    if not isinstance(devices, dict):
        raise ConfigError(f'enrolled_file {path}: expected {{"version": 1, "devices": {{"<id>": {{...}}}}}}')
    bad = [d for d in devices if not DEVICE_RE.match(d)]
    if bad:
        raise ConfigError(f"enrolled_file {path}: device id {bad[0][:80]!r} is not 1-64 of A-Za-z0-9_.-")
    return set(devices)


class Admission:
    """``refuse(device)``: None to take its message, else the one-line reason."""

    def __init__(
        self,
        enrolled_file: Optional[str],
        new_max: int,
        interval_s: float,
        known: Iterable[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(enrolled_file) if enrolled_file else None
        self.new_max, self.interval_s, self.clock = new_max, interval_s, clock
        self.known = set(known)
        self.refused = 0  # messages of refused ids (metric)
        self._window_start = clock()
        self._new_in_window = 0
        self._mtime: Optional[int] = None
        self.enrolled: set[str] = set()
        if self.path is not None:
            self._reload(first=True)

    def _reload(self, first: bool = False) -> None:
        assert self.path is not None
        try:
            mtime = os.stat(self.path).st_mtime_ns
        except OSError as exc:
            if first:
                raise ConfigError(f"enrolled_file {self.path}: cannot read it: {exc.strerror}") from None
            return  # kept: the last good list (a file being replaced)
        if mtime == self._mtime:
            return
        try:
            self.enrolled = read_enrolled(self.path)
        except ConfigError as exc:
            if first:
                raise
            log.error("collector: %s; keeping the previous list of %d devices", exc, len(self.enrolled))
        self._mtime = mtime

    def refuse(self, device: str) -> Optional[str]:
        if self.path is not None:
            self._reload()
            if device in self.enrolled:
                return None
            self.refused += 1
            return f"device {device!r} is not enrolled (enrolled_file {self.path})"
        if device in self.known:
            return None
        now = self.clock()
        if now - self._window_start >= self.interval_s:
            self._window_start, self._new_in_window = now, 0
        if self._new_in_window >= self.new_max:
            self.refused += 1
            return (
                f"device {device!r} is new and {self.new_max} new device ids were already taken in "
                f"{self.interval_s:g} s (new_devices_max; or enroll the fleet: enrolled_file)"
            )
        self._new_in_window += 1
        self.known.add(device)
        return None


class Deliveries:
    """How often each message (by a hash of topic and payload) failed to store; bounded, the
    oldest forgotten first, so 10^6 distinct poison messages cannot fill memory."""

    def __init__(self, max_keys: int = 10_000) -> None:
        self.max_keys = max_keys
        self._n: OrderedDict[bytes, int] = OrderedDict()

    @staticmethod
    def key(topic: str, payload: bytes) -> bytes:
        return hashlib.sha256(topic.encode("utf-8", "replace") + b"\0" + payload).digest()[:16]

    def failed(self, key: bytes) -> int:
        n = self._n.pop(key, 0) + 1
        self._n[key] = n
        while len(self._n) > self.max_keys:
            self._n.popitem(last=False)
        return n

    def forget(self, key: bytes) -> None:
        self._n.pop(key, None)

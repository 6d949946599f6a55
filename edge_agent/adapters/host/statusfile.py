"""The status file: a small JSON snapshot the running agent rewrites and ``edge-agent status`` reads.

Written atomically (temp file in the same directory + ``os.replace``) so a reader never sees half a
file. No fsync: it lives on /run (tmpfs) and is rewritten every few seconds, so durability buys
nothing and fsync on an SD card costs write amplification.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from edge_agent.errors import EdgeAgentError

STATUS_MODE = 0o640  # owner writes, the agent's group reads, others nothing


@dataclass(frozen=True)
class StatusSnapshot:
    data: dict[str, Any]
    written_at: float  # wall clock, from the file
    age_s: float

    def is_stale(self, max_age_s: float) -> bool:
        return self.age_s > max_age_s


def write_status(path: Union[str, Path], status: Mapping[str, Any], now: Optional[float] = None) -> None:
    """Atomically replace ``path`` with the snapshot (core.status, exactly as MQTT carries it; its
    ``ts`` is the time it was taken); creates the directory.

    Mode 0640 however we were started (umask or not): the agent's group (the operators added to
    it) may run ``edge-agent status``, other local users may not. The snapshot holds no password,
    but it names the cameras, the broker's state and the device's figures: no business of every
    account on the box, like the 0640 config."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    body = dict(status)
    if "ts" not in body:
        body["ts"] = time.time() if now is None else now
    text = json.dumps(body, sort_keys=True, default=str)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, STATUS_MODE)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_status(path: Union[str, Path], now: Optional[float] = None) -> Optional[StatusSnapshot]:
    """The last snapshot and its age; None when there is no file (agent not running / never ran)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise EdgeAgentError(f"{p}: cannot read status file: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EdgeAgentError(f"{p}: not a valid status file (JSON: {exc.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("ts"), (int, float)):
        raise EdgeAgentError(f"{p}: not a valid status file (expected a JSON object with 'ts')")
    written = float(data["ts"])
    t = time.time() if now is None else now
    return StatusSnapshot(data=data, written_at=written, age_s=max(0.0, t - written))

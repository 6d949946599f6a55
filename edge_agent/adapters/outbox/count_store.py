"""The objects-mode counter checkpoint of older versions: one small JSON file, now only read.

The counters live in the outbox, committed with their events (outbox.tallies; docs/objects.md):
this file, fsynced before the events, was ahead of them after a kill -9. A start that finds no
counters in the queue imports it once (app.agent.objects_step) and renames it ``*.imported``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from edge_agent.adapters.host.durable import move_durable
from edge_agent.errors import QueueError

MAX_BYTES = 1 << 20  # 64 zones + 64 lines of counters are a few kB: anything larger is not ours


def load(path: Path) -> Optional[Any]:
    """The saved state, None when there is none; raises QueueError naming the file when unreadable."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise QueueError(f"{path}: cannot read the count checkpoint: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:
        raise QueueError(f"{path}: count checkpoint larger than {MAX_BYTES} bytes; not ours")
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise QueueError(f"{path}: count checkpoint is not JSON: {exc}") from None


def set_aside(path: Path) -> Path:
    """After the import: ``path`` renamed ``*.imported`` (durably), so it is never read again."""
    done = path.with_name(path.name + ".imported")
    try:
        move_durable(path, done)
    except OSError as exc:
        raise QueueError(
            f"{path}: cannot rename the imported count checkpoint: {exc.strerror or exc}"
        ) from None
    return done

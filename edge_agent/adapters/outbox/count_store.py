"""The objects-mode counter checkpoint: one small JSON file, replaced durably (``write_durable``).

Kept beside the queue in ``state_dir`` so counts continue across a restart (docs/objects.md explains
why a crash can lose at most ``CHECKPOINT_S`` of counts and never count anything twice).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from edge_agent.adapters.host.durable import write_durable
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


def save(path: Path, state: object) -> None:
    """Write ``state`` so that a crash leaves either the old or the new file, never half of one."""
    data = json.dumps(state, separators=(",", ":"), allow_nan=False).encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_durable(path, data, 0o644)
    except OSError as exc:
        raise QueueError(f"{path}: cannot write the count checkpoint: {exc.strerror or exc}") from None

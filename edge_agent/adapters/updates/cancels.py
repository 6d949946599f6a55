"""A cancel of an MQTT model transfer on the device (the rule: core.updates.cancel).

``<p>/<device>/model/cancel/<transfer>`` (or the group's) whose body is the transfer's secret:
a transfer still arriving is deleted with its chunks; one complete but not yet installed (in the
inbox, or in the gate) is marked cancelled, and the agent's side refuses it before it switches.
A transfer already switched is not undone (``edge-agent model rollback`` is). Every cancelled id
goes to ``done.json``, so the chunks still queued for it at the broker are acknowledged and dropped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from edge_agent.adapters.updates.transfers import Refused
from edge_agent.core.updates.cancel import honours, parse_secret


def inbox_commitment(inbox: Path, tid: str) -> Optional[str]:
    """The cancel commitment of a complete transfer waiting in the inbox (its request file)."""
    try:
        req = json.loads((inbox / f"{tid}.request.json").read_bytes()[: 1 << 16])
    except (OSError, ValueError):
        return None
    value = req.get("cancel_sha256") if isinstance(req, dict) else None
    return value if isinstance(value, str) else None


def check_cancel(tid: str, payload: bytes, committed: Optional[str]) -> None:
    """Refused unless ``payload`` is the secret ``committed`` (the transfer's begin) names."""
    try:
        secret = parse_secret(bytes(payload))
    except ValueError as exc:
        raise Refused(f"cancel of transfer {tid}: {exc}") from None
    if committed is None:
        raise Refused(
            f"cancel of transfer {tid}: no such transfer waiting here, or its begin named no secret"
        )
    if not honours(secret, committed):
        raise Refused(f"cancel of transfer {tid}: the secret does not match the one its begin committed to")

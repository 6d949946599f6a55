"""A cancel of an MQTT model transfer on the device (the rule: core.updates.cancel).

``<p>/<device>/model/cancel/<transfer>`` (or the group's) whose body is the transfer's secret:
a transfer still arriving is deleted with its chunks; one complete but not yet installed (in the
inbox, or in the gate) is marked cancelled, and the agent's side refuses it before it switches.
The mark is a file beside its inbox request, ``<tid>.cancel``, holding the secret, written durably
(temp file, fsync, rename, fsync of the folder) before the cancel is acknowledged: a kill -9 or a
power cut before the install still refuses it at the next start (it was a set in memory, which a
restart forgot: the cancelled package was installed). The mark is believed only when its secret
opens the request's commitment again, so a damaged or foreign file cancels nothing (said in one
line, then removed). A cut while writing leaves no mark (the temp file is never read) and a cancel
neither acknowledged nor answered "cancelled": the broker redelivers it (persistent session, QoS
1) at the next start, where it still stops the package if it comes before the install.
A transfer already switched is not undone (``edge-agent model rollback`` is). Every cancelled id
goes to ``done.json``, so the chunks still queued for it at the broker are acknowledged and dropped.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Mapping, Optional, Tuple

from edge_agent.adapters.host.durable import write_durable
from edge_agent.adapters.updates.transfers import FILE_MODE, Refused
from edge_agent.core.updates.cancel import honours, parse_secret

MARK = ".cancel"
log = logging.getLogger("edge_agent.model_update")


def mark_cancelled(inbox: Path, tid: str, payload: bytes) -> None:
    """The durable mark that ``tid`` (complete, in the inbox) must not be installed."""
    write_durable(inbox / f"{tid}{MARK}", payload, FILE_MODE)


def cancel_mark(inbox: Path, tid: str, committed: Optional[str]) -> Tuple[bool, Optional[str]]:
    """(cancelled, why a mark there is not believed): a mark counts when its secret opens the
    commitment ``committed`` of the transfer's request."""
    path = inbox / f"{tid}{MARK}"
    try:
        data = path.read_bytes()[:256]
    except FileNotFoundError:
        return False, None
    except OSError as exc:
        return False, f"{path}: cannot read the cancel mark: {exc.strerror or exc}; not believed"
    try:
        secret = parse_secret(data)
    except ValueError:
        return False, f"{path}: a damaged cancel mark ({len(data)} bytes, not a secret); not believed"
    if not honours(secret, committed):
        return False, f"{path}: the cancel mark's secret does not open the request's commitment; not believed"
    return True, None


def refused_as_cancelled(inbox: Path, pkg: Path, req: Mapping[str, Any]) -> Optional[str]:
    """The one-line reason an inbox package is not installed because its sender cancelled it
    (None: not cancelled; a mark not believed is said here, once, and removed)."""
    origin = str(req.get("origin", ""))
    if not origin.startswith("mqtt:"):
        return None
    committed = req.get("cancel_sha256")
    cancelled, problem = cancel_mark(inbox, origin[5:], committed if isinstance(committed, str) else None)
    if problem is not None:
        log.warning("%s", problem)
        (inbox / f"{origin[5:]}{MARK}").unlink(missing_ok=True)
    if not cancelled:
        return None
    return f"{pkg.name}: transfer {origin[5:]} was cancelled by its sender before the install: not installed"


def drop_marks(inbox: Path) -> None:
    """Remove the cancel marks whose package is gone (a cancel that came after the install)."""
    for mark in inbox.glob(f"*{MARK}"):
        if not mark.with_suffix(".pkg").exists():
            mark.unlink(missing_ok=True)


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

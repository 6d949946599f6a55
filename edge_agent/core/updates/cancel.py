"""Cancelling an MQTT model transfer: the sender's secret, committed to in its begin.

``model push`` draws 32 random bytes, sends their sha256 in the begin (``cancel_sha256``) and
keeps the secret; a cancel carries the secret itself. A device drops a transfer only when the
secret hashes to what that transfer's own begin named, so a cancel can come only from whoever sent
the begin: another broker client who sees the transfer id (status topics, chunk topics) cannot
cancel it. A begin replayed under the same id with the same manifest resumes the transfer and keeps
the first begin's commitment; one with another manifest already replaced the transfer before this
existed (docs/threat-model.md), so a cancel gives nobody a disruption they did not have.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from typing import Optional

SECRET_BYTES = 32
_HEX64 = re.compile(r"[0-9a-f]{64}")


def is_sha256_hex(text: str) -> bool:
    return _HEX64.fullmatch(text) is not None


def new_secret() -> str:
    return os.urandom(SECRET_BYTES).hex()


def commitment(secret: str) -> str:
    """The sha256 (hex) a begin carries for ``secret`` (hex)."""
    return hashlib.sha256(bytes.fromhex(secret)).hexdigest()


def parse_secret(payload: bytes) -> str:
    """A cancel's body -> the secret (64 hex digits), or ValueError."""
    text = payload[:200].decode("ascii", errors="replace").strip()
    if len(payload) > 200 or not is_sha256_hex(text):
        raise ValueError("a cancel's body must be its transfer's secret: 64 lowercase hex digits")
    return text


def honours(secret: str, committed: Optional[str]) -> bool:
    """The secret opens this commitment (constant time); a begin without one is never cancelled."""
    return committed is not None and hmac.compare_digest(commitment(secret), committed)

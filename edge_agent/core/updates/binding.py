"""What a signed package is for, whether a rolled-back version may come back, and the begin that
carries the signed manifest over MQTT (pure).

A signature says who made a package, not where it may go: a signed group push recorded on the
broker and replayed on another device's topic used to be installed there (with its signed
``force``), and after ``model rollback`` the same recording under a new transfer id reinstalled
the bad model 12 s later. As TUF/Uptane targets metadata binds an image to its ECUs and hardware
ids, the manifest names its devices, groups and boards, and the device checks those *signed*
fields, never the topic a package came on.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Optional, Sequence

from edge_agent.core.updates.cancel import is_sha256_hex
from edge_agent.core.updates.package import Manifest, check_transfer_id, parse_version, version_tuple
from edge_agent.core.updates.store_state import StoreState

# the begin holds the manifest (up to MAX_PLAN_CHUNKS hashes, ~270 KiB) in base64 and a signature
MAX_SIGNED_BEGIN = 512 << 10
SIGNATURE_BYTES = 64  # Ed25519


@dataclass(frozen=True)
class Target:
    """This device, as a manifest's target fields see it."""

    device_id: str
    groups: Sequence[str]
    board: str  # adapters.runtime.board's kind: rpi4, rpi5, jetson, generic-arm, ...
    agent_version: str


def _few(values: Sequence[str]) -> str:
    shown = ", ".join(repr(v) for v in values[:5])
    return f"[{shown}{', ...' if len(values) > 5 else ''}]"


def target_problem(m: Manifest, me: Target, *, network: bool) -> Optional[str]:
    """Why ``m`` is not for this device, or None. ``network``: it came over MQTT, where a package
    that names no device or group is refused (locally the operator at the device is its target)."""
    named = bool(m.for_devices or m.for_groups)
    if network and not named:
        return (
            "names no device or group: a package sent over the network must say whom it is for "
            "(`edge-agent model pack --for-device ID` / `--for-group G`)"
        )
    if named and me.device_id not in m.for_devices and not set(me.groups) & set(m.for_groups):
        return (
            f"is for devices {_few(m.for_devices)} and groups {_few(m.for_groups)}, not for device "
            f"{me.device_id!r} (groups {_few(list(me.groups))})"
        )
    if m.boards and me.board not in m.boards:
        return f"is for boards {_few(m.boards)}, this device is {me.board!r}"
    if version_tuple(me.agent_version) < version_tuple(m.min_agent_version):
        return f"needs edge-agent >= {m.min_agent_version}, this agent is {me.agent_version}"
    return None


def rolled_back_problem(state: StoreState, m: Manifest) -> Optional[str]:
    """Why ``m``'s version may not come back (it was rolled back on this device), or None."""
    try:
        v = parse_version(m.version)
    except ValueError:
        return None  # parse_manifest refused it already
    for r in state.rolled_back:
        try:
            same = parse_version(r.version) == v
        except ValueError:
            continue
        if same:
            return (
                f"version {m.version} was rolled back on this device ({r.reason[:120]}); it is refused "
                "until a newer version is installed (on the device: `edge-agent model install "
                "--allow-rolled-back PACKAGE`)"
            )
    return None


@dataclass(frozen=True)
class SignedBegin:
    """A ``begin``: the transfer id (the sender's, not signed) and the package's signed manifest."""

    transfer_id: str
    manifest_data: bytes
    signature: bytes
    # sha256 of the secret whose reveal cancels this transfer (core.updates.cancel); the sender's
    cancel_sha256: Optional[str] = None

    def to_json(self) -> bytes:
        body = {
            "transfer_id": self.transfer_id,
            "manifest": base64.b64encode(self.manifest_data).decode("ascii"),
            "signature": base64.b64encode(self.signature).decode("ascii"),
        }
        if self.cancel_sha256 is not None:
            body["cancel_sha256"] = self.cancel_sha256
        return json.dumps(body).encode("ascii")


def _b64(raw: dict[str, object], key: str) -> bytes:
    v = raw.get(key)
    if not isinstance(v, str):
        raise ValueError(f"begin field {key}: expected a base64 string, got {str(v)[:40]!r}")
    try:
        return base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"begin field {key}: not base64") from None


def parse_signed_begin(payload: bytes) -> SignedBegin:
    """Untrusted ``begin`` bytes -> :class:`SignedBegin` (its signature not yet checked), or
    ValueError naming the field. The old unsigned begin (size/sha256/chunks only) is refused."""
    if len(payload) > MAX_SIGNED_BEGIN:
        raise ValueError(f"begin is {len(payload)} bytes; expected at most {MAX_SIGNED_BEGIN}")
    try:
        raw = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"begin is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ValueError("begin is not a JSON object")
    tid = check_transfer_id(str(raw.get("transfer_id", "")))
    if "manifest" not in raw:
        raise ValueError(
            "begin carries no signed manifest (the unsigned begin of edge-agent before package format 2 "
            "is refused): push a package made by this version's `edge-agent model pack`"
        )
    manifest = _b64(raw, "manifest")
    sig = _b64(raw, "signature")
    if len(sig) != SIGNATURE_BYTES:
        raise ValueError(f"begin field signature: {len(sig)} bytes, expected {SIGNATURE_BYTES} (Ed25519)")
    cancel = raw.get("cancel_sha256")
    if cancel is not None and not (isinstance(cancel, str) and is_sha256_hex(cancel)):
        raise ValueError(
            f"begin field cancel_sha256: expected 64 lowercase hex digits, got {str(cancel)[:70]!r}"
        )
    return SignedBegin(transfer_id=tid, manifest_data=manifest, signature=sig, cancel_sha256=cancel)

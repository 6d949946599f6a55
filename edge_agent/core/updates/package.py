"""Model packages (pure): the manifest schema, version checks, chunk bookkeeping, trial verdicts.

A package is an uncompressed tar holding ``manifest.json``, an optional ``manifest.sig`` (Ed25519
over the exact manifest bytes) and the files the manifest lists with their sha256. Signing the
manifest bytes, not a re-serialisation, means no canonical-JSON rules to get wrong: the hashes in
it bind every file to the signature.
"""

from __future__ import annotations

import json
import re
from typing import Dict, List, Literal, Optional, Tuple

from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from edge_agent.core.config.schema import Config
from edge_agent.core.updates.plan import MAX_CHUNK as MAX_CHUNK
from edge_agent.core.updates.plan import MIN_CHUNK as MIN_CHUNK
from edge_agent.core.updates.plan import TransferPlan
from edge_agent.errors import ModelError

# 2: the manifest names its targets and carries the MQTT transfer plan, and the files come
# before it in the tar. Format 1 packages (no targets) are still read for local installs only.
FORMAT = 2
READS = (1, 2)
MAX_TARGETS = 1000  # device ids / groups one manifest may name
# a device id as [device] id allows it; a group as one MQTT topic level (no wildcard, no '/').
# Checked by a validator, not typing.Annotated: that needs Python 3.9 (the Nano runs 3.8)
TARGET_PATTERNS = {
    "for_devices": re.compile(r"[A-Za-z0-9_.-]{1,64}"),
    "for_groups": re.compile(r"[^\x00-\x1f\x7f/#+]{1,100}"),
    "boards": re.compile(r"[a-z0-9_-]{1,32}"),
}
MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"
ROLES = ("detector", "classifier", "float_source")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)?$")


class PackageFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(pattern=_SAFE_NAME.pattern)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0)

    @field_validator("path")
    @classmethod
    def _no_dot_parts(cls, value: str) -> str:
        # the pattern alone lets "../escape.onnx" through: ".." is made of allowed characters
        if any(part in (".", "..") for part in value.split("/")):
            raise ValueError("a path part '.' or '..' is not allowed (files stay inside the package)")
        return value


class Manifest(BaseModel):
    """What a package claims; every file it lists is checked against its hash before use."""

    model_config = ConfigDict(extra="forbid")
    format: int = FORMAT
    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")
    version: str = Field(min_length=1, max_length=50, pattern=r"^[A-Za-z0-9_.+-]+$")
    task: Literal["detect", "detect+classify"] = "detect"
    created_at: str
    min_agent_version: str = "0"
    # the oldest onnxruntime that loads every model file (core.ort_compat); "0" = not recorded
    min_onnxruntime: str = Field(default="0", max_length=20, pattern=r"^[0-9]{1,4}(\.[0-9]{1,4}){0,2}$")
    # role -> file; "float_source" is the float model a TensorRT engine should be built from
    files: Dict[str, PackageFile]
    labels: Dict[str, List[str]] = Field(default_factory=dict)
    # images the gate uses when the device's frame ring is empty
    probe: List[PackageFile] = Field(default_factory=list)
    # switch even if the device's gate refuses: the package author's decision, covered by the
    # signature and honoured only when a trusted key signed it (never a flag from the network)
    force: bool = False
    # what the package is for (signed, like Mender's device_types_compatible / RAUC's compatible):
    # a device takes it only when it is named or one of its groups is; empty = a local install only
    for_devices: List[str] = Field(default_factory=list, max_length=MAX_TARGETS)
    for_groups: List[str] = Field(default_factory=list, max_length=MAX_TARGETS)
    boards: List[str] = Field(default_factory=list, max_length=32)  # empty = any board
    transfer: Optional[TransferPlan] = None  # the body's chunk hashes; required over MQTT

    @field_validator("for_devices", "for_groups", "boards")
    @classmethod
    def _targets(cls, value: List[str], info: ValidationInfo) -> List[str]:
        pattern = TARGET_PATTERNS[str(info.field_name)]
        for i, item in enumerate(value):
            if not pattern.fullmatch(item):
                raise ValueError(f"item {i}: {item[:60]!r}: does not match {pattern.pattern}")
        return value

    @field_validator("version")
    @classmethod
    def _pep440(cls, value: str) -> str:
        parse_version(value)
        return value

    @property
    def version_id(self) -> str:
        """Directory name of this version in the store: readable and unique per detector hash."""
        return f"{self.name}-{self.version}-{self.files['detector'].sha256[:8]}"

    def summary(self) -> Dict[str, str]:
        return {
            "name": self.name,
            "version": self.version,
            "detector_sha256": self.files["detector"].sha256,
        }


def parse_manifest(data: bytes, source: str) -> Manifest:
    """Bytes -> :class:`Manifest`; ModelError naming ``source`` and the field on anything wrong."""
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"{source}: {MANIFEST} is not JSON ({exc})") from None
    try:
        m = Manifest.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "<root>"
        raise ModelError(
            f"{source}: {MANIFEST} field {where} = {first.get('input')!r}: {first['msg']}"
        ) from None
    if m.format not in READS:
        raise ModelError(f"{source}: package format {m.format}, this agent reads formats {list(READS)}")
    unknown = sorted(set(m.files) - set(ROLES))
    if unknown:
        raise ModelError(f"{source}: {MANIFEST} files has unknown role(s) {unknown}; expected {list(ROLES)}")
    if "detector" not in m.files:
        raise ModelError(f"{source}: {MANIFEST} lists no 'detector' file")
    if (m.task == "detect+classify") != ("classifier" in m.files):
        raise ModelError(f"{source}: task {m.task!r} does not match the files listed {sorted(m.files)}")
    paths = [f.path for f in m.files.values()] + [p.path for p in m.probe]
    if len(set(paths)) != len(paths) or {MANIFEST, SIGNATURE} & set(paths):
        raise ModelError(f"{source}: {MANIFEST} lists a file path twice or a reserved name: {paths}")
    return m


def manifest_bytes(m: Manifest) -> bytes:
    return (json.dumps(m.model_dump(), indent=1, sort_keys=True) + "\n").encode("utf-8")


def parse_version(v: str) -> Version:
    """A package version, ordered by PEP 440 (``packaging``, the ordering pip uses): anti-rollback
    needs a total order, so a version it cannot order is refused at ``model pack`` and install."""
    try:
        return Version(v)
    except InvalidVersion:
        raise ValueError(
            f"version {v[:60]!r} is not a PEP 440 version (e.g. 1.2, 2.0.1, 2026.11.30, 2.0rc1, 2.0+site3)"
        ) from None


def version_tuple(v: str) -> Tuple[int, ...]:
    """'0.10.2rc1' -> (0, 10, 2): numeric parts only, enough to compare agent releases."""
    out = []
    for part in v.split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        out.append(int(digits.group()))
    return tuple(out)


def check_agent_version(m: Manifest, agent_version: str, source: str) -> None:
    if version_tuple(agent_version) < version_tuple(m.min_agent_version):
        raise ModelError(
            f"{source}: needs edge-agent >= {m.min_agent_version}, this agent is {agent_version}"
        )


def check_runtime_version(m: Manifest, ort_version: str, source: str) -> None:
    """Refuse, before staging and the gate, a package whose models this onnxruntime cannot load."""
    have, need = version_tuple(ort_version), version_tuple(m.min_onnxruntime)
    if have and have < need:
        raise ModelError(
            f"{source}: its models need onnxruntime >= {m.min_onnxruntime}, this device has {ort_version}; "
            f"pack models made with `edge-agent model convert|quantize ... --target-ort {ort_version}`"
        )


def update_warnings(cfg: Config) -> List[str]:
    """What ``config check`` and ``doctor`` warn about: updates enabled without a trusted key."""
    mu = cfg.model_update
    if not mu.enabled or mu.trusted_keys:
        return []
    mqtt = (
        "MQTT delivery stays off until a key is set"
        if cfg.mqtt.enabled and mu.mqtt
        else "MQTT delivery is off anyway"
    )
    return [
        "model_update is enabled with no trusted_keys: unsigned packages are installed from the "
        f"inbox and `model install`; {mqtt} (`edge-agent model keygen`, docs/threat-model.md)"
    ]


# ---- the MQTT transfer (the begin itself is core.updates.binding) ------------------------------
_TID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def check_transfer_id(tid: str) -> str:
    if not _TID.fullmatch(tid):  # fullmatch: "$" alone lets a trailing newline through
        raise ValueError(f"transfer id {tid[:70]!r}: expected 1 to 64 of [A-Za-z0-9_-]")
    return tid


def missing_ranges(have: set[int], total: int, limit: int = 20) -> List[List[int]]:
    """Chunk indexes not yet received as [first, last] ranges (what a resuming sender re-sends);
    at most ``limit`` ranges, in time proportional to ``have``, never to ``total``."""
    out: List[List[int]] = []
    nxt = 0
    for i in sorted(x for x in have if 0 <= x < total):
        if i > nxt:
            out.append([nxt, i - 1])
            if len(out) >= limit:
                return out
        nxt = i + 1
    if nxt < total and len(out) < limit:
        out.append([nxt, total - 1])
    return out


def rate_collapsed(
    baseline: Optional[float], rate: float, frames: int, min_frames: int, ratio: float
) -> bool:
    """True when a new model's detections per frame fell below ``ratio`` x the old model's.

    Needs ``min_frames`` frames and a baseline of at least 0.5 detection per frame: on a scene
    where the old model rarely saw anything, "fewer detections" is not evidence of a broken model.
    """
    if baseline is None or baseline < 0.5 or frames < min_frames:
        return False
    return rate < ratio * baseline

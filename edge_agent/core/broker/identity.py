"""Who may use the broker, and under which user names (pure; written by ``edge-agent fleet enroll``).

mosquitto 2.0's ``password_file`` + ``acl_file`` cannot tie a client id to a credential, except by
``use_username_as_clientid true``: the broker replaces every client id with the user name, so
nobody can take another identity's session (the collector's queued results were erased by an
anonymous client connecting with its id and a clean start). A device opens three connections with
three client ids (sync ``<device>``, model receiver ``<device>-model``, doctor probe
``<device>-doctor``), so it gets three users, one per role, sharing one password. An operator
gets two (``<op>`` pushes, ``<op>-watch`` reads the verdicts while the push runs); a collector one.

``enrolled.json`` is the registry the files are generated from; it is read back on every run
(re-running is idempotent), so everything in it is bounded and checked like outside data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Optional

from edge_agent.core.messages.fleet import DEVICE_RE
from edge_agent.core.messages.mqtt_names import topic_level_problem

# role -> user-name suffix; the agent's connections use these when [mqtt] role_usernames is on
DEVICE_ROLES = {"sync": "", "model": "-model", "doctor": "-doctor"}
OPERATOR_ROLES = {"push": "", "watch": "-watch"}
ENROLLED_VERSION = 1
MAX_IDENTITIES = 100_000  # devices + collectors + operators: far above a fleet, far below a memory problem
MAX_GROUPS = 32  # as [model_update] groups
MAX_ENROLLED_BYTES = 64 * 1024 * 1024
# <prefix>/groups/<g>/model/... is the group namespace: a device called "groups" would read
# the group "model"'s packages on its own model topics (<prefix>/groups/model/#)
RESERVED_NAMES = frozenset({"groups"})


class EnrollError(ValueError):
    """A name or registry the broker files cannot be made from; the text names it."""


def name_problem(name: str) -> Optional[str]:
    """Why ``name`` cannot be an identity (a device id, collector, operator) or a group, or None."""
    problem = topic_level_problem(name)
    if problem is None and not DEVICE_RE.match(name):
        problem = "expected 1-64 of A-Za-z0-9_.-"
    if problem is None and name in RESERVED_NAMES:
        problem = f"{name!r} is reserved (the topic level of group model pushes)"
    return problem


def check_name(name: object, what: str) -> str:
    if not isinstance(name, str):
        raise EnrollError(f"{what}: expected a string, got {type(name).__name__}")
    problem = name_problem(name)
    if problem is not None:
        raise EnrollError(f"{what} {name[:80]!r}: {problem}")
    return name


@dataclass
class Enrollment:
    """The registry: device -> its groups, and the collector and operator names."""

    devices: dict[str, list[str]] = field(default_factory=dict)
    collectors: list[str] = field(default_factory=list)
    operators: list[str] = field(default_factory=list)

    def users(self) -> dict[str, str]:
        """Every broker user name -> the identity it belongs to ("device cam-1"); EnrollError on a
        clash (device "cam-1-model" next to device "cam-1"; a collector named like a device)."""
        out: dict[str, str] = {}
        owners = (
            [(f"device {d}", d, DEVICE_ROLES) for d in self.devices]
            + [(f"collector {c}", c, {"collector": ""}) for c in self.collectors]
            + [(f"operator {o}", o, OPERATOR_ROLES) for o in self.operators]
        )
        for owner, name, roles in owners:
            for suffix in roles.values():
                user = name + suffix
                if user in out and out[user] != owner:
                    raise EnrollError(
                        f"{owner}: its broker user {user!r} is already the user of {out[user]} "
                        "(every connection has a user name of its own; choose another name)"
                    )
                out[user] = owner
        return out

    def names(self) -> list[str]:
        return [*self.devices, *self.collectors, *self.operators]

    def identity_users(self, name: str) -> list[str]:
        """The user names of the identity called ``name`` (empty if not enrolled)."""
        if name in self.devices:
            return [name + s for s in DEVICE_ROLES.values()]
        if name in self.operators:
            return [name + s for s in OPERATOR_ROLES.values()]
        return [name] if name in self.collectors else []

    def to_json(self) -> str:
        doc = {
            "version": ENROLLED_VERSION,
            "devices": {d: {"groups": list(self.devices[d])} for d in sorted(self.devices)},
            "collectors": sorted(self.collectors),
            "operators": sorted(self.operators),
        }
        return json.dumps(doc, indent=2) + "\n"


def _names(value: object, what: str) -> list[str]:
    if not isinstance(value, list):
        raise EnrollError(f"{what}: expected a list, got {type(value).__name__}")
    if len(value) > MAX_IDENTITIES:
        raise EnrollError(f"{what}: {len(value)} entries, at most {MAX_IDENTITIES}")
    names = [check_name(v, f"{what}[{i}]") for i, v in enumerate(value)]
    return sorted(set(names))


def parse_enrolled(text: str) -> Enrollment:
    """``enrolled.json`` back into an :class:`Enrollment`; EnrollError naming the bad field."""
    if len(text) > MAX_ENROLLED_BYTES:
        raise EnrollError(f"enrolled.json: {len(text)} characters, at most {MAX_ENROLLED_BYTES}")
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise EnrollError(f"enrolled.json: not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise EnrollError("enrolled.json: expected an object")
    if doc.get("version") != ENROLLED_VERSION:
        raise EnrollError(
            f"enrolled.json: version {str(doc.get('version'))[:20]!r}, expected {ENROLLED_VERSION}"
        )
    devices = doc.get("devices", {})
    if not isinstance(devices, dict) or len(devices) > MAX_IDENTITIES:
        raise EnrollError(f"enrolled.json: devices must be an object of at most {MAX_IDENTITIES} entries")
    out = Enrollment()
    for d, entry in devices.items():
        check_name(d, "enrolled.json: device")
        groups = entry.get("groups", []) if isinstance(entry, dict) else None
        if not isinstance(groups, list) or len(groups) > MAX_GROUPS:
            raise EnrollError(f"enrolled.json: device {d!r}: groups must be a list of at most {MAX_GROUPS}")
        out.devices[d] = _names(groups, f"enrolled.json: device {d!r} groups")
    out.collectors = _names(doc.get("collectors", []), "enrolled.json: collectors")
    out.operators = _names(doc.get("operators", []), "enrolled.json: operators")
    if len(out.devices) + len(out.collectors) + len(out.operators) > MAX_IDENTITIES:
        raise EnrollError(f"enrolled.json: more than {MAX_IDENTITIES} identities")
    out.users()  # a hand-edited file with clashing names is refused, not half-applied
    return out

"""The text of mosquitto's ``passwd``, ``acl`` and config snippet for an enrollment (pure).

ACL (mosquitto 2.0 ``acl_file``): a ``deny`` line denies read *and* write and is checked before
every grant (measured: ``topic deny p/D/confirm`` next to ``pattern read p/%u/confirm`` leaves D
unable to read its confirm). A device must read ``<p>/<d>/confirm`` yet never write it, so its
write grant cannot be ``<p>/<d>/+``: it lists the kinds the agent publishes (:data:`DEVICE_KINDS`,
kept complete by a test over every topic the agent builds), and one level deeper, under any camera
of its own (``<p>/<d>/+/<k>`` for the kinds a camera makes, :data:`CAMERA_KINDS`: never a status, a
batch or a confirm there, never another device's). ``deny`` is used where an identity must
have no access at all to a part of a broader grant. Per-user ``topic`` lines only, no ``pattern``
lines: patterns apply to every user, and the names are fixed by enrollment anyway.

Password file: mosquitto 2.0's ``$7$<iterations>$<b64 salt>$<b64 PBKDF2-SHA512>`` (what
``mosquitto_passwd`` writes: 101 iterations, a 12-byte salt, a 64-byte hash).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Optional

from edge_agent.core.broker.identity import EnrollError, Enrollment
from edge_agent.core.messages.builders import CAMERA_KINDS, SENSOR_RESULTS
from edge_agent.core.messages.mqtt_names import topic_prefix_problem

# every <prefix>/<device>/<kind> the agent publishes (results, status and its last will, sensor
# readings, objects-mode events and counts, batches). A kind missing here is *silently dropped*
# by mosquitto (it still sends the PUBACK for QoS 1), so tests/core/broker checks the agent's topics.
DEVICE_KINDS = ("detections", "status", "sensors", "objects", "counts", "batch.zlib")
CONFIRM_KIND = "confirm"  # <prefix>/<device>/confirm: written by the collector only, read by the device
# mosquitto_passwd's own default; the passwords are 192 random bits, so more iterations would only
# cost the broker CPU at every CONNECT (a fleet reconnecting at once) without making them harder to guess
PBKDF2_ITERATIONS = 101
SALT_BYTES = 12
MAX_ITERATIONS = 10_000_000


def passwd_line(user: str, password: str, salt: bytes, iterations: int = PBKDF2_ITERATIONS) -> str:
    """One ``user:$7$...`` line (no newline) that mosquitto 2.0 checks ``password`` against."""
    digest = hashlib.pbkdf2_hmac("sha512", password.encode("utf-8"), salt, iterations)
    b64 = base64.b64encode
    return f"{user}:$7${iterations}${b64(salt).decode()}${b64(digest).decode()}"


def passwd_matches(line: str, password: str) -> bool:
    """Whether a ``$7$`` line accepts ``password`` (False for any other or malformed line)."""
    try:
        _user, hashed = line.rstrip("\r\n").split(":", 1)
        empty, kind, iterations, salt, digest = hashed.split("$")
        if empty or kind != "7" or not 0 < int(iterations) <= MAX_ITERATIONS:
            return False
        want = base64.b64decode(digest, validate=True)
        got = hashlib.pbkdf2_hmac(
            "sha512", password.encode("utf-8"), base64.b64decode(salt, validate=True), int(iterations)
        )
    except ValueError:
        return False
    return hmac.compare_digest(want, got)


def parse_passwd(text: str) -> dict[str, str]:
    """``user -> whole line`` of an existing password file; EnrollError on a line mosquitto would
    reject or a user that is there twice."""
    out: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        user, sep, hashed = line.partition(":")
        if not sep or not user or not hashed.startswith(("$7$", "$6$")) or len(line) > 255:
            raise EnrollError(f"passwd line {n}: not 'user:$7$...' (is this a mosquitto password file?)")
        if user in out:
            raise EnrollError(f"passwd line {n}: user {user[:80]!r} is there twice")
        out[user] = line
    return out


def passwd_text(lines: Mapping[str, str]) -> str:
    return "".join(lines[u] + "\n" for u in sorted(lines))


def device_acl(prefix: str, device: str, groups: Sequence[str]) -> list[str]:
    p = prefix.strip("/")
    lines = [f"user {device}"] + [f"topic write {p}/{device}/{k}" for k in DEVICE_KINDS]
    lines += [f"topic write {p}/{device}/+/{k}" for k in CAMERA_KINDS]  # [[cameras]]: <p>/<d>/<cam>/<k>
    lines.append(f"topic write {p}/{device}/+/{SENSOR_RESULTS}")  # [[sensor_models]]: <p>/<d>/<model>/...
    lines += [f"topic read {p}/{device}/{CONFIRM_KIND}", "", f"user {device}-model"]
    lines += [f"topic read {p}/{device}/model/#"] + [f"topic read {p}/groups/{g}/model/#" for g in groups]
    # the doctor's probe only connects: no line under a user means no topic at all
    lines += ["", f"user {device}-doctor", f"topic deny {p}/#"]
    return lines


def collector_acl(prefix: str, name: str) -> list[str]:
    p = prefix.strip("/")
    # reads every device's one-level kinds and every camera's kinds one level deeper (by kind: not
    # <p>/+/+/+, which would let it read <p>/<d>/model/begin), plain and as a member of a shared
    # group (mosquitto checks a $share delivery against the topic itself); writes confirmations only
    reads = [f"topic read {p}/+/+"] + [f"topic read {p}/+/+/{k}" for k in (*CAMERA_KINDS, SENSOR_RESULTS)]
    return [f"user {name}", *reads, f"topic write {p}/+/{CONFIRM_KIND}"]


def operator_acl(prefix: str, name: str) -> list[str]:
    p = prefix.strip("/")
    return [
        f"user {name}",
        f"topic write {p}/+/model/#",
        f"topic write {p}/groups/+/model/#",
        "",
        f"user {name}-watch",  # `model push --wait`: the devices' verdicts in their status
        f"topic read {p}/+/status",
    ]


def acl_text(enrollment: Enrollment, prefix: str) -> str:
    """The whole ``acl_file``: nothing for anonymous clients (there are none), a block per user."""
    enrollment.users()  # clashing names never reach the broker
    blocks = [
        "# written by `edge-agent fleet enroll`; edit enrolled.json through it, not this file",
        "# (docs/collector.md, 'Broker identity'). No line before the first 'user': anonymous gets nothing.",
    ]
    for d in sorted(enrollment.devices):
        blocks += ["", *device_acl(prefix, d, enrollment.devices[d])]
    for c in sorted(enrollment.collectors):
        blocks += ["", *collector_acl(prefix, c)]
    for o in sorted(enrollment.operators):
        blocks += ["", *operator_acl(prefix, o)]
    return "\n".join(blocks) + "\n"


MAX_QUEUED = 10_000_000  # per session: a day of a 100-device fleet at one result a second
DEFAULT_DEPLOY_DIR = "/etc/mosquitto/edge-agent"
MAX_MESSAGE_BYTES = 16 * 1024 * 1024 + 64 * 1024  # a 16 MiB model chunk or batch and its topic


@dataclass(frozen=True)
class BrokerSettings:
    """What the generated files depend on besides the enrollment, kept in ``broker.json`` so a
    later ``revoke`` writes the same ACL prefix and listener without the flags being repeated."""

    prefix: str = "edge"
    port: int = 1883
    bind: Optional[str] = None  # listener address; None = every address
    deploy_dir: str = DEFAULT_DEPLOY_DIR  # where passwd and acl live on the broker host

    def __post_init__(self) -> None:
        problem = topic_prefix_problem(self.prefix)
        if problem is not None:
            raise EnrollError(f"prefix {self.prefix[:80]!r}: {problem}")
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 0 < self.port < 65536:
            raise EnrollError(f"port {str(self.port)[:20]!r}: expected 1-65535")
        if self.bind is not None and not _BIND_RE.match(self.bind):
            raise EnrollError(f"bind {self.bind[:80]!r}: expected a host name or an IP address")
        if not _PATH_RE.match(self.deploy_dir):
            raise EnrollError(
                f"deploy dir {self.deploy_dir[:80]!r}: expected an absolute path without spaces or control characters"
            )

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    def conf(self) -> str:
        return conf_text(self.deploy_dir, self.port, self.bind)


_BIND_RE = re.compile(r"^[A-Za-z0-9.:_-]{1,253}\Z")
_PATH_RE = re.compile(r"^/[A-Za-z0-9._/+@-]{0,1023}\Z")


def parse_settings(text: str) -> BrokerSettings:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise EnrollError(f"broker.json: not JSON ({exc})") from None
    if not isinstance(doc, dict) or not set(doc) <= {"prefix", "port", "bind", "deploy_dir"}:
        raise EnrollError("broker.json: expected an object with prefix, port, bind, deploy_dir")
    try:
        return BrokerSettings(**doc)
    except TypeError as exc:
        raise EnrollError(f"broker.json: {exc}") from None


def conf_text(broker_dir: str, port: int, bind: Optional[str] = None) -> str:
    """The ``mosquitto.conf`` snippet (Debian: /etc/mosquitto/conf.d/edge-agent.conf) naming the
    files in ``broker_dir`` (where they are deployed on the broker host)."""
    d = broker_dir.rstrip("/") or "/"
    listen = f"listener {port}" + (f" {bind}" if bind else "")
    return (
        "\n".join(
            [
                "# written by `edge-agent fleet enroll` (docs/collector.md, 'Broker identity (required)')",
                "per_listener_settings false",
                "allow_anonymous false",
                f"password_file {d}/passwd",
                f"acl_file {d}/acl",
                "# the collector's queue while it is away (the default 1000 drops the rest). Not 0",
                "# (unlimited): mosquitto 2.0.11 then closes a client's connection after the PUBACK",
                "# of a publish the ACL denied",
                f"max_queued_messages {MAX_QUEUED}",
                f"message_size_limit {MAX_MESSAGE_BYTES}",
                "# ---- persistence: Debian's /etc/mosquitto/mosquitto.conf already sets",
                "# ---- 'persistence true' and 'persistence_location' (a second location is an error);",
                "# ---- a broker without it needs both. Lower autosave_interval to shrink what a broker",
                "# ---- kill -9 loses (docs/collector.md, 'The delivery guarantee').",
                "# autosave_interval 60",
                "# ---- end-to-end confirmations need no setting here: the collector publishes",
                "# ---- <prefix>/<device>/confirm retained (the acl above lets only it), and devices with",
                '# ---- [mqtt] confirm = "collector" resend whatever this broker dropped or lost',
                listen,
                "# the broker replaces every client id by the user name: no one takes another's session",
                "use_username_as_clientid true",
            ]
        )
        + "\n"
    )

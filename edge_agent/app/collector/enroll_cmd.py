"""``edge-agent fleet enroll|revoke``: the broker identity of every device, collector and operator.

Writes, into ``--broker-dir``, mosquitto's ``passwd`` and ``acl``, a ``mosquitto.conf`` snippet
(no anonymous clients, client id = user name), ``enrolled.json`` (the registry) and one password
file per identity under ``secrets/`` to hand to that identity. Re-running is idempotent: an
identity keeps its password unless ``--rotate``; the others are untouched. docs/collector.md,
"Broker identity (required)".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from edge_agent.errors import ConfigError

if TYPE_CHECKING:
    from edge_agent.adapters.broker.broker_dir import Change
    from edge_agent.core.broker.files import BrokerSettings
    from edge_agent.core.broker.identity import Enrollment

    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]


def add_commands(fsub: Subparsers) -> None:
    en = fsub.add_parser(
        "enroll",
        help="give devices, collectors and operators broker credentials and an ACL (writes mosquitto's files)",
        description=__doc__,
    )
    en.add_argument("device", nargs="*", help="device ids to enroll (their [device] id)")
    en.add_argument(
        "--group",
        action="append",
        default=[],
        metavar="G",
        help="model-push group of these devices (repeat); sets their groups: give the full list",
    )
    en.add_argument(
        "--collector",
        action="append",
        default=[],
        metavar="NAME",
        help="a collector (its client_id = user name)",
    )
    en.add_argument(
        "--operator", action="append", default=[], metavar="NAME", help="an operator who pushes models"
    )
    en.add_argument("--rotate", action="store_true", help="new passwords for the identities named here")
    en.add_argument("--prefix", help="the devices' [mqtt] topic_prefix (default: the last run's, else edge)")
    en.add_argument(
        "--port", type=int, help="the broker's listener port (default: the last run's, else 1883)"
    )
    en.add_argument("--bind", help="the listener's address (default: every address)")
    en.add_argument(
        "--deploy-dir",
        metavar="PATH",
        help="where passwd and acl will live on the broker host (default: the last run's, else "
        "/etc/mosquitto/edge-agent)",
    )
    rv = fsub.add_parser("revoke", help="remove an identity's broker credentials and ACL")
    rv.add_argument("name", help="the device, collector or operator name")
    for q in (en, rv):
        q.add_argument("--broker-dir", required=True, metavar="DIR", help="the enrollment directory")
        q.add_argument("--json", action="store_true", help="machine-readable output")
    en.set_defaults(func=run_enroll)
    rv.set_defaults(func=run_revoke)


def _settings(args: argparse.Namespace) -> BrokerSettings:
    from edge_agent.adapters.broker.broker_dir import load_settings
    from edge_agent.core.broker.files import BrokerSettings

    old = load_settings(Path(args.broker_dir))
    return BrokerSettings(
        prefix=args.prefix if args.prefix is not None else old.prefix,
        port=args.port if args.port is not None else old.port,
        bind=args.bind if args.bind is not None else old.bind,
        deploy_dir=args.deploy_dir if args.deploy_dir is not None else old.deploy_dir,
    )


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")


def _report(args: argparse.Namespace, change: Change, extra: dict[str, object]) -> None:
    for user in change.foreign_users:
        sys.stderr.write(
            f"warning: passwd user {user!r} is not enrolled here: kept (no ACL: no topic at all)\n"
        )
    for user in change.mismatched:
        sys.stderr.write(f"warning: passwd line of {user!r} did not take its kept password: rewritten\n")
    if args.json:
        _out(json.dumps({**extra, "new_passwords": change.new_secrets, "removed": change.removed}))


def run_enroll(args: argparse.Namespace) -> int:
    from edge_agent.adapters.broker.broker_dir import apply
    from edge_agent.core.broker.identity import MAX_GROUPS, EnrollError, check_name

    root = Path(args.broker_dir)
    try:
        devices = [check_name(d, "device") for d in args.device]
        groups = sorted({check_name(g, "--group") for g in args.group})
        collectors = [check_name(c, "--collector") for c in args.collector]
        operators = [check_name(o, "--operator") for o in args.operator]
        if groups and not devices:
            raise EnrollError("--group needs a DEVICE (groups are where devices take model pushes)")
        if len(groups) > MAX_GROUPS:
            raise EnrollError(f"--group given {len(groups)} times, at most {MAX_GROUPS}")
        if not (devices or collectors or operators):
            raise EnrollError("nothing to enroll: name a DEVICE, a --collector or an --operator")
        named = [*devices, *collectors, *operators]
        dup = sorted({n for n in named if named.count(n) > 1})
        if dup:
            raise EnrollError(f"{dup[0]!r} is named twice (one name, one identity)")
        settings = _settings(args)

        def change_fn(e: Enrollment) -> None:
            for name in named:
                kinds = [
                    k
                    for k, v in (
                        ("device", e.devices),
                        ("collector", e.collectors),
                        ("operator", e.operators),
                    )
                    if name in v
                ]
                want = "device" if name in devices else "collector" if name in collectors else "operator"
                if kinds and kinds[0] != want:
                    raise EnrollError(f"{name!r} is already enrolled as a {kinds[0]} (revoke it first)")
            for d in devices:
                e.devices[d] = list(groups)
            e.collectors = sorted(set(e.collectors) | set(collectors))
            e.operators = sorted(set(e.operators) | set(operators))

        change = apply(root, settings, change_fn, rotate=named if args.rotate else ())
    except EnrollError as exc:
        raise ConfigError(str(exc)) from None
    _report(args, change, {"broker_dir": str(root), "enrolled": named})
    if not args.json:
        _snippets(root, settings, devices, collectors, operators, change)
    return 0


def _q(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's; raw UTF-8, no surrogate escapes)."""
    return json.dumps(value, ensure_ascii=False)


def _snippets(
    root: Path,
    settings: BrokerSettings,
    devices: list[str],
    collectors: list[str],
    operators: list[str],
    change: Change,
) -> None:
    def secret_line(name: str, etc: str = "/etc/edge-agent") -> str:
        state = "new" if name in change.new_secrets else "unchanged"
        return (
            f"# password ({state}): {root / 'secrets' / (name + '.password')} -> {etc}/mqtt-password (0600)"
        )

    prefix = _q(settings.prefix)
    for d in devices:
        _out(f"# device {d}: its /etc/edge-agent/config.toml")
        _out(secret_line(d))
        _out(f"[device]\nid = {_q(d)}\n[mqtt]\n# host = the broker's address\nport = {settings.port}")
        _out(
            f'topic_prefix = {prefix}\nusername = {_q(d)}\npassword_file = "mqtt-password"\nrole_usernames = true\n'
        )
    for c in collectors:
        _out(f"# collector {c}: its collector.toml")
        _out(secret_line(c, "/etc/edge-collector"))
        _out(f'[collector]\n# broker = "mqtt://<the broker>:{settings.port}"\nprefix = {prefix}')
        _out(f'client_id = {_q(c)}\nusername = {_q(c)}\npassword_file = "mqtt-password"\n')
    for o in operators:
        _out(f"# operator {o}: the config `edge-agent model push` reads")
        _out(secret_line(o))
        _out(f"[mqtt]\n# host = the broker's address\nport = {settings.port}\ntopic_prefix = {prefix}")
        _out(f'username = {_q(o)}\npassword_file = "mqtt-password"\nrole_usernames = true\n')
    _out(f"# broker: install {root}/passwd and {root}/acl (0640, group mosquitto) in {settings.deploy_dir},")
    _out(f"# {root}/mosquitto.conf as /etc/mosquitto/conf.d/edge-agent.conf; restart mosquitto the first")
    _out(f"# time, `systemctl reload mosquitto` after later runs. Never copy {root}/secrets to the broker.")


def run_revoke(args: argparse.Namespace) -> int:
    from edge_agent.adapters.broker.broker_dir import apply, load_settings
    from edge_agent.core.broker.identity import EnrollError, check_name

    root = Path(args.broker_dir)
    found: Optional[str] = None

    def change_fn(e: Enrollment) -> None:
        nonlocal found
        if args.name in e.devices:
            del e.devices[args.name]
            found = "device"
        elif args.name in e.collectors:
            e.collectors.remove(args.name)
            found = "collector"
        elif args.name in e.operators:
            e.operators.remove(args.name)
            found = "operator"
        else:
            raise EnrollError(f"{args.name!r}: not enrolled in {root} (nothing revoked)")

    try:
        check_name(args.name, "name")
        if not (root / "enrolled.json").exists():
            raise EnrollError(f"--broker-dir {root}: no enrolled.json (nothing enrolled there)")
        change = apply(root, load_settings(root), change_fn)
    except EnrollError as exc:
        raise ConfigError(str(exc)) from None
    _report(args, change, {"broker_dir": str(root), "revoked": args.name, "kind": found})
    if not args.json:
        _out(f"{args.name}: {found} revoked; its broker users and password removed.")
        _out(
            "Deploy passwd and acl and reload mosquitto (SIGHUP): the ACL applies to connected clients at once."
        )
    return 0

"""What `edge-agent collect` hands to the collector from its flags and config, in process (the
subprocess tests in test_collect_cmd.py get no mutmut credit): an mqtts:// broker gets TLS even
without a CA file, --quiet-s reaches the leave, flags override the config file, every flag counts."""

from __future__ import annotations

import argparse
import re
import ssl
from pathlib import Path
from typing import Any

import pytest

from edge_agent.app.cli.main import build_parser
from edge_agent.app.collector import collect_cmd
from edge_agent.app.collector import loop as collector
from edge_agent.errors import ConfigError


class Started(Exception):
    """Raised by the recording collector: what run() built is checked, nothing connects."""


def started_with(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def record(cfg: Any, password: Any, tls: Any, leave_quiet_s: Any = None, db_password: Any = None) -> None:
        seen.update(cfg=cfg, password=password, tls=tls, quiet=leave_quiet_s, db_password=db_password)
        raise Started

    monkeypatch.setattr(collector, "Collector", record)
    args = build_parser().parse_args(["collect", *argv])
    with pytest.raises(Started):
        collect_cmd.run(args)
    return seen


def test_an_mqtts_broker_gets_tls_with_the_system_cas_and_mqtt_gets_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    db = ["--db", f"sqlite:///{tmp_path}/f.db"]
    tls = started_with(monkeypatch, ["--broker", "mqtts://broker.example", *db])["tls"]
    assert isinstance(tls, ssl.SSLContext) and tls.verify_mode == ssl.CERT_REQUIRED and tls.check_hostname
    assert started_with(monkeypatch, ["--broker", "mqtt://broker.example", *db])["tls"] is None


def test_quiet_s_reaches_the_leave_and_only_a_leave(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    base = ["--db", f"sqlite:///{tmp_path}/f.db", "--group", "g", "--client-id", "col-a"]
    assert started_with(monkeypatch, [*base, "--leave", "--quiet-s", "42"])["quiet"] == 42.0
    assert started_with(monkeypatch, [*base, "--leave"])["quiet"] == 5.0
    assert started_with(monkeypatch, [*base, "--quiet-s", "42"])["quiet"] is None


def test_every_flag_overrides_the_config_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    conf = tmp_path / "c.toml"
    conf.write_text(
        "[collector]\nbroker = 'mqtt://file-host:1883'\ndb = 'sqlite:////tmp/file.db'\nprefix = 'file'\n"
        "client_id = 'file-id'\ngroup = 'file-g'\nmetrics_port = 9100\n"
    )
    flags = {
        "broker": "mqtt://flag-host:1884",
        "db": f"sqlite:///{tmp_path}/flag.db",
        "prefix": "flag",
        "client_id": "flag-id",
        "group": "flag-g",
    }
    argv = ["--config", str(conf)] + [a for k, v in flags.items() for a in (f"--{k.replace('_', '-')}", v)]
    cfg = collect_cmd.settings(build_parser().parse_args(["collect", *argv, "--metrics-port", "9200"]))
    assert {k: getattr(cfg, k) for k in flags} == flags and cfg.metrics_port == 9200
    kept = collect_cmd.settings(build_parser().parse_args(["collect", "--config", str(conf)]))
    assert (kept.broker, kept.group, kept.metrics_port) == ("mqtt://file-host:1883", "file-g", 9100)


def test_an_unreadable_config_file_is_one_error_naming_it(tmp_path: Path) -> None:
    conf = tmp_path / "c.toml"
    conf.write_bytes(b"\xff\xfe[collector]")
    args = argparse.Namespace(config=str(conf), **{k: None for k in collect_cmd.FLAGS})
    with pytest.raises(ConfigError, match=re.escape(f"{conf}: cannot read the collector config")):
        collect_cmd.settings(args)
    args.config = str(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match=r"missing\.toml: cannot read the collector config"):
        collect_cmd.settings(args)


def test_the_db_password_file_reaches_the_collector_and_a_missing_one_is_one_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "db-password").write_text("s3cret\n")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    seen = started_with(monkeypatch, ["--db", "postgresql://u@h/db", "--db-password-file", "db-password"])
    assert seen["db_password"] == "s3cret"
    assert started_with(monkeypatch, ["--db", "postgresql://u@h/db"])["db_password"] is None
    args = build_parser().parse_args(["collect", "--db", "postgresql://u@h/db", "--db-password-file", "nope"])
    with pytest.raises(ConfigError, match=r"^db_password_file = 'nope': cannot read it \(No such file"):
        collect_cmd.run(args)

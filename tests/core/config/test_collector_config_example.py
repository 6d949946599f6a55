"""The collector's example config (``edge-agent collect --example-config``) is generated from the
schema like the agent's: every key described, it parses into exactly the defaults, and every
example value of an unset key is valid."""

from __future__ import annotations

from support import cli
from support.collector import REPO

from edge_agent.core.config.collector import CollectorConfig, parse_collector_config
from edge_agent.core.config.example import collector_example, undocumented_keys


def test_every_collector_key_has_a_description_and_every_unset_key_an_example() -> None:
    assert undocumented_keys(CollectorConfig) == []


def test_the_example_parses_into_exactly_the_defaults() -> None:
    assert parse_collector_config(collector_example(), "example", {}) == CollectorConfig()


def test_the_full_example_sets_every_unset_key_with_a_valid_value() -> None:
    cfg = parse_collector_config(collector_example(full=True), "full example", {})
    assert (cfg.username, cfg.password_file) == ("collector", "mqtt-password")
    assert cfg.tls_ca and cfg.tls_cert and cfg.tls_key
    short, full = collector_example().splitlines(), collector_example(full=True).splitlines()
    assert len(short) == len(full)
    assert all(s in (f, f"# {f}") for s, f in zip(short, full))
    assert sum(s == f"# {f}" for s, f in zip(short, full)) == 7  # the seven unset keys


def test_collect_prints_it() -> None:
    out = cli("collect", "--example-config", quiet=False, env={"PYTHONPATH": str(REPO)}, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == collector_example()
    assert '# the devices\' [mqtt] topic_prefix\nprefix = "edge"\n' in out.stdout

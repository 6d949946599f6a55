"""Which config file a command reads (the flag, else $EDGE_AGENT_CONFIG, else the system path) and
the one line a missing or unreadable file is, in process."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from edge_agent.app.cli.configfile import CONFIG_ENV, add_config_arg, config_path, load_config
from edge_agent.core.config.schema import DEFAULT_CONFIG_PATH
from edge_agent.errors import ConfigError


def test_the_flag_wins_then_the_environment_then_the_system_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "env.toml"))
    assert config_path(tmp_path / "flag.toml") == tmp_path / "flag.toml"
    assert config_path(str(tmp_path / "flag.toml")) == tmp_path / "flag.toml"
    assert config_path() == tmp_path / "env.toml"
    assert config_path("") == tmp_path / "env.toml"  # an empty flag is no flag
    monkeypatch.setenv(CONFIG_ENV, f"  {tmp_path / 'env.toml'}\n")  # from a unit file or a shell
    assert config_path() == tmp_path / "env.toml"
    monkeypatch.setenv(CONFIG_ENV, "  ")
    assert config_path() == DEFAULT_CONFIG_PATH
    monkeypatch.delenv(CONFIG_ENV)
    assert config_path() == DEFAULT_CONFIG_PATH == Path("/etc/edge-agent/config.toml")


def test_load_config_reads_the_file_the_environment_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[device]\nid = "from-env"\n', encoding="utf-8")
    monkeypatch.setenv(CONFIG_ENV, str(f))
    assert load_config().device.id == "from-env"
    g = tmp_path / "g.toml"
    g.write_text('[mqtt]\nusername = "caf\u00e9"\n', encoding="utf-8")
    assert load_config(g).mqtt.username == "caf\u00e9"


def test_a_missing_config_says_how_to_get_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path / "absent.toml")
    assert str(e.value) == (
        f"{tmp_path / 'absent.toml'}: config file not found (pass --config FILE or set EDGE_AGENT_CONFIG; "
        "'edge-agent config example' prints a starting point)"
    )


def test_an_unreadable_or_undecodable_config_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path)  # a directory
    assert str(e.value).startswith(f"{tmp_path}: cannot read config: [Errno 21] Is a directory")
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b'[device]\nid = "caf\xe9"\n')
    with pytest.raises(ConfigError) as e:
        load_config(bad)
    assert str(e.value).startswith(f"{bad}: cannot read config: 'utf-8' codec can't decode byte 0xe9")


def test_a_config_error_names_the_file_it_came_from(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text("[detector]\nconf_threshold = 2\n")
    with pytest.raises(ConfigError) as e:
        load_config(f)
    assert str(e.value).startswith(str(f)) and "conf_threshold" in str(e.value)


def test_the_config_flag_has_a_short_form_and_says_the_default() -> None:
    p = argparse.ArgumentParser()
    add_config_arg(p)
    assert p.parse_args(["-c", "x.toml"]).config == "x.toml"
    assert p.parse_args(["--config", "y.toml"]).config == "y.toml"
    assert p.parse_args([]).config is None
    text = p.format_help()
    assert "--config FILE, -c FILE" in text
    assert f"config TOML (default: ${CONFIG_ENV}, else {DEFAULT_CONFIG_PATH})" in " ".join(text.split())
    assert os.sep in str(DEFAULT_CONFIG_PATH)

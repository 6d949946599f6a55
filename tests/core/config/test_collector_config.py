"""The collector's settings (core/config/collector.py) on exact inputs: the broker URL it accepts
and what it makes of it, and the one error line of every bad file."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edge_agent.core.config.collector import CollectorConfig, broker_address, parse_collector_config
from edge_agent.core.config.example import collector_example
from edge_agent.errors import ConfigError


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("mqtt://broker", ("broker", 1883, False)),
        ("mqtts://broker", ("broker", 8883, True)),  # TLS has its own default port
        ("mqtt://broker:1884", ("broker", 1884, False)),
        ("mqtts://10.0.0.2:8884/", ("10.0.0.2", 8884, True)),
        ("MQTTS://Broker.Example", ("broker.example", 8883, True)),
        ("mqtt://[::1]:1883", ("::1", 1883, False)),
    ],
)
def test_broker_address(url: str, address: tuple[str, int, bool]) -> None:
    assert broker_address(url) == address


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("mqtt://broker:99999", "Port out of range"),
        ("mqtt://broker:18x3", "Port could not be cast"),
        ("http://broker", "expected mqtt://HOST[:PORT] or mqtts://HOST[:PORT]"),
        ("mqtt://", "expected mqtt://HOST"),
        ("mqtt://:1883", "expected mqtt://HOST"),
        ("mqtt://broker/edge", "expected mqtt://HOST"),  # a topic is not part of the address
        ("broker:1883", "expected mqtt://HOST"),
    ],
)
def test_a_bad_broker_url_is_named_with_the_reason(url: str, why: str) -> None:
    with pytest.raises(ValueError) as err:
        broker_address(url)
    assert str(err.value).startswith(f"{url!r}: ") and why in str(err.value)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("x = [", "c.toml: not valid TOML: "),
        ("[mqtt]\nhost = 1\n", "c.toml: unknown section [mqtt], a collector file has only [collector]"),
        ("[zz]\n[aa]\n", "c.toml: unknown section [aa], a collector file has only [collector]"),
        ("collector = 5\n", "c.toml: collector must be a table ([collector])"),
        (
            "[collector]\nbatch_max = 0\n",
            "c.toml [collector]: batch_max = 0: Input should be greater than or equal to 1",
        ),
        (
            '[collector]\nbroker = "http://h"\n',
            "c.toml [collector]: broker = 'http://h': Value error, 'http://h': expected mqtt://HOST[:PORT]",
        ),
        ("[collector]\nbrokr = 1\n", "c.toml [collector]: "),
    ],
)
def test_a_bad_file_is_one_line_naming_file_section_and_key(text: str, line: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_collector_config(text, "c.toml", {})
    assert str(err.value).startswith(line) and "\n" not in str(err.value)


def test_an_empty_file_is_the_defaults_and_flags_go_on_top() -> None:
    assert parse_collector_config("", "c.toml", {}) == CollectorConfig()
    cfg = parse_collector_config('[collector]\nbatch_max = 5\ngroup = "g"\n', "c.toml", {"batch_max": 7})
    assert (cfg.batch_max, cfg.group) == (7, "g")
    with pytest.raises(ConfigError, match=r"^flags \[collector\]: batch_max = 0: "):
        parse_collector_config("", "flags", {"batch_max": 0})


def test_the_example_states_the_bounds_of_each_number() -> None:
    text = collector_example()
    assert "[>= 60, <= 4294967295]\nsession_expiry_s = 604_800\n" in text
    assert "[>= 1, <= 65535]\nreceive_maximum = 4000\n" in text
    assert "[> 0, <= 65535]\nkeepalive_s = 30\n" in text


@pytest.mark.parametrize(
    "url, has",
    [
        ("postgresql://u:pw@h/db", True),
        ("postgres://u:@h/db", True),  # an empty password is still one on argv
        ("postgresql://u@h/db?sslmode=require&Password=x", True),
        ("postgresql://u@h/db", False),
        ("postgresql:///db?host=/run/postgresql", False),
        ("sqlite:////var/lib/x:y@z.db", False),
    ],
)
def test_a_password_in_the_db_url_is_found(url: str, has: bool) -> None:
    from edge_agent.core.config.collector import db_url_password

    assert db_url_password(url) is has


def test_a_db_url_with_a_password_is_refused_without_echoing_it() -> None:
    for text, over in (
        ("[collector]\ndb = 'postgresql://u:hunter2@h/db'\n", {}),
        ("", {"db": "postgresql://u:hunter2@h/db"}),
    ):
        with pytest.raises(ConfigError) as err:
            parse_collector_config(text, "c.toml", over)
        assert "hunter2" not in str(err.value) and "db_password_file" in str(err.value)
    cfg = parse_collector_config(
        "[collector]\ndb = 'postgresql://u@h/db'\ndb_password_file = 'pw'\n", "c.toml", {}
    )
    assert cfg.db_password_file == "pw"


@given(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(["results", "objects", "counts"]))
def test_a_retention_age_is_taken_only_within_its_bounds(days: float, cls: str) -> None:
    key = f"retention_{cls}_days"
    text = f"[collector]\n{key} = {days!r}\n"  # repr: inf, nan, 1e+300 are TOML floats too
    if days != days or not 0 <= days <= 36500:
        with pytest.raises(ConfigError, match=key):
            parse_collector_config(text, "c.toml", {})
    else:
        assert getattr(parse_collector_config(text, "c.toml", {}), key) == days

from __future__ import annotations

import pytest

from edge_agent.core.config.schema import SensorConfig, parse_config
from edge_agent.core.sensor.parse import (
    EdgeTrigger,
    Trigger,
    convert_value,
    make_parser,
    parse_csv,
    parse_jsonl,
    parse_kv,
    parse_trigger,
)
from edge_agent.errors import ConfigError, SensorError

pytestmark = pytest.mark.arm_smoke


def cfg(**kw: object) -> SensorConfig:
    return SensorConfig(port="loop://", **kw)  # type: ignore[arg-type]


def test_convert_value_numbers_and_text() -> None:
    assert convert_value("12") == 12 and isinstance(convert_value("12"), int)
    assert convert_value("-3") == -3
    assert convert_value(" 3.5 ") == 3.5
    assert convert_value("1e3") == 1000.0
    assert convert_value("open") == "open"
    assert convert_value("nan") == "nan"  # not finite -> stays text, never a NaN in JSON
    assert convert_value("inf") == "inf"


def test_jsonl() -> None:
    assert parse_jsonl('{"temp": 21.5, "pir": 1, "door": "open", "ok": true}') == {
        "temp": 21.5,
        "pir": 1,
        "door": "open",
        "ok": True,
    }
    for bad in ["{temp: 1}", "[1,2]", "{}", '{"a": {"b": 1}}', '{"a": NaN}', '{"a": 1']:
        with pytest.raises(SensorError):
            parse_jsonl(bad)


def test_kv_space_and_comma_separated() -> None:
    assert parse_kv("temp=21.5 hum=40") == {"temp": 21.5, "hum": 40}
    assert parse_kv("temp=21.5,hum=40, door=open") == {"temp": 21.5, "hum": 40, "door": "open"}
    for bad in ["temp 21", "=3", "temp=", "   ", "booting..."]:
        with pytest.raises(SensorError):
            parse_kv(bad)


def test_csv_needs_matching_columns() -> None:
    assert parse_csv("21.5,40,1", ["temp", "hum", "pir"]) == {"temp": 21.5, "hum": 40, "pir": 1}
    assert parse_csv('21.5,"a,b"', ["temp", "tag"]) == {"temp": 21.5, "tag": "a,b"}
    with pytest.raises(SensorError, match="expected 3 CSV columns"):
        parse_csv("21.5,40", ["temp", "hum", "pir"])


def test_regex_named_groups() -> None:
    p = make_parser(cfg(protocol="regex", regex=r"T=(?P<temp>-?[\d.]+)C H=(?P<hum>\d+)%"))
    assert p("DHT22: T=-4.5C H=81%") == {"temp": -4.5, "hum": 81}
    with pytest.raises(SensorError, match="does not match"):
        p("DHT22: read error")


def _sensor_toml(**kw: object) -> str:
    lines = ["[sensor]", 'port = "loop://"'] + [
        f"{k} = {v!r}".replace("'", '"') if not isinstance(v, str) else f"{k} = '{v}'" for k, v in kw.items()
    ]
    return "\n".join(lines) + "\n"


def test_sensor_config_errors_name_the_key() -> None:
    # make_parser's checks run as config validation: a bad sensor section fails `config check`
    for kw, match in (
        ({"protocol": "csv"}, r"sensor\.csv_fields"),
        ({"protocol": "csv", "csv_fields": ["a", "a"]}, "unique"),
        ({"protocol": "regex"}, r"sensor\.regex"),
        ({"protocol": "regex", "regex": "(?P<t>"}, "not a valid regular expression"),
        ({"protocol": "regex", "regex": r"T=(\d+)"}, "named group"),
        ({"trigger": "pir >>> 1"}, "pir >>> 1"),
    ):
        with pytest.raises(ConfigError, match=match):
            parse_config(_sensor_toml(**kw), source="test.toml")
    assert make_parser(cfg(protocol="csv", csv_fields=["a"]))("7") == {"a": 7}


@pytest.mark.parametrize(
    ("expr", "reading", "expected"),
    [
        ("pir >= 1", {"pir": 1}, True),
        ("pir >= 1", {"pir": 0}, False),
        ("temp > 30.5", {"temp": 30.6}, True),
        ("temp > 30.5", {"temp": 30.5}, False),
        ("temp<0", {"temp": -1}, True),
        ("temp <= 0", {"temp": 0}, True),
        ("count == 3", {"count": 3.0}, True),
        ("count != 3", {"count": 3}, False),
        ('door == "open"', {"door": "open"}, True),
        ("door == 'open'", {"door": "closed"}, False),
        ("ok == true", {"ok": True}, True),
        ("temp > 30", {"temp": "err"}, False),  # text never compares with a number
        ("temp > 30", {"hum": 99}, False),  # key absent
    ],
)
def test_trigger_matches(expr: str, reading: dict[str, object], expected: bool) -> None:
    assert Trigger.parse(expr).matches(reading) is expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "expr", ["pir", "pir >", ">= 1", "pir => 1", "temp > warm", "door == open", "1x > 2"]
)
def test_bad_trigger_is_config_error_quoting_it(expr: str) -> None:
    with pytest.raises(ConfigError) as info:
        Trigger.parse(expr)
    assert repr(expr) in str(info.value)
    assert "sensor.trigger" in str(info.value)


def test_parse_trigger_none_and_blank() -> None:
    assert parse_trigger(None) is None
    assert parse_trigger("  ") is None
    t = parse_trigger(" pir >= 1 ")
    assert t is not None and (t.key, t.op, t.value) == ("pir", ">=", 1)


def test_edge_trigger_fires_once_per_rising_edge() -> None:
    edge = EdgeTrigger(Trigger.parse("pir >= 1"))
    seq = [{"pir": 0}, {"pir": 1}, {"pir": 1}, {"temp": 20}, {"pir": 1}, {"pir": 0}, {"pir": 2}]
    assert [edge.update(r) for r in seq] == [False, True, False, False, False, False, True]  # type: ignore[arg-type]

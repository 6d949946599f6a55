"""Property-based tests (hypothesis) for what a serial line brings in: whatever bytes a
microcontroller sends, each parser returns a reading of plain scalars (finite numbers) or raises
SensorError with one bounded line, never another exception; the trigger parser gives a Trigger or
a ConfigError; the edge trigger fires exactly on the rising edges of its condition."""

from __future__ import annotations

import math
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from edge_agent.adapters.sensor.serial_reader import SerialSensor
from edge_agent.core.config.schema import SensorConfig
from edge_agent.core.sensor.parse import (
    EdgeTrigger,
    Trigger,
    parse_csv,
    parse_jsonl,
    parse_kv,
    parse_regex,
)
from edge_agent.errors import ConfigError, SensorError

PATTERN = re.compile(r"T=(?P<temp>\S+)(?: H=(?P<hum>\S+))?")
lines = st.one_of(
    st.text(max_size=300),
    st.text(alphabet='=,. \t{}[]":-+0123456789eEinfaNtrulsxyz_', max_size=120),
)


def check(parse: object, line: str) -> None:
    try:
        reading = parse(line)  # type: ignore[operator]
    except SensorError as exc:
        msg = str(exc)
        assert "\n" not in msg.replace("\\n", "")  # one line: the line itself is quoted with repr
        assert len(msg) <= 500
        return
    assert isinstance(reading, dict) and reading
    for key, value in reading.items():
        assert isinstance(key, str)
        assert isinstance(value, (bool, int, float, str))
        if isinstance(value, float):
            assert math.isfinite(value)


@settings(max_examples=300, deadline=None)
@given(lines)
def test_every_parser_returns_scalars_or_one_sensor_error(line: str) -> None:
    check(parse_jsonl, line)
    check(parse_kv, line)
    check(lambda s: parse_regex(s, PATTERN), line)
    check(lambda s: parse_csv(s, ["a", "b"]), line)  # a \r inside a line too (once a csv.Error)


def test_a_carriage_return_inside_a_csv_line_is_garbage_not_a_crash() -> None:
    sensor = SerialSensor(SensorConfig(port="loop://", protocol="csv", csv_fields=["a", "b"]))
    assert sensor.feed_line(b"1\r2,3\n") is None
    assert sensor.garbage == 1 and sensor.feed_line(b"4,5\n") == {"a": 4, "b": 5}


keys = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
values = st.one_of(st.integers(-(10**12), 10**12), st.floats(allow_nan=False, allow_infinity=False, width=32))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(keys, values, min_size=1, max_size=6), st.sampled_from([" ", ",", ", ", "\t"]))
def test_kv_round_trips_what_a_sketch_prints(reading: dict[str, float], sep: str) -> None:
    line = sep.join(f"{k}={v!r}" for k, v in reading.items()) + "\r\n"
    got = parse_kv(line)
    assert got.keys() == reading.keys()
    for k, v in reading.items():
        assert got[k] == v and isinstance(got[k], int) == isinstance(v, int)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_a_trigger_expression_is_a_trigger_or_one_config_error(expression: str) -> None:
    try:
        trig = Trigger.parse(expression)
    except ConfigError as exc:
        assert str(exc).startswith("sensor.trigger = ")
        return
    assert trig.op in (">", ">=", "<", "<=", "==", "!=") and trig.expression == expression.strip()
    assert isinstance(trig.matches({trig.key: 1}), bool)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 3), st.none()), max_size=40))
def test_the_edge_trigger_fires_exactly_on_rising_edges(seq: list[int | None]) -> None:
    """None: a line from another sensor (no ``pir`` key): it never changes the state."""
    edge = EdgeTrigger(Trigger.parse("pir >= 2"))
    active = False
    for value in seq:
        reading = {"t": 1} if value is None else {"pir": value}
        fired = edge.update(reading)
        if value is None:
            assert fired is False
            continue
        now = value >= 2
        assert fired == (now and not active)
        active = now

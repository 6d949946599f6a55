"""Serial sensor line parsers and trigger expressions (pure: text in, readings out).

Microcontrollers print whatever their sketch prints, and a half-sent line after a reset is
normal; so every parser raises :class:`SensorError` on a bad line and the reader counts and
skips it. Config mistakes (a CSV protocol without fields, a bad regex or trigger) are
:class:`ConfigError` raised once, at start, naming the offending value.
"""

from __future__ import annotations

import csv
import json
import math
import operator
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Union

from edge_agent.core.config.schema import SensorConfig
from edge_agent.errors import ConfigError, SensorError

Value = Union[int, float, str, bool]
Reading = Dict[str, Value]
LineParser = Callable[[str], Reading]

_INT = re.compile(r"^[+-]?\d+$")
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_KV_SPLIT = re.compile(r"[,\s]+")


def convert_value(text: str) -> Value:
    """``"12"`` -> 12, ``"3.5"`` -> 3.5, anything else (including nan/inf) stays a string."""
    s = text.strip()
    if _INT.match(s):
        return int(s)
    try:
        f = float(s)
    except ValueError:
        return s
    return f if math.isfinite(f) else s


def _short(line: str) -> str:
    return line if len(line) <= 80 else line[:77] + "..."


def parse_jsonl(line: str) -> Reading:
    """A JSON object per line; values must be scalars (numbers, strings, booleans)."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise SensorError(f"not JSON ({exc.msg}): {_short(line)!r}") from None
    if not isinstance(obj, dict) or not obj:
        raise SensorError(f"expected a non-empty JSON object: {_short(line)!r}")
    out: Reading = {}
    for key, value in obj.items():
        if isinstance(value, (bool, int, str)):
            out[key] = value
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise SensorError(f"key {key!r} is not a finite number: {_short(line)!r}")
            out[key] = value
        else:
            raise SensorError(f"key {key!r} is not a scalar ({type(value).__name__}): {_short(line)!r}")
    return out


def parse_kv(line: str) -> Reading:
    """``temp=21.5 hum=40`` or ``temp=21.5,hum=40``; every token must be ``key=value``."""
    tokens = [t for t in _KV_SPLIT.split(line.strip()) if t]
    if not tokens:
        raise SensorError("empty line")
    out: Reading = {}
    for tok in tokens:
        key, sep, value = tok.partition("=")
        if not sep or not _KEY.match(key) or value == "":
            raise SensorError(f"token {tok!r} is not key=value: {_short(line)!r}")
        out[key] = convert_value(value)
    return out


def parse_csv(line: str, fields: list[str]) -> Reading:
    """One CSV row whose columns are named, in order, by ``fields``."""
    try:
        rows = list(csv.reader([line.strip()]))
    except csv.Error as exc:  # e.g. a bare CR inside the line: garbage to count, never a dead reader
        raise SensorError(f"not a CSV row ({exc}): {_short(line)!r}") from None
    row = rows[0] if rows else []
    if len(row) != len(fields):
        raise SensorError(f"expected {len(fields)} CSV columns {fields}, got {len(row)}: {_short(line)!r}")
    return {name: convert_value(cell) for name, cell in zip(fields, row)}


def parse_regex(line: str, pattern: re.Pattern[str]) -> Reading:
    """The named groups of ``pattern`` (searched, not anchored); groups that did not match are left out."""
    m = pattern.search(line)
    if m is None:
        raise SensorError(f"line does not match /{pattern.pattern}/: {_short(line)!r}")
    out = {k: convert_value(v) for k, v in m.groupdict().items() if v is not None}
    if not out:
        raise SensorError(f"no named group matched: {_short(line)!r}")
    return out


def make_parser(cfg: SensorConfig) -> LineParser:
    """The line parser for ``cfg.protocol``; config mistakes raise ConfigError naming the key."""
    if cfg.protocol == "jsonl":
        return parse_jsonl
    if cfg.protocol == "kv":
        return parse_kv
    if cfg.protocol == "csv":
        fields = list(cfg.csv_fields)
        if not fields:
            raise ConfigError(
                "sensor.csv_fields: protocol 'csv' needs the column names, e.g. ['temp', 'hum']"
            )
        if len(set(fields)) != len(fields):
            raise ConfigError(f"sensor.csv_fields = {fields}: column names must be unique")
        return lambda line: parse_csv(line, fields)
    # regex
    if not cfg.regex:
        raise ConfigError(
            "sensor.regex: protocol 'regex' needs a pattern with named groups, e.g. 'T=(?P<temp>\\S+)'"
        )
    try:
        pattern = re.compile(cfg.regex)
    except re.error as exc:
        raise ConfigError(f"sensor.regex = {cfg.regex!r}: not a valid regular expression: {exc}") from None
    if not pattern.groupindex:
        raise ConfigError(f"sensor.regex = {cfg.regex!r}: needs at least one named group (?P<name>...)")
    return lambda line: parse_regex(line, pattern)


_OPS: dict[str, Callable[[Any, Any], Any]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
}
_TRIGGER = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.\-]*)\s*(>=|<=|==|!=|>|<)\s*(\S.*?)\s*$")


@dataclass(frozen=True)
class Trigger:
    """``<key> <op> <value>`` evaluated on a reading, e.g. ``pir >= 1`` or ``state == "open"``."""

    key: str
    op: str
    value: Value
    expression: str

    @classmethod
    def parse(cls, expression: str) -> Trigger:
        """Parse once at start; a bad expression is a ConfigError quoting it."""
        m = _TRIGGER.match(expression)
        expected = "expected '<key> <op> <value>' with <op> one of > >= < <= == != (e.g. 'pir >= 1')"
        if m is None:
            raise ConfigError(f"sensor.trigger = {expression!r}: {expected}")
        key, op, raw = m.groups()
        value: Value
        if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
            value = raw[1:-1]
        elif raw in ("true", "false"):
            value = raw == "true"
        else:
            value = convert_value(raw)
        if isinstance(value, str) and op not in ("==", "!="):
            raise ConfigError(f"sensor.trigger = {expression!r}: {op} needs a number, got {raw!r}")
        if isinstance(value, str) and raw == value:
            raise ConfigError(f'sensor.trigger = {expression!r}: quote text values, e.g. {key} {op} "{raw}"')
        return cls(key=key, op=op, value=value, expression=expression.strip())

    def matches(self, reading: Reading) -> bool:
        """True when the reading has the key and the comparison holds (type mismatches never match)."""
        if self.key not in reading:
            return False
        got = reading[self.key]
        numeric = (int, float)
        if isinstance(self.value, numeric) and not isinstance(self.value, bool):
            if not isinstance(got, numeric):
                return False
            return bool(_OPS[self.op](float(got), float(self.value)))
        if type(got) is not type(self.value):
            return False
        return bool(_OPS[self.op](got, self.value))


class EdgeTrigger:
    """Fires on the *rising edge* of a trigger (condition false -> true), not on every line.

    A PIR that holds ``pir=1`` for ten seconds is one event; the periodic interval already
    covers "keep looking while it stays true".
    """

    def __init__(self, trigger: Trigger) -> None:
        self.trigger = trigger
        self._active = False

    def update(self, reading: Reading) -> bool:
        """Feed one reading; True exactly when the condition has just become true.

        Readings without the key leave the state unchanged (other sensors on the same line).
        """
        if self.trigger.key not in reading:
            return False
        now = self.trigger.matches(reading)
        fired = now and not self._active
        self._active = now
        return fired


def parse_trigger(expression: Optional[str]) -> Optional[Trigger]:
    """``None``/empty -> no trigger; otherwise :meth:`Trigger.parse`."""
    if expression is None or not expression.strip():
        return None
    return Trigger.parse(expression)

"""Rules of the pure parsers and policies fed by outside data, pinned where mutation testing found
them unpinned: sensor line errors quote the line (shortened at 80 characters), trigger values
(quotes, booleans, the empty string), type-strict trigger matching, the rising edge from the first
line; the output policy's box matching with several boxes of one label, its IoU boundary and its
defaults; backoff's jitter clamps."""

from __future__ import annotations

import re

import pytest

from edge_agent.core.config.schema import OutputConfig, SensorConfig, parse_config
from edge_agent.core.messages.output_policy import OutputPolicy, same_detections
from edge_agent.core.queue.backoff import backoff_delay
from edge_agent.core.sensor.parse import (
    EdgeTrigger,
    Trigger,
    make_parser,
    parse_csv,
    parse_jsonl,
    parse_kv,
    parse_regex,
)
from edge_agent.errors import ConfigError, SensorError

# ---- sensor lines -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{oops", r"^not JSON \(Expecting property name enclosed in double quotes\): '\{oops'$"),
        ("[1, 2]", r"^expected a non-empty JSON object: '\[1, 2\]'$"),
        ('{"t": NaN}', r"""^key 't' is not a finite number: '\{"t": NaN\}'$"""),
        ('{"t": [1]}', r"""^key 't' is not a scalar \(list\): '\{"t": \[1\]\}'$"""),
    ],
)
def test_jsonl_errors_name_the_problem_and_quote_the_line(line: str, message: str) -> None:
    with pytest.raises(SensorError, match=message):
        parse_jsonl(line)


def test_a_long_bad_line_is_quoted_shortened_to_80_characters() -> None:
    with pytest.raises(SensorError) as exc:
        parse_jsonl("x" * 200)
    quoted = str(exc.value).split(": ", 1)[1]
    assert quoted == repr("x" * 77 + "...")
    with pytest.raises(SensorError) as exc:
        parse_kv("y" * 80)  # exactly 80: quoted whole
    assert str(exc.value).endswith(repr("y" * 80))
    with pytest.raises(SensorError) as exc:
        parse_kv("y" * 81)
    assert str(exc.value).endswith(repr("y" * 77 + "..."))


def test_kv_rules() -> None:
    with pytest.raises(SensorError, match=r"^empty line$"):
        parse_kv("  ,  ")
    assert parse_kv("a=b=c x=1") == {"a": "b=c", "x": 1}  # the first '=' splits


def test_csv_and_regex_errors() -> None:
    with pytest.raises(SensorError, match=r"^expected 2 CSV columns \['a', 'b'\], got 0: ''$"):
        parse_csv("", ["a", "b"])
    with pytest.raises(SensorError, match=r"^no named group matched: 'T='$"):
        parse_regex("T=", re.compile(r"T=(?P<t>\d+)?"))


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ('door == ""', ""),
        ("door == 'open'", "open"),
        ('door != "open"', "open"),
        ("flag == false", False),
        ("flag == true", True),
        ("pir >= 1", 1),
    ],
)
def test_trigger_values(expression: str, value: object) -> None:
    t = Trigger.parse(f"  {expression}  ")
    assert t.value == value and type(t.value) is type(value)
    assert t.expression == expression  # stripped, quoted back in errors and logs


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ('door == "', r"quote text values"),
        ("door == XopenX", r"quote text values"),  # only ' and " quote
        (
            "pir ~ 1",
            r"^sensor\.trigger = 'pir ~ 1': expected '<key> <op> <value>' with <op> one of"
            r" > >= < <= == != \(e\.g\. 'pir >= 1'\)$",
        ),
        ('door > "open"', r"> needs a number, got '\"open\"'"),
    ],
)
def test_bad_triggers_are_config_errors_quoting_them(expression: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Trigger.parse(expression)


@pytest.mark.parametrize(
    ("protocol", "parser"), [("jsonl", parse_jsonl), ("kv", parse_kv)], ids=["jsonl", "kv"]
)
def test_each_protocol_gets_its_parser(protocol: str, parser: object) -> None:
    assert make_parser(SensorConfig(port="loop://", protocol=protocol)) is parser  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            'protocol = "csv"',
            r"sensor\.csv_fields: protocol 'csv' needs the column names, e\.g\. \['temp', 'hum'\]$",
        ),
        (
            'protocol = "regex"',
            r"sensor\.regex: protocol 'regex' needs a pattern with named groups, e\.g\. 'T=\(\?P<temp>\\S\+\)'$",
        ),
    ],
)
def test_a_protocol_without_its_settings_is_refused_with_an_example(section: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(f'[sensor]\nport = "loop://"\n{section}\n')


def test_triggers_match_only_their_own_type() -> None:
    assert Trigger.parse("flag == true").matches({"flag": True})
    assert not Trigger.parse("flag == true").matches({"flag": 1})  # 1 is not True here
    assert not Trigger.parse('state == "1"').matches({"state": 1})
    assert not Trigger.parse("pir >= 1").matches({"pir": "1"})
    assert Trigger.parse("pir >= 1").matches({"pir": 1.5})


def test_the_edge_trigger_fires_on_the_very_first_true_line() -> None:
    edge = EdgeTrigger(Trigger.parse("pir >= 1"))
    assert [edge.update(r) for r in ({"pir": 1}, {"pir": 1}, {"t": 3}, {"pir": 0}, {"pir": 2})] == [
        True,
        False,
        False,
        False,
        True,
    ]


# ---- output policy ------------------------------------------------------------------------------

A = (0.0, 0.0, 10.0, 10.0)
B = (100.0, 0.0, 110.0, 10.0)


def test_several_boxes_of_one_label_are_matched_one_to_one() -> None:
    assert same_detections([("car", A), ("car", B)], [("car", B), ("car", A)], 0.5)
    moved = (200.0, 50.0, 210.0, 60.0)
    assert not same_detections([("car", A), ("car", B)], [("car", A), ("car", moved)], 0.5)


def test_a_box_already_matched_does_not_end_the_matching() -> None:
    """A new box overlapping an already matched old one (skipped) must not stop the check of the
    old box that is left over and has moved away."""
    near_a = (5.0, 0.0, 15.0, 10.0)  # IoU 1/3 with A: ranked before the 0-overlap pairs
    assert not same_detections([("car", A), ("car", B)], [("car", A), ("car", near_a)], 0.5)


def test_an_overlap_of_exactly_min_iou_is_the_same_detection() -> None:
    half = (0.0, 0.0, 10.0, 5.0)  # IoU with A: 50 / 100
    assert same_detections([("p", A)], [("p", half)], 0.5)
    assert not same_detections([("p", A)], [("p", half)], 0.51)


def test_a_pending_change_must_repeat_with_its_boxes_too() -> None:
    """stable_frames=2 with min_iou: a box jumping around (same label) is flicker, not a change."""
    pol = OutputPolicy("event", 1000.0, min_iou=0.5, stable_frames=2)
    far1, far2 = ("p", (50.0, 50.0, 60.0, 60.0)), ("p", (80.0, 0.0, 90.0, 10.0))
    assert pol.decide(0.0, [("p", A)]).reason == "first"
    assert pol.decide(1.0, [far1]).emit is False
    assert pol.decide(2.0, [far2]).emit is False  # not the pending boxes: starts over
    d = pol.decide(3.0, [far2])  # seen twice in a row: now it is a change
    assert (d.emit, d.reason) == (True, "change")


def test_policy_defaults_and_limits() -> None:
    cfg = OutputConfig()
    pol = OutputPolicy()
    assert (pol.mode, pol.heartbeat_s, pol.min_iou, pol.stable_frames) == (cfg.mode, cfg.heartbeat_s, None, 1)
    assert OutputPolicy.from_config(cfg).stable_frames == 1
    assert OutputPolicy.from_config(cfg, stable_frames=3, min_iou=0.2).stable_frames == 3
    assert OutputPolicy(heartbeat_s=0.5).heartbeat_s == 0.5
    assert OutputPolicy(min_iou=0.0).min_iou == 0.0 and OutputPolicy(min_iou=1.0).min_iou == 1.0
    with pytest.raises(ValueError, match=r"^heartbeat_s must be > 0, got 0$"):
        OutputPolicy(heartbeat_s=0)
    with pytest.raises(ValueError, match=r"^min_iou must be in \[0, 1\], got 1.5$"):
        OutputPolicy(min_iou=1.5)
    with pytest.raises(ValueError, match=r"^stable_frames must be >= 1, got 0$"):
        OutputPolicy(stable_frames=0)


# ---- backoff ------------------------------------------------------------------------------------


def test_backoff_without_jitter_by_default_and_clamped_jitter() -> None:
    assert [backoff_delay(n, 1.0, 100.0) for n in (0, 1, 2, 3, 8)] == [0.0, 1.0, 2.0, 4.0, 100.0]
    assert backoff_delay(3, 1.0, 100.0, jitter=1.5, u=0.9) == pytest.approx(0.4)  # jitter <= 1
    assert backoff_delay(3, 1.0, 100.0, jitter=0.5, u=1.5) == pytest.approx(2.0)  # u <= 1
    assert backoff_delay(20000, 0.5, 30.0) == 30.0  # a week unplugged: no float overflow

"""The config's error lines and the MQTT name rules, checked in process (the CLI tests check the
same through `config check`, but a subprocess is invisible to mutation testing)."""

from __future__ import annotations

import pytest

from edge_agent.core.config.schema import parse_config, require_detector
from edge_agent.core.messages.mqtt_names import (
    MAX_PREFIX_BYTES,
    topic_level_problem,
    topic_prefix_problem,
    utf8_text_problem,
)
from edge_agent.errors import ConfigError


def _error(text: str, source: str = "c.toml") -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(text, source)
    return str(info.value)


# ---- config error lines -----------------------------------------------------------------------
def test_an_unknown_key_is_named_as_unknown_not_as_a_bad_value() -> None:
    msg = _error("[mqtt]\nhots = 'broker'\n")
    assert msg == "c.toml: unknown key 'mqtt.hots' (not part of the edge-agent config)"


def test_a_bad_value_names_the_key_the_value_and_what_was_expected() -> None:
    msg = _error("[mqtt]\nport = 70000\n")
    assert msg.startswith("c.toml: mqtt.port = 70000: ") and "65536" in msg


def test_every_error_of_a_file_is_on_one_line_separated_by_semicolons() -> None:
    msg = _error("[mqtt]\nport = 0\nkeepalive_s = 0\n")
    assert "\n" not in msg
    first, second = msg.split("; ")
    assert first.startswith("c.toml: mqtt.port = 0") and second.startswith("c.toml: mqtt.keepalive_s = 0")


def test_a_whole_config_rule_is_shown_without_pydantics_prefix() -> None:
    zone = '[[zones]]\nname = "gate"\npolygon = [[0.1, 0.1], [0.9, 0.1], [0.5, 0.9]]\n'
    msg = _error(zone + zone)
    assert msg == "c.toml: zones.1.name = 'gate' is used twice; names must be unique"


def test_a_long_value_is_shortened_and_its_length_given() -> None:
    exact = "a" * 78  # repr: 80 characters, shown whole
    assert f"device.id = '{exact}': " in _error(f'[device]\nid = "{exact}"\n')
    longer = "a" * 79  # repr: 81 characters
    msg = _error(f'[device]\nid = "{longer}"\n')
    assert f"device.id = '{'a' * 59}... (81 characters): " in msg
    assert len(_error(f'[device]\nid = "{"a" * 70_000}"\n')) < 400


def test_bad_toml_names_the_file_and_the_default_name_is_config() -> None:
    assert _error("[mqtt\n").startswith("c.toml: not valid TOML: ")
    with pytest.raises(ConfigError, match=r"^<config>: unknown key 'nope'"):
        parse_config("nope = 1\n")


def test_run_needs_a_detector_model_and_says_how_to_try_the_demo() -> None:
    with pytest.raises(ConfigError) as info:
        require_detector(parse_config('[detector]\nmodel = "  "\n'), "c.toml")
    msg = str(info.value)
    assert msg.startswith("c.toml: detector.model is not set")
    assert msg.endswith("(to try the bundled demo models, run `edge-agent demo`)")
    require_detector(parse_config('[detector]\nmodel = "d.onnx"\n'), "c.toml")  # set: no error


# ---- MQTT names -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("cp", "what"),
    [
        (0x00, "NUL"),
        (0x01, "a control character"),
        (0x1F, "a control character"),
        (0x7F, "a control character"),
        (0x80, "a control character"),
        (0x9F, "a control character"),
        (0xFDD0, "a Unicode non-character"),
        (0xFDEF, "a Unicode non-character"),
        (0xFFFE, "a Unicode non-character"),
        (0xFFFF, "a Unicode non-character"),
        (0x1FFFE, "a Unicode non-character"),
        (0x10FFFF, "a Unicode non-character"),
        (0xD800, "a lone surrogate (not UTF-8)"),
        (0xDFFF, "a lone surrogate (not UTF-8)"),
    ],
)
def test_each_character_mqtt_forbids_is_named_with_its_position(cp: int, what: str) -> None:
    problem = utf8_text_problem("ab" + chr(cp) + "c")
    assert problem == f"must not contain {what} (U+{cp:04X} at position 2); MQTT brokers drop such clients"


@pytest.mark.parametrize("cp", [0x20, 0x7E, 0xA0, 0xD7FF, 0xE000, 0xFDCF, 0xFDF0, 0xFFFD, 0x1FFFD])
def test_the_characters_next_to_the_forbidden_ranges_are_allowed(cp: int) -> None:
    assert utf8_text_problem("a" + chr(cp)) is None
    assert topic_prefix_problem("a" + chr(cp)) is None


@pytest.mark.parametrize(
    ("prefix", "why"),
    [
        ("", "must not be empty"),
        ("///", "must not be empty"),
        ("$SYS", "must not start with '$' or '/$' (reserved for the broker, e.g. $SYS)"),
        ("/$SYS", "must not start with '$' or '/$' (reserved for the broker, e.g. $SYS)"),
        ("//$x/", "must not start with '$' or '/$' (reserved for the broker, e.g. $SYS)"),
        ("a/#", "must not contain the MQTT wildcard '#'"),
        ("a/+/b", "must not contain the MQTT wildcard '+'"),
        ("a\n", "control character (U+000A at position 1)"),
    ],
)
def test_prefixes_a_broker_would_refuse(prefix: str, why: str) -> None:
    problem = topic_prefix_problem(prefix) or ""
    assert problem == why if why.startswith("must") else why in problem


@pytest.mark.parametrize("prefix", ["X", "X$", "a$", "site/a/", " ", "a b"])
def test_prefixes_a_broker_takes(prefix: str) -> None:
    # spaces are ordinary characters in MQTT topics; only '/' is stripped from the ends
    assert topic_prefix_problem(prefix) is None


def test_the_prefix_length_cap_counts_utf8_bytes_inclusively() -> None:
    assert topic_prefix_problem("a" * MAX_PREFIX_BYTES) is None
    assert topic_prefix_problem("a" * (MAX_PREFIX_BYTES + 1)) == (
        f"is {MAX_PREFIX_BYTES + 1} bytes long, at most {MAX_PREFIX_BYTES} allowed"
    )
    half = MAX_PREFIX_BYTES // 2
    assert topic_prefix_problem("\u00e9" * half) is None  # 2 bytes each: exactly the cap
    assert topic_prefix_problem("\u00e9" * half + "a") is not None


@pytest.mark.parametrize(
    ("level", "why"),
    [
        ("", "must not be empty"),
        ("a/b", "must not contain '/' (one topic level, no wildcards)"),
        ("a+", "must not contain '+' (one topic level, no wildcards)"),
        ("#", "must not contain '#' (one topic level, no wildcards)"),
        ("$dev", "must not start with '$' (reserved for the broker)"),
        ("d\x00", "must not contain NUL (U+0000 at position 1)"),
    ],
)
def test_a_topic_level_refuses_separators_wildcards_and_broker_names(level: str, why: str) -> None:
    problem = topic_level_problem(level) or ""
    assert problem == why if "U+" not in why else why in problem


@pytest.mark.parametrize("level", ["pi-7", "a$", "X", "caf\u00e9"])
def test_a_topic_level_takes_ordinary_names(level: str) -> None:
    assert topic_level_problem(level) is None


@pytest.mark.parametrize(
    ("device", "why"),
    [
        ("a/b", "must not contain '/'"),
        ("$edge", "must not start with '$'"),
        ("pi 7", "only ASCII letters, digits, '_', '.' and '-' are allowed"),
    ],
)
def test_a_device_id_error_says_why_it_is_not_a_topic_level(device: str, why: str) -> None:
    msg = _error(f'[device]\nid = "{device}"\n')
    assert msg.startswith(f"c.toml: device.id = '{device}': ") and why in msg


def test_the_tracker_low_warning_is_one_exact_line() -> None:
    from edge_agent.core.config.scene import tracker_low_warning

    assert tracker_low_warning("objects", 0.25, 0.1, 0.3) == (
        "tracker.low = 0.1 acts from 0.25 only: the tracker only sees detections scoring above "
        "detector.conf_threshold = 0.25; set conf_threshold below 0.1 to keep occluded objects "
        "tracked (docs/objects.md)"
    )
    assert tracker_low_warning("objects", 0.3, 0.1, 0.3) == (
        "tracker.low = 0.1 has no effect (the second association gets nothing): the tracker only "
        "sees detections scoring above detector.conf_threshold = 0.3; set conf_threshold below 0.1 "
        "to keep occluded objects tracked (docs/objects.md)"
    )
    assert tracker_low_warning("objects", 0.1, 0.1, 0.3) is not None  # at low: still cut
    assert tracker_low_warning("objects", 0.09, 0.1, 0.3) is None
    assert tracker_low_warning("objects", 0.0, 0.0, 0.3) is None
    assert tracker_low_warning("every_frame", 0.5, 0.1, 0.3) is None


def test_a_classifier_in_objects_mode_is_warned_about_and_only_there() -> None:
    from edge_agent.core.config.scene import objects_classifier_warning

    line = objects_classifier_warning("objects", True)
    assert line is not None and line.startswith("[classifier] in objects mode: ")
    assert "every crop is classified for nothing" in line
    assert objects_classifier_warning("objects", False) is None
    for mode in ("every_frame", "event"):
        assert objects_classifier_warning(mode, True) is None

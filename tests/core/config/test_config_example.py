"""The example config generated from the schema: it parses into the defaults, every key is
described, every example value is valid, and the TOML writer round-trips what it writes."""

from __future__ import annotations

import sys
from typing import Any, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from edge_agent.core.config.example import (
    SET_IN_EXAMPLE,
    _is_section,
    example_config,
    toml_value,
    undocumented_keys,
)
from edge_agent.core.config.schema import Config, DetectorConfig, parse_config

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in data.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def test_example_parses_into_exactly_the_defaults() -> None:
    parsed = _flat(parse_config(example_config(), "example").model_dump())
    defaults = _flat(Config().model_dump())
    assert parsed.keys() == defaults.keys()
    differ = {k for k in parsed if parsed[k] != defaults[k]}
    assert differ == SET_IN_EXAMPLE  # detector.model: `run` and `config check` need one
    field = DetectorConfig.model_fields["model"]
    assert parsed["detector.model"] == field.examples[0]


def test_every_key_has_a_description_and_every_unset_key_an_example() -> None:
    assert undocumented_keys() == []


def test_the_key_walker_finds_a_key_without_description() -> None:
    class Inner(BaseModel):
        ok: int = Field(default=1, description="fine")
        bare: int = 2
        unset: Optional[str] = Field(default=None, description="no example to show")

    class Root(BaseModel):
        inner: Inner = Field(default_factory=Inner, description="a section")
        items: list[Inner] = Field(default_factory=list, description="tables")

    expected = ["Inner.bare: no description", "Inner.unset: no default and no examples"]
    assert undocumented_keys(Root) == expected * 2


def test_full_example_sets_every_optional_part_with_valid_examples() -> None:
    cfg = parse_config(example_config(full=True), "full example")
    assert cfg.classifier is not None and cfg.sensor is not None
    assert [z.name for z in cfg.zones] == ["waiting"] and [ln.name for ln in cfg.lines] == ["gate"]
    # [[cameras]] is written live in the full example, so [camera] (refused beside it) is commented there
    assert [c.id for c in cfg.cameras] == ["gate"] and cfg.cameras[0].width == 1280
    assert cfg.lines[0].camera == "gate" and cfg.mqtt.password_file == "mqtt-password"
    assert cfg.health.prometheus_port == 9108 and cfg.detector.output_format == "yolov8"


def test_commented_lines_are_the_full_example_commented_out() -> None:
    """What a user uncomments is exactly what the full example validated above."""
    short, full = example_config().splitlines(), example_config(full=True).splitlines()
    assert len(short) == len(full)
    commented = 0
    section = ""
    for s, f in zip(short, full):
        section = s if s.startswith("[") or s.startswith("# [") else section
        if section == "[camera]" and f.startswith("# "):  # live in the short one, commented in the full
            assert s in (f, f[2:]), (s, f)  # (an unset key is commented in both)
            continue
        assert s in (f, f"# {f}", f"# # {f}"), (s, f)  # an optional key in an optional section: two
        commented += s != f
    assert commented > 40  # the optional sections and unset keys


def test_every_key_appears_once_in_its_section() -> None:
    text = example_config()
    for section, field in Config.model_fields.items():
        assert f"[{section}]" in text, section
        model = field.annotation
        for arg in getattr(model, "__args__", ()):
            model = arg if isinstance(arg, type) and issubclass(arg, BaseModel) else model
        for key, f in model.model_fields.items():  # type: ignore[union-attr]
            if _is_section(f.annotation):  # [[cameras]]' own [motion], [[zones]]: named in a comment
                assert any(f"{section}.{key}]" in ln for ln in _section_lines(text, section)), key
                continue
            n = sum(ln.lstrip("# ").startswith(f"{key} = ") for ln in _section_lines(text, section))
            assert n == 1, f"{section}.{key} shown {n} times"


def _section_lines(text: str, section: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.lstrip("# ").strip("[]") == section)
    end = next((i for i in range(start + 1, len(lines)) if not lines[i]), len(lines))
    return lines[start + 1 : end]


def test_no_secret_is_inlined() -> None:
    keys = [ln.split(" = ")[0].lstrip("# ") for ln in example_config(full=True).splitlines() if " = " in ln]
    secretish = [k for k in keys if any(w in k for w in ("password", "secret", "token"))]
    assert secretish and all(k.endswith(("_file", "_env")) for k in secretish), secretish


def test_comment_lines_stay_short_and_bounds_stay_whole() -> None:
    text = example_config()
    assert max(len(ln) for ln in text.splitlines()) <= 100
    assert "\u00a0" not in text
    assert "# the broker's port (TLS usually 8883) [> 0, < 65536]" in text
    assert "control characters) [length >= 1, length <= 64]\nid = " in text
    assert "# [one of: drop_oldest, reject_new]\npolicy = " in text  # choices the description lacks
    assert "rtsp_transport" in text and "[one of: tcp" not in text  # ... and only those


_scalars = (
    st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(st.characters(blacklist_categories=["Cs"]))
)


@given(st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4), max_leaves=12))
def test_toml_value_round_trips(value: object) -> None:
    assert tomllib.loads(f"v = {toml_value(value)}")["v"] == value


def test_toml_value_refuses_what_toml_cannot_hold() -> None:
    with pytest.raises(TypeError, match="no TOML form for a NoneType"):
        toml_value(None)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (9_999, "9999"),
        (10_000, "10_000"),  # large numbers grouped, as a reader counts zeros
        (-10_000, "-10_000"),
        (604_800, "604_800"),
        (float("nan"), "nan"),
        (float("inf"), "inf"),
        (float("-inf"), "-inf"),
        (0.5, "0.5"),
        (True, "true"),
        ("a b\u00e9\u0080", '"a b\u00e9\u0080"'),  # spaces and non-ASCII as they are
        ("tab\there\x7f", '"tab\\there\\u007f"'),
    ],
)
def test_toml_value_writes_what_a_reader_expects(value: object, text: str) -> None:
    assert toml_value(value) == text
    back = tomllib.loads(f"v = {text}")["v"]
    assert back == value or (back != back and value != value)  # nan


@settings(deadline=None)  # mutmut's stats run traces every call: slow on a busy machine
@given(st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters='"\\\x7f\t')))
def test_a_string_is_escaped_only_where_toml_requires_it(text: str) -> None:
    out = toml_value(text)
    if not any(ord(c) < 0x20 for c in text):
        assert out == f'"{text}"'
    assert tomllib.loads(f"v = {out}")["v"] == text


def test_toml_value_names_the_type_it_cannot_write() -> None:
    with pytest.raises(TypeError, match=r"^no TOML form for a dict: \{'a': 1\}$"):
        toml_value({"a": 1})


def test_a_comment_never_breaks_a_word_or_a_hyphenated_name() -> None:
    from edge_agent.core.config.example import _comment

    text = "words " * 20 + "re-open anti-rollback-check " * 3 + "mqtts://" + "h" * 150 + " end"
    lines = _comment(text)
    assert len(lines) > 2 and all(ln.startswith("# ") for ln in lines)
    assert " ".join(ln[2:] for ln in lines).split() == text.split()  # every word whole
    assert all(len(ln) <= 98 for ln in lines if " " in ln[2:])  # only a lone long word may overrun


def test_each_section_is_introduced_by_its_description() -> None:
    text = example_config()
    for name, field in Config.model_fields.items():
        assert field.description
        first = field.description.split()[0]
        header = f"[[{name}]]" if name in ("zones", "lines", "cameras") else f"[{name}]"
        before = text.split(f"\n{header}\n" if f"\n{header}\n" in text else f"\n# {header}\n")[0]
        assert before.splitlines()[-1].lstrip("# ") and first in before.rsplit("\n\n", 1)[-1], name


def test_a_non_section_field_or_a_key_without_example_is_a_developer_error() -> None:
    from edge_agent.core.config.example import _section_model, example_value

    for annotation in (int, Optional[int], list[int]):
        with pytest.raises(TypeError, match="is not a section \\(table, optional or list\\)"):
            _section_model(annotation)
    assert _section_model(Optional[DetectorConfig]) == (DetectorConfig, "optional")
    assert _section_model(list[DetectorConfig]) == (DetectorConfig, "list")
    with pytest.raises(
        ValueError, match=r"^config key x\.y has no default and no examples= to show in the example$"
    ):
        example_value("x.y", Field(default=None))  # type: ignore[arg-type]


def test_bounds_are_spelled_out_in_the_comment() -> None:
    from edge_agent.core.config.example import describe

    assert describe(Field(default=1, ge=1, le=9, description="n")) == "n [>=\u00a01,\u00a0<=\u00a09]"  # type: ignore[arg-type]
    assert describe(Field(default=1, gt=0, lt=2)) == " [>\u00a00,\u00a0<\u00a02]"  # type: ignore[arg-type]
    assert describe(Field(default=1)) == ""  # type: ignore[arg-type]

"""The example config generated from the schema: it parses into the defaults, every key is
described, every example value is valid, and the TOML writer round-trips what it writes."""

from __future__ import annotations

import sys
from typing import Any, Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from edge_agent.core.config import Config, DetectorConfig, parse_config
from edge_agent.core.config_example import (
    SET_IN_EXAMPLE,
    example_config,
    toml_value,
    undocumented_keys,
)

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
    assert cfg.camera.width == 1280 and cfg.mqtt.password_file == "mqtt-password"
    assert cfg.health.prometheus_port == 9108 and cfg.detector.output_format == "yolov8"


def test_commented_lines_are_the_full_example_commented_out() -> None:
    """What a user uncomments is exactly what the full example validated above."""
    short, full = example_config().splitlines(), example_config(full=True).splitlines()
    assert len(short) == len(full)
    commented = 0
    for s, f in zip(short, full):
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
        for key in model.model_fields:  # type: ignore[union-attr]
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

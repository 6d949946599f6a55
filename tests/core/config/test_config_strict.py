"""README: the config is "validated strictly". A TOML string where a number or a boolean belongs
(``port = "1883"``, ``enabled = "yes"``), a boolean where a number belongs (``threads = true``) or a
number where text belongs is an error naming the key, for every scalar key of the schema (agent and
collector), not coerced."""

from __future__ import annotations

import typing
from typing import Any, Union

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from edge_agent.core.config.collector import CollectorConfig
from edge_agent.core.config.schema import Config, parse_config
from edge_agent.errors import ConfigError

SCALARS = (bool, int, float, str)


def _scalar(annotation: Any) -> Union[type, None]:
    """The scalar type of a field (``Optional[int]`` is int), None for models, lists, literals."""
    if annotation in SCALARS:
        return typing.cast(type, annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is Union and len(args) == 1 and args[0] in SCALARS:
        return typing.cast(type, args[0])
    return None


def _models(model: type[BaseModel], seen: set[type]) -> list[type[BaseModel]]:
    out = [model]
    seen.add(model)
    for f in model.model_fields.values():
        for a in (f.annotation, *typing.get_args(f.annotation)):
            for b in (a, *typing.get_args(a)):
                if isinstance(b, type) and issubclass(b, BaseModel) and b not in seen:
                    out.extend(_models(b, seen))
    return out


FIELDS = sorted(
    {
        (m, name, kind)
        for root in (Config, CollectorConfig)
        for m in _models(root, set())
        for name, f in m.model_fields.items()
        if (kind := _scalar(f.annotation)) is not None
    },
    key=lambda t: (t[0].__name__, t[1]),
)

# what a lax parser would take for each kind, and the form it comes as in a TOML file
WRONG: dict[type, st.SearchStrategy[Any]] = {
    int: st.one_of(st.integers(0, 65535).map(str), st.booleans(), st.just("yes")),
    float: st.one_of(st.floats(0, 1).map(repr), st.booleans(), st.just("0.5")),
    bool: st.one_of(st.sampled_from(["yes", "no", "true", "false", "on", "1", "0"]), st.integers(0, 1)),
    str: st.one_of(st.integers(), st.floats(allow_nan=False), st.booleans()),
}


def test_the_walk_finds_the_scalar_keys_a_user_sets_most() -> None:
    names = {(m.__name__, n) for m, n, _ in FIELDS}
    assert {("MqttConfig", "port"), ("MqttConfig", "enabled"), ("DetectorConfig", "threads")} <= names
    assert len(FIELDS) > 60


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_every_scalar_key_refuses_a_value_of_another_type(data: st.DataObject) -> None:
    model, name, kind = data.draw(st.sampled_from(FIELDS), label="field")
    value = data.draw(WRONG[kind], label="value")
    with pytest.raises(ValidationError) as info:
        model.model_validate({name: value})
    assert any(e["loc"] == (name,) for e in info.value.errors()), (model.__name__, name, value)


def test_a_quoted_port_is_one_error_naming_the_key() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config('[mqtt]\nport = "1883"\n', "agent.toml")
    assert str(info.value).startswith("agent.toml: mqtt.port = ")
    assert "\n" not in str(info.value)


def test_integers_still_pass_where_a_float_belongs_and_arrays_as_points() -> None:
    cfg = parse_config(
        '[detector]\nmodel = "d.onnx"\nconf_threshold = 1\n[[zones]]\nname = "z"\n'
        "polygon = [[0, 0], [0.5, 0], [0.5, 0.5]]\n"
    )
    assert cfg.detector is not None and cfg.detector.conf_threshold == 1.0
    assert cfg.zones[0].polygon[1] == (0.5, 0.0)

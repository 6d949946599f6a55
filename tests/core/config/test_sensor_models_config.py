"""[[sensor_models]] (core/config/sensor_models.py): what the schema refuses, one line naming the key."""

from __future__ import annotations

import pytest

from edge_agent.core.config.schema import parse_config
from edge_agent.errors import ConfigError

SENSOR = '[sensor]\nport = "loop://"\n'


def models(*tables: str) -> str:
    return "".join(f'[[sensor_models]]\nname = "{n}"\nmodel = "m.onnx"\n{rest}' for n, rest in tables)


def test_a_minimal_table_takes_everything_else_from_the_model() -> None:
    cfg = parse_config(SENSOR + models(("activity", "")))
    m = cfg.sensor_models[0]
    assert (m.window, m.hop, m.task, m.layout, m.missing, m.publish, m.max_pending) == (
        None,
        None,
        None,
        "auto",
        "hold",
        "every_window",
        8,
    )


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (models(("a", "")), "sensor_models need a [sensor]"),
        (SENSOR + models(("a", ""), ("a", "")), "sensor_models.1.name = 'a' is used twice"),
        (SENSOR + models(("a", "window_s = 2.0\n")), "window_s/hop_s need rate_hz"),
        (SENSOR + models(("a", "fields = ['x', 'x']\n")), "name a key twice"),
        (SENSOR + models(("a/b", "")), "not a usable sensor model name"),
        (SENSOR + models(("a", 'missing = "zero"\n')), "sensor_models.0.missing = 'zero'"),
        (SENSOR + models(("a", "window = 1\n")), "sensor_models.0.window = 1"),
        (SENSOR + models(("a", "colour = 1\n")), "unknown key 'sensor_models.0.colour'"),
    ],
)
def test_bad_tables_are_one_line_naming_the_key(text: str, error: str) -> None:
    with pytest.raises(ConfigError, match=r"cfg\.toml") as exc:
        parse_config(text, "cfg.toml")
    assert error in str(exc.value) and "\n" not in str(exc.value), str(exc.value)

"""A sensor model's spec (inference/sensor_model.py): the table wins over the metadata, the layout
from metadata or the input shape, one error line naming the file and what to set."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edge_agent.core.config.schema import parse_config
from edge_agent.errors import ModelError
from edge_agent.inference.sensor_model import SensorModel, resolve_spec

MODEL = Path(__file__).resolve().parents[2] / "models" / "demo-sensor.onnx"
META = {
    "task": "classify",
    "labels": json.dumps(["a", "b"]),
    "channels": json.dumps(["x", "y", "z"]),
    "window": "8",
    "hop": "4",
    "mean": "[0, 0, 0]",
    "std": "[1, 2, 4]",
}


def entry(extra: str) -> object:
    cfg = parse_config(
        f'[sensor]\nport = "loop://"\n[[sensor_models]]\nname = "m"\nmodel = "m.onnx"\n{extra}'
    )
    return cfg.sensor_models[0]


def test_metadata_gives_every_default_and_the_shape_the_layout() -> None:
    s = resolve_spec("m.onnx", {k: v for k, v in META.items()}, [1, 8, 3])
    assert (s.layout, s.window, s.hop, s.channels, s.std) == ("NTC", 8, 4, ["x", "y", "z"], [1.0, 2.0, 4.0])
    assert resolve_spec("m.onnx", META, [1, 3, 8]).layout == "NCT"
    assert resolve_spec("m.onnx", META, [1, 3, "T"]).window == 8  # a dynamic time axis: metadata


def test_the_table_wins_and_seconds_become_readings() -> None:
    s = resolve_spec(
        "m.onnx", META, [1, 3, "T"], entry("window_s = 2.0\nhop_s = 0.5\nrate_hz = 50\nstd = [1, 1, 1]\n")
    )  # type: ignore[arg-type]
    assert (s.window, s.hop, s.rate_hz, s.std) == (100, 25, 50.0, [1.0, 1.0, 1.0])


@pytest.mark.parametrize(
    ("meta", "shape", "extra", "error"),
    [
        ({**META, "channels": ""}, [1, 3, 8], "", "set fields"),
        (META, [1, 3, 3], "fields = ['x', 'y', 'z']\n", "set layout"),
        ({**META, "layout": "[1,C,T]"}, [1, 4, 8], "", "takes 4 channels"),
        (META, [1, 3, 16], "window = 8\n", "time axis is 16"),
        ({**META, "task": "detect"}, [1, 3, 8], "", "task 'detect'"),
        ({**META, "std": "[1, 0, 1]"}, [1, 3, 8], "", "must be > 0"),
        ({**META, "labels": ""}, [1, 3, 8], "", "needs labels"),
        ({**META, "mean": "[oops"}, [1, 3, 8], "", "'mean' = '[oops' is not a JSON list"),
    ],
)
def test_what_cannot_be_known_is_one_line_naming_it(
    meta: dict[str, str], shape: list[object], extra: str, error: str
) -> None:
    with pytest.raises(ModelError, match=r"m\.onnx") as exc:
        resolve_spec("m.onnx", meta, shape, entry(extra) if extra else None)  # type: ignore[arg-type]
    assert error in str(exc.value) and "\n" not in str(exc.value)


def test_the_demo_model_normalises_with_its_metadata_and_softmax_sums_to_one() -> None:
    m = SensorModel.load(str(MODEL))
    rows = np.tile(np.asarray(m.spec.mean, np.float32), (m.spec.window, 1))
    assert np.allclose(m.tensor(rows), 0.0, atol=1e-5) and m.tensor(rows).shape == (1, 6, 50)
    from edge_agent.core.sensor.window import Window

    out = m.infer(Window(0, tuple(tuple(float(v) for v in r) for r in rows), 0, 0.0))
    assert out.label in m.spec.labels and abs(sum(out.probs.values()) - 1.0) < 1e-4

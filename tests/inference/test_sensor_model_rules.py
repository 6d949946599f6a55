"""The rules a sensor model's user relies on (inference/sensor_model.py), pure: which source wins
for each key, the error line for each thing that cannot be known, and how one window's outputs
become a label, a score or named values (probabilities kept, logits softmaxed, the threshold)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from edge_agent.core.config.schema import parse_config
from edge_agent.core.sensor.window import Window
from edge_agent.errors import ModelError
from edge_agent.inference.sensor_model import SensorModel, SensorSpec, is_sensor_model, resolve_spec

META = {"task": "classify", "labels": '["a", "b"]', "channels": '["x", "y", "z"]'}


def entry(extra: str) -> Any:
    cfg = parse_config(
        f'[sensor]\nport = "loop://"\n[[sensor_models]]\nname = "m"\nmodel = "m.onnx"\n{extra}'
    )
    return cfg.sensor_models[0]


def error(meta: dict, shape: Sequence[object], cfg: Any = None) -> str:
    with pytest.raises(ModelError) as exc:
        resolve_spec("dir/m.onnx", meta, shape, cfg)
    return str(exc.value)


def test_a_sensor_model_is_kind_sensor_or_rank3_with_channels() -> None:
    assert is_sensor_model({"kind": "sensor"}, [1, 3])
    assert is_sensor_model({"channels": '["x"]'}, [1, 1, 8])
    assert not is_sensor_model({"channels": '["x"]'}, [1, 8])
    assert not is_sensor_model({"channels": ""}, [1, 1, 8])
    assert not is_sensor_model({"kind": "detect"}, [1, 3, 8, 8])


def test_metadata_alone_names_channels_rate_and_defaults() -> None:
    s = resolve_spec("dir/m.onnx", {**META, "rate_hz": "50", "outputs": '["p"]'}, [1, 8, 3])
    assert (s.name, s.channels, s.rate_hz, s.window, s.hop) == ("m", ["x", "y", "z"], 50.0, 8, 8)
    assert (s.mean, s.std, s.threshold, s.missing, s.max_missing, s.time_field) == (
        [0.0] * 3,
        [1.0] * 3,
        0.0,
        "hold",
        None,
        None,
    )
    assert s.outputs == ["p"] and s.labels == ["a", "b"]
    assert resolve_spec("a.b.onnx", META, [1, 8, 3]).name == "a.b"
    assert resolve_spec("dir/m.onnx", META, [1, 8, 3], name="given").name == "given"
    assert resolve_spec("dir/m.onnx", {**META, "layout": "[1, T, C]"}, [1, 3, 3]).layout == "NTC"
    assert resolve_spec("dir/m.onnx", {**META, "layout": "NCT"}, [1, 3, 3]).layout == "NCT"


def test_every_table_key_wins_over_the_metadata() -> None:
    cfg = entry(
        "fields = ['p', 'q']\nlayout = 'NTC'\nwindow = 6\nhop = 2\nrate_hz = 20\nmean = [1, 2]\n"
        "std = [3, 4]\ntask = 'score'\nlabels = ['u']\noutputs = ['o']\nthreshold = 0.7\n"
        "missing = 'drop'\nmax_missing = 1\ntime_field = 't'\n"
    )
    meta = {**META, "rate_hz": "5", "layout": "NCT", "hop": "3", "mean": "[0, 0]", "outputs": '["z"]'}
    s = resolve_spec("dir/m.onnx", meta, [1, 6, 2], cfg)
    assert s == SensorSpec(
        name="m",
        channels=["p", "q"],
        window=6,
        hop=2,
        rate_hz=20.0,
        layout="NTC",
        mean=[1.0, 2.0],
        std=[3.0, 4.0],
        task="score",
        labels=["u"],
        threshold=0.7,
        outputs=["o"],
        missing="drop",
        max_missing=1,
        time_field="t",
    )
    assert s.describe() == "score: window 6 readings, hop 2 at 20 Hz, input [1,6,2] (NTC), channels p, q"


def test_the_metadata_fills_what_the_table_leaves_unset() -> None:
    meta = {**META, "rate_hz": "10", "hop": "3", "mean": "[1, 2, 3]", "outputs": '["o"]'}
    s = resolve_spec("dir/m.onnx", meta, [1, 3, 6], entry("threshold = 0.5\n"))
    assert (s.rate_hz, s.hop, s.mean, s.task, s.outputs, s.layout) == (
        10.0,
        3,
        [1.0, 2.0, 3.0],
        "classify",
        ["o"],
        "NCT",
    )
    assert "at 10 Hz" in s.describe() and "[1,3,6]" in s.describe()
    assert " Hz" not in resolve_spec("m.onnx", META, [1, 3, 6]).describe()


def test_seconds_become_readings_at_the_rate_at_least_one() -> None:
    s = resolve_spec("m.onnx", META, [1, 3, "T"], entry("rate_hz = 10\nwindow_s = 0.01\nhop_s = 0.26\n"))
    assert (s.window, s.hop, s.rate_hz) == (1, 3, 10.0)


def test_window_comes_from_metadata_only_on_a_dynamic_time_axis() -> None:
    assert resolve_spec("m.onnx", {**META, "window": "9", "hop": "4"}, [1, 3, -1]).window == 9
    assert resolve_spec("m.onnx", {**META, "window": "9"}, [1, 3, 0]).window == 9
    assert resolve_spec("m.onnx", META, [1, 3, 1]).window == 1


@pytest.mark.parametrize(
    ("meta", "shape", "extra", "expected"),
    [
        (
            {**META, "channels": "x"},
            [1, 3, 8],
            "",
            "dir/m.onnx: metadata 'channels' = 'x' is not a JSON list",
        ),
        (
            {**META, "channels": '"x"'},
            [1, 3, 8],
            "",
            "dir/m.onnx: metadata 'channels' = '\"x\"' is not a JSON list",
        ),
        (
            {**META, "window": "ten"},
            [1, 3, "T"],
            "",
            "dir/m.onnx: metadata 'window' = 'ten' is not an integer",
        ),
        (
            {**META, "rate_hz": "fast"},
            [1, 3, 8],
            "",
            "dir/m.onnx: metadata 'rate_hz' = 'fast' is not a number",
        ),
        (META, [3, 8], "", "dir/m.onnx: input shape [3, 8]: expected [1, C, T] or [1, T, C]"),
        (
            META,
            [1, 3, "T"],
            "",
            "dir/m.onnx: the input's time axis is dynamic and there is no 'window' metadata",
        ),
        ({**META, "mean": "[0, 0]"}, [1, 3, 8], "", "dir/m.onnx: mean has 2 values for 3 channels"),
        ({**META, "std": "[1, 1]"}, [1, 3, 8], "", "dir/m.onnx: std has 2 values for 3 channels"),
        (
            {**META, "std": "[1, 1, -1]"},
            [1, 3, 8],
            "",
            "dir/m.onnx: std [1.0, 1.0, -1.0]: every value must be > 0",
        ),
        (
            {**META, "task": ""},
            [1, 3, 8],
            "",
            "dir/m.onnx: task '': expected one of classify, score, regress",
        ),
        ({**META, "labels": ""}, [1, 3, 8], "", "dir/m.onnx: a classify model needs labels"),
        (META, [1, 3, 8], "window = 4\n", "dir/m.onnx ([[sensor_models]] 'm'): window = 4 readings but"),
        (META, [1, 3, 3], "", "dir/m.onnx: input [1, 3, 3] with 3 channels: set layout"),
    ],
)
def test_each_error_is_one_line_naming_the_file_and_the_key(
    meta: dict, shape: list[object], extra: str, expected: str
) -> None:
    text = error(meta, shape, entry(extra) if extra else None)
    assert text.startswith("dir/m.onnx") and expected in text and "\n" not in text


def test_the_table_s_fields_count_against_the_model_s_channels() -> None:
    assert "the model takes 3 channels (NCT), fields name 2" in error(
        META, [1, 3, 8], entry("fields = ['p', 'q']\nlayout = 'NCT'\n")
    )
    assert resolve_spec("m.onnx", META, [1, "C", 8], entry("layout = 'NCT'\n")).window == 8


class Runtime:
    """The one thing SensorModel asks of its runtime: ``run_single`` on a tensor, and a path."""

    path = "dir/m.onnx"

    def __init__(self, outputs: list[Any]) -> None:
        self.outputs = outputs
        self.seen: list[np.ndarray] = []

    def run_single(self, x: np.ndarray) -> list[Any]:
        self.seen.append(x)
        return self.outputs


def model(task: str, returns: list[Any], **kw: Any) -> SensorModel:
    base = dict(
        name="m",
        channels=["x", "y"],
        window=3,
        hop=3,
        rate_hz=None,
        layout="NCT",
        mean=[1.0, 2.0],
        std=[2.0, 4.0],
        task=task,
    )
    return SensorModel(Runtime(returns), SensorSpec(**{**base, **kw}))  # type: ignore[arg-type]


def test_the_tensor_is_normalised_per_channel_in_the_model_s_layout() -> None:
    rows = [[1.0, 2.0], [3.0, 6.0], [5.0, 10.0]]
    nct = model("score", [[0.0]]).tensor(rows)
    assert nct.dtype == np.float32 and nct.tolist() == [[[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]]]
    ntc = model("score", [[0.0]], layout="NTC").tensor(rows)
    assert ntc.tolist() == [[[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]]


def test_probabilities_are_kept_logits_are_softmaxed_and_the_threshold_hides_the_label() -> None:
    m = model("classify", [[[0.2, 0.8]]], labels=["a", "b"], threshold=0.5)
    out = m.infer(Window(7, ((1.0, 2.0),) * 3, 0, 0.0))
    assert (out.index, out.task, out.label, out.confidence, out.probs) == (
        7,
        "classify",
        "b",
        0.8,
        {"a": 0.2, "b": 0.8},
    )
    assert out.state == "b" and out.infer_ms >= 0.0 and m.model.seen[0].shape == (1, 2, 3)  # type: ignore[attr-defined]
    logits = m.outcome(0, np.array([0.0, np.log(3.0)]))
    assert (logits.label, logits.confidence, logits.probs) == ("b", 0.75, {"a": 0.25, "b": 0.75})
    negative = m.outcome(0, np.array([-1.0, 2.0]))
    assert negative.label == "b" and abs(sum(negative.probs.values()) - 1.0) < 1e-6
    below = model("classify", [], labels=["a", "b"], threshold=0.9).outcome(0, np.array([0.3, 0.7]))
    assert (below.label, below.confidence, below.state) == (None, 0.7, None)
    at = model("classify", [], labels=["a", "b"], threshold=0.7).outcome(0, np.array([0.3, 0.7]))
    assert at.label == "b"
    huge = m.outcome(0, np.array([1000.0, 1001.0]))  # softmax of the max-shifted logits: no overflow
    assert huge.label == "b" and np.isfinite(huge.confidence or np.nan)
    with pytest.raises(ModelError, match=r"dir/m\.onnx: 3 outputs for 2 labels \['a', 'b'\]"):
        m.outcome(0, np.array([0.1, 0.2, 0.7]))


def test_a_score_is_an_anomaly_from_the_threshold_up() -> None:
    m = model("score", [], threshold=0.5)
    assert (m.outcome(1, np.array([0.5])).anomaly, m.outcome(1, np.array([0.4999])).anomaly) == (True, False)
    out = m.outcome(2, np.array([0.1234567, 9.0]), 3.0)
    assert (out.index, out.task, out.score, out.infer_ms, out.state, out.label) == (
        2,
        "score",
        0.123457,
        3.0,
        False,
        None,
    )


def test_regress_names_its_values_and_several_outputs_are_concatenated() -> None:
    m = model("regress", [np.array([[1.5]]), np.array([[2.0, 3.0]])], outputs=["a", "b", "c"])
    out = m.infer(Window(0, ((1.0, 2.0),) * 3, 0, 0.0))
    assert (out.task, out.values, out.state) == ("regress", {"a": 1.5, "b": 2.0, "c": 3.0}, None)
    assert model("regress", [[[1.0, 2.0]]]).infer(Window(0, ((0.0, 0.0),) * 3, 0, 0.0)).values == {
        "y0": 1.0,
        "y1": 2.0,
    }
    with pytest.raises(ModelError, match=r"dir/m\.onnx: 2 output values for 1 names \['a'\]"):
        model("regress", [], outputs=["a"]).outcome(0, np.array([1.0, 2.0]))


def test_the_windower_reads_the_spec() -> None:
    w = model("score", [], hop=2, missing="interpolate", max_missing=1, rate_hz=5.0).windower()
    assert (list(w.channels), w.window, w.hop, w.missing, w.max_missing, w.rate_hz) == (
        ["x", "y"],
        3,
        2,
        "interpolate",
        1,
        5.0,
    )


def test_load_reads_the_model_s_metadata_and_the_table_over_it() -> None:
    from pathlib import Path

    path = str(Path(__file__).resolve().parents[2] / "models" / "demo-sensor.onnx")
    m = SensorModel.load(path, entry("threshold = 0.99\n"), threads=1)
    assert (m.spec.name, m.spec.window, m.spec.layout, m.spec.threshold, m.spec.rate_hz) == (
        "m",
        50,
        "NCT",
        0.99,
        10.0,
    )
    assert str(m.model.path) == path and m.run([[0.0] * 6] * 50).shape == (4,)


def test_outcomes_carry_the_time_and_six_decimals() -> None:
    c = model("classify", [], labels=["a", "b"]).outcome(0, np.array([0.1234567, 0.8765433]), 2.5)
    assert (c.confidence, c.probs, c.infer_ms) == (0.876543, {"a": 0.123457, "b": 0.876543}, 2.5)
    r = model("regress", [], outputs=["v"]).outcome(0, np.array([1.2345678]), 4.0)
    assert (r.values, r.infer_ms) == ({"v": 1.234568}, 4.0)
    assert resolve_spec("a/b/m.v1.onnx", META, [1, 3, 6]).name == "m.v1"
    assert resolve_spec("m.onnx", META, [1, 3, 6]).describe() == (
        "classify: window 6 readings, hop 6, input [1,3,6] (NCT), channels x, y, z"
    )
    one_hot = model("classify", [], labels=["a", "b"]).outcome(0, np.array([0.0, 1.0]))
    assert (one_hot.label, one_hot.confidence) == ("b", 1.0)  # a zero probability is not a logit

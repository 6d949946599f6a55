"""The agent's sensor model worker (app/agent/sensor_inference.py): a burst faster than the model
drops the oldest waiting windows as ``busy`` and never blocks the reader; ``publish = "change"``;
the camera trigger; a failing model is counted, the worker goes on."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest

from edge_agent.app.agent.sensor_inference import SensorInference
from edge_agent.core.config.schema import Config, parse_config
from edge_agent.core.sensor.window import Window
from edge_agent.errors import ModelError
from edge_agent.inference.sensor_model import SensorModel, SensorOutcome

MODEL = Path(__file__).resolve().parents[3] / "models" / "demo-sensor.onnx"
CHANNELS = ["acc_x", "acc_y", "acc_z", "gyr_x", "gyr_y", "gyr_z"]


def config(extra: str = "") -> Config:
    return parse_config(
        f'[sensor]\nport = "loop://"\n[[sensor_models]]\nname = "act"\nmodel = "{MODEL}"\n'
        f"window = 4\nhop = 2\nrate_hz = 0\n{extra}"
    )


class Fake(SensorModel):
    """The demo model's spec with a stand-in for inference: labels in turn, or blocking."""

    def __init__(self, cfg: Config, labels: list[str]) -> None:
        real = SensorModel.load(str(MODEL))  # the real one is [1, 6, 50]: a 4-reading spec for short tests
        super().__init__(real.model, dataclasses.replace(real.spec, window=4, hop=2, rate_hz=None))
        self.labels = labels
        self.gate = threading.Event()
        self.gate.set()
        self.started = threading.Event()
        self.calls = 0

    def infer(self, window: Window) -> SensorOutcome:
        self.started.set()
        assert self.gate.wait(10)
        self.calls += 1
        label = self.labels[(self.calls - 1) % len(self.labels)]
        if label == "fail":
            raise ModelError("x.onnx: inference failed: boom")
        return SensorOutcome(window.index, "classify", label=label, confidence=0.9, probs={label: 0.9})


def reading(v: float) -> dict[str, Any]:
    return dict.fromkeys(CHANNELS, v)


class Sink:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, topic: str, body: dict[str, Any]) -> None:
        assert topic == "edge/edge-0/act/sensor_results"
        self.bodies.append(body)


def test_a_burst_faster_than_the_model_drops_the_oldest_as_busy_and_accounts_every_window() -> None:
    cfg = config("max_pending = 2\n")
    model, sink = Fake(cfg, ["Running"]), Sink()
    model.gate.clear()
    inf = SensorInference(cfg, cfg.sensor_models[0], model, sink)
    inf.start()
    inf.feed(reading(0))
    for i in range(1, 4):
        inf.feed(reading(i))  # window 0 due: the worker takes it and blocks
    assert model.started.wait(5)
    for i in range(4, 24):  # 10 more windows while the model is stuck: the reader never waits
        inf.feed(reading(i))
    model.gate.set()
    inf.stop()
    s = inf.stats()
    assert s["windows_due"] == 11 and s["dropped"] == {"busy": 8}
    assert s["published"] == 3 and [b["window"] for b in sink.bodies] == [0, 9, 10]  # the newest kept
    assert s["windows_due"] == s["published"] + s["unchanged"] + sum(s["dropped"].values())


def test_publish_change_sends_only_a_new_label_and_the_trigger_fires_on_it() -> None:
    cfg = config('publish = "change"\ntrigger_camera = true\n')
    model, sink = Fake(cfg, ["Walking", "Walking", "Running", "Running", "Walking"]), Sink()
    inf = SensorInference(cfg, cfg.sensor_models[0], model, sink)

    class Sensor:
        fired = 0

        def fire(self) -> None:
            self.fired += 1

    inf.sensor = Sensor()  # type: ignore[assignment]
    for i in range(5):
        inf.step(Window(i, ((0.0,) * 6,) * 4, 0, float(i)))
    assert [b["label"] for b in sink.bodies] == ["Walking", "Running", "Walking"]
    assert inf.unchanged == 2 and inf.sensor.fired == 3  # type: ignore[attr-defined]


def test_a_failing_window_is_counted_and_the_next_one_still_runs(caplog: pytest.LogCaptureFixture) -> None:
    cfg = config()
    model, sink = Fake(cfg, ["fail", "Running"]), Sink()
    inf = SensorInference(cfg, cfg.sensor_models[0], model, sink)
    assert inf.step(Window(0, ((0.0,) * 6,) * 4, 0, 0.0)) is None
    assert inf.step(Window(1, ((0.0,) * 6,) * 4, 0, 0.0)) is not None
    assert inf.dropped == {"error": 1} and sink.bodies[0]["dropped"] == {"error": 1}
    assert "inference failed: boom" in caplog.text

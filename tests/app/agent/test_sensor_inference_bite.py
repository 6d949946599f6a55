"""What the sensor worker reports (app/agent/sensor_inference.py), pure, without its threads: the
loaded tables, the result body's fields, a result the outbox refuses, the stats, the reading's own
time field, and a score model's camera trigger only on an anomaly."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import pytest

from edge_agent.app.agent.sensor_inference import SensorInference, load_sensor_models
from edge_agent.core.config.schema import Config, parse_config
from edge_agent.core.sensor.window import Window
from edge_agent.errors import QueueFullError
from edge_agent.inference.sensor_model import SensorModel, SensorOutcome

MODEL = Path(__file__).resolve().parents[3] / "models" / "demo-sensor.onnx"
CHANNELS = ["acc_x", "acc_y", "acc_z", "gyr_x", "gyr_y", "gyr_z"]


def config(extra: str = "") -> Config:
    return parse_config(
        f'[device]\nid = "dev-7"\n[sensor]\nport = "loop://"\n[[sensor_models]]\nname = "act"\n'
        f'model = "{MODEL}"\n{extra}'
    )


class Scripted(SensorModel):
    """The demo model's spec (window 4, hop 2) with scripted outcomes in turn."""

    def __init__(self, outcomes: list[SensorOutcome], **spec: Any) -> None:
        real = SensorModel.load(str(MODEL))
        super().__init__(real.model, dataclasses.replace(real.spec, window=4, hop=2, rate_hz=None, **spec))
        self.outcomes = outcomes
        self.calls = 0

    def infer(self, window: Window) -> SensorOutcome:
        self.calls += 1
        return dataclasses.replace(self.outcomes[(self.calls - 1) % len(self.outcomes)], index=window.index)


def win(i: int, filled: int = 0) -> Window:
    return Window(i, ((0.0,) * 6,) * 4, filled, float(i))


def test_load_gives_one_worker_per_table_with_its_topic_and_spec(caplog: pytest.LogCaptureFixture) -> None:
    cfg = parse_config(
        f'[device]\nid = "dev-7"\n[sensor]\nport = "loop://"\n[[sensor_models]]\nname = "act"\nmodel = "{MODEL}"\n'
        f'[[sensor_models]]\nname = "act2"\nmodel = "{MODEL}"\nhop = 10\n'
    )
    with caplog.at_level(logging.INFO, logger="edge_agent.app.agent.sensor_inference"):
        out = load_sensor_models(cfg, lambda topic, body: None)
    assert [(w.entry.name, w.topic, w.model.spec.hop, w.windower.hop) for w in out] == [
        ("act", "edge/dev-7/act/sensor_results", 25, 25),
        ("act2", "edge/dev-7/act2/sensor_results", 10, 10),
    ]
    assert caplog.messages[1].startswith("sensor model act2: classify: window 50 readings, hop 10 at 10 Hz")
    assert out[0].stats()["infer_ms_p50"] is None and out[0].stats()["pending"] == 0


def test_the_body_names_the_model_window_and_fill_and_stats_count_it() -> None:
    cfg = config()
    bodies: list[tuple[str, dict[str, Any]]] = []
    ms = [3.20049, 1.0, 2.0, 9.0]
    model = Scripted(
        [SensorOutcome(0, "classify", label="Running", confidence=0.9, probs={}, infer_ms=m) for m in ms]
    )
    inf = SensorInference(cfg, cfg.sensor_models[0], model, lambda t, b: bodies.append((t, b)))
    assert inf.step(win(0, filled=2)) is not None
    topic, body = bodies[0]
    assert topic == "edge/dev-7/act/sensor_results"
    assert (
        body["device_id"],
        body["model"],
        body["window"],
        body["readings"],
        body["filled"],
        body["label"],
    ) == (
        "dev-7",
        "act",
        0,
        4,
        2,
        "Running",
    )
    assert body["model_id"] == model.model.info.model_id and body["dropped"] == {}
    for i in range(1, 4):
        inf.step(win(i))
    s = inf.stats()
    assert (s["inferred"], s["published"], s["unchanged"], s["infer_ms_p50"], s["dropped"]) == (
        4,
        4,
        0,
        3.2,
        {},
    )
    assert inf.infer_ms == ms


def test_a_result_the_outbox_refuses_is_counted_not_queued(caplog: pytest.LogCaptureFixture) -> None:
    cfg = config()

    def refuse(topic: str, body: dict[str, Any]) -> None:
        raise QueueFullError("outbox.db: disk full")

    inf = SensorInference(
        cfg, cfg.sensor_models[0], Scripted([SensorOutcome(0, "regress", values={"y0": 1.0})]), refuse
    )
    out = inf.step(win(0))
    assert out is not None and out.values == {"y0": 1.0}
    assert (inf.published, inf.inferred, inf.dropped_total()) == (0, 1, {"not_queued": 1})
    assert caplog.messages == ["sensor result not queued: outbox.db: disk full"]


def test_a_score_model_fires_the_camera_only_when_an_anomaly_starts() -> None:
    cfg = config("trigger_camera = true\n")
    scores = [False, True, True, False, True]
    model = Scripted([SensorOutcome(0, "score", score=1.0 if a else 0.0, anomaly=a) for a in scores])
    inf = SensorInference(cfg, cfg.sensor_models[0], model, lambda t, b: None)

    class Sensor:
        fired = 0

        def fire(self) -> None:
            self.fired += 1

    inf.sensor = Sensor()  # type: ignore[assignment]
    for i in range(5):
        inf.step(win(i))
    assert inf.sensor.fired == 2 and inf.published == 5  # type: ignore[attr-defined]


def test_the_reading_s_time_field_times_the_window() -> None:
    cfg = config('time_field = "t"\n')
    model = Scripted([SensorOutcome(0, "regress", values={})], time_field="t")
    inf = SensorInference(cfg, cfg.sensor_models[0], model, lambda t, b: None)
    for i in range(4):
        inf.feed({**dict.fromkeys(CHANNELS, 1.0), "t": 100.0 + i})
    waiting = inf._pending.get_nowait()
    assert waiting is not None and waiting.t_end == 103.0 and inf.stats()["readings"] == 4


def test_a_first_result_without_state_is_published_under_publish_change_and_times_are_capped() -> None:
    cfg = config('publish = "change"\n')
    model = Scripted([SensorOutcome(0, "regress", values={"y0": 1.0}, infer_ms=1.0)])
    inf = SensorInference(cfg, cfg.sensor_models[0], model, lambda t, b: None)
    for i in range(300):
        inf.step(win(i))
    assert (inf.published, inf.unchanged, len(inf.infer_ms)) == (1, 299, 256)
    assert inf.stats()["infer_ms_p50"] == 1.0

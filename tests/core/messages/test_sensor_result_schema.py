"""The sensor model result (builders.sensor_result_message) against schemas/sensor_result.json: one
body per task validates once stamped, an unknown field or a task's missing field does not."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from edge_agent.core.messages.builders import sensor_result_message, sensor_result_topic, stamp
from edge_agent.inference.sensor_model import SensorOutcome

jsonschema = pytest.importorskip("jsonschema", reason="dev extra: pip install -e '.[dev]'")

OUTCOMES = {
    "classify": SensorOutcome(
        0, "classify", label="Running", confidence=0.9, probs={"Running": 0.9, "Walking": 0.1}
    ),
    "classify-uncertain": SensorOutcome(
        1, "classify", label=None, confidence=0.4, probs={"a": 0.4, "b": 0.6}
    ),
    "score": SensorOutcome(2, "score", score=3.5, anomaly=True),
    "regress": SensorOutcome(3, "regress", values={"rpm": 1450.0}),
}


def validator() -> Any:
    text = resources.files("edge_agent").joinpath("schemas", "sensor_result.json").read_text(encoding="utf-8")
    return jsonschema.Draft202012Validator(json.loads(text))


def body(outcome: SensorOutcome) -> dict[str, Any]:
    return sensor_result_message(
        outcome,
        model="activity",
        model_id="demo-sensor.onnx@9a5127544d47",
        window=50,
        filled=2,
        dropped={"busy": 1},
        device_id="pi-7",
        ts=2.0,
        clock_synced=True,
    )


@pytest.mark.parametrize("kind", sorted(OUTCOMES))
def test_each_task_validates_once_stamped_and_refuses_unknown_fields(kind: str) -> None:
    b = body(OUTCOMES[kind])
    v = validator()
    with pytest.raises(jsonschema.ValidationError, match="None is not of type 'integer'"):
        v.validate(b)
    stamp(b, seq=5, boot=1)
    v.validate(b)
    with pytest.raises(jsonschema.ValidationError, match="Additional properties"):
        v.validate({**b, "forgotten_field": 1})


@pytest.mark.parametrize(
    ("kind", "field"), [("classify", "label"), ("score", "anomaly"), ("regress", "values")]
)
def test_a_task_without_its_result_field_is_refused(kind: str, field: str) -> None:
    b = body(OUTCOMES[kind])
    stamp(b, seq=5, boot=1)
    del b[field]
    with pytest.raises(jsonschema.ValidationError, match=f"'{field}' is a required property"):
        validator().validate(b)


def test_only_the_tasks_own_fields_are_present_and_the_topic_ends_with_the_kind() -> None:
    assert "score" not in body(OUTCOMES["classify"]) and "label" not in body(OUTCOMES["score"])
    assert sensor_result_topic("/plant/", "pi-7", "activity") == "plant/pi-7/activity/sensor_results"

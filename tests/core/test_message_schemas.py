"""Each core builder's body, stamped as the outbox stamps it, matches its shipped JSON Schema, and
every schema refuses a field it does not name: a field added to a builder alone fails here.

(Messages captured from real runs are validated in tests/loop/test_messages_real.py and
tests/loop/test_objects_e2e.py.)"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from edge_agent.core.messages import (
    counts_message,
    object_message,
    result_message,
    sensor_message,
    stamp,
)

jsonschema = pytest.importorskip("jsonschema", reason="dev extra: pip install -e '.[dev]'")

INFER = {
    "image": "cam#3",
    "width": 640,
    "height": 480,
    "detections": [
        {"label": "person", "class_id": 0, "confidence": 0.9, "box": [1.0, 2.0, 30.0, 40.0]},
        {
            "label": "car",
            "class_id": 2,
            "confidence": 0.5,
            "box": [5, 6, 7, 8],
            "classification": {"label": "taxi", "confidence": 0.7},
        },
    ],
    "timings_ms": {"infer": 40.0},
}


def schema(name: str) -> Any:
    text = resources.files("edge_agent").joinpath("schemas", f"{name}.json").read_text(encoding="utf-8")
    return jsonschema.Draft202012Validator(json.loads(text))


def built() -> dict[str, dict[str, Any]]:
    """One body of every kind, with every optional field the builder knows filled in."""
    ended = {
        "event": "ended",
        "object_id": 4,
        "label": "person",
        "confidence": 0.8,
        "box": [1, 2, 3, 4],
        "duration_s": 2.0,
        "first_seen": 1.0,
        "last_seen": 3.0,
        "classes": {"person": 5},
        "best_confidence": 0.9,
        "best_box": [1, 2, 3, 4],
        "_best_image": object(),  # the app's, never published
    }
    counts = {
        "from": 1.0,
        "to": 61.0,
        "lines": {"gate": {"in": 1, "out": 0, "total_in": 1, "total_out": 0}},
        "zones": {"door": {"entered": 1, "total_entered": 2, "occupancy": 0}},
    }
    return {
        "result": result_message(
            INFER,
            device_id="pi-7",
            ts=2.0,
            frame=3,
            ts_mono=1.5,
            captured_at=1.9,
            clock_synced=True,
            event="first",
            models={"detector": {"id": "m"}},
            sensor={"t": 21.5},
            snapshot_jpeg_b64="AA==",
        ),
        "sensor": sensor_message({"t": 1}, device_id="pi-7", ts=2.0, clock_synced=None),
        "object": object_message(
            ended, device_id="pi-7", ts=2.0, captured_at=3.0, frame=9, snapshot_jpeg_b64="AA=="
        ),
        "counts": counts_message(counts, device_id="pi-7", ts=2.0, interval_s=60.0),
    }


@pytest.mark.parametrize("kind", ["result", "sensor", "object", "counts"])
def test_a_stamped_body_validates_and_an_unknown_field_does_not(kind: str) -> None:
    body = built()[kind]
    validator = schema(kind)
    with pytest.raises(jsonschema.ValidationError, match="None is not of type 'integer'"):
        validator.validate(body)  # not stamped yet: seq/boot are placeholders, no valid message
    stamp(body, seq=12, boot=3)
    validator.validate(body)
    with pytest.raises(jsonschema.ValidationError, match="Additional properties"):
        validator.validate({**body, "forgotten_field": 1})


def test_nested_result_parts_refuse_unknown_fields_too() -> None:
    body = built()["result"]
    stamp(body, seq=1, boot=1)
    validator = schema("result")
    det = {**body["detections"][0], "extra": 1}
    with pytest.raises(jsonschema.ValidationError, match="Additional properties"):
        validator.validate({**body, "detections": [det]})
    cls = {**body["detections"][1], "classification": {"label": "x", "confidence": 0.1, "why": "?"}}
    with pytest.raises(jsonschema.ValidationError, match="Additional properties"):
        validator.validate({**body, "detections": [cls]})


def test_the_status_schema_refuses_an_unknown_top_level_field() -> None:
    validator = schema("status")
    errors = [e.message for e in validator.iter_errors({"forgotten_field": 1})]
    assert any("Additional properties" in m and "forgotten_field" in m for m in errors), errors


def test_the_object_builder_refuses_an_event_field_it_does_not_name() -> None:
    from edge_agent.errors import QueueError

    with pytest.raises(QueueError, match="unknown event field"):
        object_message({"event": "appeared", "colour": "red"}, device_id="d", ts=1.0, captured_at=1.0)

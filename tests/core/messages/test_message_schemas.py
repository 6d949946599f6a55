"""Each core builder's body, stamped as the outbox stamps it, matches its shipped JSON Schema, and
every schema refuses a field it does not name: a field added to a builder alone fails here.

(Messages captured from real runs are validated in tests/app/agent/test_messages_real.py and
tests/app/agent/test_objects_e2e.py.)"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from edge_agent.core.messages.builders import (
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
            models={"detector": {"id": "m", "sha256": "ab" * 32, "quantization": "fp32"}},
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
    for models in ({"detector": {**body["models"]["detector"], "extra": 1}}, {**body["models"], "x": {}}):
        with pytest.raises(jsonschema.ValidationError, match="Additional properties"):
            validator.validate({**body, "models": models})
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({**body, "sensor": {"t": {"nested": 1}}})  # a reading is a flat map


def test_the_status_schema_refuses_an_unknown_top_level_field() -> None:
    validator = schema("status")
    errors = [e.message for e in validator.iter_errors({"forgotten_field": 1})]
    assert any("Additional properties" in m and "forgotten_field" in m for m in errors), errors


def test_the_object_builder_refuses_an_event_field_it_does_not_name() -> None:
    from edge_agent.errors import QueueError

    with pytest.raises(QueueError, match="unknown event field"):
        object_message({"event": "appeared", "colour": "red"}, device_id="d", ts=1.0, captured_at=1.0)


def full_status() -> dict[str, Any]:
    """A status body with every nested part filled as the agent fills it (the real agent's bodies
    are validated in tests/app/agent/test_messages_real.py and tests/app/updates/test_agent_updates.py)."""
    from edge_agent.core.messages.status import build_status
    from edge_agent.core.updates.store_state import Outcome, event

    sha = "ab" * 32
    gate = {
        "passed": True,
        "images": 8,
        "source": "ring",
        "seconds": 1.5,
        "reasons": [],
        "candidate_max_score": 0.9,
        "detector": {"passed": True},
        "classifier": None,
    }
    version = {"name": "demo", "version": "2.0", "detector_sha256": sha}
    return build_status(
        device_id="pi-7",
        version="1.0",
        state="running",
        ts=2.0,
        started_at=1.0,
        uptime_s=1.0,
        ready_s=0.5,
        pid=42,
        counters={"frames": 3},
        fps=1.0,
        latency_ms={"infer": 4.0, "total": 5.0},
        queue={
            **dict.fromkeys(("pending", "inflight", "unflushed", "bytes", "seq", "dropped", "expired"), 0),
            **dict.fromkeys(("rejected", "salvaged", "lost", "corrupt_files", "crashes", "seq_skipped"), 0),
            "oldest": None,
            "path": "/var/lib/edge-agent/queue.db",
            "boot": 1,
            "disk_full": False,
        },
        broker={
            "state": "connected",
            "last_sync": None,
            "last_error": None,
            "connect_attempts": 1,
            "connects": 1,
            "published": 2,
            "acked": 2,
            "thread_restarts": 0,
        },
        camera={
            "source": "/dev/video0",
            "kind": "v4l2",
            "state": "streaming",
            "frames": 3,
            "dropped": 0,
            "reconnects": 0,
            "open_failures": 0,
            "errors": 0,
            "skipped": 0,
            "last_error": None,
            "last_frame_age_s": 0.1,
            "fps": 1.0,
            "granted": {"fourcc": "MJPG", "width": 640, "height": 480, "fps": 30.0},
        },
        sensor={
            "port": "/dev/ttyUSB0",
            "state": "reading",
            "lines": 1,
            "readings": 1,
            "garbage": 0,
            "triggers": 0,
            "reconnects": 0,
            "open_failures": 0,
            "callback_errors": 0,
            "last_error": None,
        },
        provider="CPUExecutionProvider",
        models={
            "detector": {"id": "d", "sha256": sha, "quantization": "fp32"},
            "classifier": {"id": "c", "sha256": sha, "quantization": "int8-qdq"},
        },
        clock_synced=True,
        warnings=["w"],
        model_update={
            "current": {**version, "id": "demo-2.0-abcd", "created_at": "2026-11-30T00:00:00Z"},
            "history": [None],
            "trial": {
                "vid": "demo-2.0-abcd",
                "since": 1.0,
                "running": True,
                "baseline_rate": 1.5,
                "forced": False,
            },
            "last": event(Outcome.SWITCHED, "passed", "mqtt:t1", 1.0, version, gate, signer=0),
            "state": "idle",
            "errors": 0,
            "transfer": {
                "transfer_id": "t1",
                "name": "demo",
                "received": 1,
                "chunks": 3,
                "bytes": 9,
                "missing": [[1, 2]],
            },
            "ring_frames": 8,
            "receiver": {
                "alive": True,
                "messages": 3,
                "refused": 0,
                "failed": 0,
                "discarded_at_start": 0,
                "restarts": 0,
                "transfers": 1,
                "last_error": None,
            },
        },
    )


NESTED = [
    ("queue",),
    ("broker",),
    ("camera",),
    ("camera", "granted"),
    ("sensor",),
    ("models",),
    ("models", "detector"),
    ("model_update",),
    ("model_update", "current"),
    ("model_update", "trial"),
    ("model_update", "last"),
    ("model_update", "last", "version"),
    ("model_update", "last", "gate"),
    ("model_update", "transfer"),
    ("model_update", "receiver"),
]


@pytest.mark.parametrize("path", NESTED, ids=".".join)
def test_every_nested_status_part_refuses_an_unknown_field(path: tuple[str, ...]) -> None:
    validator = schema("status")
    body = full_status()
    validator.validate(body)
    part = body
    for key in path:
        part = part[key]
    part["forgotten_field"] = 1
    errors = [e.message for e in validator.iter_errors(body)]
    assert any("forgotten_field" in m for m in errors), errors


def test_latency_is_a_map_of_numbers_not_a_place_for_objects() -> None:
    validator = schema("status")
    body = full_status()
    body["latency_ms"]["nested"] = {"x": 1}
    assert not validator.is_valid(body)

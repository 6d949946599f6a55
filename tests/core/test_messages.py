"""The result message body: schema, detections exactly as ``infer --json`` gives them, compact JSON."""

from __future__ import annotations

import json
import math

import pytest

from edge_agent.core.messages import (
    ABSENT,
    encode,
    new_message_id,
    offline_status,
    result_message,
    stamp,
    topics,
)
from edge_agent.errors import QueueError

INFER = {
    "image": "/data/bus.jpg",
    "width": 810,
    "height": 1080,
    "detections": [
        {"label": "bus", "class_id": 5, "confidence": 0.87, "box": [22.1, 231.0, 805.0, 756.5]},
        {"label": "person", "class_id": 0, "confidence": 0.5, "box": [48, 398, 245, 902]},
    ],
    "timings_ms": {"preprocess": 3.1, "inference": 41.0, "postprocess": 0.9},
}


@pytest.mark.arm_smoke
def test_result_message_body() -> None:
    body = result_message(INFER, device_id="pi-7", ts=1700000000.25, msg_id="abc")
    assert body == {
        "schema": 1,
        "id": "abc",
        "seq": None,
        "boot": None,
        "device_id": "pi-7",
        "ts": 1700000000.25,
        "image": "/data/bus.jpg",
        "width": 810,
        "height": 1080,
        "detections": [
            {"label": "bus", "class_id": 5, "confidence": 0.87, "box": [22.1, 231.0, 805.0, 756.5]},
            {"label": "person", "class_id": 0, "confidence": 0.5, "box": [48.0, 398.0, 245.0, 902.0]},
        ],
        "timings_ms": {"preprocess": 3.1, "inference": 41.0, "postprocess": 0.9},
    }
    assert list(body)[:6] == ["schema", "id", "seq", "boot", "device_id", "ts"]


def test_the_builder_places_the_numbers_and_the_outbox_stamps_them() -> None:
    body = result_message(INFER, device_id="pi-7", ts=1.0, sensor={"pir": 1})
    assert len(body["id"]) == 32 and body["seq"] is None and body["boot"] is None
    assert body["sensor"] == {"pir": 1}
    order = list(body)
    assert stamp(body, seq=7, boot=2) == body["id"]
    assert (body["seq"], body["boot"]) == (7, 2) and list(body) == order  # filled in place
    loose: dict[str, object] = {"x": 1}  # not from a builder: id and numbers appended
    stamp(loose, seq=1, boot=1)
    assert list(loose) == ["x", "id", "seq", "boot"]


def test_frame_fields_are_named_and_absent_unless_given() -> None:
    bare = result_message(INFER, device_id="d", ts=1.0)
    assert not {"frame", "captured_at", "clock_synced", "sensor", "event"} & set(bare)
    full = result_message(
        INFER,
        device_id="d",
        ts=1.0,
        frame=3,
        ts_mono=2.5,
        captured_at=None,
        clock_synced=None,
        event="first",
        models={"detector": {}},
        sensor=None,
        snapshot_jpeg_b64="AA==",
    )
    assert list(full)[-8:] == [
        "frame",
        "ts_mono",
        "captured_at",
        "clock_synced",
        "event",
        "models",
        "sensor",
        "snapshot_jpeg_b64",
    ]
    assert full["captured_at"] is None and full["sensor"] is None  # JSON null, not left out
    assert "sensor" not in result_message(INFER, device_id="d", ts=1.0, sensor=ABSENT)


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda r: r.pop("width"), "lacks width"),
        (lambda r: r.__setitem__("detections", "x"), "expected a list"),
        (lambda r: r["detections"][0].pop("box"), r"detections\[0\] lacks box"),
        (lambda r: r["detections"][1].__setitem__("box", [1, 2, 3]), r"detections\[1\].box"),
    ],
)
def test_malformed_results_are_named(mutate: object, match: str) -> None:
    result = json.loads(json.dumps(INFER))
    mutate(result)  # type: ignore[operator]
    with pytest.raises(QueueError, match=match):
        result_message(result, device_id="d", ts=0.0)


def test_encode_is_compact_and_refuses_nan() -> None:
    assert encode({"a": [1, 2], "b": "é"}) == '{"a":[1,2],"b":"é"}'.encode()
    with pytest.raises(QueueError, match="not JSON-serialisable"):
        encode({"c": math.nan})


def test_ids_topics_status() -> None:
    ids = {new_message_id() for _ in range(1000)}
    assert len(ids) == 1000 and all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    assert topics("edge", "pi-7") == ("edge/pi-7/detections", "edge/pi-7/status", "edge/pi-7/sensors")
    assert topics("/site/a/", "x").status == "site/a/x/status"
    st = offline_status({"state": "running", "models": ["m"], "queue": {"pending": 3}})
    assert st == {"state": "offline", "models": ["m"], "queue": {"pending": 3}}

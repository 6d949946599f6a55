"""The result message body: schema, detections exactly as ``infer --json`` gives them, compact JSON."""

from __future__ import annotations

import json
import math

import pytest

from edge_agent.core.messages.builders import (
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


def test_stamping_keeps_the_builders_id_so_a_redelivery_carries_the_same_one() -> None:
    body = result_message(INFER, device_id="d", ts=1.0, msg_id="f" * 32)
    assert stamp(body, seq=1, boot=1) == "f" * 32 and body["id"] == "f" * 32
    loose: dict[str, object] = {"x": 1}
    got = stamp(loose, seq=1, boot=1)
    assert isinstance(got, str) and len(got) == 32 and loose["id"] == got  # a real id, not "None"


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda r: r["detections"].__setitem__(1, "bus"), r"detections\[1\] is str, expected an object"),
        (lambda r: r.__setitem__("detections", {"a": 1}), "detections is dict, expected a list"),
        (lambda r: (r.pop("width"), r.pop("image")), "lacks image, width"),
        (
            lambda r: (r["detections"][0].pop("box"), r["detections"][0].pop("label")),
            r"detections\[0\] lacks label, box",
        ),
    ],
)
def test_malformed_results_name_the_type_and_every_missing_key(mutate: object, match: str) -> None:
    result = json.loads(json.dumps(INFER))
    mutate(result)  # type: ignore[operator]
    with pytest.raises(QueueError, match=match):
        result_message(result, device_id="d", ts=0.0)


def test_a_prefix_is_stripped_of_slashes_only() -> None:
    assert topics("XYZ/", "d").detections == "XYZ/d/detections"


def test_the_other_builders_carry_what_they_are_given() -> None:
    from edge_agent.core.messages.builders import (
        counts_message,
        object_message,
        object_topics,
        sensor_message,
    )

    s = sensor_message({"t": 21.5}, device_id="d", ts=2, clock_synced=False)
    assert (s["clock_synced"], s["reading"], s["ts"]) == (False, {"t": 21.5}, 2.0)
    assert sensor_message({}, device_id="d", ts=2, clock_synced=True)["clock_synced"] is True
    ev = {"event": "ended", "object_id": 3, "_best_image": b"crop"}
    bare = object_message(ev, device_id="d", ts=1, captured_at=0.5)
    assert "frame" not in bare and "snapshot_jpeg_b64" not in bare and "_best_image" not in bare
    full = object_message(ev, device_id="d", ts=1, captured_at=0.5, frame=9, snapshot_jpeg_b64="AA==")
    assert (full["frame"], full["snapshot_jpeg_b64"], full["captured_at"]) == (9, "AA==", 0.5)
    with pytest.raises(QueueError, match=r"unknown event field\(s\) a, b$"):
        object_message({"event": "x", "b": 1, "a": 2}, device_id="d", ts=1, captured_at=0)
    c = counts_message(
        {"from": 1.0, "to": 2.0, "lines": {"l": {}}, "zones": {}}, device_id="d", ts=2, interval_s=60
    )
    assert (c["from"], c["to"], c["lines"], c["interval_s"]) == (1.0, 2.0, {"l": {}}, 60.0)
    assert object_topics("/site/", "cam") == ("site/cam/objects", "site/cam/counts")
    assert object_topics("X", "cam") == ("X/cam/objects", "X/cam/counts")

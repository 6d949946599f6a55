from __future__ import annotations

import pytest

from edge_agent.core.config.schema import OutputConfig
from edge_agent.core.messages.output_policy import Detection, OutputPolicy, box_iou, same_detections

pytestmark = pytest.mark.arm_smoke

PERSON: Detection = ("person", (10.0, 10.0, 50.0, 110.0))
PERSON_JITTER: Detection = ("person", (12.0, 11.0, 52.0, 111.0))
PERSON_MOVED: Detection = ("person", (200.0, 10.0, 240.0, 110.0))
CAR: Detection = ("car", (300.0, 300.0, 400.0, 350.0))


def test_box_iou() -> None:
    assert box_iou((0, 0, 10, 10), (0, 0, 10, 10)) == 1.0
    assert box_iou((0, 0, 10, 10), (5, 0, 15, 10)) == pytest.approx(50 / 150)
    assert box_iou((0, 0, 10, 10), (20, 20, 30, 30)) == 0.0
    assert box_iou((0, 0, 0, 0), (0, 0, 0, 0)) == 0.0


def test_same_detections_label_multiset_and_iou() -> None:
    assert same_detections([PERSON, CAR], [CAR, PERSON_MOVED], None)  # labels only: order and boxes ignored
    assert not same_detections([PERSON], [PERSON, PERSON], None)  # one more person is a change
    assert not same_detections([PERSON], [CAR], None)
    assert same_detections([PERSON, CAR], [CAR, PERSON_JITTER], 0.5)
    assert not same_detections([PERSON], [PERSON_MOVED], 0.5)
    # two people swapping places still match one-to-one
    assert same_detections([PERSON, PERSON_MOVED], [PERSON_MOVED, PERSON_JITTER], 0.5)
    assert same_detections([], [], 0.5)


def test_event_mode_emits_changes_and_heartbeats() -> None:
    p = OutputPolicy("event", heartbeat_s=60)
    decisions = [
        (0.0, []),
        (1.0, []),
        (2.0, [PERSON]),
        (3.0, [PERSON_MOVED]),  # same labels, no IoU check: not a change
        (4.0, [PERSON, CAR]),
        (5.0, [CAR, PERSON]),
        (64.0, [CAR, PERSON]),  # 60 s since the last emit
        (70.0, [CAR, PERSON]),
        (71.0, []),
    ]
    got = [(t, p.decide(t, d).reason) for t, d in decisions]
    assert got == [
        (0.0, "first"),
        (1.0, None),
        (2.0, "change"),
        (3.0, None),
        (4.0, "change"),
        (5.0, None),
        (64.0, "heartbeat"),
        (70.0, None),
        (71.0, "change"),
    ]
    assert p.decide(72.0, []).emit is False


def test_iou_tolerance_ignores_jitter_but_not_movement() -> None:
    p = OutputPolicy("event", heartbeat_s=60, min_iou=0.5)
    assert p.decide(0, [PERSON]).reason == "first"
    assert p.decide(1, [PERSON_JITTER]).emit is False
    assert p.decide(2, [PERSON_MOVED]).reason == "change"
    assert p.decide(3, [PERSON_MOVED]).emit is False


def test_stable_frames_suppresses_flicker() -> None:
    p = OutputPolicy("event", heartbeat_s=60, stable_frames=3)
    assert p.decide(0, []).reason == "first"
    # a person flickering at the threshold: never 3 frames in a row -> nothing emitted
    assert [p.decide(t, [PERSON] if t % 2 else []).emit for t in range(1, 9)] == [False] * 8
    assert [p.decide(t, [PERSON]).reason for t in (10, 11, 12, 13)] == [None, None, "change", None]


def test_every_frame_mode_emits_all() -> None:
    p = OutputPolicy.from_config(OutputConfig(mode="every_frame", heartbeat_s=5))
    assert [p.decide(t, []).reason for t in (0, 0.1, 0.2)] == ["every_frame"] * 3


def test_from_config_and_validation() -> None:
    p = OutputPolicy.from_config(OutputConfig(heartbeat_s=2.5), min_iou=0.3)
    assert (p.mode, p.heartbeat_s, p.min_iou) == ("event", 2.5, 0.3)
    for kw in ({"heartbeat_s": 0}, {"min_iou": 1.5}, {"stable_frames": 0}):
        with pytest.raises(ValueError):
            OutputPolicy("event", **kw)  # type: ignore[arg-type]

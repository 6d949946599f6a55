"""What ``fleet status`` reads back of the device rows (issue 36, the survivors of the
collector-trust run), on SQLite and PostgreSQL: each device's own version, model, times, gaps and
cameras map, never another device's or another field's."""

from __future__ import annotations

import json

import pytest
from support.collector import NOW, rec

from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.core.messages.fleet import LOSS_COUNTERS, DeviceStatus, parse

CAMS = {"door": {"state": "running", "fps": 5.0}}
# each figure its own value: a column read for another shows
LOSSES = {"pending": 41, **{k: 100 + i for i, k in enumerate(LOSS_COUNTERS)}}


def status(
    dev: str, version: str, model: str, ts: float, at: float, queue: dict[str, int], **extra: object
) -> DeviceStatus:
    body = {
        "device_id": dev,
        "state": "running",
        "ts": ts,
        "version": version,
        "queue": {"pending": 0, **queue},
        "models": {"detector": {"id": model}},
        **extra,
    }
    got = parse("edge", f"edge/{dev}/status", json.dumps(body).encode(), at).status
    assert got is not None
    return got


def test_each_device_row_shows_its_own_version_model_times_gaps_and_cameras(url: str) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        db.store([r for s in (1, 2, 5, 9) for r in rec("d1", s)], NOW)  # missing 3-4 and 6-8
        db.store([r for s in (1, 2, 3) for r in rec("d2", s)], NOW)
        db.store(
            [],
            NOW + 10,
            statuses=[
                status("d1", "0.3.1", "yolo-7", NOW + 4, NOW + 10, LOSSES, cameras=CAMS),
                status("d2", "0.2.0", "yolo-5", NOW + 6, NOW + 10, {"pending": 0}),
                status("d3", "0.2.0", "yolo-5", NOW + 6, NOW + 10, {}),  # a status, no message yet
            ],
        )
        by = {d["device"]: d for d in db.devices()}
        one, two, three = by["d1"], by["d2"], by["d3"]
        assert (one["version"], one["model_version"]) == ("0.3.1", "yolo-7")
        assert (two["version"], two["model_version"]) == ("0.2.0", "yolo-5")
        # status_time: the device's ts (clamped to arrival); last_seen: when the collector got it
        assert one["status_time"] == pytest.approx(NOW + 4, abs=1e-3)
        assert one["last_seen"] == pytest.approx(NOW + 10, abs=1e-3)
        assert two["status_time"] == pytest.approx(NOW + 6, abs=1e-3)
        assert (one["messages"], one["gaps"], one["missing"]) == (4, 2, 5)
        assert (two["messages"], two["gaps"], two["missing"]) == (3, 0, 0)
        assert one["cameras"] == CAMS and "cameras" not in two
        assert one["backlog"] == 41 and one["counters"] == {k: 100 + i for i, k in enumerate(LOSS_COUNTERS)}
        assert two["backlog"] == 0 and set(two["counters"].values()) == {0}
        assert (three["messages"], three["gaps"], three["missing"], three["conflicts"]) == (0, 0, 0, 0)
        assert one["conflicts"] == two["conflicts"] == 0
    finally:
        db.close()


def ordered(dev: str, state: str, link: int, n: int, at: float, boot: int = 1) -> DeviceStatus:
    body = {
        "device_id": dev,
        "state": state,
        "ts": at,
        "link": link,
        "status_seq": n,
        "queue": {"boot": boot},
    }
    got = parse("edge", f"edge/{dev}/status", json.dumps(body).encode(), at).status
    assert got is not None
    return got


Order = tuple[int, int, int]  # boot, link, status_seq


@pytest.mark.parametrize(
    ("at", "past"),
    [
        ((1, 2, 6 + 1_000_000_000), (1, 2, 7 + 1_000_000_000)),
        ((1, 2 + 1_000_000, 1), (1, 3 + 1_000_000, 1)),
        ((1 + 1000, 0, 0), (2 + 1000, 0, 0)),
    ],
    ids=["status_seq", "link", "boot"],
)
def test_a_forged_order_at_the_jump_bound_is_taken_one_past_it_cannot_pin_the_row(
    url: str, at: Order, past: Order
) -> None:
    db = CollectorDb(url)
    try:
        db.migrate()
        for dev in ("at", "past"):
            db.store([], NOW, statuses=[ordered(dev, "running", 2, 6, NOW)])  # boot 1, link 2, seq 6
        # "at": exactly the largest jump a device can make; "past": one more (a forged order)
        for dev, (boot, link, n) in (("at", at), ("past", past)):
            db.store([], NOW + 1, statuses=[ordered(dev, "offline", link, n, NOW + 1, boot=boot)])
        # the device's own next status, sent later on its link 2 of boot 1
        db.store([], NOW + 2, statuses=[ordered(d, "running", 2, 7, NOW + 2) for d in ("at", "past")])
        state = {d["device"]: d["state"] for d in db.devices()}
        assert state == {"at": "offline", "past": "running"}
    finally:
        db.close()

"""The page's recent events: events only (not counts), newest first, bounded, snapshots by link."""

from __future__ import annotations

import base64

from edge_agent.app.web.web_routes import EventLog


def test_events_newest_first_bounded_with_their_snapshots_by_link() -> None:
    log = EventLog(size=3)
    log.add({"lines": {}, "zones": {}})  # a counts message is not an event
    jpeg = b"\xff\xd8 a jpeg \xff\xd9"
    for n in range(4):
        log.add({"event": "ended", "object_id": n, "snapshot_jpeg_b64": base64.b64encode(jpeg).decode()})
    got = log.recent(10)
    assert [e["object_id"] for e in got] == [3, 2, 1]  # three kept, newest first
    assert all("snapshot_jpeg_b64" not in e for e in got)
    assert got[0]["snapshot"] == f"/api/v1/snapshot?id={got[0]['id']}"
    assert log.snapshot(got[0]["id"]) == jpeg
    assert log.snapshot(1) is None  # the first one fell out
    assert [e["object_id"] for e in log.recent(1)] == [3]

"""``edge-agent status`` as a person reads it: ages and local times, no epochs or dict reprs, and
nothing shown as streaming once the agent stopped or stopped reporting."""

from __future__ import annotations

import time

from edge_agent.app.cli.status_cmd import age, render, when
from edge_agent.core.messages.status import build_status

NOW = 1_800_000_000.0


def snap(state: str = "running") -> dict[str, object]:
    return build_status(
        device_id="cam-1",
        version="1.2.3",
        state=state,
        ts=NOW - 2,
        started_at=NOW - 3600,
        uptime_s=3600,
        ready_s=1.5,
        pid=42,
        counters={"frames": 10, "results": 4, "errors": 0},
        fps=5.0,
        latency_ms={"infer": 40.0, "total": 52.25},
        queue={
            "pending": 3,
            "bytes": 900,
            "oldest": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW - 300)),
            "dropped": 2,
            "disk_full": True,
        },
        broker={"state": "connected", "last_sync": NOW - 12, "last_error": None, "thread_restarts": 1},
        camera={"state": "streaming", "source": "/dev/video0", "dropped": 0},
        sensor=None,
        provider="CPUExecutionProvider",
        models={"detector": {"id": "m"}},
        clock_synced=True,
    )


def test_ages() -> None:
    assert [age(s) for s in (0.4, 12, 300, 9000, 400000)] == [
        "0 s ago",
        "12 s ago",
        "5 min ago",
        "2.5 h ago",
        "5 d ago",
    ]
    assert age(None) == "never"
    local = time.strftime("%H:%M:%S", time.localtime(NOW - 12))
    assert when(NOW - 12, NOW) == f"{local} (12 s ago)"
    assert when(None, NOW) == "never"


def test_running_view_has_ages_and_local_times_not_epochs_or_dicts() -> None:
    text = render(snap(), age_s=2, max_age=30, now=NOW)
    assert "streaming" in text and "reported 2 s ago" in text
    assert "last ack " + time.strftime("%H:%M:%S", time.localtime(NOW - 12)) + " (12 s ago)" in text
    assert "oldest " + time.strftime("%H:%M:%S", time.localtime(NOW - 300)) + " (5 min ago)" in text
    assert "infer 40.0 ms, total 52.25 ms" in text and "DISK FULL" in text and "sync restarts 1" in text
    assert str(int(NOW - 12)) not in text and "{" not in text and "None" not in text.split("provider")[0]
    assert not any(w in text for w in ("None", "True", "False"))  # no Python spellings anywhere
    assert "clock synced: " in text


def test_stopped_or_silent_agent_is_not_shown_streaming() -> None:
    # the snapshot itself (status file, MQTT) says so, not only the view
    assert snap("stopped")["camera"] == {"state": "stopped", "source": "/dev/video0", "dropped": 0}
    assert snap("running")["camera"]["state"] == "streaming"  # type: ignore[index]
    stopped = render(snap("stopped"), age_s=5, max_age=30, now=NOW)
    assert "streaming" not in stopped and "stopped" in stopped
    silent = render(snap("running"), age_s=600, max_age=30, now=NOW)
    assert "streaming" not in silent and "NOT REPORTING" in silent and "10 min ago" in silent
    assert "connected" not in silent  # the broker state is as stale as the rest


def test_not_reporting_starts_just_past_max_age() -> None:
    at = render(snap("running"), age_s=30.0, max_age=30, now=NOW)
    past = render(snap("running"), age_s=30.5, max_age=30, now=NOW)
    assert "NOT REPORTING" not in at and "streaming" in at
    assert "NOT REPORTING" in past and "streaming" not in past


def test_the_exit_code_says_stale_only_for_a_running_agent(tmp_path: object, capsys: object) -> None:
    """exit 1 when a *running* agent has not reported for --max-age; a stopped one's old file is
    its last word, exit 0."""
    import argparse
    from pathlib import Path

    from edge_agent.adapters.host.statusfile import write_status
    from edge_agent.app.cli import status_cmd

    f = Path(str(tmp_path)) / "status.json"
    for state, age_s, code in [
        ("running", 100, 1),
        ("running", 5, 0),
        ("stopped", 100, 0),
        ("draining", 100, 0),
    ]:
        write_status(f, {**snap(state), "ts": time.time() - age_s})
        args = argparse.Namespace(file=str(f), config=None, json=False, max_age=30.0)
        assert status_cmd.run(args) == code, (state, age_s)


def test_age_units_switch_at_their_boundaries_and_another_day_shows_its_date() -> None:
    assert [age(s) for s in (89, 90, 5399, 5400, 172799, 172800)] == [
        "89 s ago",
        "2 min ago",
        "90 min ago",
        "1.5 h ago",
        "48.0 h ago",
        "2 d ago",
    ]
    earlier = NOW - 3 * 86400
    full = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(earlier))
    assert when(earlier, NOW) == f"{full} (3 d ago)"


def test_each_named_camera_gets_a_line_with_its_figures() -> None:
    d = snap()
    d["camera"] = None
    base = {"source": "/srv/a", "kind": "folder", "state": "streaming", "fps_in": 15.0, "fps": 7.5}
    d["cameras"] = {
        "gate": {**base, "processed": 9, "skipped_motion": 3, "dropped_stale": 0, "frame_age_ms": 41.0,
                 "motion_ratio": 0.75, "reconnects": 2, "last_error": None},
        "yard": {**base, "state": "reconnecting", "source": "rtsp://***@cam/yard", "processed": 0,
                 "skipped_motion": 0, "dropped_stale": 1, "frame_age_ms": None, "motion_ratio": None,
                 "reconnects": 5, "last_error": "connection refused"},
    }  # fmt: skip
    text = render(d, age_s=2, max_age=30, now=NOW)
    lines = [ln for ln in text.splitlines() if ln.startswith("camera")]
    assert lines == [
        "camera gate: streaming  /srv/a  7.5 fps of 15.0 in, frame age 41.0 ms  skipped_motion 3, reconnects 2",
        "camera yard: reconnecting  rtsp://***@cam/yard  7.5 fps of 15.0 in, frame age -  dropped_stale 1, "
        "reconnects 5, last_error connection refused",
    ]
    stopped = render({**d, "state": "stopped"}, age_s=5, max_age=30, now=NOW)
    assert "camera gate: unknown (agent stopped)" in stopped

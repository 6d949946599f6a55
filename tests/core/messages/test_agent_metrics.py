"""The device's /metrics page as Prometheus tooling reads it: counters typed counter and named
``_total``, a ``# HELP`` per family, times in seconds, no gauge named ``_total``; ``promtool check
metrics`` (Debian's prometheus package) finds nothing on a page made from a full snapshot."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest

from edge_agent.adapters.host.metrics_http import render
from edge_agent.core.messages.agent_metrics import agent_families
from edge_agent.core.messages.status import prometheus_values

SNAPSHOT: dict[str, Any] = {
    "schema": 1, "device_id": "cam-1", "state": "running", "ts": 1.0, "started_at": 0.5, "pid": 7,
    "uptime_s": 3600.5, "ready_s": 0.67, "frames": 10231, "results": 912, "errors": 1, "reloads": 0,
    "reload_failures": 0, "fps": 7.4,
    "latency_ms": {"age": 20.35, "classify": 5.56, "infer": 2.64, "post": 0.53, "pre": 1.27, "total": 9.47},
    "queue": {"boot": 1, "bytes": 2285, "corrupt_files": 0, "crashes": 0, "disk_free_bytes": 7.6e10,
              "disk_full": False, "dropped": 0, "expired": 0, "inflight": 0, "lost": 0, "pending": 2,
              "rejected": 0, "salvaged": 0, "sent": 3, "seq": 5, "seq_skipped": 0, "unflushed": 0,
              "oldest_unconfirmed_s": 12.5},
    "broker": {"state": "connected", "connect_attempts": 2, "connects": 2, "published": 9, "acked": 9,
               "thread_restarts": 0},
    "camera": {"dropped": 0, "errors": 0, "fps": 7.5, "frames": 5, "last_frame_age_s": 0.25,
               "open_failures": 0, "reconnects": 1, "skipped": 0, "state": "streaming"},
    "sensor": {"state": "reading", "readings": 4, "lines": 5, "garbage": 1, "triggers": 0},
    "clock_synced": True,
    "model_update": {"errors": 0, "ring_frames": 20, "state": "idle",
                     "receiver": {"alive": True, "messages": 4, "refused": 1, "failed": 0, "transfers": 1,
                                  "restarts": 0, "low_space": 0}},
    "cameras": {"gate": {"fps": 7.0, "processed": 30, "state": "streaming"},
                'odd "cam"': {"fps": 1.0, "processed": 2, "state": "stopped"}},
}  # fmt: skip


def _page() -> str:
    return render(prometheus_values(SNAPSHOT), {"device": "cam-1"})


def test_counters_are_total_times_are_seconds_and_every_family_has_help() -> None:
    fams = {f.name: f for f in agent_families(prometheus_values(SNAPSHOT), {"device": "cam-1"})}
    for name in ("frames_total", "results_total", "errors_total", "queue_sent_total", "broker_acked_total",
                 "camera_reconnects_total", "sensor_readings_total", "model_update_receiver_refused_total",
                 "camera_processed_total"):  # fmt: skip
        assert fams[name].type == "counter", name
    for name in ("fps", "queue_pending", "queue_seq", "model_update_ring_frames", "broker_connected", "up"):
        assert fams[name].type == "gauge", name
    assert not [f.name for f in fams.values() if f.type == "gauge" and f.name.endswith("_total")]
    assert not [f.name for f in fams.values() if f.type == "counter" and not f.name.endswith("_total")]
    assert all(f.help for f in fams.values())
    assert fams["uptime_seconds"].samples == [({"device": "cam-1"}, 3600.5)]
    lat = dict((s["stage"], v) for s, v in fams["latency_seconds"].samples)
    assert lat["total"] == pytest.approx(0.00947) and lat["infer"] == pytest.approx(0.00264)
    assert fams["queue_oldest_unconfirmed_seconds"].samples[0][1] == 12.5
    assert fams["camera_last_frame_age_seconds"].samples[0][1] == 0.25
    assert ({"device": "cam-1", "camera": 'odd "cam"'}, 2.0) in fams["camera_processed_total"].samples
    assert not any("_ms" in n or n.endswith("_s") for n in fams)


def test_the_page_has_help_and_type_once_per_family() -> None:
    lines = _page().splitlines()
    assert lines.count("# TYPE edge_agent_frames_total counter") == 1
    assert lines.count("# TYPE edge_agent_latency_seconds gauge") == 1
    assert 'edge_agent_frames_total{device="cam-1"} 10231' in lines
    assert 'edge_agent_camera_fps{camera="odd \\"cam\\"",device="cam-1"} 1' in lines
    helps = [ln.split()[2] for ln in lines if ln.startswith("# HELP ")]
    types = [ln.split()[2] for ln in lines if ln.startswith("# TYPE ")]
    assert helps == types and len(set(types)) == len(types)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool missing (apt install prometheus)")
def test_promtool_finds_nothing_to_lint() -> None:
    r = subprocess.run(
        ["promtool", "check", "metrics"], input=_page(), capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), r.stdout + r.stderr

"""Acceptance of issue 34 (several cameras on one agent), end to end with real servers: one
``edge-agent run`` (a child process) with four ``[[cameras]]`` on one shared detector -- two real
GStreamer RTSP servers (H.264), one MJPEG-over-HTTP server, one looping folder in objects mode with
a counting line -- publishing to a real mosquitto.

Checked: every camera's results arrive on ``<prefix>/<device>/<camera>/detections`` carrying their
``camera``; the objects camera's object events (line crossings among them) and counts arrive on
``.../<camera>/objects`` and ``.../<camera>/counts``. Then one RTSP server is killed (SIGKILL, its
process really gone) and restarted on the same port: that camera reconnects (its ``reconnects``
in the status ``cameras`` map grows, its state is ``streaming`` again), and the other three never
stall: their processed fps, from the status file's ``processed`` counters, during the outage stays
within 10 % of before.

The detector is the demo INT8 model (7 ms a frame here), not YOLOv8n: FP32 YOLOv8n took 475 ms a
frame on this shared 2-core machine (load 9), ~2 frames/s for all four cameras, too few to tell
a 10 % change in each camera's rate within a test's minute. Each source runs at 5 frames/s, so
the agent is not saturated and a camera's processed fps is its source's rate: a stall of one
camera must not change the others' (the saturated case, where a freed share goes to the others,
is measured by tests/bench/bench_cameras.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from support import wait_until
from support.mjpeg import MjpegServer
from support.mqtt import Broker, Collector
from support.objects import make_clip
from support.rtsp import RtspServer, require_rtsp_server
from support.world import AgentProc, agent_toml

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
MODEL = REPO / "models" / "demo-detector-int8.onnx"
FPS = 5
TOLERANCE = 0.10
WINDOW_S = 10.0  # each fps window: ~50 frames per camera at 5 fps (one frame = 2 %)
LIVE = ("rtsp-a", "rtsp-b", "mjpeg")


def cameras_toml(rtsp_a: str, rtsp_b: str, mjpeg: str, folder: Path) -> str:
    live = "".join(
        f'[[cameras]]\nid = "{cid}"\nsource = "{url}"\nstall_timeout_s = 2.0\nreconnect_max_s = 1.0\n'
        for cid, url in (("rtsp-a", rtsp_a), ("rtsp-b", rtsp_b), ("mjpeg", mjpeg))
    )
    # the objects clip (support/objects.py: squares crossing x = 0.5), looping at its own rate
    return live + (
        f'[[cameras]]\nid = "yard"\nsource = "{folder}"\nloop = true\nfps = {FPS * 2}\nmode = "objects"\n'
        '[[cameras.lines]]\nname = "gate"\npoints = [[0.5, 0.0], [0.5, 0.6]]\nin_side = "left"\n'
    )


def processed(status: dict[str, Any]) -> dict[str, int]:
    return {cid: int(c["processed"]) for cid, c in status["cameras"].items()}


def rates(agent: AgentProc, seconds: float) -> dict[str, float]:
    """Each camera's processed frames/s over ``seconds``, from two status snapshots (their
    ``uptime_s``): the counters, not the 50-frame ``fps`` window, so the window is exact."""
    first = wait_until(agent.status, 10, "a status snapshot")
    time.sleep(seconds)
    n0 = processed(first)
    last = wait_until(
        lambda: (s := agent.status()) and s["uptime_s"] >= first["uptime_s"] + seconds and s,
        10,
        "a later status snapshot",
    )
    dt = last["uptime_s"] - first["uptime_s"]
    return {cid: (n - n0[cid]) / dt for cid, n in processed(last).items()}


def test_four_cameras_one_agent_results_per_camera_and_a_killed_rtsp_server(
    tmp_path: Path, broker: Broker
) -> None:
    require_rtsp_server()
    folder = tmp_path / "yard"
    folder.mkdir()
    make_clip(folder)
    a, b = RtspServer(fps=FPS), RtspServer(fps=FPS)
    a.start()
    b.start()
    web = MjpegServer(fps=FPS)
    col = Collector(broker.port, "site/#", client_id="cameras-acceptance")
    cfg = tmp_path / "agent.toml"
    cfg.write_text(
        agent_toml(
            tmp_path / "state",
            None,
            MODEL,
            port=broker.port,
            extra=cameras_toml(a.url, b.url, web.url, folder),
            device={"id": "cam-1"},
            mqtt={"topic_prefix": "site"},
            detector={"conf_threshold": 0.5},
            output={"mode": "every_frame", "counts_interval_s": 2},
        )
    )
    agent = AgentProc(cfg)
    try:
        agent.start()
        # every camera streams and is inferred
        wait_until(
            lambda: (
                (s := agent.status())
                and all(c["state"] == "streaming" and c["processed"] > 0 for c in s["cameras"].values())
                and len(s["cameras"]) == 4
            ),
            60,
            lambda: f"four cameras streaming: {agent.status()}\n{agent.log_text()[-3000:]}",
        )
        # per camera: results on <p>/<d>/<camera>/detections carrying their camera
        for cid in LIVE:
            col.wait_until(
                lambda c, cid=cid: len(c.on_topic(f"site/cam-1/{cid}/detections")) >= 5,
                30,
                f"results of {cid}",
            )
        col.wait_until(
            lambda c: (
                any(o["event"] == "line_crossed" for o in c.on_topic("site/cam-1/yard/objects"))
                and c.on_topic("site/cam-1/yard/counts")
            ),
            60,
            lambda: f"objects and counts of yard: {sorted({t for t, _, _ in col.messages})}",
        )
        with col.lock:
            topics = {t for t, _, _ in col.messages}
        kinds = {t.rsplit("/", 1)[0] for t in topics if not t.endswith("/status")}
        assert kinds == {f"site/cam-1/{cid}" for cid in (*LIVE, "yard")}, topics
        for cid in LIVE:
            bodies = col.on_topic(f"site/cam-1/{cid}/detections")
            assert {m["camera"] for m in bodies} == {cid}
            assert {m["device_id"] for m in bodies} == {"cam-1"}
        yard = col.on_topic("site/cam-1/yard/objects") + col.on_topic("site/cam-1/yard/counts")
        assert {m["camera"] for m in yard} == {"yard"}
        assert not col.on_topic("site/cam-1/yard/detections")  # objects mode: no per-frame results
        crossed = [o for o in col.on_topic("site/cam-1/yard/objects") if o["event"] == "line_crossed"]
        assert {o["line"] for o in crossed} == {"gate"}
        assert any("gate" in c["lines"] for c in col.on_topic("site/cam-1/yard/counts"))

        before = rates(agent, WINDOW_S)
        base = agent.status()
        assert base is not None
        reconnects = base["cameras"]["rtsp-a"]["reconnects"]
        a.stop()  # SIGKILL: the server process is gone
        wait_until(
            lambda: (s := agent.status()) and s["cameras"]["rtsp-a"]["state"] == "reconnecting",
            30,
            lambda: f"rtsp-a reconnecting: {agent.status()}",
        )
        during = rates(agent, WINDOW_S)
        a.start()  # the same port
        wait_until(
            lambda: (
                (s := agent.status())
                and s["cameras"]["rtsp-a"]["state"] == "streaming"
                and s["cameras"]["rtsp-a"]["reconnects"] > reconnects
            ),
            60,
            lambda: f"rtsp-a streaming again: {agent.status()}\n{agent.log_text()[-2000:]}",
        )
        after = processed(wait_until(agent.status, 10, "a status snapshot"))
        wait_until(
            lambda: (s := agent.status()) and s["cameras"]["rtsp-a"]["processed"] > after["rtsp-a"] + 10,
            30,
            lambda: f"rtsp-a inferred again: {agent.status()}\n{agent.log_text()[-3000:]}",
        )
    finally:
        agent.stop()
        col.close()
        web.close()
        a.stop()
        b.stop()
    spread = {cid: round(during[cid] / before[cid] - 1, 3) for cid in ("rtsp-b", "mjpeg", "yard")}
    print(f"processed fps before {before}, during the outage {during}; change {spread}")
    assert during["rtsp-a"] < 0.5 * before["rtsp-a"]  # the outage was real
    for cid, change in spread.items():
        assert before[cid] > 0.8 * FPS if cid != "yard" else before[cid] > 1.6 * FPS, before
        assert abs(change) <= TOLERANCE, (cid, before, during)

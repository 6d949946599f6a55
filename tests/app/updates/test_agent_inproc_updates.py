"""Model updates as the agent's loop drives them, in process (so mutation testing credits
app/agent/agent.py): the installed version is the one that runs, frames feed the ring and the trial, a
clean stop releases the trial, and a package dropped into the inbox of the running agent ends in
a reload onto it. The demo FP32 detector runs; the candidate is the demo INT8 one."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from support import wait_until
from support.mqtt import Broker, Collector
from support.updates import FP32, INT8, SAMPLES, pack_in_process, write_config
from support.world import run_agent

from edge_agent.adapters.updates.store import ModelStore
from edge_agent.app.agent.agent import Agent
from edge_agent.app.cli.configfile import load_config
from edge_agent.app.updates.agent_side import inbox_dir
from edge_agent.app.updates.switch import install

if not INT8.is_file():  # pragma: no cover - the demo models are part of the repository
    pytest.skip(f"{INT8} missing", allow_module_level=True)

ONE_PROBE = sorted(SAMPLES.glob("*.jpg"))[:1]  # a gate on one image: these tests run per mutant
RING = "[model_update]\nring_frames = 3\nring_interval_s = 0.001\n"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_installed_version_runs_its_frames_feed_ring_and_trial_and_a_clean_stop_ends_the_run_flag(
    tmp_path: Path,
) -> None:
    cfg = load_config(write_config(tmp_path, extra=RING))
    res = install(
        cfg, pack_in_process(tmp_path / "v2.pkg", INT8, version="2.0", probe=ONE_PROBE), origin="test"
    )
    assert res["outcome"] == "switched", res["detail"]
    bodies: list[dict[str, Any]] = []
    agent = Agent(cfg, max_frames=12, on_result=bodies.append)
    assert run_agent(agent, 60) == 0
    # the installed version, not the config's model
    assert {b["models"]["detector"]["sha256"] for b in bodies} == {sha(INT8)} != {sha(FP32)}
    assert agent.updates is not None
    # every frame's detection count went to the trial (the baseline of the next install) ...
    per_frame = [len(b["detections"]) for b in bodies]
    assert len(per_frame) == 12 and agent.updates.detection_rate() == pytest.approx(sum(per_frame) / 12)
    # ... and frames to the ring the update gate compares models on
    assert agent.last_status is not None and agent.last_status["model_update"]["ring_frames"] == 3
    # stopped cleanly: the trial is not taken for a crash at the next start
    trial = ModelStore(cfg.device.state_dir).state().trial
    assert trial is not None and trial.running is False


def outcome(cfg: Any) -> Any:
    last = ModelStore(cfg.device.state_dir).state().last
    return None if last is None else last["outcome"]


def test_a_package_dropped_into_the_inbox_of_the_running_agent_is_installed_and_the_loop_reloads_onto_it(
    tmp_path: Path, broker: Broker
) -> None:
    """... and the broker hears each step at once (gating, then the new version), not at the
    next periodic status (an hour here)."""
    path = write_config(tmp_path, port=broker.port)
    path.write_text(path.read_text().replace("status_interval_s = 1.0", "status_interval_s = 3600"))
    cfg = load_config(path)
    col = Collector(broker.port, "+/cam-1/status", client_id="update-status")
    bodies: list[dict[str, Any]] = []
    agent = Agent(cfg, path, on_result=bodies.append)
    t = threading.Thread(target=agent.run, daemon=True)
    t.start()
    try:
        wait_until(lambda: agent.frames >= 2, 30, "frames on the config's model")
        col.wait_until(lambda c: bool(c.on_topic("/status")), 30, "the first status")
        pkg = pack_in_process(tmp_path / "v2.pkg", INT8, version="2.0", probe=ONE_PROBE)
        os.replace(pkg, inbox_dir(cfg) / "v2.pkg")  # whole, as `edge-agent model install` drops it
        # the worker gates and switches; then the loop reloads onto it within a few frames (20 fps)
        wait_until(lambda: not t.is_alive() or outcome(cfg) is not None, 60, "the install's outcome")
        assert outcome(cfg) == "switched"
        n = agent.frames
        wait_until(
            lambda: not t.is_alive() or agent.reloads + agent.reload_failures > 0 or agent.frames >= n + 60,
            30,
            "the reload onto v2.0",
        )
        assert (agent.reloads, agent.reload_failures) == (1, 0)
        col.wait_until(
            lambda c: any(
                (m["model_update"].get("current") or {}).get("version") == "2.0"
                for m in c.on_topic("/status")
            ),
            10,
            lambda: f"a status naming v2.0: {[m['model_update'] for m in col.on_topic('/status')]}",
        )
        steps = [m["model_update"]["state"] for m in col.on_topic("/status")]
        assert "gating" in steps, steps
        wait_until(lambda: bodies[-1]["models"]["detector"]["sha256"] == sha(INT8), 30, "results of v2.0")
    finally:
        agent.stop_event.set()
        t.join(30)
        col.close()
    assert not t.is_alive()
    assert bodies[0]["models"]["detector"]["sha256"] == sha(FP32)
    assert ModelStore(cfg.device.state_dir).state().current is not None

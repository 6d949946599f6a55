"""Attacks on a running agent over a real mosquitto: the crash-loop begin, the default config, a
signed downgrade. Each reproduces a line of issue 17 and checks what happens now."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Optional

import paho.mqtt.client as mqtt
import pytest
from support import cli, wait_until
from support.mqtt import Broker
from support.updates import FP32, INT8, AgentProc, keys

pytestmark = pytest.mark.slow


def receiver(a: AgentProc) -> dict[str, Any]:
    return dict(((a.status() or {}).get("model_update") or {}).get("receiver") or {})


def publish(port: int, topic: str, payload: bytes) -> None:
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="attacker")
    c.connect("127.0.0.1", port)
    c.loop_start()
    try:
        c.publish(topic, payload, qos=1).wait_for_publish(10)
    finally:
        c.disconnect()
        c.loop_stop()


def peak_rss_mb(pid: int) -> Optional[float]:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return None


def test_a_billion_chunk_begin_neither_kills_the_receiver_nor_crash_loops_the_agent(
    broker: Broker, agents: list[AgentProc], packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    """Issue 17: with chunks = 10**9 today's receiver died with MemoryError (2.4 GB peak) and every
    later start crashed on the persisted begin. Also with trusted_keys set."""
    a = AgentProc(make_config(port=broker.port, extra=keys(packages)))
    agents.append(a.start())
    wait_until(lambda: receiver(a).get("alive"), what=lambda: f"receiver alive\n{a.log_text()}")
    a.stop()
    # while the device is off, the broker queues the begin for its persistent session ...
    boom = {"transfer_id": "boom", "size": 10, "sha256": "a" * 64, "chunks": 10**9, "chunk_size": 10}
    publish(broker.port, "edge/cam-1/model/begin", json.dumps(boom).encode())
    # ... and the state dir holds what today's main persisted for it
    poison = a.state / "models" / "transfers" / "boom"
    (poison / "chunks").mkdir(parents=True)
    (poison / "begin.json").write_text(json.dumps(boom))
    a.start()

    def counted() -> dict[str, Any]:
        r = receiver(a)
        return r if r.get("refused", 0) >= 1 and r.get("discarded_at_start", 0) >= 1 else {}

    snap = wait_until(counted, what=lambda: f"the refused begin counted\n{a.log_text()}")
    assert snap["alive"] is True and snap["failed"] == 0
    assert not poison.exists()
    assert a.proc is not None
    rss = peak_rss_mb(a.proc.pid)
    assert rss is not None and rss < 300, f"peak RSS {rss} MB"
    lines = [ln for ln in a.log_text().splitlines() if "ERROR edge_agent.model_mqtt" in ln]
    assert len(lines) == 2 and "Traceback" not in a.log_text(), lines  # one per refusal, no traceback
    assert "discarded" in lines[0] and "refused message on 'edge/cam-1/model/begin'" in lines[1]
    print(f"peak RSS of the agent after the billion-chunk begin: {rss:.0f} MB")


def test_the_default_config_takes_no_package_from_mqtt(
    broker: Broker, agents: list[AgentProc], packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    a = AgentProc(make_config(port=broker.port))
    agents.append(a.start())
    wait_until(lambda: "trusted_keys" in str(receiver(a).get("off")), what="the receiver reported off")
    assert [ln for ln in a.log_text().splitlines() if "trusted_keys is empty" in ln] != []
    r = cli(
        "model",
        "push",
        str(packages["signed"]),
        "-c",
        str(a.cfg_path),
        "--device",
        "cam-1",
        "--wait",
        "3",
        quiet=False,
    )
    assert r.returncode == 1 and "cam-1: no answer" in r.stdout, r.stdout + r.stderr
    assert not (a.state / "models" / "transfers").exists()
    assert list((a.state / "models" / "inbox").iterdir()) == []
    assert a.detector_sha() is not None and a.detector_sha() == hashlib_sha(FP32)
    r = cli(
        "model",
        "push",
        str(packages["good"]),
        "-c",
        str(a.cfg_path),
        "--device",
        "cam-1",
        "--force",
        quiet=False,
    )
    assert r.returncode != 0 and "never take 'force' from the network" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def hashlib_sha(p: Path) -> str:
    import hashlib

    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_a_signed_older_version_over_mqtt_is_refused(
    broker: Broker,
    agents: list[AgentProc],
    packages: dict[str, Path],
    versioned: dict[str, Path],
    make_config: Callable[..., Path],
) -> None:
    a = AgentProc(make_config(port=broker.port, extra=keys(packages)))
    agents.append(a.start())
    push = ("-c", str(a.cfg_path), "--device", "cam-1", "--wait", "60")
    r = cli("model", "push", str(versioned["2.0"]), *push, quiet=False)
    assert r.returncode == 0 and "cam-1: switched:" in r.stdout, r.stdout + a.log_text()
    r = cli("model", "push", str(versioned["1.0"]), *push, quiet=False)
    assert r.returncode == 1 and "cam-1: refused:" in r.stdout and "not newer than 2.0" in r.stdout, r.stdout
    state = json.loads((a.state / "models" / "active.json").read_text())
    assert state["current"].startswith("demo-2.0-")


def test_a_second_run_on_the_same_state_dir_leaves_the_trial_alone(
    agents: list[AgentProc], packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    """Issue 22: the second `run` read the first one's trial as an unclean end and rolled the new
    model back on disk before failing with 'queue is in use'."""
    import subprocess
    import sys

    a = AgentProc(make_config())
    agents.append(a.start())
    assert cli("model", "install", str(packages["good"]), "-c", str(a.cfg_path), quiet=False).returncode == 0
    wait_until(lambda: a.detector_sha() == hashlib_sha(INT8), what="switch")
    before = json.loads((a.state / "models" / "active.json").read_text())
    assert before["trial"]["running"] is True
    r = subprocess.run(
        [sys.executable, "-m", "edge_agent", "run", "-c", str(a.cfg_path), "--max-frames", "3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode != 0 and "another edge-agent run uses this state directory" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    after = json.loads((a.state / "models" / "active.json").read_text())
    assert after["current"] == before["current"] and after["trial"] == before["trial"]
    a.stop()
    a.start()  # a clean stop: the next start keeps the new model
    assert a.detector_sha() == hashlib_sha(INT8)

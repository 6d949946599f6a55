"""Model updates against a running agent (`edge-agent run` subprocess), a real mosquitto, kill -9."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any, Callable

import pytest
from support import cli, wait_until
from support.mqtt import Broker, Collector
from support.updates import FP32, INT8, AgentProc, keys

from edge_agent.adapters.updates.package_file import PackageReader, transfer_parts
from edge_agent.app.cli.configfile import load_config
from edge_agent.app.updates.push import push_package

pytestmark = pytest.mark.slow
FP32_SHA = hashlib.sha256(FP32.read_bytes()).hexdigest()
INT8_SHA = hashlib.sha256(INT8.read_bytes()).hexdigest()


def test_good_package_over_mqtt_switches_and_status_reports_it(
    broker: Broker, agents: list[AgentProc], packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    a = AgentProc(make_config(port=broker.port, extra=keys(packages)))
    agents.append(a.start())
    assert a.detector_sha() == FP32_SHA
    col = Collector(broker.port, "edge/cam-1/status", client_id="status-watch")
    try:
        tid = push_package(a.cfg, packages["signed"], ["cam-1"], None)
        wait_until(
            lambda: a.detector_sha() == INT8_SHA, what=lambda: f"switch to the INT8 model\n{a.log_text()}"
        )

        def reported() -> bool:
            for body in col.on_topic("/status"):
                mu = body.get("model_update") or {}
                cur = mu.get("current") or {}
                if cur.get("version") == "2.1+signed" and body["models"]["detector"]["sha256"] == INT8_SHA:
                    return True
            return False

        wait_until(reported, what="the status topic reporting the new version and hash")
        progress = [(b.get("model_update") or {}).get("transfer") or {} for b in col.on_topic("/status")]
        assert any(t.get("transfer_id") == tid for t in progress)  # the transfer was reported too
        # every body (transfer progress, trial, the last event with its gate) matches the shipped
        # schema, which refuses unknown fields at every level
        jsonschema = pytest.importorskip("jsonschema", reason="dev extra: pip install -e '.[dev]'")
        status_schema = json.loads(
            resources.files("edge_agent").joinpath("schemas", "status.json").read_text(encoding="utf-8")
        )
        for body in [*col.on_topic("/status"), *filter(None, [a.status()])]:
            jsonschema.Draft202012Validator(status_schema).validate(body)
        assert a.last()["origin"] == f"mqtt:{tid}" and a.last()["gate"]["passed"] is True
        r = cli("model", "status", "-c", str(a.cfg_path), quiet=False)
        assert "demo 2.1+signed" in r.stdout and INT8_SHA in r.stdout
    finally:
        col.close()


def test_zero_score_install_to_the_running_agent_is_refused(
    agents: list[AgentProc], packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    a = AgentProc(make_config())
    agents.append(a.start())
    r = cli("model", "install", str(packages["zero"]), "-c", str(a.cfg_path), quiet=False)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "running agent" in r.stderr
    assert "broken-model guard" in r.stdout and "candidate max score 0.0" in r.stdout
    frames = a.status()["frames"]  # type: ignore[index]
    wait_until(lambda: (a.status() or {}).get("frames", 0) > frames + 3, what="the loop still running")
    assert a.detector_sha() == FP32_SHA
    # a good INT8 through the same path is accepted
    r = cli("model", "install", str(packages["good"]), "-c", str(a.cfg_path), quiet=False)
    assert r.returncode == 0 and r.stdout.startswith("switched"), r.stdout + r.stderr
    wait_until(lambda: a.detector_sha() == INT8_SHA, what="switch")


def test_bad_signature_over_mqtt_is_refused(
    broker: Broker, agents: list[AgentProc], packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    pub = packages["pub"].read_text().strip()
    a = AgentProc(make_config(port=broker.port, extra=f'[model_update]\ntrusted_keys = ["{pub}"]'))
    agents.append(a.start())
    r = cli(
        "model",
        "push",
        str(packages["badsig"]),
        "-c",
        str(a.cfg_path),
        "--device",
        "cam-1",
        "--wait",
        "60",
        quiet=False,
    )
    assert r.returncode == 1 and "cam-1: refused:" in r.stdout and "bad signature" in r.stdout, r.stdout
    # refused at its begin, before a chunk was stored: nothing reached the install
    assert a.last() == {} and a.detector_sha() == FP32_SHA
    rec = wait_until(
        lambda: (
            (((a.status() or {}).get("model_update") or {}).get("receiver") or {}).get("unsigned") == 1
            and a.status()["model_update"]["receiver"]
        ),  # the status file lags the status topic by <= 2 s
        what="the refusal counted",
    )
    assert rec["unknown_transfer"] == 2 and rec["failed"] == 0  # its 2 chunks dropped
    r = cli(
        "model",
        "push",
        str(packages["signed"]),
        "-c",
        str(a.cfg_path),
        "--device",
        "cam-1",
        "--wait",
        "60",
        quiet=False,
    )
    assert r.returncode == 0 and "cam-1: switched:" in r.stdout, r.stdout + a.log_text()
    wait_until(
        lambda: a.detector_sha() == INT8_SHA, what=lambda: f"the signed package switched\n{a.log_text()}"
    )


def test_kill9_mid_transfer_resumes_and_completes(
    broker: Broker, agents: list[AgentProc], packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    a = AgentProc(make_config(port=broker.port, extra=keys(packages)))
    agents.append(a.start())
    total = transfer_parts(packages["small"])[0].count  # 16 KiB chunks
    assert total > 20
    tid = "resume-test"
    push_package(a.cfg, packages["small"], ["cam-1"], None, transfer_id=tid, only=range(10))
    chunks = a.state / "models" / "transfers" / tid / "chunks"
    wait_until(lambda: chunks.is_dir() and len(list(chunks.iterdir())) >= 10, what="10 chunks on disk")
    a.kill9()
    assert a.detector_sha() is None
    # the rest arrives while the device is down: the broker keeps it for the persistent session
    push_package(a.cfg, packages["small"], ["cam-1"], None, transfer_id=tid, only=range(10, total))
    assert len(list(chunks.iterdir())) == 10  # persisted across the kill, nothing more yet
    a.start()
    wait_until(
        lambda: a.detector_sha() == INT8_SHA, what=lambda: f"resumed transfer switched\n{a.log_text()}"
    )
    assert a.last()["origin"] == f"mqtt:{tid}"
    assert not (a.state / "models" / "transfers" / tid).exists()


def test_kill9_during_cli_install_always_leaves_a_working_model(
    packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    """kill -9 the installer at each phase it reaches (started, extracting, staged/gate, switched),
    each phase seen on disk rather than guessed from a delay (a slow machine moves delays around):
    every time, the next start loads a complete, hash-verified model."""
    from edge_agent.app.updates.agent_side import ModelUpdates, release_run_lock

    cfg_path = make_config()
    cfg = load_config(cfg_path)
    models = Path(cfg.device.state_dir) / "models"

    def entries(d: Path) -> bool:
        return d.is_dir() and any(d.iterdir())

    def switched() -> bool:
        try:
            return json.loads((models / "active.json").read_text()).get("current") is not None
        except (OSError, ValueError):
            return False

    phases: dict[str, Callable[[], bool]] = {
        "started": lambda: True,
        "extracting": lambda: entries(models / "staging"),
        "staged": lambda: entries(models / "versions"),
        "switched": switched,
    }
    seen = set()
    for phase, reached in phases.items():
        p = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "edge_agent",
                "model",
                "install",
                str(packages["good"]),
                "-c",
                str(cfg_path),
                "--allow-rolled-back",  # each round's rollback below is a reset, not a verdict
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        done = lambda r=reached, q=p: r() or q.poll() is not None  # noqa: E731
        wait_until(done, timeout=120, what=f"the install to reach {phase}")
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        updates = ModelUpdates(cfg, lambda: None)
        built = updates.build_models(cfg)  # verifies the active version's hashes
        sha = built.detector.model.info.sha256
        assert sha in (FP32_SHA, INT8_SHA)
        if phase in ("started", "switched"):  # the two ends: the old model, then the new one
            assert sha == (FP32_SHA if phase == "started" else INT8_SHA), phase
        seen.add(sha)
        staging = updates.store.staging
        assert not staging.exists() or list(staging.iterdir()) == []  # debris of a cut extraction removed
        cli("model", "rollback", "-c", str(cfg_path), quiet=False)  # next round starts from the config model
    assert seen == {FP32_SHA, INT8_SHA}  # kills landed both before and after the switch
    release_run_lock(cfg)  # this process played the agent above; now a real one starts
    r = subprocess.run(
        [sys.executable, "-m", "edge_agent", "run", "-c", str(cfg_path), "--max-frames", "3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr


def test_kill9_mid_gate_keeps_the_old_model_and_the_update_completes_after_restart(
    agents: list[AgentProc], packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    import shutil

    from support.updates import SAMPLES

    a = AgentProc(make_config(extra="[model_update]\nring_frames = 60\nring_interval_s = 3600"))
    ring = a.state / "models" / "ring"
    ring.mkdir(parents=True)
    now = int(time.time() * 1000)
    samples = sorted(SAMPLES.glob("*.jpg"))
    for i in range(60):  # a full ring makes the gate take a while (~3 model runs per frame)
        shutil.copyfile(samples[i % len(samples)], ring / f"{now - 60_000 + i * 1000:015d}.jpg")
    agents.append(a.start())
    inbox = a.state / "models" / "inbox"
    shutil.copyfile(packages["good"], inbox / ".drop.partial")
    os.replace(inbox / ".drop.partial", inbox / "drop.pkg")
    wait_until((inbox / "drop.request.json").exists, what="the gate starting")  # written just before it
    a.kill9()
    state = (
        json.loads((a.state / "models" / "active.json").read_text())
        if (a.state / "models" / "active.json").exists()
        else {}
    )
    assert state.get("current") is None  # cut before the switch
    a.start()
    assert a.last().get("outcome") in (None, "switched")
    wait_until(lambda: a.detector_sha() == INT8_SHA, what=lambda: f"the retried update\n{a.log_text()}")
    assert json.loads((inbox / "drop.result.json").read_text())["outcome"] == "switched"


def test_staged_but_not_switched_starts_the_old_model(
    agents: list[AgentProc], packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    """The state a power cut between stage and switch leaves: a complete version in versions/,
    a half-extracted one in staging/, the pointer untouched."""
    from edge_agent.adapters.updates.store import ModelStore

    a = AgentProc(make_config())
    store = ModelStore(str(a.state)).ensure()
    with PackageReader(packages["good"]) as r:
        store.stage(r)
    half = store.staging / "demo-2.0+good-deadbeef.123"
    half.mkdir()
    (half / "detector.onnx").write_bytes(INT8.read_bytes()[:1000])
    agents.append(a.start())
    assert a.detector_sha() == FP32_SHA
    assert not half.exists()


def test_rollback_of_the_running_agent(
    agents: list[AgentProc], packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    a = AgentProc(make_config(extra="[model_update]\nring_frames = 3\nring_interval_s = 0.1"))
    agents.append(a.start())
    ring = a.state / "models" / "ring"
    wait_until(lambda: ring.is_dir() and len(list(ring.glob("*.jpg"))) == 3, what="the loop filling its ring")
    r = cli("model", "install", str(packages["good"]), "-c", str(a.cfg_path), quiet=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert a.last()["gate"]["source"] == "ring" and a.last()["gate"]["images"] == 3
    wait_until(lambda: a.detector_sha() == INT8_SHA, what="switch")
    r = cli("model", "rollback", "-c", str(a.cfg_path), quiet=False)
    assert r.returncode == 0 and "reloading" in r.stdout
    wait_until(lambda: a.detector_sha() == FP32_SHA, what="rollback to the FP32 model")


def test_detection_rate_collapse_rolls_back_a_forced_model(
    agents: list[AgentProc], packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    a = AgentProc(make_config(extra="[model_update]\ntrial_min_frames = 10\ncollapse_ratio = 0.2"))
    agents.append(a.start())
    wait_until(lambda: (a.status() or {}).get("frames", 0) >= 15, what="a baseline detection rate")
    r = cli("model", "install", str(packages["dim"]), "-c", str(a.cfg_path), "--force", quiet=False)
    assert r.returncode == 0 and "(forced)" in r.stdout, r.stdout + r.stderr
    assert "--force given by cli" in a.log_text()
    wait_until(
        lambda: a.last().get("outcome") == "rolled_back", what=lambda: f"automatic rollback\n{a.log_text()}"
    )
    assert "detection rate collapsed" in a.last()["detail"]
    wait_until(lambda: a.detector_sha() == FP32_SHA, what="the FP32 model back")


def test_unclean_end_during_the_trial_rolls_back_at_the_next_start(
    agents: list[AgentProc], packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    a = AgentProc(make_config())
    agents.append(a.start())
    assert cli("model", "install", str(packages["good"]), "-c", str(a.cfg_path), quiet=False).returncode == 0
    wait_until(lambda: a.detector_sha() == INT8_SHA, what="switch")
    a.kill9()  # what systemd's watchdog kill (SIGABRT) or a power cut looks like
    a.start()
    assert a.detector_sha() == FP32_SHA
    assert "ended uncleanly" in a.last()["detail"]


@pytest.mark.parametrize("damage", ["truncated", "bit-flip"])
def test_a_damaged_model_is_rolled_back_at_start(
    packages: dict[str, Path], make_config: Callable[..., Path], damage: str
) -> None:
    """An SD card eating half the file (does not load) or flipping one weight bit (loads fine,
    computes garbage: only the hash check at start catches it)."""
    cfg_path = make_config()
    assert cli("model", "install", str(packages["good"]), "-c", str(cfg_path), quiet=False).returncode == 0
    cfg = load_config(cfg_path)
    state = json.loads((Path(cfg.device.state_dir) / "models" / "active.json").read_text())
    det = Path(cfg.device.state_dir) / "models" / "versions" / state["current"] / "detector.onnx"
    data = bytearray(det.read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 2]
    else:
        data[len(data) * 3 // 4] ^= 0x01  # inside the weights
    det.write_bytes(bytes(data))
    r = subprocess.run(
        [sys.executable, "-m", "edge_agent", "run", "-c", str(cfg_path), "--max-frames", "3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "does not load" in r.stderr
    assert "sha256 no longer matches" in r.stderr
    last = json.loads((Path(cfg.device.state_dir) / "models" / "active.json").read_text())
    assert last["current"] is None and last["last"]["outcome"] == "rolled_back"


def test_one_package_on_a_group_topic_reaches_ten_devices(
    broker: Broker, packages: dict[str, Path], make_config: Callable[..., Path], tmp_path: Path
) -> None:
    """Ten receivers (each a device's MQTT side, own client id and disk) subscribed to one group."""
    from edge_agent.adapters.updates.receiver import ModelReceiver

    receivers = []
    for i in range(10):
        extra = keys(packages) + '\ngroups = ["fleet-a"]'
        cfg = load_config(make_config(port=broker.port, device=f"dev-{i}", extra=extra))
        root = Path(cfg.device.state_dir)
        rec = ModelReceiver(cfg, root / "transfers", root / "inbox", lambda info: None)
        rec.start()
        receivers.append((rec, root / "inbox"))
    try:
        wait_until(lambda: all(r.subscribed.is_set() for r, _ in receivers), what="10 receivers subscribed")
        plan, manifest, _ = transfer_parts(packages["small"])
        body = packages["small"].read_bytes()[: plan.size]
        tid = push_package(load_config(make_config(port=broker.port)), packages["small"], [], "fleet-a")
        for _, inbox in receivers:
            pkg = inbox / f"{tid}.pkg"
            wait_until(pkg.exists, what=f"{pkg}")
            assert pkg.read_bytes()[: plan.size] == body  # the signed body, then the signed manifest
            with PackageReader(pkg) as r:
                assert r.manifest_data == manifest
    finally:
        for r, _ in receivers:
            r.stop()


def test_transfer_over_the_size_cap_is_refused(
    broker: Broker, packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    from edge_agent.adapters.updates.receiver import ModelReceiver

    cfg = load_config(make_config(port=broker.port, extra=keys(packages) + "\nmax_package_mb = 0.1"))
    root = Path(cfg.device.state_dir)
    events: list[dict[str, Any]] = []
    rec = ModelReceiver(cfg, root / "transfers", root / "inbox", lambda info: events.append(info or {}))
    rec.start()
    try:
        wait_until(rec.subscribed.is_set, what="subscribed (SUBACK)")
        push_package(cfg, packages["signed"], ["cam-1"], None)
        wait_until(lambda: any("refused" in e for e in events), what="refusal")
        assert "> max_package_mb (100000 bytes)" in next(e["refused"] for e in events if "refused" in e)
        assert (
            not (root / "transfers" / "done.json").exists() and len(list((root / "transfers").iterdir())) == 0
        )
        assert list((root / "inbox").glob("*.pkg")) == []
    finally:
        rec.stop()


def test_a_chunk_that_is_not_the_signed_one_is_refused_before_it_is_written(
    broker: Broker, packages: dict[str, Path], make_config: Callable[..., Path]
) -> None:
    """The signed begin of a real package, then its first chunk with one byte changed: refused
    (not stored) at once, not after the whole package was assembled; the true chunks still go in."""
    import paho.mqtt.client as mqtt

    from edge_agent.adapters.updates.receiver import ModelReceiver
    from edge_agent.core.updates.binding import SignedBegin

    cfg = load_config(make_config(port=broker.port, extra=keys(packages)))
    root = Path(cfg.device.state_dir)
    events: list[dict[str, Any]] = []
    rec = ModelReceiver(cfg, root / "transfers", root / "inbox", lambda info: events.append(info or {}))
    rec.start()
    plan, manifest, sig = transfer_parts(packages["small"])
    data = packages["small"].read_bytes()[: plan.size]
    pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="bad-sender")
    pub.connect("127.0.0.1", broker.port)
    pub.loop_start()
    try:
        wait_until(rec.subscribed.is_set, what="subscribed (SUBACK)")
        base = "edge/cam-1/model"
        pub.publish(f"{base}/begin", SignedBegin("badsha", manifest, sig).to_json(), qos=1).wait_for_publish(
            5
        )
        first = data[: plan.chunk_size]
        pub.publish(f"{base}/chunk/badsha/0", bytes([first[0] ^ 1]) + first[1:], qos=1).wait_for_publish(5)
        wait_until(lambda: rec.counts["bad_chunk"] == 1, what="the forged chunk refused")
        assert rec.last_error is not None and "chunk 0 does not match its signed sha256" in rec.last_error
        assert list((root / "transfers" / "badsha" / "chunks").iterdir()) == []
        for i in range(plan.count):
            chunk = data[i * plan.chunk_size : (i + 1) * plan.chunk_size]
            pub.publish(f"{base}/chunk/badsha/{i}", chunk, qos=1).wait_for_publish(5)
        wait_until((root / "inbox" / "badsha.pkg").exists, what="the true package in the inbox")
        assert rec.counts["refused"] == 1
    finally:
        pub.disconnect()
        pub.loop_stop()
        rec.stop()


def test_a_transfer_survives_a_broker_that_lost_its_sessions(
    broker: Broker,
    packages: dict[str, Path],
    make_config: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Half the chunks arrive, the broker restarts without its persistence file (sessions and
    queued chunks gone), the operator re-pushes under the same transfer id: the device keeps what
    it has on disk and completes."""
    from edge_agent.adapters.host import durable
    from edge_agent.adapters.updates import receiver as model_mqtt

    written: list[str] = []
    real_replace = os.replace

    def counting_replace(src: Any, dst: Any) -> None:
        written.append(Path(dst).name)
        real_replace(src, dst)

    monkeypatch.setattr(durable.os, "replace", counting_replace)  # every durable write
    cfg_path = make_config(port=broker.port, extra=keys(packages))
    cfg = load_config(cfg_path)
    root = Path(cfg.device.state_dir)
    rec = model_mqtt.ModelReceiver(cfg, root / "transfers", root / "inbox", lambda info: None)
    rec.start()
    try:
        wait_until(rec.subscribed.is_set, what="subscribed (SUBACK)")
        tid = "lost-session"
        push_package(cfg, packages["small"], ["cam-1"], None, transfer_id=tid, only=range(5))
        chunks = root / "transfers" / tid / "chunks"
        wait_until(lambda: chunks.is_dir() and len(list(chunks.iterdir())) == 5, what="5 chunks on disk")
        broker.stop()
        (broker.workdir / "mosquitto.db").unlink(missing_ok=True)
        broker.start()
        r = cli(
            "model",
            "push",
            str(packages["small"]),
            "-c",
            str(cfg_path),
            "--device",
            "cam-1",
            "--transfer-id",
            tid,
            quiet=False,
        )
        assert r.returncode == 0, r.stderr
        wait_until((root / "inbox" / f"{tid}.pkg").exists, what="the completed package in the inbox")
        plan = transfer_parts(packages["small"])[0]
        assert sorted(int(n) for n in written if n.isdigit()) == list(range(plan.count))  # 0-4 written once
        data = (root / "inbox" / f"{tid}.pkg").read_bytes()
        assert data[: plan.size] == packages["small"].read_bytes()[: plan.size]
    finally:
        rec.stop()

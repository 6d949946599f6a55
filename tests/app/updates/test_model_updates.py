"""The running agent's side of model updates (app.model_updates) in process: the inbox (who may drop
a package, what a request may ask, a package that killed the agent twice), the trial (confirmed,
rolled back on a collapse or an unclean end), the run lock, the pid file and the status block."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support import wait_until
from support.updates import INT8, SAMPLES, make_zero_score, pack_in_process, write_config

from edge_agent.app.cli.configfile import load_config
from edge_agent.app.updates import agent_side as model_updates
from edge_agent.app.updates import switch as model_switch
from edge_agent.app.updates.agent_side import (
    ModelUpdates,
    hold_run_lock,
    inbox_dir,
    pid_file,
    release_run_lock,
)
from edge_agent.errors import EdgeAgentError

if not INT8.is_file():  # pragma: no cover - the demo models are part of the repository
    pytest.skip(f"{INT8} missing", allow_module_level=True)

ONE_PROBE = sorted(SAMPLES.glob("*.jpg"))[:1]
TRIAL = "[model_update]\ntrial_s = 0\ntrial_min_frames = 3\ncollapse_ratio = 0.5\n"


class Agent:
    """ModelUpdates as `edge-agent run` holds it, with the reloads and status publishes counted."""

    def __init__(self, tmp_path: Path, extra: str = TRIAL) -> None:
        self.cfg = load_config(write_config(tmp_path, extra=extra))
        self.reloads = 0
        self.published = 0
        self.updates = ModelUpdates(self.cfg, self._reload)
        self.updates.build_models(self.cfg)
        self.updates.publish = self._publish
        inbox_dir(self.cfg).mkdir(parents=True, exist_ok=True)

    def _reload(self) -> None:
        self.reloads += 1

    def _publish(self) -> None:
        self.published += 1

    def drop(self, pkg: Path, request: Any = None, raw: str | None = None) -> Path:
        dst = inbox_dir(self.cfg) / pkg.name
        dst.write_bytes(pkg.read_bytes())
        if request is not None or raw is not None:
            text = raw if raw is not None else json.dumps(request)
            dst.with_suffix(".request.json").write_text(text)
        return dst

    def result(self, name: str) -> dict[str, Any]:
        return dict(json.loads((inbox_dir(self.cfg) / name).with_suffix(".result.json").read_text()))

    def state(self) -> Any:
        return self.updates.store.state()

    def close(self) -> None:
        self.updates.stop()
        release_run_lock(self.cfg)


@pytest.fixture
def agent(tmp_path: Path) -> Any:
    a = Agent(tmp_path)
    yield a
    a.close()


def pkg(tmp_path: Path, version: str, model: Path = INT8, **kw: Any) -> Path:
    return pack_in_process(tmp_path / f"v{version}.pkg", model, version=version, probe=ONE_PROBE, **kw)


@pytest.fixture
def zero_model(tmp_path: Path) -> Path:
    return make_zero_score(INT8, tmp_path / "zero.onnx")


def test_a_package_in_the_inbox_is_installed_once_answered_and_removed(agent: Agent, tmp_path: Path) -> None:
    dropped = agent.drop(pkg(tmp_path, "2.0"))
    agent.updates.scan_inbox()
    res = agent.result("v2.0.pkg")
    assert res["outcome"] == "switched" and res["origin"] == "inbox:v2.0.pkg"
    assert not dropped.exists() and not dropped.with_suffix(".request.json").exists()
    assert agent.reloads == 1 and agent.published == 2  # "gating", then the verdict
    assert agent.updates.state == "idle"
    assert agent.state().current.startswith("demo-2.0-")
    agent.updates.scan_inbox()  # nothing left: nothing happens again
    assert agent.reloads == 1 and agent.published == 2


def test_a_refused_package_is_answered_and_asks_for_no_reload(
    agent: Agent, tmp_path: Path, zero_model: Path
) -> None:
    agent.drop(pkg(tmp_path, "3.0", zero_model))
    agent.updates.scan_inbox()
    assert agent.result("v3.0.pkg")["outcome"] == "refused"
    assert agent.reloads == 0 and agent.state().current is None


@pytest.mark.parametrize(
    ("request_body", "forced"),
    [
        ({"origin": "cli", "force": True}, True),
        ({"force": True}, False),  # a request not written by `model install`: no force
        ({"origin": "inbox:x", "force": True}, False),
    ],
)
def test_force_counts_only_from_the_local_command(
    agent: Agent, tmp_path: Path, zero_model: Path, request_body: dict[str, Any], forced: bool
) -> None:
    agent.drop(pkg(tmp_path, "3.0", zero_model), request_body)
    agent.updates.scan_inbox()
    res = agent.result("v3.0.pkg")
    assert res["outcome"] == ("switched" if forced else "refused"), res["detail"]
    assert res["origin"] == request_body.get("origin", "inbox:v3.0.pkg")


@pytest.mark.parametrize(("origin", "allowed"), [("cli", True), ("inbox:x", False)])
def test_allow_downgrade_counts_only_from_the_local_command(
    agent: Agent, tmp_path: Path, origin: str, allowed: bool
) -> None:
    agent.drop(pkg(tmp_path, "3.0"))
    agent.updates.scan_inbox()
    agent.drop(pkg(tmp_path, "2.0"), {"origin": origin, "allow_downgrade": True})
    agent.updates.scan_inbox()
    res = agent.result("v2.0.pkg")
    assert res["outcome"] == ("switched" if allowed else "refused"), res["detail"]


def test_a_package_from_mqtt_must_be_signed(agent: Agent, tmp_path: Path) -> None:
    agent.drop(pkg(tmp_path, "2.0"), {"origin": "mqtt:t1"})
    agent.updates.scan_inbox()
    res = agent.result("v2.0.pkg")
    assert res["outcome"] == "refused" and res["origin"] == "mqtt:t1"
    assert "sign" in res["detail"]


@pytest.mark.parametrize(
    ("attempts", "installed"), [(None, True), (0, True), (1, True), (2, False), (7, False)]
)
def test_a_package_that_killed_the_agent_twice_is_refused(
    agent: Agent, tmp_path: Path, attempts: Any, installed: bool
) -> None:
    agent.drop(pkg(tmp_path, "2.0"), {} if attempts is None else {"attempts": attempts})
    agent.updates.scan_inbox()
    res = agent.result("v2.0.pkg")
    if installed:
        assert res["outcome"] == "switched", res["detail"]
    else:
        assert res["outcome"] == "refused"
        assert res["detail"] == "v2.0.pkg: the agent died twice while installing it"
        assert res["origin"] == "inbox:v2.0.pkg"
        assert agent.state().current is None and agent.published == 1  # no "gating" event


@pytest.mark.parametrize("raw", ["{not json", "[1, 2]", '{"attempts": "two"}', '{"attempts": 1.5}'])
def test_a_damaged_request_is_no_request(agent: Agent, tmp_path: Path, raw: str) -> None:
    agent.drop(pkg(tmp_path, "2.0"), raw=raw)
    agent.updates.scan_inbox()
    res = agent.result("v2.0.pkg")
    assert res["outcome"] == "switched" and res["origin"] == "inbox:v2.0.pkg"


def test_the_attempt_is_on_disk_while_the_gate_runs(
    agent: Agent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash inside the gate must find the attempt counted at the next start."""
    seen: dict[str, Any] = {}
    real = model_switch.install

    def install(cfg: Any, package: Path, **kw: Any) -> dict[str, Any]:
        seen["request"] = json.loads(package.with_suffix(".request.json").read_text())
        seen["state"] = agent.updates.state
        seen["kw"] = kw
        return real(cfg, package, **kw)

    monkeypatch.setattr(model_switch, "install", install)
    agent.updates.detection_rate = lambda: 2.5  # type: ignore[method-assign]
    agent.drop(pkg(tmp_path, "2.0"), {"origin": "inbox:ops", "attempts": 1, "note": "kept"})
    agent.updates.scan_inbox()
    assert seen["request"] == {"origin": "inbox:ops", "attempts": 2, "note": "kept"}
    assert seen["state"] == "gating"
    cancelled = seen["kw"].pop("cancelled")  # asks the receiver whether the sender cancelled it
    assert cancelled() is False  # no receiver here (MQTT off): nothing can have been cancelled
    assert seen["kw"] == {
        "force": False,
        "origin": "inbox:ops",
        "baseline_rate": 2.5,
        "require_signature": False,
        "allow_downgrade": False,
        "allow_rolled_back": False,
        "planner": agent.updates._planner,  # the gate loads on the running agent's plans
    }
    assert seen["kw"]["planner"] is not None
    assert agent.updates._in_progress is None


@pytest.mark.parametrize(
    ("request_body", "on_disk"),
    [
        (None, {"attempts": 1}),
        ({"origin": "cli"}, {"origin": "cli", "attempts": 1}),
        ({"origin": "cli", "attempts": "two"}, {"origin": "cli", "attempts": 1}),
    ],
)
def test_the_first_attempt_is_counted_as_one(
    agent: Agent,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request_body: Any,
    on_disk: dict[str, Any],
) -> None:
    """No request, one without a count or with a damaged count: the gate running now is the
    first attempt (a crash in it leaves one more try, not none)."""
    seen: list[Any] = []

    def install(cfg: Any, package: Path, **kw: Any) -> dict[str, Any]:
        seen.append(json.loads(package.with_suffix(".request.json").read_text()))
        return model_switch.record(agent.updates.store, "t", None, model_switch.Outcome.REFUSED, "x")

    monkeypatch.setattr(model_switch, "install", install)
    agent.drop(pkg(tmp_path, "2.0"), request_body)
    agent.updates.scan_inbox()
    assert seen == [on_disk]


def test_a_clean_stop_during_the_gate_gives_the_attempt_back(
    agent: Agent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent stopped (SIGTERM) while the worker gates: the request on disk goes back to the
    count it had, so a package interrupted by clean stops is never refused as a crash."""
    seen: list[Any] = []

    def install(cfg: Any, package: Path, **kw: Any) -> dict[str, Any]:
        req = package.with_suffix(".request.json")
        seen.append(json.loads(req.read_text())["attempts"])
        agent.updates.stop()  # what the main thread does meanwhile
        seen.append(json.loads(req.read_text())["attempts"])
        return model_switch.record(agent.updates.store, "t", None, model_switch.Outcome.REFUSED, "x")

    monkeypatch.setattr(model_switch, "install", install)
    agent.drop(pkg(tmp_path, "2.0"), {"origin": "cli", "attempts": 1})
    agent.updates.scan_inbox()
    assert seen == [2, 1]


def test_an_origin_is_cut_to_100_characters(agent: Agent, tmp_path: Path) -> None:
    agent.drop(pkg(tmp_path, "2.0"), {"origin": "inbox:" + "o" * 200})
    agent.updates.scan_inbox()
    assert agent.result("v2.0.pkg")["origin"] == "inbox:" + "o" * 94


def test_a_package_gone_before_its_turn_is_answered_not_an_error(agent: Agent) -> None:
    """Listed, then removed by its owner before the worker took it: a refusal in the answer file,
    no exception out of the inbox scan (the worker would log it as its own failure)."""
    agent.updates._take(inbox_dir(agent.cfg) / "gone.pkg")
    res = agent.result("gone.pkg")
    assert res["outcome"] == "refused" and res["origin"] == "inbox:gone.pkg"
    assert res["detail"].startswith("gone.pkg: ")
    assert agent.updates.state == "idle" and agent.reloads == 0


def test_a_root_owned_package_is_taken_by_an_agent_of_another_user(
    agent: Agent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent runs as its own user (uid 1234 here); root could replace the agent anyway, so a
    file root put into the inbox is taken, one of a third user is not."""
    monkeypatch.setattr(model_updates.os, "getuid", lambda: 1234)
    agent.drop(pkg(tmp_path, "2.0"))  # written by this test, as root
    agent.updates.scan_inbox()
    assert agent.result("v2.0.pkg")["outcome"] == "switched"
    dropped = agent.drop(pkg(tmp_path, "3.0"))
    os.chown(dropped, 1, 1)
    agent.updates.scan_inbox()
    assert agent.result("v3.0.pkg")["detail"].startswith(
        "v3.0.pkg is owned by uid 1, not by the agent's uid 1234 (or root): refused"
    )


def test_a_status_publish_that_fails_does_not_stop_the_install(
    agent: Agent, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> None:
        raise ConnectionError("broker gone")

    caplog.set_level("DEBUG", "edge_agent.model_update")
    agent.updates.publish = broken
    agent.drop(pkg(tmp_path, "2.0"))
    agent.updates.scan_inbox()
    assert agent.result("v2.0.pkg")["outcome"] == "switched" and agent.reloads == 1
    assert caplog.messages.count("status publish failed: broker gone") == 2  # "gating", the verdict


def test_the_status_block_names_a_store_it_cannot_describe(
    agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(cfg: Any) -> dict[str, Any]:
        raise EdgeAgentError("active.json: unreadable")

    monkeypatch.setattr(model_switch, "describe", broken)
    st = agent.updates.status()
    assert st["error"] == "active.json: unreadable"
    assert (st["state"], st["errors"], st["transfer"]) == ("idle", 0, None)


def test_an_error_inside_the_install_is_the_answer_once_not_a_crash_loop(
    agent: Agent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*a: Any, **kw: Any) -> dict[str, Any]:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(model_switch, "install", broken)
    dropped = agent.drop(pkg(tmp_path, "2.0"))
    agent.updates.scan_inbox()
    res = agent.result("v2.0.pkg")
    assert (res["outcome"], res["detail"]) == ("refused", "v2.0.pkg: RuntimeError: disk on fire")
    assert res["origin"] == "inbox:v2.0.pkg"
    assert not dropped.exists() and not dropped.with_suffix(".request.json").exists()
    assert agent.updates.state == "idle" and agent.updates._in_progress is None and agent.reloads == 0


def test_packages_are_taken_oldest_first(
    agent: Agent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    order: list[str] = []

    def install(cfg: Any, package: Path, **kw: Any) -> dict[str, Any]:
        order.append(package.name)
        return model_switch.record(agent.updates.store, "t", None, model_switch.Outcome.REFUSED, "x")

    monkeypatch.setattr(model_switch, "install", install)
    now = time.time()
    for name, age in (("b.pkg", 30), ("a.pkg", 10), ("c.pkg", 20)):
        p = inbox_dir(agent.cfg) / name
        p.write_bytes(b"x")
        os.utime(p, (now - age, now - age))
    agent.updates.scan_inbox()
    assert order == ["b.pkg", "c.pkg", "a.pkg"]


@pytest.mark.skipif(os.geteuid() != 0, reason="files of another user need root to set up")
@pytest.mark.parametrize("whose", ["package", "request"])
def test_a_file_of_another_user_in_the_inbox_is_refused(agent: Agent, tmp_path: Path, whose: str) -> None:
    dropped = agent.drop(pkg(tmp_path, "2.0"), {"origin": "cli", "force": True})
    target = dropped if whose == "package" else dropped.with_suffix(".request.json")
    os.chown(target, 65534, 65534)
    agent.updates.scan_inbox()
    res = agent.result("v2.0.pkg")
    assert res["outcome"] == "refused" and agent.state().current is None
    assert res["detail"] == (
        f"{target.name} is owned by uid 65534, not by the agent's uid 0 (or root): refused, "
        "only the service's user may drop packages into the inbox"
    )
    assert res["origin"] == "inbox:v2.0.pkg"  # the foreign request was not read
    assert not dropped.exists()


def test_a_symlink_in_the_inbox_is_refused(agent: Agent, tmp_path: Path) -> None:
    real = pkg(tmp_path, "2.0")
    link = inbox_dir(agent.cfg) / "link.pkg"
    link.symlink_to(real)
    agent.updates.scan_inbox()
    res = agent.result("link.pkg")
    assert (res["outcome"], res["detail"]) == ("refused", "link.pkg is not a regular file")
    assert real.exists() and agent.state().current is None


def test_a_clean_stop_mid_gate_does_not_count_the_attempt(agent: Agent, tmp_path: Path) -> None:
    req = inbox_dir(agent.cfg) / "x.request.json"
    for before, after in ((2, 1), (1, 0), (0, 0)):
        req.write_text(json.dumps({"origin": "cli", "attempts": before}))
        agent.updates._in_progress = req
        agent.updates.stop()
        assert json.loads(req.read_text()) == {"origin": "cli", "attempts": after}
    req.write_text(json.dumps({"origin": "cli"}))  # no count yet: the one running is the first
    agent.updates.stop()
    assert json.loads(req.read_text()) == {"origin": "cli", "attempts": 0}


def test_the_trial_passes_and_is_cleared(
    agent: Agent, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", "edge_agent.model_update")
    agent.drop(pkg(tmp_path, "2.0"))
    agent.updates.scan_inbox()
    vid = agent.state().current
    agent.updates.build_models(agent.cfg)  # the reload: the new version starts its trial
    assert agent.state().trial.running is True
    agent.updates.start()
    for _ in range(3):
        agent.updates.on_frame(2)
    wait_until(lambda: agent.state().trial is None, 10, "the trial confirmed")
    assert agent.state().current == vid and agent.updates._watch is None
    wait_until(
        lambda: f"model {vid} passed its trial" in [r.getMessage() for r in caplog.records],
        10,
        "the log line",
    )


def test_a_collapse_of_the_detection_rate_rolls_back_and_reloads(agent: Agent, tmp_path: Path) -> None:
    for _ in range(10):
        agent.updates.on_frame(4)  # the old model: 4 detections per frame
    assert agent.updates.detection_rate() == 4.0
    agent.drop(pkg(tmp_path, "2.0"))
    agent.updates.scan_inbox()
    assert agent.state().trial.baseline_rate == 4.0
    agent.updates.build_models(agent.cfg)
    assert agent.updates.detection_rate() is None  # the new model's count starts empty
    agent.updates.start()
    reloads = agent.reloads
    for _ in range(3):
        agent.updates.on_frame(1)  # 1/frame < 0.5 x 4
    wait_until(lambda: agent.state().current is None, 10, "the rollback to the config model")
    wait_until(lambda: agent.reloads == reloads + 1, 10, "a reload after the rollback")
    last = agent.state().last
    assert last["outcome"] == "rolled_back" and last["origin"] == "agent"
    assert "detection rate collapsed" in last["detail"]


def test_the_detection_rate_needs_ten_frames_and_keeps_the_last_300(agent: Agent) -> None:
    for _ in range(9):
        agent.updates.on_frame(3)
    assert agent.updates.detection_rate() is None
    agent.updates.on_frame(13)
    assert agent.updates.detection_rate() == 4.0
    for _ in range(300):
        agent.updates.on_frame(1)
    assert agent.updates.detection_rate() == 1.0


def test_an_unclean_end_during_the_trial_rolls_back_at_the_next_start(tmp_path: Path) -> None:
    a = Agent(tmp_path)
    a.drop(pkg(tmp_path, "2.0"))
    a.updates.scan_inbox()
    vid = a.state().current
    a.updates.build_models(a.cfg)
    assert a.state().trial.running is True
    release_run_lock(a.cfg)  # the process "dies" here: no stop(), the running flag stays
    b = Agent(tmp_path)
    try:
        st = b.state()
        assert st.current is None and st.trial is None
        assert (st.last["outcome"], st.last["origin"], st.last["detail"]) == (
            "rolled_back",
            "agent",
            f"{vid} -> config model: the agent ended uncleanly while it was on trial "
            "(crash, watchdog kill or power cut)",
        )
    finally:
        b.close()


def test_a_clean_stop_keeps_the_trial_for_the_next_start(tmp_path: Path) -> None:
    a = Agent(tmp_path)
    a.drop(pkg(tmp_path, "2.0"))
    a.updates.scan_inbox()
    vid = a.state().current
    a.updates.build_models(a.cfg)
    a.close()
    assert a.state().trial.running is False
    b = Agent(tmp_path)
    try:
        assert b.state().current == vid and b.state().trial.running is True
    finally:
        b.close()


def test_a_version_that_no_longer_loads_is_rolled_back_at_start(tmp_path: Path) -> None:
    a = Agent(tmp_path)
    a.drop(pkg(tmp_path, "2.0"))
    a.updates.scan_inbox()
    vid = a.state().current
    a.close()
    (a.updates.store.versions / vid / "detector.onnx").write_bytes(b"damaged")
    b = Agent(tmp_path)
    try:
        assert b.state().current is None
        assert b.state().last["detail"].startswith(f"{vid} -> config model: does not load: ")
        assert b.state().last["origin"] == "agent"
    finally:
        b.close()


def test_start_writes_the_pid_file_and_stop_removes_it(tmp_path: Path) -> None:
    a = Agent(tmp_path)
    a.updates.start()
    assert pid_file(a.cfg).read_text() == f"{os.getpid()}\n"
    assert oct(inbox_dir(a.cfg).stat().st_mode & 0o777) == "0o700"
    a.close()
    assert not pid_file(a.cfg).exists()


def test_an_inbox_that_cannot_be_made_disables_updates_with_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Inference does not depend on updates: no worker, no pid file, one error line naming both
    places and the cause; stop() is still clean."""
    (tmp_path / "file").write_text("not a folder")
    cfg = load_config(write_config(tmp_path, extra=f'[model_update]\ninbox = "{tmp_path}/file/inbox"\n'))
    u = ModelUpdates(cfg, lambda: None)
    u.build_models(cfg)
    u.start()
    try:
        assert u._thread is None and not pid_file(cfg).exists()
        assert caplog.messages == [
            f"model updates disabled: {u.store.root} or {tmp_path}/file/inbox is not writable "
            f"([Errno 20] Not a directory: '{tmp_path}/file/inbox')"
        ]
    finally:
        u.stop()
        release_run_lock(cfg)


def test_the_worker_is_a_named_daemon_thread(agent: Agent) -> None:
    """Named for `py-spy dump` and the log; a daemon, so an agent leaving on an error without
    stop() is not held open by it."""
    agent.updates.start()
    t = agent.updates._thread
    assert t is not None and t.name == "model-updates" and t.daemon is True and t.is_alive()
    # the gate's onnxruntime threads inherit the worker's nice value: 10 below the loop's
    main = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    wait_until(
        lambda: (
            t.native_id is not None and os.getpriority(os.PRIO_PROCESS, t.native_id) == min(19, main + 10)
        ),
        10,
        "the worker niced",
    )


def test_a_configured_inbox_keeps_its_mode(tmp_path: Path) -> None:
    inbox = tmp_path / "drop"
    inbox.mkdir(mode=0o775)
    os.chmod(inbox, 0o775)
    a = Agent(tmp_path, extra=f'[model_update]\ninbox = "{inbox}"\n')
    assert inbox_dir(a.cfg) == inbox
    a.updates.start()
    try:
        assert oct(inbox.stat().st_mode & 0o777) == "0o775"
    finally:
        a.close()


def test_the_status_block_says_why_mqtt_delivery_is_off(tmp_path: Path) -> None:
    a = Agent(tmp_path)
    a.updates.start()
    try:
        st = a.updates.status()
    finally:
        a.close()
    assert st["state"] == "idle" and st["transfer"] is None and st["ring_frames"] is None
    assert st["receiver"] == {"alive": False, "off": "off (mqtt.enabled or model_update.mqtt is false)"}
    assert st["current"] == {"id": None, "model": a.cfg.detector.model}


def test_mqtt_delivery_without_trusted_keys_is_off(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from support import free_port

    cfg = load_config(write_config(tmp_path, port=free_port()))
    u = ModelUpdates(cfg, lambda: None)
    u.build_models(cfg)
    u.start()
    try:
        off = u.status()["receiver"]
    finally:
        u.stop()
        release_run_lock(cfg)
    assert off == {
        "alive": False,
        "off": "off: model_update.trusted_keys is empty (MQTT packages must be signed)",
    }
    assert (
        caplog.messages.count(
            "model updates over MQTT off: model_update.trusted_keys is empty (MQTT packages must be signed); "
            "see docs/threat-model.md"
        )
        == 1
    )


def test_a_completed_transfer_wakes_the_worker_at_once(agent: Agent) -> None:
    agent.updates._on_transfer({"transfer_id": "t", "complete": False})
    assert agent.updates._jobs.empty() and agent.published == 1
    agent.updates._on_transfer({"transfer_id": "t", "complete": True})
    assert agent.updates._jobs.get_nowait() == ("scan", None)
    assert agent.updates.status()["transfer"] == {"transfer_id": "t", "complete": True}
    agent.updates._on_transfer(None)
    assert agent.updates.transfer is None and agent.updates._jobs.empty()


def test_a_second_agent_on_the_state_dir_is_refused_naming_the_first(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path))
    model_switch.store_for(cfg).ensure()
    lock = model_switch.store_for(cfg).root / "run.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            f"fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"locked\n"
        pid_file(cfg).write_text(f"{holder.pid}\n")
        with pytest.raises(EdgeAgentError) as err:
            hold_run_lock(cfg)
        assert str(err.value) == (
            f"{cfg.device.state_dir}: another edge-agent run uses this state directory "
            f"(pid {holder.pid}); stop it first"
        )
        pid_file(cfg).write_text("garbage")
        with pytest.raises(EdgeAgentError, match="uses this state directory; stop it first"):
            hold_run_lock(cfg)
    finally:
        holder.kill()
        holder.wait(10)
    hold_run_lock(cfg)  # the holder is gone: its flock with it
    try:
        assert str(lock) in model_updates._RUN_LOCKS
        hold_run_lock(cfg)  # twice in one process is fine
    finally:
        release_run_lock(cfg)
    assert str(lock) not in model_updates._RUN_LOCKS


def test_the_status_block_counts_the_ring_when_it_is_on(tmp_path: Path) -> None:
    a = Agent(tmp_path, extra=TRIAL + "ring_frames = 5\n")
    try:
        assert a.updates.status()["ring_frames"] == 0  # on, and empty
    finally:
        a.close()


# ---- the worker, the trial and the status as the running agent meets them (issue 19) ----------


def trial_passes(a: Agent, frames: int = 3) -> None:
    """The reload onto the installed version, then good frames until the worker confirms it."""
    a.updates.build_models(a.cfg)
    assert a.state().trial is not None and a.state().trial.running is True
    for _ in range(frames):
        a.updates.on_frame(2)
    wait_until(lambda: a.state().trial is None, 10, "the trial confirmed")


def test_rollback_goes_to_the_previous_version_not_the_oldest(agent: Agent, tmp_path: Path) -> None:
    """2.0, 3.0 and 4.0 installed in turn, the first two confirmed; 4.0's detections collapse:
    the agent goes back to 3.0 (2.0 stays the one before it), not to 2.0 or the config's model."""
    agent.updates.start()
    vids = []
    for version in ("2.0", "3.0", "4.0"):
        if version == "4.0":
            for _ in range(10):
                agent.updates.on_frame(4)  # 3.0 finds 4 per frame: 4.0's baseline
        agent.drop(pkg(tmp_path, version))
        agent.updates.scan_inbox()
        assert agent.result(f"v{version}.pkg")["outcome"] == "switched"
        vids.append(agent.state().current)
        if version != "4.0":
            trial_passes(agent)
    agent.updates.build_models(agent.cfg)  # the reload onto 4.0: its trial starts
    reloads = agent.reloads
    for _ in range(3):
        agent.updates.on_frame(0)
    wait_until(lambda: agent.state().last["outcome"] == "rolled_back", 10, "the rollback of 4.0")
    st = agent.state()
    assert st.current == vids[1] and st.history == [vids[0]] and st.trial is None
    assert st.last["detail"].startswith(f"{vids[2]} -> {vids[1]}: detection rate collapsed")
    wait_until(lambda: agent.reloads == reloads + 1, 10, "the reload onto 3.0")
    assert not (agent.updates.store.versions / vids[2]).exists()  # the abandoned one is deleted


def test_a_transfer_over_mqtt_is_handed_to_the_gate_at_once(
    tmp_path: Path, broker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signed package pushed to the device's topic: the receiver assembles it into the inbox and
    the completed transfer wakes the worker (its inbox poll is 60 s here), which gates and
    switches it, asks for one reload and shows the transfer and the receiver's counts in the
    status; a clean stop ends the worker without waiting for its poll either."""
    from edge_agent.adapters.updates import signing
    from edge_agent.adapters.updates.package_file import transfer_parts
    from edge_agent.app.updates.push import push_package

    monkeypatch.setattr(model_updates, "INBOX_POLL_S", 60.0)
    key = tmp_path / "signing.key"
    pub = signing.generate_key(key)
    extra = TRIAL + f'trusted_keys = ["{pub}"]\n'
    cfg = load_config(write_config(tmp_path, port=broker.port, extra=extra))
    reloads: list[int] = []
    published: list[int] = []
    u = ModelUpdates(cfg, lambda: reloads.append(1))
    u.build_models(cfg)
    u.start(lambda: published.append(1))
    try:
        assert u._receiver is not None and u._receiver.subscribed.wait(10)
        package = pkg(tmp_path, "2.0", signature_key=key)
        tid = push_package(cfg, package, ["cam-1"], None)
        wait_until(lambda: u.store.state().last is not None, 20, "the verdict on the pushed package")
        st = u.store.state()
        assert st.last["outcome"] == "switched" and st.last["origin"] == f"mqtt:{tid}"
        assert st.last["signed_by_key"] == 0 and st.current.startswith("demo-2.0-")
        wait_until(lambda: reloads == [1], 10, "one reload")
        chunks = transfer_parts(package)[0].count
        status = u.status()
        assert status["transfer"] == {
            "transfer_id": tid,
            "received": chunks,
            "chunks": chunks,
            "complete": True,
        }
        rec = status["receiver"]
        assert rec["alive"] is True and rec["messages"] == chunks + 1  # the begin and each chunk
        assert (rec["refused"], rec["failed"], rec["restarts"], rec["transfers"]) == (0, 0, 0, 0)
        assert status["current"]["id"] == st.current and status["state"] == "idle"
        assert list(inbox_dir(cfg).iterdir()) == [inbox_dir(cfg) / f"{tid}.result.json"]
        assert len(published) >= 3  # the transfer, "gating", the verdict
    finally:
        u.stop()
        release_run_lock(cfg)
    assert u._thread is not None and not u._thread.is_alive()
    assert not u._receiver.alive()


def test_a_failing_job_is_logged_and_counted_and_the_worker_goes_on_supervising(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A rollback that raises (a store error) is one log line and one count in the status; the
    worker takes the next job (a trial confirmed) and still restarts the receiver's MQTT thread."""
    from support import free_port

    from edge_agent.adapters.updates import signing

    pub = signing.generate_key(tmp_path / "signing.key")
    cfg = load_config(write_config(tmp_path, port=free_port(), extra=TRIAL + f'trusted_keys = ["{pub}"]\n'))
    reloads: list[int] = []
    u = ModelUpdates(cfg, lambda: reloads.append(1))
    u.build_models(cfg)

    def broken(*a: Any, **kw: Any) -> dict[str, Any]:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(model_switch, "rollback", broken)
    caplog.set_level("INFO", "edge_agent.model_update")
    u.start()
    try:
        assert u.status()["errors"] == 0
        u._jobs.put(("rollback", ("demo-2.0-x", "detection rate collapsed")))
        wait_until(lambda: u.status()["errors"] == 1, 10, "the failed rollback counted")
        assert "model update: OSError: [Errno 28] No space left on device" in caplog.messages
        assert reloads == [] and u._thread is not None and u._thread.is_alive()
        u._jobs.put(("confirm", "demo-2.0-x"))  # the next job is done
        wait_until(lambda: "model demo-2.0-x passed its trial" in caplog.messages, 10, "the confirm")
        rec = u._receiver
        assert rec is not None
        rec._client.loop_stop()  # paho's thread ends: the worker restarts it at its next turn
        u._jobs.put(("scan", None))
        wait_until(lambda: u.status()["receiver"]["restarts"] == 1, 10, "the receiver restarted")
        assert u.status()["receiver"]["alive"] is True and u.status()["errors"] == 1
    finally:
        u.stop()
        release_run_lock(cfg)


def test_the_run_lock_is_released_for_the_next_run_and_never_follows_a_symlink(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = load_config(write_config(tmp_path))
    lock = model_switch.store_for(cfg).root / "run.lock"
    hold_run_lock(cfg)
    assert oct(lock.stat().st_mode & 0o777) == "0o640"
    release_run_lock(cfg)
    hold_run_lock(cfg)  # released means the flock is gone too, not only forgotten
    release_run_lock(cfg)
    lock.unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("kept")
    lock.symlink_to(elsewhere)  # planted by someone who may write the state dir
    caplog.set_level("DEBUG", "edge_agent.model_update")
    hold_run_lock(cfg)  # not taken, not followed: no error either
    assert str(lock) not in model_updates._RUN_LOCKS and elsewhere.read_text() == "kept"
    assert caplog.messages == [
        f"run lock {lock} not taken: [Errno 40] Too many levels of symbolic links: '{lock}'"
    ]


def test_a_stop_that_cannot_update_the_store_logs_it_and_still_releases_the_lock(
    agent: Agent, caplog: pytest.LogCaptureFixture
) -> None:
    agent.updates.start()
    pid = pid_file(agent.cfg)
    pid.unlink()
    pid.mkdir()  # the pid file cannot be removed
    agent.updates.stop()
    assert [m for m in caplog.messages if m.startswith("model store not updated at stop: ")] == [
        f"model store not updated at stop: [Errno 21] Is a directory: '{pid}'"
    ]
    hold_run_lock(agent.cfg)  # the next run may start


def mqtt_config(tmp_path: Path, port: int) -> Any:
    from edge_agent.adapters.updates import signing

    pub = signing.generate_key(tmp_path / "signing.key")
    return load_config(write_config(tmp_path, port=port, extra=TRIAL + f'trusted_keys = ["{pub}"]\n'))


def test_the_receiver_keeps_its_transfers_in_the_documented_private_folder(tmp_path: Path) -> None:
    """docs/threat-model.md: `models/transfers` is 0700 (partial packages of anyone's pushes)."""
    from support import free_port

    cfg = mqtt_config(tmp_path, free_port())
    u = ModelUpdates(cfg, lambda: None)
    u.build_models(cfg)
    u.start()
    try:
        transfers = u.store.root / "transfers"
        assert u._receiver is not None and u._receiver.dir == transfers
        assert oct(transfers.stat().st_mode & 0o777) == "0o700"
    finally:
        u.stop()
        release_run_lock(cfg)


def test_a_receiver_that_cannot_start_turns_mqtt_delivery_off_with_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The inbox and the worker go on (a local install still works); the status says why MQTT
    delivery is off."""
    from support import free_port

    cfg = mqtt_config(tmp_path, free_port())
    u = ModelUpdates(cfg, lambda: None)
    u.build_models(cfg)
    (u.store.root / "transfers").write_text("not a folder")
    u.start()
    try:
        errors = [m for m in caplog.messages if m.startswith("model updates over MQTT disabled: ")]
        assert len(errors) == 1 and "transfers" in errors[0]
        why = errors[0].removeprefix("model updates over MQTT disabled: ")
        assert u.status()["receiver"] == {"alive": False, "off": f"off: {why}"}
        assert u._thread is not None and u._thread.is_alive()
    finally:
        u.stop()
        release_run_lock(cfg)


def test_a_late_rollback_of_a_version_already_replaced_changes_nothing(agent: Agent, tmp_path: Path) -> None:
    """A collapse verdict queued for 2.0 while an install replaced it meanwhile: the worker must
    not roll back the model that runs now, nor reload."""
    agent.drop(pkg(tmp_path, "2.0"))
    agent.updates.scan_inbox()
    current = agent.state().current
    agent.updates.start(agent._publish)
    published = agent.published
    agent.updates._jobs.put(("rollback", ("demo-1.0-gone", "detection rate collapsed")))
    wait_until(lambda: agent.published > published, 10, "the worker took the job")
    agent.updates._jobs.put(("confirm", current))  # a marker: once done, the rollback was handled
    wait_until(lambda: agent.state().trial is None, 10, "the confirm after it")
    assert agent.state().current == current and agent.reloads == 1  # the install's only
    assert agent.state().last["outcome"] == "switched"


def test_the_running_worker_polls_the_inbox(agent: Agent, tmp_path: Path) -> None:
    """`model install` on a running agent only drops the package and its request: no wake-up, the
    worker finds it at its next poll and asks for the reload."""
    agent.updates.start(agent._publish)
    agent.drop(pkg(tmp_path, "2.0"), {"origin": "cli"})
    wait_until(lambda: (inbox_dir(agent.cfg) / "v2.0.result.json").exists(), 15, "the verdict")
    assert agent.result("v2.0.pkg")["outcome"] == "switched"
    wait_until(lambda: agent.reloads == 1, 10, "the reload")


def test_a_reload_during_the_trial_loads_the_version_on_trial_and_keeps_the_trial(
    agent: Agent, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """SIGHUP while the new version is on trial: its running flag is this process's own, not an
    unclean end; the reload gets the version's detector and the trial goes on."""
    agent.drop(pkg(tmp_path, "2.0"))
    agent.updates.scan_inbox()
    vid = agent.state().current
    caplog.set_level("INFO", "edge_agent.model_update")
    models = agent.updates.build_models(agent.cfg)  # the reload after the switch
    assert Path(models.detector.model.path) == agent.updates.store.versions / vid / "detector.onnx"
    again = agent.updates.build_models(agent.cfg)  # a SIGHUP during the trial
    st = agent.state()
    assert st.current == vid and st.trial is not None and st.trial.running is True
    assert Path(again.detector.model.path) == agent.updates.store.versions / vid / "detector.onnx"
    assert caplog.messages.count(f"model {vid} on trial for 0s") == 2


def test_the_default_inbox_is_the_documented_folder(tmp_path: Path) -> None:
    """docs/model-updates.md: `<state_dir>/models/inbox/`, where operators and scripts drop packages."""
    cfg = load_config(write_config(tmp_path))
    assert inbox_dir(cfg) == Path(cfg.device.state_dir) / "models" / "inbox"


def test_a_request_gone_at_stop_is_one_debug_line(agent: Agent, caplog: pytest.LogCaptureFixture) -> None:
    req = inbox_dir(agent.cfg) / "x.request.json"
    agent.updates._in_progress = req  # the gate's request, removed by its owner meanwhile
    caplog.set_level("DEBUG", "edge_agent.model_update")
    agent.updates.stop()
    assert f"request {req} not rewritten: [Errno 2] No such file or directory: '{req}'" in caplog.messages
    assert not req.exists()


def test_the_ring_keeps_frames_at_the_configured_interval_in_the_documented_folder(tmp_path: Path) -> None:
    """docs/model-updates.md: at most `ring_frames` JPEGs in `<state_dir>/models/ring/`, one per
    `ring_interval_s`; the status counts them."""
    import numpy as np

    a = Agent(tmp_path, extra=TRIAL + "ring_frames = 5\nring_interval_s = 60\n")
    try:
        frame = np.zeros((32, 32, 3), np.uint8)
        t0 = time.time() - 100
        kept = [a.updates.ring.offer(frame, now=t0 + t) for t in (0.0, 30.0, 61.0)]
        assert kept == [True, False, True]
        ring = Path(a.cfg.device.state_dir) / "models" / "ring"
        assert len(list(ring.glob("*.jpg"))) == 2 and a.updates.status()["ring_frames"] == 2
    finally:
        a.close()


def test_a_dangling_symlink_in_the_inbox_is_refused_and_the_packages_after_it_still_install(
    agent: Agent, tmp_path: Path
) -> None:
    """The scan sorted by the target's mtime: a link to nothing failed the whole scan at every
    poll, so no package behind it was ever installed."""
    link = inbox_dir(agent.cfg) / "gone.pkg"
    link.symlink_to(tmp_path / "nothing-here.pkg")
    agent.drop(pkg(tmp_path, "2.0"), {"origin": "cli", "force": True})
    agent.updates.scan_inbox()
    res = agent.result("gone.pkg")
    assert (res["outcome"], res["detail"]) == ("refused", "gone.pkg is not a regular file")
    assert agent.result("v2.0.pkg")["outcome"] == "switched"
    assert agent.state().current is not None and "-2.0-" in agent.state().current

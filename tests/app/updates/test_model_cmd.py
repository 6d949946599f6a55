"""`edge-agent model install|status|rollback|push` in process (``cli.main``, on purpose: mutmut
credits only in-process calls, see tests/support/runner.py): what an operator reads, the exit code,
and what reaches the running agent (its inbox, a SIGHUP) or the broker."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.updates import INT8, SAMPLES, make_zero_score, pack_in_process, trusted_key, write_config

from edge_agent.adapters.updates.package_file import transfer_parts
from edge_agent.app.cli.configfile import load_config
from edge_agent.app.cli.main import main
from edge_agent.app.updates.agent_side import inbox_dir, pid_file

if not INT8.is_file():  # pragma: no cover - the demo models are part of the repository
    pytest.skip(f"{INT8} missing", allow_module_level=True)

ONE_PROBE = sorted(SAMPLES.glob("*.jpg"))[:1]  # a gate on one image: these tests run per mutant


@pytest.fixture
def cfg_path(tmp_path: Path) -> Path:
    return write_config(tmp_path)


@pytest.fixture
def good(tmp_path: Path) -> Path:
    # signed: `model push` sends only signed packages (a device without keys installs it all the same)
    return pack_in_process(
        tmp_path / "v2.pkg", INT8, version="2.0", probe=ONE_PROBE, signature_key=trusted_key()[0]
    )


@pytest.fixture
def zero(tmp_path: Path) -> Path:
    model = make_zero_score(INT8, tmp_path / "zero.onnx")
    return pack_in_process(tmp_path / "zero.pkg", model, version="3.0", probe=ONE_PROBE)


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A live process to stand for the running agent's pid (it dies of the SIGHUP it is sent)."""
    # SIGHUP back to its default in the child: a shell started under nohup hands down "ignored",
    # and the stand-in would then outlive the signal the test waits for (a real agent sets its own)
    p = subprocess.Popen(["sleep", "60"], preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
    try:
        yield p
    finally:
        if p.poll() is None:
            p.kill()
        p.wait(10)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["-q", "model", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def state_of(cfg_path: Path) -> dict[str, Any]:
    cfg = load_config(cfg_path)
    return dict(json.loads((Path(cfg.device.state_dir) / "models" / "active.json").read_text()))


def test_install_without_an_agent_switches_prints_the_gate_and_exits_0(
    capsys: pytest.CaptureFixture[str], cfg_path: Path, good: Path
) -> None:
    rc, out, err = run(capsys, "install", str(good), "-c", str(cfg_path))
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("switched: gate on 1 probe images")
    assert lines[0].endswith("; no agent running: it loads this version at its next start")
    checks = [ln.split() for ln in lines[1:4]]
    assert [c[:2] for c in checks] == [
        ["detector", "recall_of_reference"],
        ["detector", "mean_iou"],
        ["detector", "mean_abs_conf_delta"],
    ]
    assert all(c[-1] == "ok" for c in checks)
    assert "(>=" in lines[1] and "0.9)" in lines[1] and "(<=" in lines[3] and "0.1)" in lines[3]
    assert lines[4].startswith(
        "  reference detections 3.0, candidate detections 3.0, candidate max score 0.9"
    )
    assert len(lines) == 5
    st = state_of(cfg_path)
    assert st["current"].startswith("demo-2.0-") and st["last"]["origin"] == "cli"


def test_install_refused_by_the_gate_exits_1_with_the_failed_checks(
    capsys: pytest.CaptureFixture[str], cfg_path: Path, zero: Path
) -> None:
    rc, out, _ = run(capsys, "install", str(zero), "-c", str(cfg_path))
    assert rc == 1
    assert out.startswith("refused: ") and "no agent running" not in out
    assert " FAIL\n" in out
    assert state_of(cfg_path)["current"] is None  # still the config's model


def test_install_force_switches_past_the_gate_and_json_prints_the_whole_outcome(
    capsys: pytest.CaptureFixture[str], cfg_path: Path, zero: Path
) -> None:
    rc, out, _ = run(capsys, "install", str(zero), "-c", str(cfg_path), "--force", "--json")
    assert rc == 0
    res = json.loads(out)
    assert res["outcome"] == "switched" and "(forced)" in res["detail"] and res["origin"] == "cli"
    assert res["detail"].endswith("; no agent running: it loads this version at its next start")
    assert state_of(cfg_path)["trial"]["forced"] is True


def test_install_of_the_same_version_again_is_unchanged_and_exit_0(
    capsys: pytest.CaptureFixture[str], cfg_path: Path, good: Path
) -> None:
    assert run(capsys, "install", str(good), "-c", str(cfg_path))[0] == 0
    rc, out, _ = run(capsys, "install", str(good), "-c", str(cfg_path))
    assert rc == 0 and out.startswith("unchanged: ") and "no agent running" not in out


def test_an_older_version_needs_allow_downgrade(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cfg_path: Path, good: Path
) -> None:
    newer = pack_in_process(tmp_path / "v3.pkg", INT8, version="3.0", probe=ONE_PROBE)
    assert run(capsys, "install", str(newer), "-c", str(cfg_path))[0] == 0
    rc, out, _ = run(capsys, "install", str(good), "-c", str(cfg_path))
    assert rc == 1 and out.startswith("refused: ")
    rc, out, _ = run(capsys, "install", str(good), "-c", str(cfg_path), "--allow-downgrade")
    assert rc == 0 and out.startswith("switched: ")
    assert state_of(cfg_path)["current"].startswith("demo-2.0-")


def test_install_of_a_missing_file_is_one_line(capsys: pytest.CaptureFixture[str], cfg_path: Path) -> None:
    rc, out, err = run(capsys, "install", "/no/such.pkg", "-c", str(cfg_path))
    assert rc == 1 and out == ""
    assert err == "edge-agent model: error: /no/such.pkg: no such package file\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="a state dir owned by another user needs root to set up")
@pytest.mark.parametrize("action", ["install", "rollback"])
@pytest.mark.parametrize(("uid", "shown", "sudo"), [(65534, None, None), (54321, "#54321", "'#54321'")])
def test_a_state_dir_of_another_user_is_refused_with_the_command_to_run(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    cfg_path: Path,
    good: Path,
    action: str,
    uid: int,
    shown: str | None,
    sudo: str | None,
) -> None:
    """The refusal names the owner and the command to run instead, ready to paste (a uid without
    a user name is "#UID" for sudo, quoted for the shell)."""
    import pwd

    if shown is None:
        try:
            shown = sudo = pwd.getpwuid(uid).pw_name
        except KeyError:  # pragma: no cover - a system without "nobody"
            pytest.skip("no user 65534 here")
    state = Path(load_config(cfg_path).device.state_dir)
    state.mkdir()
    os.chown(state, uid, uid)
    args = ["install", str(good)] if action == "install" else ["rollback"]
    monkeypatch.setattr("sys.argv", ["edge-agent", "model", *args, "-c", str(cfg_path)])
    rc, out, err = run(capsys, *args, "-c", str(cfg_path))
    assert rc == 1 and out == ""
    assert err == (
        f"edge-agent model: error: {state} belongs to {shown}, this is uid 0: files written now would "
        f"not be the service's; run it as that user: sudo -u {sudo} edge-agent model {' '.join(args)} "
        f"-c {cfg_path}\n"
    )
    assert not (state / "models").exists()  # nothing written as root


def test_install_hands_the_package_to_the_running_agent_and_prints_its_verdict(
    capsys: pytest.CaptureFixture[str], cfg_path: Path, good: Path
) -> None:
    """The agent (this process's ModelUpdates worker, as `edge-agent run` has it) takes the package
    from its inbox; the command prints the verdict it wrote back and removes the answer file."""
    from edge_agent.app.updates.agent_side import ModelUpdates, release_run_lock

    cfg = load_config(cfg_path)
    reloads: list[int] = []
    updates = ModelUpdates(cfg, lambda: reloads.append(1))
    updates.build_models(cfg)
    updates.start()
    try:
        assert pid_file(cfg).read_text() == f"{os.getpid()}\n"
        rc, out, err = run(capsys, "install", str(good), "-c", str(cfg_path), "--timeout", "60", "--json")
    finally:
        updates.stop()
        release_run_lock(cfg)
    assert rc == 0, err
    assert f"handed {good} to the running agent (pid {os.getpid()}); waiting for the gate" in err
    res = json.loads(out)  # --json holds for the agent's verdict too
    assert res["outcome"] == "switched" and res["origin"] == "cli"
    assert res["detail"].startswith("gate on 1 probe images") and "no agent running" not in res["detail"]
    assert reloads == [1]
    assert list(inbox_dir(cfg).iterdir()) == []  # package, request and answer all gone
    assert state_of(cfg_path)["last"]["origin"] == "cli"


def test_install_to_an_agent_that_never_answers_times_out_with_one_line(
    capsys: pytest.CaptureFixture[str], cfg_path: Path, good: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    cfg = load_config(cfg_path)
    pid_file(cfg).parent.mkdir(parents=True)
    pid_file(cfg).write_text(f"{sleeper.pid}\n")
    rc, out, err = run(capsys, "install", str(good), "-c", str(cfg_path), "--force", "--timeout", "0.5")
    assert rc == 1 and out == ""
    assert err.endswith(
        "edge-agent model: error: no answer from the agent within 0s; see `edge-agent model status`\n"
    )
    reqs = list(inbox_dir(cfg).glob("*.request.json"))
    assert len(reqs) == 1 and reqs[0].stem.startswith("cli-")
    assert json.loads(reqs[0].read_text()) == {
        "origin": "cli",
        "force": True,
        "allow_downgrade": False,
        "allow_rolled_back": False,
    }
    pkg = reqs[0].with_name(reqs[0].name.replace(".request.json", ".pkg"))
    assert pkg.read_bytes() == good.read_bytes()
    assert oct(inbox_dir(cfg).stat().st_mode & 0o777) == "0o700"
    assert sleeper.poll() is None  # an install never signals the agent


def test_without_timeout_install_waits_for_the_agent_as_long_as_its_help_says(
    capsys: pytest.CaptureFixture[str],
    cfg_path: Path,
    good: Path,
    sleeper: subprocess.Popen[bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the operator's plain `model install PKG`: no --timeout. The command's clock is a fake one its
    # sleeps advance, so the whole default wait passes at once
    from types import SimpleNamespace

    from edge_agent.app.updates import model_cmd

    with pytest.raises(SystemExit):
        main(["model", "install", "--help"])
    promised = re.search(r"agent \(default: ([\d.]+)\)", " ".join(capsys.readouterr().out.split()))
    assert promised is not None
    now = [1000.0]
    monkeypatch.setattr(
        model_cmd,
        "time",
        SimpleNamespace(monotonic=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s)),
    )
    cfg = load_config(cfg_path)
    pid_file(cfg).parent.mkdir(parents=True)
    pid_file(cfg).write_text(f"{sleeper.pid}\n")
    rc, _, err = run(capsys, "install", str(good), "-c", str(cfg_path))
    assert rc == 1
    waited = float(promised.group(1))
    assert err.endswith(f"no answer from the agent within {waited:.0f}s; see `edge-agent model status`\n")
    assert waited <= now[0] - 1000.0 < waited + 1  # it did wait that long, polling


def test_a_stale_pid_file_is_no_running_agent(
    capsys: pytest.CaptureFixture[str], cfg_path: Path, good: Path
) -> None:
    from edge_agent.app.updates.model_cmd import agent_pid

    cfg = load_config(cfg_path)
    pid_file(cfg).parent.mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait(10)
    for text in (f"{dead.pid}\n", "not a pid\n"):
        pid_file(cfg).write_text(text)
        assert agent_pid(cfg) is None
    pid_file(cfg).write_text(f" {os.getpid()}\n")
    assert agent_pid(cfg) == os.getpid()
    pid_file(cfg).write_text(f"{dead.pid}\n")
    rc, out, _ = run(capsys, "install", str(good), "-c", str(cfg_path))
    assert rc == 0 and "no agent running" in out  # installed by the command itself, not handed over


def test_status_after_an_install_names_version_trial_and_last_event(
    capsys: pytest.CaptureFixture[str], cfg_path: Path, good: Path
) -> None:
    import time

    rc, out, _ = run(capsys, "status", "-c", str(cfg_path))
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == f"current   the config's model: {load_config(cfg_path).detector.model}"
    assert lines[1] == "previous  -"
    assert lines[2] == "agent     not running, update state -"
    assert len(lines) == 3
    assert run(capsys, "install", str(good), "-c", str(cfg_path))[0] == 0
    rc, out, _ = run(capsys, "status", "-c", str(cfg_path))
    lines = out.splitlines()
    assert rc == 0
    assert lines[0].startswith("current   demo 2.0  detector sha256 ") and len(lines[0].split()[-1]) == 64
    assert lines[1] == "previous  config model"
    st = state_of(cfg_path)
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(st["trial"]["since"]))
    assert lines[2] == f"trial     since {since}"
    assert lines[3] == "agent     not running, update state -"
    assert lines[4].startswith("last      20") and lines[4].endswith(
        " switched (cli): gate on 1 probe images" + lines[4].split("gate on 1 probe images", 1)[1]
    )
    assert len(lines) == 5


def test_status_names_the_history_newest_first_and_a_forced_trial(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cfg_path: Path, good: Path, zero: Path
) -> None:
    import time

    assert run(capsys, "install", str(good), "-c", str(cfg_path))[0] == 0
    v2 = state_of(cfg_path)["current"]
    assert run(capsys, "install", str(zero), "-c", str(cfg_path), "--force")[0] == 0
    st = state_of(cfg_path)
    st["trial"]["since"], st["last"]["at"] = 1_000_000_000.0, 1_100_000_000.0  # not "now": 2001, 2004
    active = Path(load_config(cfg_path).device.state_dir) / "models" / "active.json"
    active.write_text(json.dumps(st))
    rc, out, _ = run(capsys, "status", "-c", str(cfg_path))
    lines = out.splitlines()
    assert rc == 0
    assert lines[1] == f"previous  {v2}, config model"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(st["trial"]["since"]))
    assert lines[2] == f"trial     since {since} (forced past the gate)"
    at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(st["last"]["at"]))
    assert lines[4] == f"last      {at} switched (cli): {st['last']['detail']}"
    rc, out, _ = run(capsys, "status", "-c", str(cfg_path), "--json")
    assert out.startswith('{\n  "current": {\n    "name": "demo",\n') and out.endswith("\n}\n")
    assert json.loads(out)["history"] == [None, v2]


def test_status_json_shows_the_live_update_state_of_a_running_agent(
    capsys: pytest.CaptureFixture[str], cfg_path: Path
) -> None:
    import time

    cfg = load_config(cfg_path)
    status_file = Path(cfg.health.status_file)
    status_file.parent.mkdir(parents=True)
    live = {"state": "receiving", "transfer": {"transfer_id": "t1", "received": 3, "chunks": 9}}
    status_file.write_text(json.dumps({"ts": time.time(), "state": "running", "model_update": live}))
    pid_file(cfg).parent.mkdir(parents=True)
    pid_file(cfg).write_text(f"{os.getpid()}\n")
    rc, out, _ = run(capsys, "status", "-c", str(cfg_path), "--json")
    info = json.loads(out)
    assert rc == 0
    assert (info["agent"], info["state"], info["transfer"]) == ("running", "receiving", live["transfer"])
    rc, out, _ = run(capsys, "status", "-c", str(cfg_path))
    assert "agent     running, update state receiving\n" in out
    assert "transfer  t1: 3/9 chunks\n" in out
    # a status file older than 30 s is a dead agent's: its update state is not shown
    status_file.write_text(json.dumps({"ts": time.time() - 30.6, "state": "running", "model_update": live}))
    info = json.loads(run(capsys, "status", "-c", str(cfg_path), "--json")[1])
    assert (info["state"], info["transfer"]) == (None, None)


def test_rollback_signals_the_running_agent_to_reload(
    capsys: pytest.CaptureFixture[str], cfg_path: Path, good: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    assert run(capsys, "install", str(good), "-c", str(cfg_path))[0] == 0
    vid = state_of(cfg_path)["current"]
    cfg = load_config(cfg_path)
    pid_file(cfg).write_text(f"{sleeper.pid}\n")
    rc, out, _ = run(capsys, "rollback", "-c", str(cfg_path))
    assert rc == 0
    assert out == (
        f"rolled_back: {vid} -> config model: requested with `edge-agent model rollback`; "
        f"agent pid {sleeper.pid} reloading\n"
    )
    assert sleeper.wait(10) == -signal.SIGHUP
    assert state_of(cfg_path)["current"] is None


def test_rollback_with_nothing_to_go_back_to_exits_1_and_signals_nobody(
    capsys: pytest.CaptureFixture[str], cfg_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    cfg = load_config(cfg_path)
    pid_file(cfg).parent.mkdir(parents=True)
    pid_file(cfg).write_text(f"{sleeper.pid}\n")
    rc, out, _ = run(capsys, "rollback", "-c", str(cfg_path))
    assert rc == 1 and out.startswith("refused: ") and "reloading" not in out
    assert sleeper.poll() is None


def test_rollback_without_an_agent_only_changes_the_pointer(
    capsys: pytest.CaptureFixture[str], cfg_path: Path, good: Path
) -> None:
    assert run(capsys, "install", str(good), "-c", str(cfg_path))[0] == 0
    rc, out, _ = run(capsys, "rollback", "-c", str(cfg_path))
    assert rc == 0 and out.startswith("rolled_back: ") and "reloading" not in out


# ---- push: every argument checked before the config is read or a broker reached -------------


NAMES = "expected 1 to 64 of [A-Za-z0-9_.-]"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--device", "bad/id"], "--device 'bad/id': expected a device id of 1 to 64 of [A-Za-z0-9_.-]"),
        (
            ["--device", "x" * 100],
            f"--device '{'x' * 70}': expected a device id of 1 to 64 of [A-Za-z0-9_.-]",
        ),
        (["--device", "x" * 65], f"--device '{'x' * 65}': expected a device id of 1 to 64 of [A-Za-z0-9_.-]"),
        (["--device", "cam-1\n"], "--device 'cam-1\\n': expected a device id of 1 to 64 of [A-Za-z0-9_.-]"),
        (["--device", ""], "--device '': expected a device id of 1 to 64 of [A-Za-z0-9_.-]"),
        (
            ["--device", "cam-1", "--device", "a b"],
            "--device 'a b': expected a device id of 1 to 64 of [A-Za-z0-9_.-]",
        ),
        (["--group", "a/#"], f"--group 'a/#': {NAMES}"),
        (["--group", "g" * 100], f"--group '{'g' * 70}': {NAMES}"),
        (["--group", "g\n"], f"--group 'g\\n': {NAMES}"),
        (["--device", "cam-1", "--wait", "-1"], "--wait -1.0: expected seconds >= 0"),
        (["--device", "cam-1", "--wait", "nan"], "--wait nan: expected seconds >= 0"),
        (["--device", "cam-1", "--wait", "inf"], "--wait inf: expected seconds >= 0"),
        (["--group", "g", "--wait", "1", "--expect", "-1"], "--expect -1: expected a number of devices >= 0"),
        (
            ["--device", "cam-1", "--wait", "5", "--expect", "3"],
            "--expect N counts the members of a --group; with --device the list is the expectation",
        ),
        (
            ["--group", "g1", "--expect", "3"],
            "--expect N needs --wait S (how long to wait for the N verdicts)",
        ),
        (
            ["--device", "cam-1", "--transfer-id", "../x"],
            "--transfer-id: transfer id '../x': expected 1 to 64 of [A-Za-z0-9_-]",
        ),
        (
            ["--device", "cam-1", "--force"],
            "model push --force: refused; devices never take 'force' from the network. Sign the package, "
            "or run `edge-agent model install --force PACKAGE` on the device",
        ),
    ],
)
def test_push_argument_mistakes_are_one_line_and_nothing_is_sent(
    capsys: pytest.CaptureFixture[str], good: Path, args: list[str], says: str
) -> None:
    rc, out, err = run(capsys, "push", str(good), "-c", "/nonexistent.toml", *args)
    assert rc == 1 and out == ""
    assert err == f"edge-agent model: error: {says}\n"


@pytest.mark.parametrize(
    "args",
    [
        ["--device", "x" * 64, "--device", "A_b.c-9"],
        ["--group", "g" * 64, "--wait", "0"],
        ["--group", "g", "--wait", "1", "--expect", "0"],
        ["--group", "g", "--wait", "1", "--expect", "2"],
        ["--device", "cam-1", "--transfer-id", "0123456789abcdef"],
    ],
)
def test_push_arguments_at_their_limits_pass_the_checks(
    capsys: pytest.CaptureFixture[str], good: Path, args: list[str]
) -> None:
    # they reach the config: a missing one is the next error, not an argument refusal
    rc, _, err = run(capsys, "push", str(good), "-c", "/nonexistent.toml", *args)
    assert rc == 1 and err.startswith("edge-agent model: error: /nonexistent.toml: config file not found"), (
        err
    )


def test_push_of_a_missing_package_is_one_line(capsys: pytest.CaptureFixture[str], cfg_path: Path) -> None:
    rc, out, err = run(capsys, "push", "/no/such.pkg", "-c", str(cfg_path), "--device", "cam-1")
    assert (rc, out) == (1, "")
    assert err == "edge-agent model: error: /no/such.pkg: no such package file\n"


def test_push_sends_the_package_and_reports_each_devices_verdict(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, broker: Any, good: Path
) -> None:
    """Two devices named, one answers on its retained status topic, the other never does: the
    command prints both, waits no longer than --wait and exits 1 for the silent one."""
    from support.mqtt import Collector

    cfg_path = write_config(tmp_path, port=broker.port)
    topics = Collector(broker.port, "edge/+/model/#", client_id="model-watch")
    answered = threading.Event()
    tid = "0123456789abcdef"

    def device_answers() -> None:
        topics.wait_until(lambda c: any("/chunk/" in t for t, _, _ in c.messages), 20, "a chunk")
        status = {
            "device_id": "cam-1",
            "model_update": {"last": {"origin": f"mqtt:{tid}", "outcome": "switched", "detail": "ok"}},
        }
        pub = Collector(broker.port, "nothing/here", client_id="fake-cam-1")
        pub.client.publish("edge/cam-1/status", json.dumps(status), qos=1, retain=True).wait_for_publish(5)
        pub.close()
        answered.set()

    t = threading.Thread(target=device_answers, daemon=True)
    t.start()
    rc, out, err = run(
        capsys,
        "push",
        str(good),
        "-c",
        str(cfg_path),
        "--device",
        "cam-1",
        "--device",
        "cam-2",
        "--transfer-id",
        tid,
        "--wait",
        "3",
    )
    t.join(10)
    topics.close()
    assert answered.is_set()
    assert rc == 1, err
    assert out.splitlines() == [
        f"pushed {good} as transfer {tid}",
        "cam-1: switched: ok",
        "cam-2: no answer",
    ]
    begins = [json.loads(p) for t_, p, _ in topics.messages if t_.endswith("/begin")]
    assert [b["transfer_id"] for b in begins] == [tid, tid]


def _verdicts(port: int, tid: str, outcomes: dict[str, str]) -> None:
    """Retained status messages of devices that already judged transfer ``tid``."""
    from support.mqtt import Collector

    pub = Collector(port, "nothing/here", client_id="fake-devices")
    for dev, outcome in outcomes.items():
        body = {
            "device_id": dev,
            "model_update": {"last": {"origin": f"mqtt:{tid}", "outcome": outcome, "detail": "d"}},
        }
        pub.client.publish(f"edge/{dev}/status", json.dumps(body), qos=1, retain=True).wait_for_publish(5)
    pub.close()


def test_push_to_a_group_without_wait_sends_and_exits_0(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, broker: Any, good: Path
) -> None:
    from support.mqtt import Collector

    cfg_path = write_config(tmp_path, port=broker.port)
    topics = Collector(broker.port, "edge/#", client_id="group-watch")
    rc, out, err = run(capsys, "push", str(good), "-c", str(cfg_path), "--group", "north")
    assert rc == 0, err
    lines = out.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"pushed {good} as transfer ")
    tid = lines[0].rsplit(" ", 1)[1]
    assert len(tid) == 16 and all(c in "0123456789abcdef" for c in tid)
    assert "does not name group 'north'" in err  # the package is for fleet-a: said before sending
    chunks = transfer_parts(good)[0].count
    topics.wait_until(lambda c: sum("/chunk/" in t for t, _, _ in c.messages) == chunks, 30, "every chunk")
    topics.close()
    begin = json.loads(next(p for t, p, _ in topics.messages if t == "edge/groups/north/model/begin"))
    assert begin["transfer_id"] == tid and set(begin) == {
        "transfer_id",
        "manifest",
        "signature",
        "cancel_sha256",
    }
    assert {t.rsplit("/chunk/", 1)[0] for t, _, _ in topics.messages} == {
        "edge/groups/north/model",
        "edge/groups/north/model/begin",
    }


@pytest.mark.parametrize(
    ("outcomes", "args", "rc"),
    [
        # --wait 20: every expected verdict is there at once, so the command must not sit out the wait
        (
            {"cam-1": "switched", "cam-2": "switched"},
            ["--device", "cam-1", "--device", "cam-2", "--wait", "20"],
            0,
        ),
        (
            {"cam-1": "switched", "cam-2": "refused"},
            ["--device", "cam-1", "--device", "cam-2", "--wait", "20"],
            1,
        ),
        ({"a": "switched", "b": "switched"}, ["--group", "g", "--expect", "2", "--wait", "20"], 0),
        ({"a": "switched"}, ["--group", "g", "--expect", "2", "--wait", "1"], 1),  # one of the two expected
        ({"a": "switched", "b": "rolled_back"}, ["--group", "g", "--expect", "2", "--wait", "20"], 1),
    ],
)
def test_push_exit_code_is_0_only_when_every_expected_device_switched(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    broker: Any,
    good: Path,
    outcomes: dict[str, str],
    args: list[str],
    rc: int,
) -> None:
    tid = "feedc0ffee000001"
    _verdicts(broker.port, tid, outcomes)  # retained: the watcher sees them as it subscribes
    cfg_path = write_config(tmp_path, port=broker.port)
    import time

    t0 = time.monotonic()
    got, out, err = run(capsys, "push", str(good), "-c", str(cfg_path), *args, "--transfer-id", tid)
    assert time.monotonic() - t0 < 10, "waited for verdicts that were all in"
    assert got == rc, (out, err)
    assert out.splitlines()[1:] == [f"{d}: {o}: d" for d, o in sorted(outcomes.items())]


def test_push_without_wait_does_not_wait_for_verdicts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, broker: Any, good: Path
) -> None:
    cfg_path = write_config(tmp_path, port=broker.port)
    rc, out, _ = run(capsys, "push", str(good), "-c", str(cfg_path), "--device", "cam-1", "--device", "cam-2")
    assert rc == 0 and len(out.splitlines()) == 1 and out.startswith(f"pushed {good} as transfer ")


def test_the_verdict_lists_classifier_checks_and_survives_a_gate_without_metrics(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from edge_agent.app.updates.model_cmd import _print_result

    check = {"name": "top1_agreement", "value": 0.5, "op": ">=", "limit": 0.9, "passed": False}
    res = {
        "outcome": "refused",
        "detail": "gate failed",
        "gate": {"detector": {"checks": []}, "classifier": {"checks": [check]}, "candidate_max_score": 0.7},
    }
    assert _print_result(res, False) == 1
    assert capsys.readouterr().out.splitlines() == [
        "refused: gate failed",
        "  classifier top1_agreement         0.5  (>= 0.9)  FAIL",
        "  reference detections None, candidate detections None, candidate max score 0.7",
    ]
    assert _print_result(res, True) == 1
    out = capsys.readouterr().out
    assert out.startswith('{\n  "outcome": "refused",\n  "detail"') and json.loads(out) == res


def test_push_refuses_a_package_that_names_no_device_or_group_and_sends_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Every device would refuse it at its begin: said once, before the broker is reached (none
    listens on the config's port)."""
    from support import free_port

    pkg = pack_in_process(
        tmp_path / "local.pkg",
        INT8,
        version="2.0",
        signature_key=trusted_key()[0],
        for_devices=[],
        for_groups=[],
    )
    cfg_path = write_config(tmp_path, port=free_port())
    rc, out, err = run(capsys, "push", str(pkg), "-c", str(cfg_path), "--device", "cam-1")
    assert rc == 1 and out == ""
    assert err == (
        f"edge-agent model: error: {pkg}: names no device or group; devices refuse it over MQTT (repack with "
        "`edge-agent model pack --for-device ID` or `--for-group G`)\n"
    )
    old = tmp_path / "old.pkg"  # format 1 (manifest first, no plan): one line too
    from edge_agent.adapters.updates import signing
    from edge_agent.adapters.updates.package_file import PackageReader, write_package
    from edge_agent.core.updates.package import manifest_bytes

    with PackageReader(pkg) as r:
        m = r.manifest.model_copy(update={"format": 1, "transfer": None, "for_devices": ["cam-1"]})
    write_package(old, m, {"detector.onnx": INT8}, signing.sign(manifest_bytes(m), trusted_key()[0]))
    rc, out, err = run(capsys, "push", str(old), "-c", str(cfg_path), "--device", "cam-1")
    assert rc == 1 and "a format-1 package without a transfer plan; pushing needs a package" in err

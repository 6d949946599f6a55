"""The stranger on stock Debian (issue 22): one line and exit != 0 instead of a traceback, doctor
FAILs on a refused password found the way the unit hands it over, install hints a checkout can
follow, and `edge-agent status` for an operator who is not root."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import cli
from support.mqtt import Broker, require_mosquitto

from edge_agent import install_hint
from edge_agent.adapters.host.statusfile import write_status

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "models" / "samples" / "sample_1.jpg"


def one_line(r: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in r.stderr, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_infer_save_onto_an_existing_file_is_one_line_and_leaves_it_alone(tmp_path: Path) -> None:
    existing = tmp_path / "notes.txt"
    existing.write_text("keep me\n")
    r = cli("infer", str(SAMPLE), "--save", str(existing))
    assert r.returncode == 1
    assert one_line(r) == (
        f"edge-agent infer: error: --save {existing}: is a file, expected a folder for the annotated "
        "images (it is never written over)"
    )
    assert existing.read_text() == "keep me\n"


@pytest.mark.parametrize("bad", ["file", "uncreatable"])
def test_demo_with_a_bad_state_dir_is_one_line(tmp_path: Path, bad: str) -> None:
    if bad == "file":
        target = tmp_path / "state"
        target.write_text("")
        expected = "is a file, expected a folder for the demo's queue"
    else:
        target = Path("/proc/edge-agent-demo")  # procfs: not even root can make a folder there
        expected = "cannot create the folder:"
    r = cli("demo", "--state-dir", str(target), "--frames", "1")
    assert r.returncode == 1
    line = one_line(r)
    assert line.startswith(f"edge-agent demo: error: --state-dir {target}: ") and expected in line


def test_install_hints_put_the_checkout_first() -> None:
    hint = install_hint("models")
    assert hint.startswith("pip install '.[models]' in the edge-agent checkout")
    assert hint.index("'.[models]'") < hint.index("onnx-edge-agent[models]")
    assert "once published" in hint


def test_doctor_reads_the_credential_next_to_the_config_and_fails_a_refused_password(tmp_path: Path) -> None:
    """README's one setup: /etc/edge-agent/mqtt-password + password_file = "mqtt-password"; outside
    the unit (no $CREDENTIALS_DIRECTORY) doctor finds it beside the config."""
    require_mosquitto()
    b = Broker(tmp_path / "broker", users={"cam": "right"})
    b.start()
    try:
        etc = tmp_path / "etc"
        etc.mkdir()
        state = tmp_path / "state"
        cfg = etc / "config.toml"
        cfg.write_text(
            f'[device]\nid = "d1"\nstate_dir = "{state}"\n[detector]\nmodel = "{REPO / "models" / "demo-detector-int8.onnx"}"\n'
            f'[camera]\nsource = "{REPO / "models" / "samples"}"\n[queue]\npath = "{state}/q.db"\n'
            f'[health]\nstatus_file = "{state}/status.json"\n'
            f'[mqtt]\nhost = "127.0.0.1"\nport = {b.port}\nusername = "cam"\npassword_file = "mqtt-password"\n'
        )
        env = {k: v for k, v in os.environ.items() if k != "CREDENTIALS_DIRECTORY"}
        for password, rc, status, words in [
            ("wrong", 1, "FAIL", "refused the connection as 'cam'"),
            ("right", 0, "ok", "connected as cam"),
        ]:
            (etc / "mqtt-password").write_text(password + "\n")
            # cwd not etc/: the file is found beside the config, not in the cwd
            r = cli("doctor", "--json", "--config", str(cfg), env=env, cwd=tmp_path)
            checks = {c["check"]: c for c in json.loads(r.stdout)}
            assert checks["broker"]["status"] == status and words in checks["broker"]["detail"], checks[
                "broker"
            ]
            if status == "FAIL":
                assert r.returncode == rc and "mqtt-password" in checks["broker"]["fix"]
    finally:
        b.stop()


def _nobody_can_run_python() -> str | None:
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        return "needs root and runuser to act as another user"
    r = subprocess.run(
        ["runuser", "-u", "nobody", "--", sys.executable, "-c", "import edge_agent"],
        capture_output=True,
        text=True,
        cwd="/",
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    if r.returncode != 0:
        return (
            f"user nobody cannot run {sys.executable} (a venv under a 0700 home): {r.stderr.strip()[-120:]}"
        )
    return None


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A folder other users can enter (pytest's tmp_path sits under a 0700 directory)."""
    d = Path(tempfile.mkdtemp(prefix="edge-agent-status-"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d)


def test_status_works_for_the_agents_group_and_not_for_other_users(open_dir: Path) -> None:
    why = _nobody_can_run_python()
    if why:
        pytest.skip(why)
    tmp_path = open_dir
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o755)
    status = run_dir / "status.json"
    write_status(status, {"device_id": "d1", "state": "running"}, now=time.time())
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[health]\nstatus_file = "{status}"\n')
    os.chmod(cfg, 0o640)  # root:root 0640: readable by the service's group, not by nobody
    base = ["runuser", "-u", "nobody", "--", sys.executable, "-m", "edge_agent", "-q", "status"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    show = [*base, "--file", str(status), "--json"]
    # root:root 0640: nobody is not in the group: one error naming the file, no traceback
    r = subprocess.run(show, capture_output=True, text=True, cwd="/", env=env)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert f"{status}: cannot read status file" in r.stderr and "Permission denied" in r.stderr
    # the file's group is nobody's (an operator added to the agent's group): readable
    os.chown(status, 0, pwd.getpwnam("nobody").pw_gid)
    r = subprocess.run(show, capture_output=True, text=True, cwd="/", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["device_id"] == "d1"
    # without read access to the config: says so and reads the default path (absent here)
    r = subprocess.run([*base, "--config", str(cfg)], capture_output=True, text=True, cwd="/", env=env)
    assert "Traceback" not in r.stderr and r.returncode == 1
    assert (
        f"{cfg} is readable by the edge-agent group only; reading the default /run/edge-agent/status.json"
        in r.stderr
    )

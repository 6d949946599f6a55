"""``edge-agent doctor`` in process, the promises test_doctor_inproc.py leaves open (issue 36, from
the cli-doctor area's survivors): what ``--help`` says of it, the real / when no ``--root`` is
given, one open of the camera and no retries, and the fix for a camera refused at open."""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import onnxruntime as ort
import pytest
from support.mqtt import Broker, require_mosquitto
from support.users import OTHER_USERS, ROOT, as_user, open_dir
from support.world import agent_toml

from edge_agent.adapters.host import probes
from edge_agent.adapters.host.probes import cpu_features
from edge_agent.app.cli import doctor_cmd
from edge_agent.app.cli.main import main
from edge_agent.core.camera.source_spec import Frame
from edge_agent.core.config.schema import Config, parse_config

REPO = Path(__file__).resolve().parents[3]
DETECTOR = REPO / "models" / "demo-detector-int8.onnx"


def config(tmp_path: Path, source: object, mqtt: object = None, **camera: object) -> Path:
    state = tmp_path / "state"
    more = {} if mqtt is None else {"mqtt": mqtt}
    text = agent_toml(
        state,
        str(source),
        DETECTOR,
        device={"id": "d1"},
        queue={"path": str(state / "q.db")},
        output=None,  # type: ignore[arg-type]
        camera={"source": str(source), **camera},
        **more,  # type: ignore[arg-type]
    )
    path = tmp_path / "c.toml"
    path.write_text(text)
    return path


def doctor(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, dict[str, str]]]:
    rc = main(["-q", "doctor", "--json", *argv])
    return rc, {c["check"]: c for c in json.loads(capsys.readouterr().out)}


def help_page(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    try:
        main(list(argv))
    except SystemExit as exc:
        assert exc.code in (0, None)
    return capsys.readouterr().out


def test_the_help_names_the_command_and_its_page_says_what_it_checks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    top = help_page(capsys, "--help")
    assert "    doctor       check board, runtime, devices, storage, broker and clock\n" in top
    page = help_page(capsys, "doctor", "--help")
    assert "is this board ready to run the agent? Each line says what to fix." in page
    assert "Exit status 1 when any check FAILs." in " ".join(page.split())
    assert re.search(r"\n  --json +print the checks as JSON\n", page), page
    assert "--root" not in page  # the tests' fake /proc and /dev trees: not an operator's option


def test_without_root_it_reads_this_machines_own_proc(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, c = doctor(capsys, "--config", str(config(tmp_path, REPO / "models" / "samples")))
    cpu = cpu_features("/")
    assert c["cpu"]["detail"] == f"{cpu.model}; {cpu.summary}", c["cpu"]
    assert c["camera"]["status"] == "ok", c["camera"]


@pytest.fixture
def refusing() -> Iterator[tuple[str, list[str]]]:
    """An HTTP camera answering every request 503, and the paths it was asked for."""
    seen: list[str] = []

    class Refusing(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_error(503, "Busy")

        def log_message(self, format: str, *args: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/stream", seen
    srv.shutdown()
    srv.server_close()
    t.join(5)


def test_a_camera_that_refuses_is_asked_once_not_retried(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], refusing: tuple[str, list[str]]
) -> None:
    url, seen = refusing
    rc, c = doctor(capsys, "--config", str(config(tmp_path, url)))
    cam = c["camera"]
    assert rc == 1 and cam["status"] == "FAIL" and "HTTP 503" in cam["detail"], cam
    assert cam["fix"] == "check [camera] source (URL, user, path), the network and that the camera is on"
    assert seen == ["/stream"]  # one request: doctor reports, it does not wait for the camera to come back


def test_a_video_announcing_frames_above_max_pixels_fails_at_open_with_that_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    video = tmp_path / "big.avi"
    out = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 5.0, (64, 48))
    for i in range(3):
        out.write(np.full((48, 64, 3), 40 * i, np.uint8))
    out.release()
    rc, c = doctor(capsys, "--config", str(config(tmp_path, video, max_pixels=1000)))
    cam = c["camera"]
    assert rc == 1 and cam["status"] == "FAIL" and cam["detail"].startswith(f"camera {str(video)!r}: "), cam
    assert "max_pixels" in cam["detail"]
    assert cam["fix"] == "lower the camera's resolution or raise [camera] max_pixels"


def test_the_capture_size_hint_ends_with_the_condition_and_where_to_read_more() -> None:
    bare = parse_config("[camera]\nsource = 0\n")
    frame = Frame(np.zeros((360, 640, 3), np.uint8), 0.0, 0.0, 1, "0", full_size=(1920, 1080))
    assert doctor_cmd._frame_line(bare, "v4l2_device", frame) == (
        "got a 1920x1080 frame, decoded to 640x360 for the model's input; [camera] width = 640, "
        "height = 360 would let the driver capture smaller, if that mode keeps the field of view "
        "(docs/cameras.md)"
    )


def test_a_refused_broker_login_points_at_the_password_file_and_the_readme(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    require_mosquitto()
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    b = Broker(tmp_path / "broker", users={"cam": "right"})
    b.start()
    try:
        (tmp_path / "pw").write_text("wrong\n")
        mqtt = {"enabled": True, "host": "127.0.0.1", "port": b.port, "username": "cam"}
        cfg = config(
            tmp_path, REPO / "models" / "samples", mqtt={**mqtt, "password_file": str(tmp_path / "pw")}
        )
        rc, c = doctor(capsys, "--config", str(cfg))
    finally:
        b.stop()
    assert rc == 1 and c["broker"]["status"] == "FAIL", c["broker"]
    assert c["broker"]["fix"] == (
        "fix [mqtt] username / the password in /etc/edge-agent/mqtt-password (README: MQTT password), "
        "or the TLS files"
    )


def board(root: Path, model: bytes) -> Path:
    (root / "proc/device-tree").mkdir(parents=True)
    (root / "proc/device-tree/model").write_bytes(model + b"\x00")
    (root / "proc/cpuinfo").write_text("".join(f"processor\t: {i}\nCPU part\t: 0xd08\n\n" for i in range(4)))
    (root / "dev").mkdir()
    return root


def checks(cfg: Config, root: Path) -> dict[str, dict[str, str]]:
    return {c["check"]: c for c in doctor_cmd.checks(cfg, str(root), probe=False)}


def test_the_runtime_line_shows_the_configured_threads_and_the_whole_provider_chain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pi = board(tmp_path / "pi", b"Raspberry Pi 4 Model B Rev 1.4")
    line = checks(parse_config("[detector]\nthreads = 2\n"), pi)["onnxruntime"]["detail"]
    assert "CPU with 2 threads (physical cores)" in line, line  # the config's 2, not the 4 cores
    gpu = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    monkeypatch.setattr(ort, "get_available_providers", lambda: gpu)  # onnxruntime-gpu on a Jetson
    jetson = board(tmp_path / "jetson", b"NVIDIA Jetson Orin Nano")
    line = checks(Config(), jetson)["onnxruntime"]["detail"]
    assert line.endswith("will use " + " > ".join(gpu) + " (Jetson: " + " > ".join(gpu[:2]) + " > CPU)"), line


def test_every_video_device_is_listed(tmp_path: Path) -> None:
    root = board(tmp_path / "root", b"Raspberry Pi 4 Model B Rev 1.4")
    for n in ("video0", "video2"):
        (root / "dev" / n).touch()
    assert checks(Config(), root)["video devices"]["detail"] == f"{root}/dev/video0, {root}/dev/video2"


def test_the_disk_warns_below_twice_the_queue_cap_and_says_when_it_cannot_tell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cap = 10_500_001  # shown as 11 MB: a figure rounded at its half
    cfg = parse_config(f'[queue]\npath = "{tmp_path}/q.db"\nmax_bytes = {cap}\n')
    for free, status in ((2 * cap, "ok"), (2 * cap - 1, "warn")):
        monkeypatch.setattr(probes, "free_disk_bytes", lambda _path, free=free: free)
        disk = checks(cfg, tmp_path)["disk"]
        assert (disk["status"], disk["detail"]) == (status, f"0.0 GB free for {tmp_path}/q.db")
        fix = "less than twice [queue] max_bytes (11 MB): lower it or free space"
        assert disk["fix"] == (fix if status == "warn" else "")
    monkeypatch.setattr(probes, "free_disk_bytes", lambda _path: 2_250_000_001)
    assert checks(cfg, tmp_path)["disk"]["detail"] == f"2.3 GB free for {tmp_path}/q.db"
    monkeypatch.setattr(probes, "free_disk_bytes", lambda _path: None)
    disk = checks(cfg, tmp_path)["disk"]
    assert disk == {
        "check": "disk",
        "status": "warn",
        "detail": f"cannot stat the filesystem of {tmp_path}/q.db",
        "fix": "",
    }


def state_dir(path: Path) -> tuple[str, str, str, str]:
    seen: list[tuple[str, str, str, str]] = []

    def add(name: str, status: str, detail: str, fix: str = "") -> None:
        seen.append((name, status, detail, fix))

    doctor_cmd._state_dir(str(path), add)
    assert len(seen) == 1
    return seen[0]


def test_the_state_dir_as_the_service_user_sees_it() -> None:
    with open_dir() as top:
        mine = top / "mine"
        mine.mkdir()  # root's, 0755: nobody else writes in it
        ro = top / "ro"
        ro.mkdir(mode=0o555)
        script = top / "script"
        script.write_text("#!/bin/sh\n")
        script.chmod(0o777)  # writable and executable, still not a folder
        assert state_dir(script) == (
            "state dir",
            "FAIL",
            f"{script} is not a writable directory",
            "fix its owner/mode or set [device] state_dir",
        )
        with as_user(OTHER_USERS[-1]):
            if ROOT:  # else the block runs as the test's own user, who made mine
                assert state_dir(mine)[:3] == ("state dir", "FAIL", f"{mine} is not a writable directory")
            assert state_dir(ro / "new") == (
                "state dir",
                "warn",
                f"{ro / 'new'} does not exist and {ro} is not writable by this user",
                "the unit's StateDirectory= creates it for the service; else create it or set [device] state_dir",
            )

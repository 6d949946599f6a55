"""``edge-agent doctor`` in process (issue 36): every check's verdict, line and fix as an operator
reads them, on fake /proc and /dev trees, the demo models, the sample folder and a real broker.

test_doctor.py runs the command as a subprocess (what ships); mutation testing sees nothing of a
subprocess, so the same promises are pinned here through ``cli.main`` and ``checks``."""

from __future__ import annotations

import json
import os
import platform
import socket
from pathlib import Path
from typing import Optional

import numpy as np
import onnxruntime as ort
import pytest
from support.mqtt import Broker, require_mosquitto
from support.world import agent_toml

from edge_agent import __version__
from edge_agent.adapters.host import probes
from edge_agent.app.cli import doctor_cmd
from edge_agent.app.cli.main import main
from edge_agent.core.camera.source_spec import Frame
from edge_agent.core.config.schema import Config, parse_config

REPO = Path(__file__).resolve().parents[3]
DETECTOR = REPO / "models" / "demo-detector-int8.onnx"
SAMPLES = REPO / "models" / "samples"
KEY = "A" * 43 + "="


def fake_board(root: Path, model: bytes = b"Raspberry Pi 4 Model B Rev 1.4", dotprod: bool = False) -> Path:
    dt = root / "proc/device-tree"
    dt.mkdir(parents=True)
    (dt / "model").write_bytes(model + b"\x00")
    feats = "fp asimd evtstrm crc32 cpuid" + (" asimddp" if dotprod else "")
    (root / "proc/cpuinfo").write_text(
        "".join(f"processor\t: {i}\nFeatures\t: {feats}\nCPU part\t: 0xd08\n\n" for i in range(4))
    )
    (root / "dev").mkdir()
    return root


def toml(
    tmp_path: Path, extra: str = "", camera: Path = SAMPLES, model: Path = DETECTOR, **sections: object
) -> str:
    state = tmp_path / "state"
    base: dict[str, object] = {"device": {"id": "d1"}, "queue": {"path": str(state / "q.db")}, "output": None}
    base.update(sections)
    return agent_toml(state, camera, model, extra=extra, **base)  # type: ignore[arg-type]


def doctor(
    capsys: pytest.CaptureFixture[str], cfg_text: str, tmp_path: Path, root: Optional[Path] = None, *more: str
) -> tuple[int, dict[str, dict[str, str]]]:
    cfg = tmp_path / "c.toml"
    cfg.write_text(cfg_text)
    rc = main(
        ["-q", "doctor", "--json", "--config", str(cfg), "--root", str(root or tmp_path / "none"), *more]
    )
    out = capsys.readouterr().out
    return rc, {c["check"]: c for c in json.loads(out)}


def by_name(cfg: Config, root: Path, probe: bool = False) -> dict[str, dict[str, str]]:
    return {c["check"]: c for c in doctor_cmd.checks(cfg, str(root), probe=probe)}


def test_a_board_ready_to_run_passes_every_check_with_what_it_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = fake_board(tmp_path / "root", dotprod=True)
    (root / "run/systemd/timesync").mkdir(parents=True)
    (root / "run/systemd/timesync/synchronized").touch()
    (root / "dev/video0").touch()
    rc, c = doctor(capsys, toml(tmp_path), tmp_path, root)
    assert rc == 0, c
    assert list(c) == [
        "config", "edge-agent", "board", "cpu", "onnxruntime", "detector", "video devices", "camera",
        "serial", "state dir", "model updates", "disk", "broker", "clock",
    ]  # fmt: skip
    assert c["config"] == {"check": "config", "status": "ok", "detail": str(tmp_path / "c.toml"), "fix": ""}
    assert c["edge-agent"]["detail"] == (
        f"{__version__} on Python {platform.python_version()} ({platform.machine()})"
    )
    assert c["board"]["detail"] == "Raspberry Pi 4 Model B Rev 1.4 [rpi4], 4 physical cores"
    assert c["cpu"]["status"] == "ok" and c["cpu"]["fix"] == ""
    assert c["cpu"]["detail"].endswith("dot-product (asimddp): yes") or "asimddp" in c["cpu"]["detail"]
    onnx = c["onnxruntime"]["detail"]
    assert onnx.startswith(
        f"{ort.__version__}; available {', '.join(ort.get_available_providers())}; will use "
    )
    assert "CPUExecutionProvider (" in onnx
    det = c["detector"]
    assert det["status"] == "ok", det
    assert det["detail"].startswith("demo-detector-int8.onnx@") and det["detail"].endswith(
        " (qdq_int8) loaded and ran on CPUExecutionProvider"
    )
    assert c["video devices"] == {
        "check": "video devices",
        "status": "ok",
        "detail": f"{root}/dev/video0",
        "fix": "",
    }
    assert c["camera"]["status"] == "ok"
    assert (
        c["camera"]["detail"] == f"{SAMPLES}: got a 320x240 frame, decoded to 160x120 for the model's input"
    )
    assert c["serial"]["detail"] == "no [sensor] configured"
    assert c["model updates"]["status"] == "warn" and "no trusted_keys" in c["model updates"]["detail"]
    assert c["model updates"]["fix"] == "add a public key to [model_update] trusted_keys"
    assert c["disk"]["status"] == "ok" and c["disk"]["detail"].endswith(f" GB free for {tmp_path}/state/q.db")
    assert c["broker"] == {
        "check": "broker", "status": "ok", "detail": "MQTT disabled: results stay in the local queue", "fix": "",
    }  # fmt: skip
    assert c["clock"] == {"check": "clock", "status": "ok", "detail": "synchronised", "fix": ""}


def test_the_text_report_puts_each_fix_under_its_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(toml(tmp_path, model=tmp_path / "gone.onnx"))
    assert main(["-q", "doctor", "--config", str(cfg), "--root", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"[  ok] config        {cfg}"
    models = lines.index(next(ln for ln in lines if ln.startswith("[FAIL] models        ")))
    assert str(tmp_path / "gone.onnx") in lines[models]
    assert lines[models + 1] == " " * 21 + "-> fix [detector] model / [classifier] model"
    assert not any(ln.strip() == "->" for ln in lines)  # no arrow without a fix


def test_a_camera_that_gives_no_frame_fails_with_the_fix_for_its_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    rc, c = doctor(capsys, toml(tmp_path, camera=empty), tmp_path)
    assert rc == 1
    cam = c["camera"]
    assert cam["status"] == "FAIL" and cam["detail"] == f"{empty}: no frame within 10 s", cam
    assert cam["fix"] == "fix [camera] source or plug the camera in"


def test_the_fix_for_a_camera_says_what_went_wrong() -> None:
    fix = doctor_cmd._camera_fix
    assert fix("network", "461 Unsupported Transport") == 'set [camera] rtsp_transport = "udp" (or "auto")'
    assert (
        fix("file", "3000x3000 is above max_pixels")
        == "lower the camera's resolution or raise [camera] max_pixels"
    )
    assert (
        fix("network", "timed out")
        == "check [camera] source (URL, user, path), the network and that the camera is on"
    )
    assert fix("v4l2_device", "no frame within 10 s") == "fix [camera] source or plug the camera in"


def test_a_config_that_does_not_load_still_checks_the_board_and_probes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, c = doctor(capsys, "[camera]\nsource = 3\nbogus = 1\n", tmp_path, fake_board(tmp_path / "root"))
    assert rc == 1
    assert c["config"]["status"] == "FAIL" and c["config"]["fix"] == "see 'edge-agent config example'"
    assert "bogus" in c["config"]["detail"]
    assert "board" in c and "clock" in c
    assert not {"detector", "models", "camera"} & set(c)  # the defaults' model and camera are not tried
    assert "broker" not in c  # nor the default broker


def test_no_dot_product_warns_with_what_to_expect(tmp_path: Path) -> None:
    c = by_name(Config(), fake_board(tmp_path / "root"))
    assert c["cpu"]["status"] == "warn" and "asimddp" in c["cpu"]["detail"]
    assert (
        c["cpu"]["fix"]
        == "no int8 dot-product instructions: expect smaller INT8 speed-ups (Pi 4/Jetson Nano)"
    )
    assert (
        c["video devices"]["detail"] == "no /dev/video* devices (fine for a file, folder or network camera)"
    )
    assert "broker" not in c  # MQTT enabled and no probe: nothing said about it


def test_a_jetson_shows_its_l4t_release(tmp_path: Path) -> None:
    root = fake_board(tmp_path / "root", model=b"NVIDIA Jetson Orin Nano")
    (root / "etc").mkdir()
    (root / "etc/nv_tegra_release").write_text("# R36 (release), REVISION: 3.0, GCID: 1\n")
    detail = by_name(Config(), root)["board"]["detail"]
    assert (
        detail
        == "NVIDIA Jetson Orin Nano [jetson], 4 physical cores, L4T R36 (release), REVISION: 3.0, GCID: 1"
    )


def test_a_provider_this_onnxruntime_cannot_give_fails_with_the_fix(tmp_path: Path) -> None:
    cfg = parse_config('[detector]\nprovider = "tensorrt"\n')
    onnx = by_name(cfg, tmp_path)["onnxruntime"]
    assert onnx["status"] == "FAIL" and onnx["detail"].startswith(f"{ort.__version__}; ")
    assert onnx["fix"] == "fix [detector] provider or install the right onnxruntime"


def test_serial_ports_are_listed_when_no_sensor_is_configured(tmp_path: Path) -> None:
    root = fake_board(tmp_path / "root")
    for n in ("ttyUSB0", "ttyS0"):
        (root / "dev" / n).touch()
    serial = by_name(Config(), root)["serial"]
    assert serial["detail"] == f"no [sensor] configured (ports here: {root}/dev/ttyS0, {root}/dev/ttyUSB0)"
    assert "serial" not in by_name(parse_config('[sensor]\nport = "/dev/ttyACM7"\n'), root)  # not probed


def test_a_sensor_port_that_opens_is_ok_and_a_missing_one_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, c = doctor(capsys, toml(tmp_path, extra="", sensor='port = "loop://"\nbaudrate = 9600\n'), tmp_path)
    assert c["serial"] == {
        "check": "serial",
        "status": "ok",
        "detail": "sensor port loop:// opens at 9600 baud",
        "fix": "",
    }
    missing = tmp_path / "ttyACM7"
    rc, c = doctor(capsys, toml(tmp_path, sensor=f'port = "{missing}"\n'), tmp_path)
    assert rc == 1 and c["serial"]["status"] == "FAIL"
    assert c["serial"]["detail"].startswith(f"sensor port {missing}: ")
    assert c["serial"]["fix"] == "check the cable and that the service user is in the dialout group"


def test_the_state_dir_is_judged_without_creating_it(tmp_path: Path) -> None:
    seen: list[tuple[str, str, str, str]] = []

    def add(name: str, status: str, detail: str, fix: str = "") -> None:
        seen.append((name, status, detail, fix))

    there = tmp_path / "there"
    there.mkdir()
    doctor_cmd._state_dir(str(there), add)
    later = tmp_path / "a" / "b"
    doctor_cmd._state_dir(str(later), add)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    doctor_cmd._state_dir(str(blocker), add)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        doctor_cmd._state_dir(str(ro / "new"), add)
        doctor_cmd._state_dir(str(ro), add)
    finally:
        ro.chmod(0o755)
    assert not later.exists() and not (tmp_path / "a").exists()
    root_user = os.geteuid() == 0  # root writes anywhere: the last two are ok there
    assert seen[:3] == [
        ("state dir", "ok", f"{there} is writable", ""),
        ("state dir", "ok", f"{later} does not exist yet; the agent will create it under {tmp_path}", ""),
        (
            "state dir",
            "FAIL",
            f"{blocker} is not a writable directory",
            "fix its owner/mode or set [device] state_dir",
        ),
    ]
    if not root_user:
        assert seen[3:] == [
            (
                "state dir",
                "warn",
                f"{ro / 'new'} does not exist and {ro} is not writable by this user",
                "the unit's StateDirectory= creates it for the service; else create it or set [device] state_dir",
            ),
            (
                "state dir",
                "FAIL",
                f"{ro} is not a writable directory",
                "fix its owner/mode or set [device] state_dir",
            ),
        ]


def test_model_updates_say_whether_packages_must_be_signed(tmp_path: Path) -> None:
    off = by_name(parse_config("[model_update]\nenabled = false\n"), tmp_path)["model updates"]
    assert off == {"check": "model updates", "status": "ok", "detail": "disabled", "fix": ""}
    keys = f"[model_update]\ntrusted_keys = ['{KEY}', '{'B' * 43}=']\n"
    signed = by_name(parse_config(keys), tmp_path)["model updates"]
    assert signed["status"] == "ok" and signed["detail"] == "only packages signed by one of 2 trusted key(s)"


def test_a_disk_with_less_than_twice_the_queue_cap_warns(tmp_path: Path) -> None:
    free = probes.free_disk_bytes(tmp_path)
    assert free is not None
    small = parse_config(f'[queue]\npath = "{tmp_path}/q.db"\nmax_bytes = {max(free // 2 - 10**7, 10**6)}\n')
    assert by_name(small, tmp_path)["disk"]["status"] == "ok"
    big = parse_config(f'[queue]\npath = "{tmp_path}/q.db"\nmax_bytes = {free // 2 + 10**7}\n')
    disk = by_name(big, tmp_path)["disk"]
    assert disk["status"] == "warn" and disk["detail"] == f"{free / 1e9:.1f} GB free for {tmp_path}/q.db"
    assert disk["fix"] == (
        f"less than twice [queue] max_bytes ({(free // 2 + 10**7) / 1e6:.0f} MB): lower it or free space"
    )


@pytest.mark.parametrize(
    ("state", "status", "detail"),
    [(False, "warn", "NOT synchronised"), (None, "warn", "unknown")],
)
def test_a_clock_not_known_to_be_synchronised_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: Optional[bool], status: str, detail: str
) -> None:
    # the kernel's NTP state cannot be set by a test: the probe's answer is given instead
    monkeypatch.setattr(probes, "clock_synchronised", lambda root: state)
    clock = by_name(Config(), tmp_path)["clock"]
    assert (clock["status"], clock["detail"]) == (status, detail)
    assert clock["fix"] == "results carry clock_synced=false; enable systemd-timesyncd/chrony or add an RTC"


def test_a_broker_that_refuses_fails_and_a_relative_password_file_is_read_beside_the_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    require_mosquitto()
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    b = Broker(tmp_path / "broker", users={"cam": "right"})
    b.start()
    try:
        (tmp_path / "pw").write_text("wrong\n")
        mqtt = {
            "mqtt": {
                "enabled": True,
                "host": "127.0.0.1",
                "port": b.port,
                "username": "cam",
                "password_file": "pw",
            }
        }
        cfg = toml(tmp_path, **mqtt)
        elsewhere = tmp_path / "cwd"
        elsewhere.mkdir()
        monkeypatch.chdir(elsewhere)  # the password is found next to the config, not in the cwd
        rc, c = doctor(capsys, cfg, tmp_path)
        assert rc == 1 and c["broker"]["status"] == "FAIL", c["broker"]
        assert "refused the connection as 'cam'" in c["broker"]["detail"]
        assert c["broker"]["fix"].startswith(
            "fix [mqtt] username / the password in /etc/edge-agent/mqtt-password"
        )
        (tmp_path / "pw").write_text("right\n")
        rc, c = doctor(capsys, cfg, tmp_path)
        assert c["broker"]["status"] == "ok" and "connected as cam" in c["broker"]["detail"], c["broker"]
        assert c["broker"]["fix"] == ""
        # under the unit, a relative password_file is the credential systemd hands over, not the
        # file beside the config
        creds = tmp_path / "creds"
        creds.mkdir()
        (creds / "pw").write_text("wrong\n")
        monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
        rc, c = doctor(capsys, cfg, tmp_path)
        assert c["broker"]["status"] == "FAIL", c["broker"]
        monkeypatch.delenv("CREDENTIALS_DIRECTORY")
    finally:
        b.stop()
    rc, c = doctor(capsys, cfg, tmp_path)  # gone: a warning, results queue locally
    assert rc == 0 and c["broker"]["status"] == "warn", c["broker"]
    assert f"127.0.0.1:{b.port}" in c["broker"]["detail"]
    assert c["broker"]["fix"] == "results queue locally until the broker answers; check [mqtt] host/port"


def _frame(full: Optional[tuple[int, int]]) -> Frame:
    return Frame(np.zeros((360, 640, 3), np.uint8), 0.0, 0.0, 1, "0", full_size=full)


def test_a_usb_camera_by_index_gets_the_capture_size_hint_unless_a_size_is_set() -> None:
    hint = "; [camera] width = 640, height = 360 would let the driver capture smaller"
    bare = parse_config("[camera]\nsource = 0\n")
    assert hint in doctor_cmd._frame_line(bare, "device_index", _frame((1920, 1080)))
    for size in ("width = 1920", "height = 1080"):  # one of the two set is the operator's choice
        asked = parse_config(f"[camera]\nsource = 0\n{size}\n")
        line = doctor_cmd._frame_line(asked, "device_index", _frame((1920, 1080)))
        assert line == "got a 1920x1080 frame, decoded to 640x360 for the model's input"
    assert hint not in doctor_cmd._frame_line(bare, "network", _frame((1920, 1080)))


def test_a_camera_that_cannot_be_opened_fails_with_its_error_and_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (junk := tmp_path / "junk.mp4").write_bytes(b"not a video" * 10)  # there, but no video in it
    rc, c = doctor(capsys, toml(tmp_path, camera=junk), tmp_path)
    cam = c["camera"]
    assert rc == 1 and cam["status"] == "FAIL", cam
    assert (
        cam["detail"].startswith(f"camera {str(junk)!r}: ")
        and cam["fix"] == "fix [camera] source or plug the camera in"
    )
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    url = f"http://127.0.0.1:{port}/stream"
    rc, c = doctor(capsys, toml(tmp_path, camera=url), tmp_path)  # type: ignore[arg-type]
    cam = c["camera"]
    assert rc == 1 and cam["status"] == "FAIL" and cam["detail"].startswith(f"{url}: "), cam
    assert "cannot connect" in cam["detail"]
    assert cam["fix"] == "check [camera] source (URL, user, path), the network and that the camera is on"

"""``edge-agent doctor`` checks what the config names, for real, and changes nothing on disk."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Optional

from support import cli
from support.mqtt import Broker, TlsFiles, require_mosquitto
from support.world import agent_toml

REPO = Path(__file__).resolve().parents[3]
DETECTOR = REPO / "models" / "demo-detector-int8.onnx"
SAMPLES = REPO / "models" / "samples"


def doctor(*args: str, env: Optional[dict[str, str]] = None) -> tuple[int, dict[str, dict[str, str]], str]:
    r = cli("doctor", "--json", *args, env=env)
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, {c["check"]: c for c in json.loads(r.stdout)}, r.stderr


def fake_pi4(root: Path, dotprod: bool = False) -> Path:
    dt = root / "proc/device-tree"
    dt.mkdir(parents=True)
    (dt / "model").write_bytes(b"Raspberry Pi 4 Model B Rev 1.4\x00")
    (dt / "compatible").write_bytes(b"raspberrypi,4-model-b\x00brcm,bcm2711\x00")
    feats = "fp asimd evtstrm crc32 cpuid" + (" asimddp" if dotprod else "")
    (root / "proc/cpuinfo").write_text(
        "".join(f"processor\t: {i}\nFeatures\t: {feats}\nCPU part\t: 0xd08\n\n" for i in range(4))
    )
    (root / "dev").mkdir()
    (root / "dev/video0").touch()
    return root


def config(tmp_path: Path, extra: str = "", model: Path = DETECTOR, camera: str = str(SAMPLES)) -> Path:
    """A config naming real things: the demo detector, the sample folder as the camera."""
    state = tmp_path / "state"
    cfg = tmp_path / "c.toml"
    # no [mqtt] (the default broker, unless extra names one) and no [output]
    queue = {"path": str(state / "q.db")}
    cfg.write_text(
        agent_toml(
            state, camera, model, extra=extra, device={"id": "d1"}, mqtt=None, queue=queue, output=None
        )
    )
    return cfg


def test_doctor_loads_the_model_grabs_a_frame_and_connects_over_tls(
    tmp_path: Path, tls_broker: Broker, tls_files: TlsFiles
) -> None:
    root = fake_pi4(tmp_path / "root")
    mqtt = (
        f'[mqtt]\nhost = "127.0.0.1"\nport = {tls_broker.tls_port}\ntls_ca = "{tls_files.ca}"\n'
        f'tls_cert = "{tls_files.client_cert}"\ntls_key = "{tls_files.client_key}"\n'
    )
    rc, checks, err = doctor("--config", str(config(tmp_path, mqtt)), "--root", str(root))
    assert rc == 0, (checks, err)
    assert "Raspberry Pi 4" in checks["board"]["detail"] and "4 physical cores" in checks["board"]["detail"]
    assert checks["cpu"]["status"] == "warn" and "dot-product (asimddp): no" in checks["cpu"]["detail"]
    assert checks["detector"]["status"] == "ok" and "loaded and ran" in checks["detector"]["detail"]
    assert checks["camera"]["status"] == "ok" and "frame" in checks["camera"]["detail"]
    assert checks["broker"]["status"] == "ok" and "(TLS)" in checks["broker"]["detail"]
    # doctor has no side effects: the state dir it judged is still not there
    assert not (tmp_path / "state").exists()
    assert "does not exist yet" in checks["state dir"]["detail"]


def test_doctor_warns_when_the_broker_accepts_tcp_but_never_answers_mqtt(tmp_path: Path) -> None:
    listener = socket.socket()  # a port that accepts but never sends CONNACK (not a broker)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    try:
        extra = f'[mqtt]\nhost = "127.0.0.1"\nport = {listener.getsockname()[1]}\n'
        rc, checks, _ = doctor("--config", str(config(tmp_path, extra)))
    finally:
        listener.close()
    assert rc == 0  # a missing broker is a warning: results queue locally
    assert checks["broker"]["status"] == "warn" and "no CONNACK" in checks["broker"]["detail"]


def test_a_config_naming_a_missing_model_fails_and_names_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "yolov8n.onnx"
    rc, checks, _ = doctor("--config", str(config(tmp_path, "[mqtt]\nenabled = false\n", model=missing)))
    assert rc == 1
    assert checks["models"]["status"] == "FAIL" and str(missing) in checks["models"]["detail"]


def test_a_camera_that_gives_no_frame_fails(tmp_path: Path) -> None:
    empty = tmp_path / "empty-folder"
    empty.mkdir()
    rc, checks, _ = doctor("--config", str(config(tmp_path, "[mqtt]\nenabled = false\n", camera=str(empty))))
    assert rc == 1 and checks["camera"]["status"] == "FAIL" and str(empty) in checks["camera"]["detail"]


def test_doctor_shows_the_frame_as_the_agent_decodes_it_for_the_model(tmp_path: Path) -> None:
    # the 320x240 samples are twice the demo detector's 160x120 letterbox: decoded at 1/2 by libjpeg
    rc, checks, _ = doctor("--config", str(config(tmp_path, "[mqtt]\nenabled = false\n")))
    assert rc == 0, checks
    detail = checks["camera"]["detail"]
    assert "got a 320x240 frame, decoded to 160x120 for the model's input" in detail, detail
    assert "width = 160" not in detail  # a folder: no capture-size hint (that is for V4L2/CSI)


def test_a_v4l2_camera_far_above_the_model_gets_a_capture_size_hint_not_a_change() -> None:
    import numpy as np

    from edge_agent.app.cli.doctor_cmd import _frame_line
    from edge_agent.core.camera.source_spec import Frame
    from edge_agent.core.config.schema import parse_config

    def frame(full: Optional[tuple[int, int]]) -> Frame:
        return Frame(np.zeros((360, 640, 3), np.uint8), 0.0, 0.0, 1, "/dev/video0", full_size=full)

    cfg = parse_config('[camera]\nsource = "/dev/video0"\n')
    line = _frame_line(cfg, "v4l2_device", frame((1920, 1080)))
    assert (
        line.startswith("got a 1920x1080 frame, decoded to 640x360") and "width = 640, height = 360" in line
    )
    asked = parse_config('[camera]\nsource = "/dev/video0"\nwidth = 1920\nheight = 1080\n')
    assert "width =" not in _frame_line(asked, "v4l2_device", frame((1920, 1080)))  # the operator chose
    assert _frame_line(cfg, "v4l2_device", frame(None)) == "got a 640x360 frame"


def test_doctor_fails_on_a_missing_serial_port_and_unwritable_state(tmp_path: Path) -> None:
    root = fake_pi4(tmp_path / "root", dotprod=True)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    cfg = tmp_path / "c.toml"
    sensor = '[sensor]\nport = "/dev/ttyACM7"\n'
    cfg.write_text(
        agent_toml(
            blocker,
            SAMPLES,
            DETECTOR,
            extra=sensor,
            device={"id": None},
            queue=None,
            output=None,
            health=None,
        )
    )
    rc, checks, _ = doctor("--config", str(cfg), "--root", str(root))
    assert rc == 1
    assert checks["serial"]["status"] == "FAIL" and "dialout" in checks["serial"]["fix"]
    assert checks["state dir"]["status"] == "FAIL"
    assert checks["cpu"]["status"] == "ok"


def test_doctor_reads_the_same_config_as_every_command(tmp_path: Path) -> None:
    """$EDGE_AGENT_CONFIG is honoured; without any config the first check FAILs and says where it looked."""
    cfg = config(tmp_path, "[mqtt]\nenabled = false\n")
    rc, checks, _ = doctor(env={"EDGE_AGENT_CONFIG": str(cfg)})
    assert rc == 0 and checks["config"]["detail"] == str(cfg)
    rc, checks, _ = doctor(env={"EDGE_AGENT_CONFIG": str(tmp_path / "absent.toml")})
    assert rc == 1 and checks["config"]["status"] == "FAIL"
    assert "absent.toml: config file not found" in checks["config"]["detail"]


def test_doctor_reports_a_broker_that_refuses_our_credentials(tmp_path: Path) -> None:
    """TCP and MQTT both answer, the CONNACK says no: that is what a bad password looks like."""
    require_mosquitto()
    b = Broker(tmp_path / "auth-broker", users={"cam": "right"})
    b.start()
    try:
        secret = tmp_path / "pw"
        secret.write_text("wrong\n")
        mqtt = f'[mqtt]\nhost = "127.0.0.1"\nport = {b.port}\nusername = "cam"\npassword_file = "{secret}"\n'
        rc, checks, _ = doctor("--config", str(config(tmp_path, mqtt)))
        # a wrong password never heals by waiting: FAIL and exit 1 (issue 22), not warn
        assert rc == 1 and checks["broker"]["status"] == "FAIL"
        assert "refused the connection as 'cam'" in checks["broker"]["detail"], checks["broker"]
        secret.write_text("right\n")
        rc, checks, _ = doctor("--config", str(config(tmp_path, mqtt)))
        assert checks["broker"]["status"] == "ok" and "connected as cam" in checks["broker"]["detail"]
    finally:
        b.stop()


def test_serial_ports_without_a_sensor_section_are_not_reported_as_a_checked_port(tmp_path: Path) -> None:
    """`[ ok] serial /dev/ttyS0` read as if the sensor port had been opened; there is no [sensor]."""
    root = fake_pi4(tmp_path / "root")
    (root / "dev/ttyS0").touch()
    _, checks, _ = doctor("--config", str(config(tmp_path)), "--root", str(root))
    assert checks["serial"]["status"] == "ok"
    assert checks["serial"]["detail"] == f"no [sensor] configured (ports here: {root}/dev/ttyS0)"

"""`config check` in process (mutmut credits only in-process calls): which file it reads, every
model path it looks for, each warning it owes the operator, and the summary line."""

from __future__ import annotations

from pathlib import Path

import pytest

from edge_agent.app.cli.configfile import CONFIG_ENV
from edge_agent.app.cli.main import main

MODEL = Path(__file__).resolve().parents[3] / "models" / "demo-detector-int8.onnx"


QUIET = "[model_update]\nenabled = false\n"  # else its no-trusted-key warning comes with every check


def check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, list[str]]:
    rc = main(["config", "check", *argv])
    cap = capsys.readouterr()
    return rc, cap.out, [ln for ln in cap.err.splitlines() if ln.startswith("warning: ")]


def test_every_model_file_is_looked_for(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[detector]\nmodel = "det.onnx"\n[classifier]\nmodel = "cls.onnx"\n' + QUIET)
    rc, _, warnings = check(capsys, str(cfg))
    assert rc == 0
    assert f"warning: {cfg}: detector.model = 'det.onnx': file not found (yet)" in warnings
    assert f"warning: {cfg}: classifier.model = 'cls.onnx': file not found (yet)" in warnings
    cfg.write_text(f'[detector]\nmodel = "{MODEL}"\n[classifier]\nmodel = "{MODEL}"\n' + QUIET)
    assert check(capsys, str(cfg))[2] == []


def test_a_tracker_low_the_detector_threshold_hides_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "c.toml"
    body = f'[detector]\nmodel = "{MODEL}"\nconf_threshold = 0.3\n[tracker]\nlow = 0.1\nhigh = 0.5\n' + QUIET
    cfg.write_text(body + '[output]\nmode = "objects"\n')
    rc, _, warnings = check(capsys, str(cfg))
    assert rc == 0 and len(warnings) == 1
    assert warnings[0].startswith(f"warning: {cfg}: tracker.low = 0.1 acts from 0.3 only")
    cfg.write_text(body + '[output]\nmode = "event"\n')  # no tracker in event mode: nothing to say
    assert check(capsys, str(cfg))[2] == []


def test_a_classifier_in_objects_mode_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "c.toml"
    body = f'[detector]\nmodel = "{MODEL}"\nconf_threshold = 0.05\n[classifier]\nmodel = "{MODEL}"\n' + QUIET
    cfg.write_text(body + '[output]\nmode = "objects"\n')
    rc, _, warnings = check(capsys, str(cfg))
    assert rc == 0 and len(warnings) == 1
    assert warnings[0].startswith(f"warning: {cfg}: [classifier] in objects mode: ")
    cfg.write_text(body + '[output]\nmode = "every_frame"\n')
    assert check(capsys, str(cfg))[2] == []


def test_the_file_comes_from_config_then_the_environment_and_the_summary_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text(f'[device]\nid = "dev-a"\n[detector]\nmodel = "{MODEL}"\n[mqtt]\nenabled = false\n')
    b.write_text(
        f'[device]\nid = "dev-b"\n[detector]\nmodel = "{MODEL}"\n[mqtt]\nhost = "broker.lan"\nport = 8883\n'
    )
    monkeypatch.setenv(CONFIG_ENV, str(b))
    rc, out, _ = check(capsys, "--config", str(a))
    assert rc == 0 and out == f"{a}: OK (device dev-a, camera 0, mqtt 127.0.0.1:disabled)\n"
    rc, out, _ = check(capsys)
    assert rc == 0 and out == f"{b}: OK (device dev-b, camera 0, mqtt broker.lan:8883)\n"


def test_a_config_without_a_detector_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[device]\nid = "d"\n')
    assert main(["config", "check", str(cfg)]) == 1
    assert "detector" in capsys.readouterr().err


def test_cameras_are_summed_up_with_their_passwords_hidden_and_each_mode_warned_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "c.toml"
    cams = (
        '[[cameras]]\nid = "gate"\nsource = "rtsp://admin:hunter2@10.0.0.5/live"\nmode = "objects"\n'
        '[[cameras]]\nid = "yard"\nsource = "/srv/yard"\n'
    )
    cfg.write_text(f'[detector]\nmodel = "{MODEL}"\n[classifier]\nmodel = "{MODEL}"\n' + QUIET + cams)
    rc, out, warnings = check(capsys, str(cfg))
    assert rc == 0 and "hunter2" not in out
    assert out.startswith(
        f"{cfg}: OK (device edge-0, 2 cameras: gate='rtsp://***@10.0.0.5/live', yard='/srv/yard'"
    )
    # only gate is in objects mode: its classifier warning is owed although [output] mode is "event"
    assert any("[classifier] in objects mode" in w for w in warnings)
    cfg.write_text(f'[detector]\nmodel = "{MODEL}"\n' + QUIET + cams.replace('id = "yard"', 'id = "gate"'))
    rc = main(["config", "check", str(cfg)])
    err = capsys.readouterr().err
    assert rc != 0 and err.count("\n") == 1 and "cameras.1.id = 'gate' is used twice" in err

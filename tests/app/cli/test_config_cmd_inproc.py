"""`config example` and `config check -` in process (mutmut credits only in-process calls): the
example on stdout, standard input read as UTF-8 (one line when it is not), the update warning, one
camera's password hidden, and the help of both actions."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest

from edge_agent.app.cli.main import main
from edge_agent.core.config.example import example_config

MODEL = Path(__file__).resolve().parents[3] / "models" / "demo-detector-int8.onnx"
QUIET = "[model_update]\nenabled = false\n"


def stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def test_example_prints_the_generated_config(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "example"]) == 0
    cap = capsys.readouterr()
    assert cap.out == example_config() and cap.err == ""


def test_the_example_read_from_stdin_checks_with_its_warnings(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stdin(monkeypatch, example_config().encode())
    assert main(["config", "check", "-"]) == 0
    cap = capsys.readouterr()
    assert cap.out.startswith("<stdin>: OK (device edge-0, camera ")
    assert "warning: <stdin>: detector.model = " in cap.err and "file not found (yet)" in cap.err


def test_stdin_that_is_not_utf8_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stdin(monkeypatch, b'[device]\nid = "\xff"\n')
    assert main(["config", "check", "-"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "<stdin>: not UTF-8 text (invalid start byte at byte 15)" in err
    assert "Traceback" not in err


def test_one_camera_is_shown_without_its_password(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    body = (
        f'[camera]\nsource = "rtsp://admin:s3cret@10.0.0.5:554/s1"\n[detector]\nmodel = "{MODEL}"\n' + QUIET
    )
    stdin(monkeypatch, body.encode())
    assert main(["config", "check", "-"]) == 0
    cap = capsys.readouterr()
    assert (
        cap.out == "<stdin>: OK (device edge-0, camera 'rtsp://***@10.0.0.5:554/s1', mqtt 127.0.0.1:1883)\n"
    )
    assert cap.err == ""


def test_updates_without_a_trusted_key_are_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[detector]\nmodel = "{MODEL}"\n[model_update]\nenabled = true\n')
    assert main(["config", "check", str(cfg)]) == 0
    warnings = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("warning: ")]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"warning: {cfg}: model_update is enabled with no trusted_keys: ")


def test_no_classifier_is_not_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[detector]\nmodel = "gone.onnx"\n' + QUIET)
    assert main(["config", "check", str(cfg)]) == 0
    err = capsys.readouterr().err
    assert err == f"warning: {cfg}: detector.model = 'gone.onnx': file not found (yet)\n"


def test_errors_from_stdin_name_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stdin(monkeypatch, b'[device]\nid = "d"\n')
    assert main(["config", "check", "-"]) == 1
    assert "error: <stdin>: detector.model is not set: " in capsys.readouterr().err
    stdin(monkeypatch, b"[queue]\nmax_mesages = 5\n")
    assert main(["config", "check", "-"]) == 1
    assert "<stdin>" in capsys.readouterr().err


def test_a_file_without_a_detector_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[device]\nid = "d"\n')
    assert main(["config", "check", str(cfg)]) == 1
    assert f"error: {cfg}: detector.model is not set: " in capsys.readouterr().err


def helped(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as ex:
        main([*argv, "--help"])
    assert ex.value.code == 0
    return capsys.readouterr().out


def test_an_action_is_required_and_each_has_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ex:
        main(["config"])
    err = capsys.readouterr().err
    assert ex.value.code == 2 and re.search(r"the following arguments are required: ACTION$", err, re.M), err
    assert re.search(r"^\s+config\s+print an example config or check one$", helped(capsys), re.M)
    out = helped(capsys, "config")
    assert re.search(r"^usage: edge-agent config \[-h\] \[-v\] \[-q\] ACTION \.\.\.$", out, re.M), out
    assert re.search(r"^\s+example\s+print a commented example config$", out, re.M), out
    words = " ".join(out.split())  # argparse wraps the long help to the terminal's width
    assert " check validate a config file (unknown keys and bad values are errors) " in words
    assert "the commented config generated from the schema" in out
    out = " ".join(helped(capsys, "config", "check").split())
    assert (
        "config TOML, - for standard input (default: --config, $EDGE_AGENT_CONFIG, else "
        "/etc/edge-agent/config.toml)"
    ) in out

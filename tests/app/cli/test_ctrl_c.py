"""Ctrl-C in the first second of a command (while its modules import, onnxruntime loads, the model
is read) is one line and exit 130, never a ``KeyboardInterrupt`` traceback."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edge_agent.app.cli.main import main

REPO = Path(__file__).resolve().parents[3]
SAMPLES = REPO / "models" / "samples"

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "command",
    [
        ["infer", str(SAMPLES)],
        ["doctor"],
        ["inspect", str(REPO / "models" / "demo-detector-int8.onnx")],
        ["--help"],
    ],
)
def test_ctrl_c_early_in_any_command_is_one_line_and_130(command: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    seen = []
    for delay in (0.15, 0.4, 0.8):
        proc = subprocess.Popen(
            [sys.executable, "-m", "edge_agent", *command],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        seen.append(proc.returncode)
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
        # the command's own INFO lines before the signal (inspect's "loaded ... in 68 ms") are its
        # output, not the interrupt's: the interrupt adds one line
        own = [ln for ln in err.splitlines() if not re.match(r"\d{4}-\d\d-\d\d [\d:,]+ INFO ", ln)]
        assert len(own) <= 1, err
        if proc.returncode == 130:
            assert err.endswith("interrupted\n")
        else:  # done before the signal (doctor's own verdict may be 1), or killed by it before
            # Python's handler was installed
            assert proc.returncode in (0, 1, 2, -signal.SIGINT), err
    assert 130 in seen  # at least one delay landed inside the command


def test_an_interrupt_while_the_commands_import_is_caught_by_main(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("edge_agent.app.cli.main.build_parser", boom)
    assert main(["infer", "x.jpg"]) == 130
    assert capsys.readouterr().err == "edge-agent infer: interrupted\n"


def test_an_interrupt_inside_a_compiled_modules_init_is_an_interrupt_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """onnxruntime's pybind11 init turns a Ctrl-C into ``ImportError: initialization failed``
    caused by the KeyboardInterrupt (CI: a 40-line traceback); any other ImportError stays one."""

    def interrupted_import() -> None:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise ImportError("initialization failed") from exc

    monkeypatch.setattr("edge_agent.app.cli.main.build_parser", interrupted_import)
    assert main(["infer", "x.jpg"]) == 130
    assert capsys.readouterr().err == "edge-agent infer: interrupted\n"

    def missing() -> None:
        raise ImportError("No module named 'nothing'")

    monkeypatch.setattr("edge_agent.app.cli.main.build_parser", missing)
    with pytest.raises(ImportError, match="nothing"):
        main(["infer", "x.jpg"])

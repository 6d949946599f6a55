"""``edge-agent export-check``'s own part, in process and without PyTorch (the dev venv has none;
tests/tools/test_export_check.py runs the export itself where torch is installed): every bad
--input-shape / --kwargs is one line before anything loads, and the options reach the export check
as given. The check is swapped for a recorder here: what it does is tools/export_check.py's, tested
there; this file is about the command line."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import edge_agent.tools.export_check as export_check
from edge_agent.app.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["export-check", *args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize(
    ("shape", "error"),
    [
        ("1,3,a,4", "--input-shape '1,3,a,4': expected N,C,H,W integers"),
        ("1", "--input-shape '1': expected 2 to 5 positive numbers (N,C,H,W; N,T; N,C,T)"),
        (
            "1,1,1,1,1,1",
            "--input-shape '1,1,1,1,1,1': expected 2 to 5 positive numbers (N,C,H,W; N,T; N,C,T)",
        ),
        ("1,3,0,32", "--input-shape '1,3,0,32': expected 2 to 5 positive numbers (N,C,H,W; N,T; N,C,T)"),
        ("1,3,32", "--input-shape '1,3,32': the built-in network takes images N,3,H,W; pass --module"),
        ("1,1,32,32", "--input-shape '1,1,32,32': the built-in network takes images N,3,H,W; pass --module"),
    ],
)
def test_a_bad_input_shape_is_one_line(capsys: pytest.CaptureFixture[str], shape: str, error: str) -> None:
    rc, out, err = run(capsys, "--input-shape", shape)
    assert rc == 1 and out == ""
    assert err.splitlines()[0].startswith(f"edge-agent export-check: error: {error}"), err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [("{imgsz: 1}", "--kwargs '{imgsz: 1}': not JSON"), ("[1]", "--kwargs '[1]': expected a JSON object")],
)
def test_bad_kwargs_are_one_line(capsys: pytest.CaptureFixture[str], kwargs: str, error: str) -> None:
    rc, _, err = run(capsys, "--kwargs", kwargs)
    assert rc == 1 and err.splitlines() == [f"edge-agent export-check: error: {error}"]


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed here")
def test_without_torch_the_built_in_network_says_how_to_install_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, _, err = run(capsys, "--input-shape", "1,3,32,32")
    assert rc == 1 and len(err.splitlines()) == 1
    assert err.startswith("edge-agent export-check: error: export checks need PyTorch; install it with: ")


# what --module returns here: a module tree of one, with the Ultralytics export flag
NET = """
class Net:
    def __init__(self, **kwargs):
        self.kwargs, self.export = kwargs, False

    def modules(self):
        return [self]


def make(**kwargs):
    return Net(**kwargs)
"""


@dataclass
class Report:
    passed: bool

    def format(self) -> str:
        return f"the report ({'PASS' if self.passed else 'FAIL'})"


@pytest.fixture
def factory(tmp_path: Path) -> str:
    path = tmp_path / "netfile.py"
    path.write_text(NET)
    return f"{path}:make"


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []

    def record(net: Any, shape: tuple[int, ...], out: Path, *args: object, **kw: object) -> Report:
        seen.append({"net": net, "shape": shape, "out": out, "args": args, **kw})
        return Report(passed=bool(net.kwargs.get("ok", True)))

    monkeypatch.setattr(export_check, "run_export_check", record)
    return seen


def test_the_defaults_reach_the_check(
    capsys: pytest.CaptureFixture[str], factory: str, calls: list[dict[str, Any]]
) -> None:
    rc, out, _ = run(capsys, "--module", factory)
    assert rc == 0 and out == "the report (PASS)\n"
    (call,) = calls
    assert call["shape"] == (1, 3, 224, 224) and call["out"] == Path("export-check.onnx")
    assert call["args"] == (16, 30, 2, True)  # opset, runs, threads, with INT8
    assert (call["dtype"], call["int8_mode"], call["vocab"]) == ("float32", None, 100)
    assert call["net"].kwargs == {} and call["net"].export is True  # the head's deployable output


def test_every_option_reaches_the_check(
    capsys: pytest.CaptureFixture[str], factory: str, calls: list[dict[str, Any]], tmp_path: Path
) -> None:
    out_path = tmp_path / "m.onnx"
    argv = ["--module", factory, "--kwargs", '{"imgsz": 64}', "--input-shape", "2,16", "-o", str(out_path)]
    argv += ["--opset", "19", "--runs", "0", "--threads", "1", "--no-int8", "--input-dtype", "int64"]
    rc, _, _ = run(capsys, *argv, "--int8", "dynamic", "--vocab", "7")
    assert rc == 0
    (call,) = calls
    assert call["shape"] == (2, 16) and call["out"] == out_path and call["args"] == (19, 0, 1, False)
    assert (call["dtype"], call["int8_mode"], call["vocab"]) == ("int64", "dynamic", 7)
    assert call["net"].kwargs == {"imgsz": 64}


def test_five_dims_and_any_channels_are_taken_with_a_module(
    capsys: pytest.CaptureFixture[str], factory: str, calls: list[dict[str, Any]]
) -> None:
    assert run(capsys, "--module", factory, "--input-shape", "1,1,2,3,4")[0] == 0
    assert run(capsys, "--module", factory, "--input-shape", "1,6,50")[0] == 0
    assert [c["shape"] for c in calls] == [(1, 1, 2, 3, 4), (1, 6, 50)]


def test_a_failed_check_exits_1_after_its_report(
    capsys: pytest.CaptureFixture[str], factory: str, calls: list[dict[str, Any]]
) -> None:
    rc, out, _ = run(capsys, "--module", factory, "--kwargs", '{"ok": false}')
    assert rc == 1 and out == "the report (FAIL)\n" and len(calls) == 1


@pytest.mark.parametrize(
    ("exc", "said"),
    [
        (
            RuntimeError("  Given groups=1, weight of size [8, 3]\nmore torch detail\n"),
            "Given groups=1, weight of size [8, 3]",
        ),
        (RuntimeError(""), "RuntimeError"),
        (RuntimeError("   \n"), "RuntimeError"),
    ],
)
def test_a_model_that_does_not_take_the_input_is_one_line(
    capsys: pytest.CaptureFixture[str],
    factory: str,
    monkeypatch: pytest.MonkeyPatch,
    exc: Exception,
    said: str,
) -> None:
    def fail(*args: object, **kw: object) -> Report:
        raise exc

    monkeypatch.setattr(export_check, "run_export_check", fail)
    rc, _, err = run(capsys, "--module", factory, "--input-shape", "1,3,8,8", "--input-dtype", "int64")
    assert rc == 1
    assert err.splitlines() == [
        f"edge-agent export-check: error: the model did not run on an input of shape [1, 3, 8, 8] int64: {said}"
    ]


@pytest.mark.parametrize(
    "argv",
    [["--input-dtype", "float32"], ["--int8", "static"], ["--int8", "both"], ["--int8", "dynamic"]],
)
def test_each_documented_choice_is_taken(
    capsys: pytest.CaptureFixture[str], factory: str, calls: list[dict[str, Any]], argv: list[str]
) -> None:
    assert run(capsys, "--module", factory, *argv)[0] == 0
    assert calls[0]["dtype" if argv[0] == "--input-dtype" else "int8_mode"] == argv[1]


@pytest.mark.parametrize("argv", [["--input-dtype", "float16"], ["--int8", "qdq"]])
def test_a_value_outside_the_choices_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        main(["export-check", *argv])
    assert e.value.code == 2 and "invalid choice" in capsys.readouterr().err


# the help page as an operator reads it (whitespace folded): docs/model-tools.md section 1 tells the
# same; a change of an option's meaning or default must change this page (and the docs) with it
HELP = (
    "options: -h, --help show this help message and exit "
    "--module MODULE MODULE:CALLABLE or FILE.py:CALLABLE returning an nn.Module (default: a built-in small conv net) "
    "--kwargs KWARGS JSON keyword arguments for CALLABLE, e.g. '{\"imgsz\": 640}' (default: {}) "
    "--input-shape INPUT_SHAPE example input: N,C,H,W for images (default 1,3,224,224), N,T for token ids, "
    "N,C,T for sensor windows "
    "--input-dtype {float32,int64} int64: token ids (random in 0..--vocab-1; the sequence axis is exported "
    "dynamic) (default: float32) "
    "--vocab VOCAB token id range for --input-dtype int64 (default: 100) "
    "--int8 {static,dynamic,both} INT8 copy to time: static QDQ (images only; the default for them), dynamic "
    "(MatMulInteger/ConvInteger, no calibration; the default for any other input), or both (images: the two "
    "side by side) "
    "--opset OPSET ONNX opset of the export; the file (and its INT8 copy) then loads on the oldest onnxruntime "
    "with that opset: 16 = 1.11 (Jetson Nano, JetPack 4.6), 19 = 1.16 (JetPack 5) (default: 16) "
    "-o OUTPUT, --output OUTPUT where to write the ONNX file (default: export-check.onnx) "
    "--runs RUNS timed runs per runtime (0 = no timing) (default: 30) "
    "--threads THREADS threads for PyTorch and onnxruntime alike (default: 2) "
    "--no-int8 skip the INT8 quantization and its timing "
)


def test_the_help_page_says_what_each_option_does(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "2000")  # one line per option: no hyphen broken across lines
    with pytest.raises(SystemExit):
        main(["export-check", "--help"])
    page = " ".join(capsys.readouterr().out.split())
    assert HELP in page
    assert (
        page.split(" options: ")[0]
        .split("'edge-agent export-check': ")[1]
        .startswith("export a PyTorch model to ONNX and check it (needs the [torch] extra).")
    )
    with pytest.raises(SystemExit):
        main(["--help"])
    top = " ".join(capsys.readouterr().out.split())
    assert " export-check export a PyTorch model to ONNX and check it " in top

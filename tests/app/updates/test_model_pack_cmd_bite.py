"""`model pack|keygen` in process, the edges the mutation run found untested (issue 36): the
summary line's targets, the runtime minimum compared as numbers, a file newer than any known
onnxruntime, a target list the manifest refuses, and keygen."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from support.updates import INT8, SAMPLES

from edge_agent.adapters.updates import signing
from edge_agent.adapters.updates.package_file import PackageReader
from edge_agent.app.cli.main import main


def pack(tmp_path: Path, *flags: str) -> tuple[int, Path]:
    out = tmp_path / "p.pkg"
    return main(["model", "pack", str(INT8), "-o", str(out), "--name", "demo", "--version", "1", *flags]), out


def summary(capsys: pytest.CaptureFixture[str]) -> str:
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out
    return out


def identity_model(path: Path, ir: int, opset: int) -> Path:
    """The smallest ONNX file of a given IR and opset (a float source is hashed and summarized,
    never loaded)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir
    onnx.save(m, str(path))
    return path


@pytest.mark.parametrize(
    ("flags", "targets"),
    [
        ([], "for local installs, detector"),
        (["--board", "rpi4"], "for local installs on rpi4, detector"),
        (
            ["--for-group", "north", "--board", "rpi4", "--board", "jetson"],
            "for group north on rpi4/jetson, ",
        ),
        (
            [a for i in range(6) for a in ("--for-device", f"cam-{i}")],
            "for device cam-0, device cam-1, device cam-2, device cam-3, device cam-4, device cam-5, detector",
        ),
        (
            [*(a for i in range(6) for a in ("--for-device", f"cam-{i}")), "--for-group", "south"],
            "for device cam-0, device cam-1, device cam-2, device cam-3, device cam-4, device cam-5, ..., detector",
        ),
    ],
)
def test_the_summary_line_names_the_targets_the_first_six_then_an_ellipsis(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], targets: str
) -> None:
    """The author reads what the package is for before pushing it: at most six names (a
    thousand device ids would bury the line), the boards after them, or "local installs"."""
    rc, out = pack(tmp_path, *flags)
    assert rc == 0
    line = summary(capsys)
    assert line.startswith(f"{out}: demo 1 (detect), {out.stat().st_size} bytes, unsigned, ")
    assert f", {targets}" in line


def test_the_runtime_minimum_is_compared_as_version_numbers(tmp_path: Path) -> None:
    """1.11 (the INT8 detector) is newer than 1.6 (an IR 7 / opset 12 float source); compared as
    text "1.6" > "1.11", and a device with onnxruntime 1.9 would take a detector it cannot load."""
    old = identity_model(tmp_path / "old.onnx", ir=7, opset=12)
    rc, out = pack(tmp_path, "--float-source", str(old))
    assert rc == 0
    with PackageReader(out) as r:
        assert r.manifest.min_onnxruntime == "1.11"
        assert set(r.manifest.files) == {"detector", "float_source"}


def test_a_file_newer_than_any_known_onnxruntime_is_one_error_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = identity_model(tmp_path / "new.onnx", ir=99, opset=99)
    rc, out = pack(tmp_path, "--float-source", str(new))
    assert rc == 1 and not out.exists()
    err = capsys.readouterr().err
    assert f"{new}: IR 99 / opsets " in err and "are newer than any known onnxruntime" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_group_whose_name_has_a_colon_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The manifest's message is split at ": " to name the flag; a name containing ": " (groups
    allow it) must not make that split fail."""
    rc, out = pack(tmp_path, "--for-group", "north: a/b")
    assert rc == 1 and not out.exists()
    err = capsys.readouterr().err
    assert "--for-group 'north: a/b': does not match " in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1


def test_too_many_targets_name_the_flag_and_the_list_cut_short(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    devices = [f"d{i:04d}" for i in range(1001)]  # MAX_TARGETS is 1000
    rc, out = pack(tmp_path, *(a for d in devices for a in ("--for-device", d)))
    assert rc == 1 and not out.exists()
    err = capsys.readouterr().err
    shown = str(devices)[:60]
    assert f"--for-device {shown!r}: List should have at most 1000 items" in err, err
    assert len(err.strip().splitlines()) == 1


def test_keygen_writes_a_private_key_and_prints_its_public_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = tmp_path / "signing.key"
    assert main(["model", "keygen", str(key)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"private key: {key} (keep it off the devices)",
        "public key for [model_update] trusted_keys on the devices:",
        f"  {signing.public_key(key)}",
    ]
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600


def test_keygen_never_overwrites_a_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = tmp_path / "signing.key"
    signing.generate_key(key)
    before = key.read_bytes()
    assert main(["model", "keygen", str(key)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"{key}: exists; refusing to overwrite a signing key" in captured.err
    assert key.read_bytes() == before


@pytest.mark.parametrize("bad", ["IMG 0001.jpg", "café.jpg", "a+b.png"])
def test_a_probe_image_whose_name_the_package_refuses_is_one_line_and_no_package(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    """A phone's "IMG 0001.jpg" in the probe folder: the manifest's file-name rule refuses it, so
    pack says which file and what to do, in one line, before writing anything (it was pydantic's
    traceback); a name of the allowed characters beside it is packed."""
    src = sorted(p for p in SAMPLES.iterdir() if p.suffix.lower() == ".jpg")[0]
    probe = tmp_path / "probe"
    probe.mkdir()
    shutil.copy(src, probe / "good_1.jpg")
    shutil.copy(src, probe / bad)
    rc, out = pack(tmp_path, "--probe", str(probe))
    err = capsys.readouterr().err
    assert rc == 1
    assert err == (
        f"edge-agent model: error: --probe {probe}: {bad!r}: a probe image's name may hold only "
        "A-Z a-z 0-9 _ . - (the package's file-name rule); rename it\n"
    )
    assert not out.exists()
    (probe / bad).rename(probe / "good-2.JPG")
    rc, out = pack(tmp_path, "--probe", str(probe))
    assert rc == 0
    with PackageReader(out) as r:
        assert [f.path for f in r.manifest.probe] == ["probe/good-2.JPG", "probe/good_1.jpg"]

"""`model pack` in process (mutmut credits only in-process calls): what the package author's
command writes into the manifest from each file and flag, read back from the package."""

from __future__ import annotations

import shutil
from pathlib import Path

import onnx
import pytest
from support.toolchain import toy_classifier_model, toy_detector_model
from support.updates import INT8, SAMPLES

from edge_agent.adapters.updates.package_file import PackageReader
from edge_agent.app.cli.main import main
from edge_agent.core.runtime.onnx_wire import summarize
from edge_agent.core.runtime.ort_compat import oldest_runtime

CLASSIFIER = INT8.parent / "demo-classifier.onnx"


def needs(path: Path) -> str:
    g = summarize(path.read_bytes())
    row = oldest_runtime(g.ir_version, g.opsets)
    assert row is not None
    return row.name


def manifest(pkg: Path):  # type: ignore[no-untyped-def]
    with PackageReader(pkg) as r:
        return r.manifest


def test_the_newest_runtime_any_file_needs_is_the_package_minimum_whichever_file_it_is(
    tmp_path: Path,
) -> None:
    """Devices compare min_onnxruntime with their own before staging: a minimum taken from the
    detector alone, or from the last file, lets a Jetson Nano (1.11) install a package whose other
    model it cannot load."""
    new_cls, new_det = tmp_path / "cls17.onnx", tmp_path / "det20.onnx"
    onnx.save(toy_classifier_model(), str(new_cls))
    onnx.save(toy_detector_model(opset=20), str(new_det))
    assert needs(INT8) == needs(CLASSIFIER) == "1.11"
    assert needs(new_cls) not in ("1.11", needs(new_det))

    newer_classifier = tmp_path / "a.pkg"
    assert (
        main(
            [
                "-q",
                "model",
                "pack",
                str(INT8),
                "--classifier",
                str(new_cls),
                "-o",
                str(newer_classifier),
                "--version",
                "1",
            ]
        )
        == 0
    )
    assert manifest(newer_classifier).min_onnxruntime == needs(new_cls)

    newer_detector = tmp_path / "b.pkg"
    assert (
        main(
            [
                "-q",
                "model",
                "pack",
                str(new_det),
                "--classifier",
                str(CLASSIFIER),
                "-o",
                str(newer_detector),
                "--version",
                "1",
            ]
        )
        == 0
    )
    assert manifest(newer_detector).min_onnxruntime == needs(new_det)

    newer_float = tmp_path / "c.pkg"
    assert (
        main(
            [
                "-q",
                "model",
                "pack",
                str(INT8),
                "--float-source",
                str(new_det),
                "-o",
                str(newer_float),
                "--version",
                "1",
            ]
        )
        == 0
    )
    assert manifest(newer_float).min_onnxruntime == needs(new_det)


def test_probe_images_are_the_first_32_by_name_of_any_case_of_extension(tmp_path: Path) -> None:
    """The probe set is bounded (32: the gate runs every one on the device), taken in name order,
    and a camera's upper-case .JPG counts like .jpg; other files are ignored."""
    src = sorted(p for p in SAMPLES.iterdir() if p.suffix.lower() == ".jpg")[0]
    probe = tmp_path / "probe"
    probe.mkdir()
    for i in range(40):
        shutil.copy(src, probe / f"img{i:02d}.{'JPG' if i % 2 else 'jpg'}")
    (probe / "notes.txt").write_text("not an image")
    pkg = tmp_path / "p.pkg"
    assert (
        main(["-q", "model", "pack", str(INT8), "--probe", str(probe), "-o", str(pkg), "--version", "1"]) == 0
    )
    names = [f.path for f in manifest(pkg).probe]
    assert names == [f"probe/img{i:02d}.{'JPG' if i % 2 else 'jpg'}" for i in range(32)]


def test_a_probe_folder_without_images_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "x.txt").write_text("no")
    assert main(["-q", "model", "pack", str(INT8), "--probe", str(probe), "-o", str(tmp_path / "p.pkg")]) != 0
    assert f"{probe}: no .jpg/.png probe images" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        (["--name", "../x"], "--name '../x': String should match pattern"),
        (["--name", "n" * 101], "String should have at most 100 characters"),
        (["--min-agent-version", "abc"], "--min-agent-version: version 'abc' is not a PEP 440 version"),
        (["--version", "1 2"], "--version: version '1 2' is not a PEP 440 version"),
        (
            ["--for-device", "cam-1", "--for-device", "cam/1"],
            "--for-device 'cam/1': does not match [A-Za-z0-9_.-]{1,64}",
        ),
        (["--for-group", "g/#"], "--for-group 'g/#': does not match"),
        (["--board", "rpi6"], "--board 'rpi6': expected one of rpi4, rpi5, rpi, jetson, generic-arm"),
        (["--chunk-kb", "0"], "--chunk-kb 0: expected 1..16384"),
        (["--chunk-kb", "16385"], "--chunk-kb 16385: expected 1..16384"),
    ],
)
def test_a_flag_the_manifest_refuses_is_one_error_naming_it_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], error: str
) -> None:
    """What every device would refuse is refused at pack time, as one line (pydantic's traceback
    for --name before)."""
    out = tmp_path / "p.pkg"
    assert main(["-q", "model", "pack", str(INT8), *flags, "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert error in err and "Traceback" not in err
    assert not out.exists()


def test_name_and_min_agent_version_flags_reach_the_manifest(tmp_path: Path) -> None:
    pkg = tmp_path / "p.pkg"
    assert (
        main(
            [
                "-q",
                "model",
                "pack",
                str(INT8),
                "--name",
                "yard-cam",
                "--min-agent-version",
                "0.5",
                "-o",
                str(pkg),
                "--version",
                "3",
            ]
        )
        == 0
    )
    m = manifest(pkg)
    assert (m.name, m.version, m.min_agent_version, m.task) == ("yard-cam", "3", "0.5", "detect")


def test_the_target_flags_reach_the_signed_manifest_with_a_plan_of_the_body(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from edge_agent.adapters.updates import signing
    from edge_agent.adapters.updates.package_file import transfer_parts

    key = tmp_path / "k"
    signing.generate_key(key)
    pkg = tmp_path / "p.pkg"
    flags = ["--for-device", "cam-1", "--for-device", "cam-2", "--for-group", "north", "--board", "rpi5"]
    args = [
        "model",
        "pack",
        str(INT8),
        *flags,
        "--chunk-kb",
        "64",
        "--sign",
        str(key),
        "-o",
        str(pkg),
        "--version",
        "3",
    ]
    assert main(args) == 0
    assert "for device cam-1, device cam-2, group north on rpi5" in capsys.readouterr().out
    m = manifest(pkg)
    assert (m.for_devices, m.for_groups, m.boards, m.format) == (["cam-1", "cam-2"], ["north"], ["rpi5"], 2)
    plan, data, sig = transfer_parts(pkg)  # every chunk of the body matches its hash
    assert plan.chunk_size == 64 << 10 and plan.size < pkg.stat().st_size and len(sig) == 64
    assert signing.verify(data, sig, [signing.public_key(key)], "p") == 0  # the plan is signed
    unnamed = tmp_path / "u.pkg"
    assert main(["model", "pack", str(INT8), "-o", str(unnamed), "--version", "3"]) == 0
    assert "no --for-device / --for-group: devices install it locally only" in capsys.readouterr().err
    assert manifest(unnamed).for_devices == [] and manifest(unnamed).transfer is not None


def test_pack_without_an_output_file_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """-o is required: argparse's usage error (exit 2) naming it, never a package written somewhere."""
    with pytest.raises(SystemExit) as exc:
        main(["model", "pack", str(INT8), "--version", "1"])
    assert exc.value.code == 2
    assert "error: the following arguments are required: -o/--output" in capsys.readouterr().err

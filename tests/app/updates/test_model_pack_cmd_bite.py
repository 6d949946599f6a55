"""`model pack|keygen` in process, the edges the mutation run found untested (issue 36): the
summary line's targets, the runtime minimum compared as numbers, a file newer than any known
onnxruntime, a target list the manifest refuses, and keygen."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import time
from datetime import datetime, timezone
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from support.updates import INT8, SAMPLES, make_zero_score

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


@pytest.mark.parametrize("bad", ["IMG 0001.jpg", "café.jpg", "a+b.png", f"long {'q' * 70}.jpg"])
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
        f"edge-agent model: error: --probe {probe}: {bad[:60]!r}: a probe image's name may hold only "
        "A-Z a-z 0-9 _ . - (the package's file-name rule); rename it\n"
    )
    assert not out.exists()
    (probe / bad).rename(probe / "good-2.JPG")
    rc, out = pack(tmp_path, "--probe", str(probe))
    assert rc == 0
    with PackageReader(out) as r:
        assert [f.path for f in r.manifest.probe] == ["probe/good-2.JPG", "probe/good_1.jpg"]


@pytest.mark.parametrize("kb", [1, 16384])
def test_the_chunk_size_bounds_are_accepted_and_signed_into_the_plan(tmp_path: Path, kb: int) -> None:
    """1 KiB and 16 MiB are the plan's own bounds (core.updates.plan): both pack, and the plan
    devices get says that chunk size."""
    rc, out = pack(tmp_path, "--chunk-kb", str(kb))
    assert rc == 0
    with PackageReader(out) as r:
        plan = r.manifest.transfer
    assert plan is not None and plan.chunk_size == kb * 1024


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (["--chunk-kb", "0"], "--chunk-kb 0: expected 1..16384"),
        (["--chunk-kb", "16385"], "--chunk-kb 16385: expected 1..16384"),
        (
            ["--board", "b" * 50],
            f"--board {'b' * 40!r}: expected one of rpi4, rpi5, rpi, jetson, generic-arm, generic-x86, generic",
        ),
    ],
)
def test_a_bad_chunk_size_or_board_is_exactly_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], line: str
) -> None:
    """The whole line: the bounds as whole KiB, a long board kind cut at 40 characters."""
    rc, out = pack(tmp_path, *flags)
    assert (rc, capsys.readouterr().err) == (1, f"edge-agent model: error: {line}\n")
    assert not out.exists()


def test_an_output_folder_that_does_not_exist_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "no-such" / "p.pkg"
    rc = main(["model", "pack", str(INT8), "-o", str(out), "--version", "1"])
    assert (rc, capsys.readouterr().err) == (
        1,
        f"edge-agent model: error: -o {out}: the folder {out.parent} does not exist\n",
    )


def test_the_guard_refuses_a_zero_score_detector_unless_skip_guard_then_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every device would refuse a detector whose scores round to 0: pack says so in one line and
    writes nothing; --skip-guard packs it (to test a fleet's gate) with one warning line."""
    zero = make_zero_score(INT8, tmp_path / "zero.onnx")
    out = tmp_path / "z.pkg"
    assert main(["model", "pack", str(zero), "-o", str(out), "--version", "1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"edge-agent model: error: {zero}: ") and err.count("\n") == 1
    assert "cannot produce detection scores" in err
    assert err.endswith(" (not packed; --skip-guard packs it anyway)\n")
    assert not out.exists()
    assert main(["model", "pack", str(zero), "-o", str(out), "--version", "1", "--skip-guard"]) == 0
    lines = capsys.readouterr().err.splitlines()
    warning = [ln for ln in lines if ln.startswith("warning: ")]
    assert len(warning) == 1 and warning[0].startswith(f"warning: {zero}: ")
    assert warning[0].endswith(" (packed: --skip-guard)") and "cannot produce detection scores" in warning[0]
    assert out.is_file()


def test_the_package_holds_the_detector_as_detector_onnx_with_its_labels(tmp_path: Path) -> None:
    """What a device unpacks: the detector's bytes under detector.onnx (the file the manifest
    lists, hash checked) and its class names under labels["detector"], in class order."""
    rc, out = pack(tmp_path)
    assert rc == 0
    dest = tmp_path / "x"
    dest.mkdir()
    with PackageReader(out) as r:
        r.extract_to(dest)
        m = r.manifest
    assert (dest / "detector.onnx").read_bytes() == INT8.read_bytes()
    assert m.files["detector"].path == "detector.onnx"
    assert m.labels == {"detector": ["circle", "square", "triangle"]}  # the demo detector's classes 0, 1, 2


def test_every_model_file_is_stored_under_its_role_and_the_classifier_keeps_its_labels(
    tmp_path: Path,
) -> None:
    """--classifier and --float-source: each file's bytes under classifier.onnx / float_source.onnx
    (what a device installs), the classifier's class names under labels["classifier"]."""
    classifier = INT8.parent / "demo-classifier.onnx"
    float_source = INT8.parent / "demo-detector.onnx"
    rc, out = pack(tmp_path, "--classifier", str(classifier), "--float-source", str(float_source))
    assert rc == 0
    dest = tmp_path / "x"
    dest.mkdir()
    with PackageReader(out) as r:
        r.extract_to(dest)
        m = r.manifest
    assert (dest / "classifier.onnx").read_bytes() == classifier.read_bytes()
    assert (dest / "float_source.onnx").read_bytes() == float_source.read_bytes()
    assert {role: f.path for role, f in m.files.items()} == {
        "detector": "detector.onnx",
        "classifier": "classifier.onnx",
        "float_source": "float_source.onnx",
    }
    assert m.labels["classifier"] == ["solid", "striped", "dotted", "outlined"]
    assert m.task == "detect+classify"


def test_probe_images_of_every_image_suffix_in_any_case_are_packed(tmp_path: Path) -> None:
    import cv2
    import numpy as np

    probe = tmp_path / "probe"
    probe.mkdir()
    img = np.full((8, 8, 3), 90, np.uint8)
    for name in ("a.jpeg", "b.JPEG", "c.png", "d.PNG", "e.jpg"):
        assert cv2.imwrite(str(probe / name.lower()), img)
        (probe / name.lower()).rename(probe / name)
    (probe / "f.gif").write_bytes(b"GIF89a")
    rc, out = pack(tmp_path, "--probe", str(probe))
    assert rc == 0
    with PackageReader(out) as r:
        assert [f.path for f in r.manifest.probe] == [
            f"probe/{n}" for n in ("a.jpeg", "b.JPEG", "c.png", "d.PNG", "e.jpg")
        ]


@pytest.mark.parametrize(
    ("file", "name"),
    [("yard-cam.onnx", "yard-cam"), ("my yard.onnx", "my_yard"), ("yard_model", "yard_model")],
)
def test_the_default_package_name_is_the_detector_file_stem_with_spaces_as_underscores(
    tmp_path: Path, file: str, name: str
) -> None:
    det = tmp_path / file
    det.write_bytes(INT8.read_bytes())
    out = tmp_path / "p.pkg"
    assert main(["model", "pack", str(det), "-o", str(out), "--version", "1"]) == 0
    with PackageReader(out) as r:
        assert r.manifest.name == name


def test_the_default_version_and_the_creation_time_are_utc_whatever_the_local_zone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A packer's machine five hours west of UTC still stamps UTC ("...Z"): the version defaults to
    the UTC time of packing (docs/model-updates.md)."""
    monkeypatch.setenv("TZ", "EST+5")
    time.tzset()
    try:
        before = datetime.now(timezone.utc).replace(microsecond=0)
        out = tmp_path / "p.pkg"
        assert main(["model", "pack", str(INT8), "-o", str(out)]) == 0
        after = datetime.now(timezone.utc)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    with PackageReader(out) as r:
        m = r.manifest
    created = datetime.strptime(m.created_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert before <= created <= after
    assert m.version == created.strftime("%Y%m%d.%H%M%S")


NOTE = (
    "note: no --for-device / --for-group: devices install it locally only (`model install`), "
    "never over MQTT\n"
)
UNSIGNED_FORCE = "warning: --force without --sign: devices ignore force in an unsigned manifest\n"


@pytest.mark.parametrize(
    ("flags", "err"),
    [
        ([], NOTE),
        (["--for-device", "cam-1"], ""),
        (["--for-group", "north"], ""),
        (["--force", "--for-group", "north"], UNSIGNED_FORCE),
        (["--force"], UNSIGNED_FORCE + NOTE),
    ],
)
def test_pack_warns_of_an_unsigned_force_and_notes_a_package_for_no_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], err: str
) -> None:
    """stderr is exactly these lines: the unsigned --force warning, the local-only note when no
    target is named; nothing for a package with a target and no --force."""
    rc, out = pack(tmp_path, *flags)
    assert (rc, capsys.readouterr().err) == (0, err)
    with PackageReader(out) as r:
        assert r.manifest.force is ("--force" in flags)


def test_a_signed_force_reaches_the_manifest_without_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = tmp_path / "k"
    signing.generate_key(key)
    rc, out = pack(tmp_path, "--force", "--sign", str(key), "--for-device", "cam-1")
    got = capsys.readouterr()
    assert (rc, got.err) == (0, "")
    sha = hashlib.sha256(INT8.read_bytes()).hexdigest()
    assert got.out == (
        f"{out}: demo 1 (detect), {out.stat().st_size} bytes, signed, for device cam-1, "
        f"detector sha256 {sha[:16]}...\n"
    )
    with PackageReader(out) as r:
        assert r.manifest.force is True and r.signature is not None


def test_a_package_that_cannot_be_written_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """-o names an existing folder: the write fails and pack says so in one line (exit 1)."""
    out = tmp_path / "p.pkg"
    out.mkdir()
    rc, _ = pack(tmp_path, "--for-device", "cam-1")
    assert (rc, capsys.readouterr().err) == (
        1,
        f"edge-agent model: error: -o {out}: cannot write the package: Is a directory\n",
    )
    assert out.is_dir() and list(out.iterdir()) == []

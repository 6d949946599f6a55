"""``edge-agent model convert``: what mutation testing found no test reading (app-convert area):
the help page, the conversion's own lines on stderr, the private folder the converted copy is
checked in (hidden, beside -o, -o absent until it passes), a folder or disk that refuses the copy
as one line, the default of 8 images out of more, and the table's last line complete."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import onnx
import pytest
from support.toolchain import toy_detector_model

import edge_agent.tools.validate as validate
from edge_agent.app.cli.main import main
from edge_agent.inference.report import ValidationReport


def convert(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["model", "convert", *args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def src(tmp_path: Path) -> Path:
    path = tmp_path / "toy20.onnx"
    onnx.save(toy_detector_model(opset=20), str(path))
    return path


def test_the_conversion_says_what_it_lowered_naming_the_input(
    capsys: pytest.CaptureFixture[str], src: Path, tmp_path: Path
) -> None:
    rc, _, err = convert(
        capsys, str(src), "--target-ort", "1.11", "-o", str(tmp_path / "o.onnx"), "--no-validate"
    )
    assert rc == 0
    assert err.splitlines()[0].startswith("toy20.onnx: opset 20 -> 16 ("), err


def test_the_copy_is_checked_in_a_hidden_folder_beside_the_output_before_it_is_written(
    capsys: pytest.CaptureFixture[str],
    src: Path,
    toy_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out_dir = tmp_path / "out"
    out = out_dir / "toy.onnx"
    seen: list[tuple[Path, list[str]]] = []
    real = validate.validate_models

    def watching(a: Path, b: Path, *args: object, **kw: object) -> ValidationReport:
        seen.append((Path(b), sorted(p.name for p in out_dir.iterdir())))
        return real(a, b, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(validate, "validate_models", watching)
    rc, text, _ = convert(
        capsys, str(src), "--target-ort", "1.11", "-o", str(out), "--images", str(toy_dir / "val")
    )
    assert rc == 0
    ((trial, listing),) = seen
    # -o is not there while its copy is compared: only a hidden folder named after it
    assert len(listing) == 1 and listing[0].startswith(".toy.onnx.") and trial.name == "toy.onnx"
    assert trial.parent == out_dir / listing[0]
    assert sorted(p.name for p in out_dir.iterdir()) == ["toy.onnx"]  # then -o, the folder gone
    # the table is whole: its last line is the verdict, ended like every other line
    assert text.endswith("\n") and "PASS" in text.splitlines()[-1]


def _full_disk_for(folder: Path, monkeypatch: pytest.MonkeyPatch, call: str) -> None:
    """Root ignores permissions, so the folder refusing (ENOSPC) is made to happen at ``call``."""
    if call == "mkdir":
        real_mkdir = os.mkdir

        def mkdir(path: object, *args: object, **kw: object) -> None:
            if Path(str(path)).parent == folder:
                raise OSError(errno.ENOSPC, "No space left on device")
            real_mkdir(path, *args, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "mkdir", mkdir)
    else:
        real_write = Path.write_bytes

        def write_bytes(self: Path, data: bytes) -> int:
            if folder in self.parents:
                raise OSError(errno.ENOSPC, "No space left on device")
            return real_write(self, data)

        monkeypatch.setattr(Path, "write_bytes", write_bytes)


@pytest.mark.parametrize("call", ["mkdir", "write"])
def test_a_folder_that_refuses_the_copy_is_one_line_and_nothing_is_left(
    capsys: pytest.CaptureFixture[str], src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "toy.onnx"
    _full_disk_for(out_dir, monkeypatch, call)
    rc, _, err = convert(capsys, str(src), "--target-ort", "1.11", "-o", str(out), "--no-validate")
    assert rc == 1
    assert (
        err.splitlines()[-1] == f"edge-agent model: error: {out}: cannot write there: No space left on device"
    )
    assert list(out_dir.iterdir()) == []


def test_the_default_is_8_images_of_more_and_0_takes_all(
    capsys: pytest.CaptureFixture[str], src: Path, toy_dir: Path, tmp_path: Path
) -> None:
    many = tmp_path / "many"
    many.mkdir()
    for i, image in enumerate(sorted((toy_dir / "val").iterdir()) * 2):  # 16 images
        shutil.copy(image, many / f"{i:02d}{image.suffix}")
    base = [str(src), "--target-ort", "1.11", "--images", str(many)]
    rc, text, _ = convert(capsys, *base, "-o", str(tmp_path / "a.onnx"))
    assert rc == 0 and "on 8 images" in text
    rc, text, _ = convert(capsys, *base, "-o", str(tmp_path / "b.onnx"), "--max-images", "0")
    assert rc == 0 and "on 16 images" in text


@pytest.mark.parametrize("left_out", ["--target-ort", "-o"])
def test_the_target_and_the_output_are_required(
    capsys: pytest.CaptureFixture[str], src: Path, tmp_path: Path, left_out: str
) -> None:
    given = {"--target-ort": "1.11", "-o": str(tmp_path / "o.onnx")}
    argv = [str(src)] + [a for k, v in given.items() if k != left_out for a in (k, v)]
    with pytest.raises(SystemExit) as e:
        main(["model", "convert", *argv])
    assert e.value.code == 2
    want = "--target-ort" if left_out == "--target-ort" else "-o/--output"
    assert f"the following arguments are required: {want}" in capsys.readouterr().err
    assert not (tmp_path / "o.onnx").exists()


# the help page as an operator reads it (whitespace folded); docs/model-tools.md section 5 tells the same
HELP = (
    "usage: edge-agent model convert [-h] --target-ort VERSION -o OUTPUT [--images IMAGES] [--max-images N] "
    "[--no-validate] [-v] [-q] model "
)
OPTIONS = (
    "positional arguments: model ONNX model to convert "
    "options: -h, --help show this help message and exit "
    "--target-ort VERSION onnxruntime version, e.g. 1.11 "
    "-o OUTPUT, --output OUTPUT ONNX file to write "
    "--images IMAGES images to compare input and output on (default: bundled samples) "
    "--max-images N at most N images (0 = all) (default: 8) "
    "--no-validate skip the comparison with the input "
)


def test_the_help_page_says_what_each_option_does(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "2000")
    with pytest.raises(SystemExit):
        main(["model", "convert", "--help"])
    page = " ".join(capsys.readouterr().out.split())
    assert page.startswith(HELP) and OPTIONS in page
    assert page[len(HELP) :].startswith(
        "'edge-agent model convert IN.onnx --target-ort 1.11 -o OUT.onnx': a model an older onnxruntime "
        "loads. A Jetson Nano (JetPack 4.6) runs onnxruntime 1.11,"
    )
    with pytest.raises(SystemExit):
        main(["model", "--help"])
    top = " ".join(capsys.readouterr().out.split())
    assert " convert down-convert a model for an older onnxruntime (opset/IR) " in top

"""On an x86 CPU without VNNI the INT8 accuracy measured by ``validate``/``quantize`` is not the
board's (saturating int16 pair sums): the commands say so once, for INT8 candidates only, and only
on such a host, read from /proc/cpuinfo's flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from edge_agent.adapters.runtime import board
from edge_agent.app.cli.main import main

MODELS = Path(__file__).resolve().parents[3] / "models"
CLS_IMAGES = MODELS / "data" / "heldout-cls"
AVX2 = "processor\t: 0\nflags\t\t: fpu sse2 ssse3 avx avx2 fma\n\n"


def _cpuinfo(tmp_path: Path, text: str) -> Path:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("flags", "machine", "saturates"),
    [
        ("avx2 fma", "x86_64", True),
        ("avx2 avx512f avx512_vnni", "x86_64", False),
        ("avx2 avx_vnni", "AMD64", False),
        ("avx2 amx_int8", "x86_64", False),
        ("avx2", "aarch64", False),  # ARM's dot-product kernels sum in int32
        ("avx2", "armv7l", False),
    ],
)
def test_saturation_is_read_from_the_cpu_flags(
    tmp_path: Path, flags: str, machine: str, saturates: bool
) -> None:
    root = _cpuinfo(tmp_path, f"processor\t: 0\nflags\t\t: fpu {flags}\n\n")
    assert board.int8_saturates(root, machine) is saturates


def test_no_cpuinfo_or_no_flags_line_is_not_called_saturating(tmp_path: Path) -> None:
    assert board.int8_saturates(tmp_path, "x86_64") is False
    assert board.int8_saturates(_cpuinfo(tmp_path, "processor\t: 0\nmodel name\t: x\n"), "x86_64") is False


def test_a_vnni_flag_on_a_later_line_does_not_count_only_the_first_flags_line(tmp_path: Path) -> None:
    root = _cpuinfo(tmp_path, AVX2 + "processor\t: 1\nflags\t\t: avx512_vnni\n")
    assert board.int8_saturates(root, "x86_64") is True


def _validate(capsys: pytest.CaptureFixture[str], candidate: str) -> str:
    rc = main(["validate", str(MODELS / "demo-classifier.onnx"), str(MODELS / candidate),
               "--images", str(CLS_IMAGES), "--max-images", "4", "--json"])  # fmt: skip
    assert rc in (0, 1)
    return capsys.readouterr().err


def test_validate_warns_for_an_int8_candidate_on_a_saturating_host(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(board, "int8_saturates", lambda *a: True)
    err = _validate(capsys, "demo-classifier-int8.onnx")
    assert err.count("without VNNI") == 1 and "quantize --reduce-range" in err
    assert err.startswith("edge-agent validate: warning:")


def test_no_warning_for_a_float_candidate_or_an_exact_host(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(board, "int8_saturates", lambda *a: True)
    assert "VNNI" not in _validate(capsys, "demo-classifier.onnx")
    monkeypatch.setattr(board, "int8_saturates", lambda *a: False)
    assert "VNNI" not in _validate(capsys, "demo-classifier-int8.onnx")

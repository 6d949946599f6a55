"""``edge-agent bench``: interleaved runs, percentiles, ratios against the first model, memory probe."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edge_agent.app.cli.main import main
from edge_agent.tools.bench import percentiles, probe_memory, synthetic_image
from edge_agent.tools.quantize import image_files, quantize_model


@pytest.fixture(scope="module")
def pair(toy_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    int8 = tmp_path_factory.mktemp("b") / "toy.int8.onnx"
    quantize_model(toy_dir / "toy-fp32.onnx", int8, image_files(toy_dir / "calib"), progress=False)
    return toy_dir / "toy-fp32.onnx", int8


def test_percentiles_and_synthetic_image() -> None:
    p = percentiles(list(range(1, 101)))
    assert (
        p["p50"] == pytest.approx(50.5)
        and p["p90"] == pytest.approx(90.1)
        and p["p99"] == pytest.approx(99.01)
    )
    a, b = synthetic_image(seed=3), synthetic_image(seed=3)
    assert a.shape == (480, 640, 3) and a.dtype == np.uint8 and np.array_equal(a, b)


def test_bench_two_models_side_by_side(pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    fp32, int8 = pair
    rc = main(["bench", str(fp32), str(int8), "--runs", "4", "--warmup", "1", "--threads", "1", "--json"])
    cap = capsys.readouterr()
    assert rc == 0
    rep = json.loads(cap.out)
    assert rep["runs"] == 4 and rep["threads"] == 1
    assert "synthetic" in rep["image"] or "samples" in rep["image"]
    first, second = rep["models"]
    assert first["quantization"] == "fp32" and second["quantization"] == "qdq_int8"
    assert first["speedup_vs_first"]["session_run_p50"] == 1.0
    for m in rep["models"]:
        s = m["session_run_ms"]
        assert 0 < s["p50"] <= s["p90"] <= s["p99"]
        stages = m["pipeline_ms"]
        assert stages["total"]["p50"] >= stages["infer"]["p50"] > 0
        assert m["images_per_s"] > 0
        assert m["peak_rss_mb"] > m["model_rss_mb"] >= 0 and m["load_ms"] > 0
    ratio = first["session_run_ms"]["p50"] / second["session_run_ms"]["p50"]
    assert second["speedup_vs_first"]["session_run_p50"] == pytest.approx(ratio, rel=1e-2)
    assert "benchmarking" in cap.err


def test_bench_table_and_image_option(
    pair: tuple[Path, Path], toy_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    img = image_files(toy_dir / "val")[0]
    rc = main(["bench", str(pair[0]), "--image", str(img), "--runs", "2", "--warmup", "0", "--no-memory"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "toy-fp32.onnx" in out and "1.00x" in out and img.name in out


def test_memory_probe_runs_in_a_fresh_process(pair: tuple[Path, Path]) -> None:
    fp32 = probe_memory(str(pair[0]), "cpu", 1)
    assert fp32["peak_rss_mb"] > 20 and fp32["load_ms"] > 0
    assert 0 <= fp32["model_rss_mb"] < fp32["peak_rss_mb"]
    with pytest.raises(Exception, match="memory probe failed"):
        probe_memory(str(pair[0]) + ".missing", "cpu", 1)


def test_bench_rejects_bad_counts(pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    # a usage error since the CLI checks ranges in argparse (exit 2, one line; see test_cli_manners)
    with pytest.raises(SystemExit) as e:
        main(["bench", str(pair[0]), "--runs", "0"])
    assert e.value.code == 2
    assert "--runs: 0 is out of range: expected a whole number >= 1" in capsys.readouterr().err

"""``bench``'s arithmetic and bookkeeping, in process (issue 19): warm-up runs are not samples,
ratios are against the first model, the table shows what the report holds, the probe's JSON.

Timings themselves are never asserted (no timed unit tests): only counts, ratios of given
numbers and the report's shape.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import cv2
import numpy as np
import pytest

from edge_agent.tools.bench import (
    STAGES,
    ModelBench,
    _current_rss_mb,
    _peak_rss_mb,
    _probe_main,
    bench_models,
    default_image,
    format_table,
    percentiles,
    report_json,
    synthetic_image,
)


@pytest.mark.parametrize(("runs", "warmup"), [(3, 2), (2, 0)])
def test_warmup_runs_are_not_samples(toy_dir: Path, runs: int, warmup: int) -> None:
    img = synthetic_image(64, 64)
    (b,) = bench_models(
        [str(toy_dir / "toy-fp32.onnx")],
        img,
        runs=runs,
        warmup=warmup,
        measure_memory=False,
        show_progress=False,
    )
    assert len(b.session_ms) == runs
    assert {s: len(v) for s, v in b.stages_ms.items()} == dict.fromkeys(STAGES, runs)
    assert (b.kind, b.quantization, b.path) == ("detect", "fp32", str(toy_dir / "toy-fp32.onnx"))
    assert math.isnan(b.peak_rss_mb) and b.load_ms > 0
    for i in range(runs):
        parts = sum(b.stages_ms[s][i] for s in ("pre", "infer", "post"))
        assert b.stages_ms["total"][i] == pytest.approx(parts)


def test_a_classifier_is_benched_through_its_own_pipeline(color_classifier: Path) -> None:
    (b,) = bench_models(
        [str(color_classifier)],
        synthetic_image(40, 50),
        runs=2,
        warmup=1,
        measure_memory=False,
        show_progress=False,
    )
    assert b.kind == "classify" and len(b.stages_ms["post"]) == 2
    for i in range(2):
        parts = sum(b.stages_ms[s][i] for s in ("pre", "infer", "post"))
        assert b.stages_ms["total"][i] == pytest.approx(parts, rel=1e-6, abs=1e-6)


def _bench(path: str, session: list[float], total: list[float]) -> ModelBench:
    b = ModelBench(path, "detect", "fp32", load_ms=12.34, peak_rss_mb=100.04, model_rss_mb=20.06)
    b.session_ms = session
    b.stages_ms = {"pre": [1.0] * len(total), "infer": session, "post": [0.5] * len(total), "total": total}
    return b


def test_report_ratios_are_against_the_first_model() -> None:
    a = _bench("/m/a.onnx", [10.0, 20.0, 30.0], [20.0, 20.0, 40.0])
    b = _bench("/m/b.onnx", [5.0, 5.0, 5.0], [10.0, 10.0, 10.0])
    rep = report_json([a, b], {"image": "x", "runs": 3})
    assert rep["image"] == "x" and rep["runs"] == 3
    first, second = rep["models"]
    assert first["speedup_vs_first"] == {"session_run_p50": 1.0, "pipeline_p50": 1.0}
    assert second["speedup_vs_first"] == {"session_run_p50": 4.0, "pipeline_p50": 2.0}
    assert first["session_run_ms"] == {"p50": 20.0, "p90": 28.0, "p99": 29.8, "mean": 20.0}
    assert first["images_per_s"] == round(1000.0 / (80.0 / 3), 2)
    assert (first["load_ms"], first["peak_rss_mb"], first["model_rss_mb"]) == (12.3, 100.0, 20.1)
    assert first["pipeline_ms"]["pre"]["p50"] == 1.0 and first["pipeline_ms"]["post"]["mean"] == 0.5


def test_an_empty_bench_has_no_rate_and_nan_percentiles() -> None:
    assert ModelBench("/m/a.onnx", "detect", "fp32").summary()["images_per_s"] is None
    p = percentiles([])
    assert math.isnan(p["p50"]) and math.isnan(p["p90"]) and math.isnan(p["p99"]) and p["mean"] == 0.0
    assert percentiles([4.0]) == {"p50": 4.0, "p90": 4.0, "p99": 4.0, "mean": 4.0}


def test_the_table_shows_the_report() -> None:
    a = _bench("/m/" + "a" * 40 + ".onnx", [10.0, 20.0, 30.0], [20.0, 20.0, 40.0])
    b = _bench("/m/b.onnx", [5.0, 5.0, 5.0], [10.0, 10.0, 10.0])
    rep = report_json([a, b], {"image": "bus.jpg (640x480)", "runs": 3, "warmup": 1, "threads": None})
    lines = format_table(rep).splitlines()
    assert (
        lines[0]
        == "bench: bus.jpg (640x480) (3 runs after 1 warm-up, interleaved; threads default; times in ms)"
    )
    assert lines[1].split() == [
        "model",
        "quant",
        "run",
        "p50",
        "p90",
        "p99",
        "pre",
        "post",
        "e2e",
        "p50",
        "img/s",
        "load",
        "RSS",
        "MB",
        "x",
        "first",
    ]
    assert lines[2].split() == [
        "a" * 34,
        "fp32",
        "20.00",
        "28.00",
        "29.80",
        "1.00",
        "0.50",
        "20.00",
        "37.5",
        "12",
        "20.1",
        "1.00x",
    ]
    assert lines[3].split()[0] == "b.onnx" and lines[3].split()[-1] == "4.00x"
    assert lines[-1] == "x first: median session.run speed-up against the first model (>1 = faster)"
    rep["threads"] = 2
    assert "threads 2;" in format_table(rep).splitlines()[0]


def test_the_default_image_is_the_first_sample_else_synthetic(tmp_path: Path) -> None:
    img, label = default_image(None)
    assert label == "synthetic 640x480" and img.shape == (480, 640, 3)
    assert np.array_equal(img, synthetic_image())
    assert default_image(tmp_path / "missing")[1] == "synthetic 640x480"
    (tmp_path / "notes.txt").write_text("no image")
    assert default_image(tmp_path)[1] == "synthetic 640x480"
    cv2.imwrite(str(tmp_path / "b.png"), np.full((10, 20, 3), 200, np.uint8))
    cv2.imwrite(str(tmp_path / "a.PNG"), np.full((12, 16, 3), 50, np.uint8))
    img, label = default_image(tmp_path)
    assert label == str(tmp_path / "a.PNG") and img.shape == (12, 16, 3) and int(img.max()) == 50


def test_synthetic_images_differ_by_seed_and_size() -> None:
    a, b = synthetic_image(48, 64, seed=1), synthetic_image(48, 64, seed=2)
    assert a.shape == (48, 64, 3) and not np.array_equal(a, b)
    assert a.std() > 10  # texture and shapes, not a flat grey


def test_the_probe_prints_one_json_line(toy_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _probe_main(["--probe", str(toy_dir / "toy-fp32.onnx"), "--runs", "2", "--threads", "1"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    got = json.loads(out[-1])
    assert set(got) == {"load_ms", "peak_rss_mb", "model_rss_mb"} and got["load_ms"] > 0
    assert got["peak_rss_mb"] >= got["model_rss_mb"]
    # both in MiB (ru_maxrss and VmRSS are KiB); the kernel updates the peak lazily, so no order
    assert _peak_rss_mb() > 10 and _current_rss_mb() > 10


def test_the_synthetic_image_is_the_same_picture_on_every_release() -> None:
    """Bench figures are compared across releases and boards: the default picture must not move
    (numpy's PCG64 stream and OpenCV's 8-bit GaussianBlur are both bit-exact by design)."""
    import hashlib

    assert hashlib.sha256(synthetic_image().tobytes()).hexdigest() == (
        "e97db4558cfa1b4b850b164496cd754fe3032cf35d45a5ebee6d705ac4943dc4"
    )
    assert hashlib.sha256(synthetic_image(48, 64, seed=3).tobytes()).hexdigest() == (
        "3d6fd79b3f6c3d61c90490af06ddc896044ad1b551f1ee2d409ea41d3da513e1"
    )


def test_summary_keys_and_rounding() -> None:
    b = ModelBench("/m/a.onnx", "classify", "qdq_int8", load_ms=1.0)
    b.session_ms = [1.23456]
    b.stages_ms = {"pre": [0.11111], "infer": [1.23456], "post": [0.22222], "total": [3.0]}
    s = b.summary()
    assert (s["path"], s["kind"], s["quantization"]) == ("/m/a.onnx", "classify", "qdq_int8")
    assert s["session_run_ms"]["p50"] == 1.235 and s["pipeline_ms"]["pre"]["mean"] == 0.111
    assert s["images_per_s"] == 333.33


def test_threads_and_provider_reach_every_model_load(
    toy_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import edge_agent.adapters.runtime.onnx_model as runtime

    seen: list[dict[str, object]] = []
    real = runtime.OnnxModel

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(dict(kwargs))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(runtime, "OnnxModel", spy)
    path = str(toy_dir / "toy-fp32.onnx")
    bench_models(
        [path, path],
        synthetic_image(64, 64),
        runs=1,
        warmup=0,
        threads=1,
        provider="cpu",
        measure_memory=False,
        show_progress=False,
    )
    assert [(k["provider"], k["threads"]) for k in seen] == [("cpu", 1), ("cpu", 1)]
    seen.clear()
    assert _probe_main(["--probe", path, "--provider", "cpu", "--threads", "2"]) == 0
    assert seen == [{"provider": "cpu", "threads": 2, "warmup": False}]
    capsys.readouterr()


def test_rss_figures_are_mebibytes() -> None:
    # a Python process with numpy and onnxruntime loaded: tens to hundreds of MiB, not KiB or GiB
    assert 10 < _current_rss_mb() < 20_000 and 10 < _peak_rss_mb() < 20_000


def test_the_memory_probe_gets_the_provider_and_threads(
    toy_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import edge_agent.tools.bench as bench

    asked: list[tuple[str, object, object]] = []

    def probe(
        path: str, provider: object, threads: object, runs: int = 3, seq_len: int = 128
    ) -> dict[str, float]:
        asked.append((path, provider, threads))
        return {"load_ms": 7.0, "peak_rss_mb": 90.0, "model_rss_mb": 12.0}

    monkeypatch.setattr(bench, "probe_memory", probe)
    path = str(toy_dir / "toy-fp32.onnx")
    (b,) = bench_models(
        [path], synthetic_image(64, 64), runs=2, warmup=0, threads=3, provider="cpu", show_progress=False
    )
    assert asked == [(path, "cpu", 3)]
    assert (b.load_ms, b.peak_rss_mb, b.model_rss_mb) == (7.0, 90.0, 12.0)
    assert all(0 < t < 60_000 for t in b.session_ms)  # milliseconds of one run, not a clock reading


def test_ratios_are_rounded_to_three_places() -> None:
    a = _bench("/m/a.onnx", [10.0], [10.0])
    b = _bench("/m/b.onnx", [3.0], [3.0])
    assert report_json([a, b], {})["models"][1]["speedup_vs_first"] == {
        "session_run_p50": 3.333,
        "pipeline_p50": 3.333,
    }

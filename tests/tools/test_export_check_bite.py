"""export-check's promises that tests/tools/test_export_check.py left unread (issue 36, from the
tools-export-check area's survivors): a net left in training mode is checked in inference mode, the
input and output names and the dynamic batch, no deprecation noise, the example's token ids, the
INT8 copies (calibration images, weights, quiet), and the timing loop (blocks, untimed first calls,
one thread count for all). Skipped without torch, which only the [torch] extra installs."""

from __future__ import annotations

import types
import warnings
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import onnx
import onnxruntime
import pytest

torch = pytest.importorskip(
    "torch", reason="export checks need PyTorch (pip install 'onnx-edge-agent[torch]')"
)

from edge_agent.tools import export_check as ec  # noqa: E402
from edge_agent.tools import quantize  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("torch_threads_kept")]


def _dims(vi: Any) -> list[Any]:
    return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]


class Window(torch.nn.Module):  # type: ignore[misc]
    """A sensor window [N, 6, T] -> 3 logits (neither an image nor token ids)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv1d(6, 8, 3, padding=1)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x: Any) -> Any:
        return self.head(torch.relu(self.conv(x)).mean(-1))


def test_a_net_left_in_training_mode_is_checked_in_inference_mode(tmp_path: Path) -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3),
        torch.nn.BatchNorm2d(8),
        torch.nn.Dropout(0.5),
        torch.nn.Flatten(),
    ).train()
    rep = ec.check_export(net, torch.rand(1, 3, 8, 8), tmp_path / "t.onnx")
    assert rep.passed, rep.format()
    assert not net.training


def test_the_names_and_the_dynamic_batch_of_each_kind_of_input(tmp_path: Path) -> None:
    rep = ec.run_export_check(Window(), (1, 6, 32), tmp_path / "w.onnx", runs=0)
    assert rep.passed and rep.int8 == "dynamic", rep.format()
    g = onnx.load(str(tmp_path / "w.onnx")).graph
    assert [i.name for i in g.input] == ["input"] and [o.name for o in g.output] == ["output0"]
    assert _dims(g.input[0]) == ["batch", 6, 32] and _dims(g.output[0]) == ["batch", 3]
    assert rep.timings_ms == {}  # --runs 0: nothing timed
    ec.export(ec.small_convnet(), torch.rand(1, 3, 16, 16), tmp_path / "c.onnx")
    g = onnx.load(str(tmp_path / "c.onnx")).graph
    assert [i.name for i in g.input] == ["images"] and [o.name for o in g.output] == ["output0"]
    assert _dims(g.input[0]) == ["batch", 3, 16, 16] and _dims(g.output[0]) == ["batch", 10]


def test_the_export_of_a_clean_net_shows_no_warning(tmp_path: Path) -> None:
    # torch 2.13 warns that its TorchScript exporter is deprecated, and of dynamic axes naming no
    # input or output: the check says nothing of either
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ec.export(Window(), torch.rand(1, 6, 8), tmp_path / "w.onnx")
    assert [f"{w.category.__name__}: {w.message}" for w in seen] == []


def test_an_export_the_onnx_checker_refuses_is_reported_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(model: Any, full_check: bool = False) -> None:
        raise onnx.checker.ValidationError("refused")

    real = ec.export

    def export_then_refuse(*args: Any) -> None:
        real(*args)  # the export's own conversion checks the file too: refused only afterwards
        monkeypatch.setattr(onnx.checker, "check_model", refuse)

    monkeypatch.setattr(ec, "export", export_then_refuse)
    rep = ec.check_export(Window(), torch.rand(1, 6, 8), tmp_path / "w.onnx")
    assert not rep.checker_ok and not rep.passed
    assert "onnx.checker FAIL" in rep.format()


class Ids(torch.nn.Module):  # type: ignore[misc]
    """Token ids -> embedding -> mean: keeps every id batch it is called with."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(vocab, 4)
        self.seen: list[Any] = []

    def forward(self, ids: Any) -> Any:
        self.seen.append(ids.clone())
        return self.emb(ids).mean(1)


@pytest.mark.parametrize("vocab", [7, None])
def test_the_example_is_token_ids_from_0_to_vocab_minus_1(tmp_path: Path, vocab: Any) -> None:
    net = Ids(vocab or 100)
    kw = {"vocab": vocab} if vocab else {}  # None: the default, 100
    rep = ec.run_export_check(
        net, (1, 2000), tmp_path / "t.onnx", runs=0, dtype="int64", with_int8=False, **kw
    )
    assert rep.passed and rep.int8 == "none", rep.format()
    ids = net.seen[0]
    assert ids.dtype == torch.int64 and tuple(ids.shape) == (1, 2000)
    assert set(ids.flatten().tolist()) == set(range(vocab or 100))
    (inp,) = onnx.load(str(tmp_path / "t.onnx")).graph.input
    assert inp.name == "input_ids" and _dims(inp) == ["batch", "seq"]


def test_the_static_int8_copy_is_calibrated_on_16_images_of_the_input_size_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[dict[str, Any]] = []
    real = quantize.quantize_model

    def spy(src: Path, dst: Path, files: list[Path], **kw: Any) -> Any:
        calls.append({"shapes": {cv2.imread(str(f)).shape for f in files}, "n": len(files), **kw})
        return real(src, dst, files, **kw)

    monkeypatch.setattr(quantize, "quantize_model", spy)
    rep = ec.run_export_check(ec.small_convnet(), (1, 3, 32, 48), tmp_path / "c.onnx", runs=0, opset=19)
    assert rep.passed and rep.int8 == "static" and rep.opset == 19, rep.format()
    assert len(calls) == 1 and calls[0]["n"] == 16 and calls[0]["shapes"] == {(32, 48, 3)}
    assert calls[0]["target_ort"] == "1.15" and calls[0]["progress"] is False
    assert onnx.load(str(tmp_path / "c.int8.onnx")).ir_version == 9  # what onnxruntime 1.15 reads
    assert "calibrating" not in capsys.readouterr().err


def test_the_dynamic_int8_copy_has_signed_int8_weights(tmp_path: Path) -> None:
    ec.run_export_check(Window(), (1, 6, 16), tmp_path / "w.onnx", runs=0)
    q = onnx.load(str(tmp_path / "w.int8-dynamic.onnx"))
    kinds = {t.data_type for t in q.graph.initializer if t.name.endswith("_quantized")}
    assert kinds == {onnx.TensorProto.INT8}


class Clock:
    """A perf_counter that only the timed calls move: each call says how long it took."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class Timed(Window):
    def __init__(self, clock: Clock, block: int) -> None:
        super().__init__()
        self.clock, self.block, self.calls = clock, block, 0

    def forward(self, x: Any) -> Any:
        # the first call of each block (it wakes the pool up) is slow: it must not be timed
        self.clock.now += 0.1 if self.calls % self.block == 0 else 0.002
        self.calls += 1
        return super().forward(x)


@pytest.mark.parametrize(("runs", "per_block"), [(10, 2), (3, 1)])
def test_each_runtime_is_timed_in_5_blocks_with_one_thread_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runs: int, per_block: int
) -> None:
    clock = Clock()
    net = Timed(clock, per_block + 1)
    example = torch.rand(1, 6, 16)
    fp32, int8 = tmp_path / "w.onnx", tmp_path / "w.int8-dynamic.onnx"
    ec.run_export_check(net, (1, 6, 16), fp32, runs=0)
    real = onnxruntime.InferenceSession
    made: list[dict[str, Any]] = []

    class Session:
        def __init__(self, path: str, so: Any, providers: list[str]) -> None:
            self.real, self.calls = real(path, so, providers=providers), 0
            made.append({"path": path, "so": so, "providers": providers, "session": self})

        def run(self, names: Any, feeds: dict[str, Any]) -> Any:
            assert set(feeds) == {"input"} and np.array_equal(feeds["input"], example.numpy())
            clock.now += 0.1 if self.calls % (per_block + 1) == 0 else 0.0005
            self.calls += 1
            return self.real.run(names, feeds)

    monkeypatch.setattr(onnxruntime, "InferenceSession", Session)
    monkeypatch.setattr(ec, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    net.calls = 0
    got = ec.time_runtimes(net, example, fp32, None, runs=runs, threads=3, dynamic=int8)
    assert list(got) == ["pytorch", "onnxruntime fp32", "onnxruntime int8 (dynamic)"]
    assert got == pytest.approx({k: v for k, v in zip(got, (2.0, 0.5, 0.5))})
    assert net.calls == 5 * (per_block + 1)
    assert [m["session"].calls for m in made] == [5 * (per_block + 1)] * 2
    assert [Path(m["path"]) for m in made] == [fp32, int8]
    assert torch.get_num_threads() == 3
    for m in made:
        so = m["so"]
        assert m["providers"] == ["CPUExecutionProvider"]
        assert so.intra_op_num_threads == 3 and so.log_severity_level == 3
        assert so.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_the_built_in_network_is_a_small_conv_bn_silu_classifier() -> None:
    net = ec.small_convnet()
    assert not net.training
    kinds = [type(m).__name__ for m in net.modules() if type(m).__name__ != "Sequential"]
    assert kinds == ["Conv2d", "BatchNorm2d", "SiLU"] * 5 + ["AdaptiveAvgPool2d", "Flatten", "Linear"]
    assert sum(p.numel() for p in net.parameters()) == 135_962  # ~0.1 M, no conv bias (BN follows)
    assert all(m.bias is None for m in net.modules() if isinstance(m, torch.nn.Conv2d))
    x, sizes = torch.rand(1, 3, 64, 64), []
    with torch.no_grad():
        for block in list(net)[:5]:
            x = block(x)
            sizes.append(tuple(x.shape[1:]))
        assert sizes == [(16, 32, 32), (32, 16, 16), (64, 8, 8), (64, 8, 8), (128, 4, 4)]
        assert tuple(net(torch.rand(2, 3, 64, 64)).shape) == (2, 10)
    # BatchNorm has the non-trivial running statistics of a trained net
    for bn in (m for m in net.modules() if isinstance(m, torch.nn.BatchNorm2d)):
        assert not torch.allclose(bn.running_mean, torch.zeros_like(bn.running_mean))
        assert not torch.allclose(bn.running_var, torch.ones_like(bn.running_var))


class Branchy(torch.nn.Module):  # type: ignore[misc]
    def forward(self, x: Any) -> Any:
        return x.mean((2, 3)) if bool(x.sum() > 0) else -x.mean((2, 3))  # frozen by the trace


def test_the_tracers_own_warnings_still_reach_the_user(tmp_path: Path) -> None:
    # only the exporter's deprecation notice is silenced: a trace that may be wrong says so
    with pytest.warns(torch.jit.TracerWarning, match="trace might not generalize"):
        ec.export(Branchy(), torch.rand(1, 3, 4, 4), tmp_path / "b.onnx")


def test_a_file_without_a_dynamic_batch_fails_the_check_without_a_batch_2_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def static_export(net: Any, example: Any, out: Path, opset: int) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.onnx.export(
                net, (example,), str(out), opset_version=opset, input_names=["input"], dynamo=False
            )

    monkeypatch.setattr(ec, "export", static_export)
    rep = ec.check_export(Window().eval(), torch.rand(1, 6, 8), tmp_path / "s.onnx")
    assert not rep.dynamic_batch and rep.batch2_rel_diff == float("inf") and not rep.passed
    assert rep.max_rel_diff <= ec.MAX_REL_DIFF  # batch 1 still compared
    assert "dynamic batch FAIL" in rep.format() and "(batch 2: inf;" in rep.format()


def test_the_check_compares_on_the_cpu_provider(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real, asked = onnxruntime.InferenceSession, []

    def session(path: str, *args: Any, **kw: Any) -> Any:
        asked.append((args, kw))
        return real(path, *args, **kw)

    monkeypatch.setattr(onnxruntime, "InferenceSession", session)
    assert ec.check_export(Window(), torch.rand(1, 6, 8), tmp_path / "w.onnx").passed
    assert asked == [((), {"providers": ["CPUExecutionProvider"]})]


def test_one_timed_run_is_timed_and_two_threads_are_the_default(tmp_path: Path) -> None:
    rep = ec.run_export_check(Window(), (1, 6, 16), tmp_path / "w.onnx", runs=1)
    assert set(rep.timings_ms) == {"pytorch", "onnxruntime fp32", "onnxruntime int8 (dynamic)"}
    assert all(v > 0 for v in rep.timings_ms.values())
    assert torch.get_num_threads() == 2
    torch.set_num_threads(1)
    ec.time_runtimes(Window(), torch.rand(1, 6, 16), tmp_path / "w.onnx", None, runs=1)
    assert torch.get_num_threads() == 2

"""PyTorch -> ONNX export checks (skipped without torch, which only the [torch] extra installs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import onnx
import pytest

torch = pytest.importorskip(
    "torch", reason="export checks need PyTorch (pip install 'onnx-edge-agent[torch]')"
)

from edge_agent.app.cli.main import main  # noqa: E402
from edge_agent.tools.export_check import check_export, run_export_check, set_export_mode, small_convnet  # noqa: E402
from edge_agent.tools.graph import postprocess_tail  # noqa: E402

pytestmark = pytest.mark.slow


class TinyYolo(torch.nn.Module):  # type: ignore[misc]
    """Conv stem + head conv -> DFL box decode + sigmoid scores -> [B, 4+nc, N], like a YOLOv8 export."""

    def __init__(self, nc: int = 3, imgsz: int = 64, bins: int = 4) -> None:
        super().__init__()
        self.nc, self.imgsz, self.bins, self.export = nc, imgsz, bins, False
        self.stem = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, 2, 1),
            torch.nn.BatchNorm2d(16),
            torch.nn.SiLU(),
            torch.nn.Conv2d(16, 24, 3, 2, 1),
        )
        self.down = torch.nn.Conv2d(24, 24, 3, 2, 1)
        self.up = torch.nn.Upsample(scale_factor=2.0, mode="nearest")  # a Resize, as in YOLO necks
        self.head = torch.nn.Conv2d(24, 4 * bins + nc, 1)
        self.dfl = torch.nn.Conv2d(bins, 1, 1, bias=False).requires_grad_(False)
        self.dfl.weight.data[:] = torch.arange(bins, dtype=torch.float32).view(1, bins, 1, 1)

    def forward(self, x: Any) -> Any:
        f = torch.relu(self.stem(x))
        h = self.head(f + self.up(self.down(f)))
        flat = h.flatten(2)
        box, cls = flat.split((4 * self.bins, self.nc), 1)
        b, _, a = box.shape
        dist = self.dfl(box.view(b, 4, self.bins, a).transpose(2, 1).softmax(1)).view(b, 4, a)
        return torch.cat((dist * (self.imgsz / self.bins), cls.sigmoid()), 1)


class Noisy(torch.nn.Module):  # type: ignore[misc]
    """Exports to something that cannot match PyTorch: fresh random noise on every call."""

    def forward(self, x: Any) -> Any:
        return x.mean((2, 3)) + torch.rand(1)


def test_small_convnet_export_passes_every_check(tmp_path: Path) -> None:
    net = small_convnet()
    rep = run_export_check(net, (1, 3, 64, 64), tmp_path / "small.onnx", runs=0)
    assert rep.passed, rep.format()
    assert rep.opset == 16 and rep.checker_ok and rep.dynamic_batch
    assert rep.min_onnxruntime == "1.11"  # the default export loads on a Jetson Nano
    assert rep.max_rel_diff <= 1e-4 and rep.batch2_rel_diff <= 1e-4
    int8 = tmp_path / "small.int8.onnx"
    assert int8.is_file()
    # torch writes its onnx's newest IR: lowered, and the INT8 copy carries no ai.onnx.ml 5 & co.
    assert (onnx.load(str(tmp_path / "small.onnx")).ir_version, onnx.load(str(int8)).ir_version) == (8, 8)
    assert [o.domain for o in onnx.load(str(int8)).opset_import] == [""]
    assert any(n.op_type == "QuantizeLinear" for n in onnx.load(str(int8)).graph.node)


def test_opset_19_export_is_stamped_for_jetpack_5(tmp_path: Path) -> None:
    rep = check_export(small_convnet().eval(), torch.rand(1, 3, 32, 32), tmp_path / "s19.onnx", opset=19)
    assert rep.opset == 19 and rep.min_onnxruntime == "1.15" and rep.passed, rep.format()
    assert onnx.load(str(tmp_path / "s19.onnx")).ir_version == 9


def test_export_check_refuses_outputs_that_differ(tmp_path: Path) -> None:
    rep = check_export(Noisy().eval(), torch.rand(1, 3, 8, 8), tmp_path / "noisy.onnx")
    assert rep.max_rel_diff > 1e-4
    assert not rep.passed and "FAIL" in rep.format()


def test_yolo_style_export_at_opset_16_keeps_its_head_float_when_quantized(tmp_path: Path) -> None:
    net = TinyYolo()
    assert set_export_mode(net) == 1 and net.export
    rep = run_export_check(net, (1, 3, 64, 64), tmp_path / "tiny.onnx", runs=0)
    assert rep.passed, rep.format()
    tail = [n.op_type for n in postprocess_tail(onnx.load(str(tmp_path / "tiny.onnx")).graph)]
    # everything after the head conv, the DFL (Softmax + its fixed Conv) included, stays float
    assert {"Split", "Softmax", "Sigmoid", "Mul", "Concat"} <= set(tail) and tail.count("Conv") == 1
    q = onnx.load(str(tmp_path / "tiny.int8.onnx"))
    producer = {o: n for n in q.graph.node for o in n.output}
    assert producer[q.graph.output[0].name].op_type == "Concat"
    assert "DequantizeLinear" not in {producer[i].op_type for i in producer[q.graph.output[0].name].input}


def test_export_check_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cli.onnx"
    rc = main(["export-check", "-o", str(out), "--input-shape", "1,3,32,32", "--runs", "2", "--threads", "1"])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "PASS" in text and "onnxruntime fp32" in text and "onnxruntime int8" in text and "pytorch" in text
    assert main(["export-check", "-o", str(out), "--input-shape", "1,3,32"]) == 1
    err = capsys.readouterr().err
    assert "the built-in network takes images N,3,H,W" in err and "Traceback" not in err


def test_quantizing_a_dynamic_batch_export_leaves_no_files_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # symbolic shape inference fails on this export and onnxruntime dumps a temp model into the cwd
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    run_export_check(TinyYolo(), (1, 3, 64, 64), tmp_path / "tiny.onnx", runs=0)
    assert list(work.iterdir()) == []
    assert Path.cwd() == work


class TinyText(torch.nn.Module):  # type: ignore[misc]
    """Token ids -> embedding -> one self-attention block -> mean pool -> 2 logits (BERT-like)."""

    def __init__(self, vocab: int = 100, hidden: int = 32) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(vocab, hidden)
        self.q, self.k, self.v = (torch.nn.Linear(hidden, hidden) for _ in range(3))
        self.head = torch.nn.Linear(hidden, 2)

    def forward(self, ids: Any) -> Any:
        x = self.emb(ids)
        att = torch.softmax(self.q(x) @ self.k(x).transpose(1, 2) / 32**0.5, dim=-1)
        return self.head((x + att @ self.v(x)).mean(dim=1))


def test_a_token_model_is_checked_and_timed_with_dynamic_int8(tmp_path: Path) -> None:
    from edge_agent.tools.export_check import run_export_check

    rep = run_export_check(TinyText(), (1, 16), tmp_path / "t.onnx", runs=5, threads=1, dtype="int64")
    assert rep.passed, rep.format()
    assert rep.int8 == "dynamic" and set(rep.timings_ms) == {
        "pytorch",
        "onnxruntime fp32",
        "onnxruntime int8 (dynamic)",
    }
    ops = {n.op_type for n in onnx.load(str(tmp_path / "t.int8-dynamic.onnx")).graph.node}
    assert "MatMulInteger" in ops or "DynamicQuantizeMatMul" in ops
    seq = onnx.load(str(tmp_path / "t.onnx")).graph.input[0].type.tensor_type.shape.dim[1]
    assert seq.dim_param == "seq"  # one export for every text length


def test_the_dynamic_int8_path_for_a_cnn(tmp_path: Path) -> None:
    from edge_agent.tools.export_check import run_export_check

    rep = run_export_check(
        small_convnet(), (1, 3, 32, 32), tmp_path / "c.onnx", runs=3, threads=1, int8_mode="dynamic"
    )
    assert "onnxruntime int8 (dynamic)" in rep.timings_ms


def test_both_int8_copies_of_a_cnn_are_timed_side_by_side(tmp_path: Path) -> None:
    from edge_agent.tools.export_check import run_export_check

    rep = run_export_check(
        small_convnet(), (1, 3, 32, 32), tmp_path / "c.onnx", runs=3, threads=1, int8_mode="both"
    )
    assert rep.passed and rep.int8 == "both"
    assert list(rep.timings_ms) == [
        "pytorch",
        "onnxruntime fp32",
        "onnxruntime int8 (static)",
        "onnxruntime int8 (dynamic)",
    ]
    static = {n.op_type for n in onnx.load(str(tmp_path / "c.int8.onnx")).graph.node}
    dynamic = {n.op_type for n in onnx.load(str(tmp_path / "c.int8-dynamic.onnx")).graph.node}
    assert "QuantizeLinear" in static and "ConvInteger" in dynamic

"""export-check's promises left unread after test_export_check_bite.py (issue 36, from the
tools-export-check area's second run, h-mutw): a file the full onnx.checker refuses is a FAIL line,
the export is made at the asked opset (not converted down from torch's default), a file newer than
every known onnxruntime says so, batch 2 holds two different samples for every input layout, every
timed session gets the same options on the CPU, and the calibration images are temporary. Skipped
without torch, which only the [torch] extra installs."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import onnx
import onnxruntime
import pytest

torch = pytest.importorskip(
    "torch", reason="export checks need PyTorch (pip install 'onnx-edge-agent[torch]')"
)

from edge_agent.tools import export_check as ec  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("torch_threads_kept")]


class Lin(torch.nn.Module):  # type: ignore[misc]
    """[N, 6] -> 3: the smallest net with weights."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(6, 3)

    def forward(self, x: Any) -> Any:
        return torch.relu(self.lin(x))


def _then(monkeypatch: pytest.MonkeyPatch, change: Any) -> None:
    """Make check_export's export the real one followed by ``change`` of the written file."""
    real = ec.export

    def export_then_change(net: Any, example: Any, out: Path, opset: int) -> None:
        real(net, example, out, opset)
        model = onnx.load(str(out))
        change(model)
        onnx.save(model, str(out))

    monkeypatch.setattr(ec, "export", export_then_change)


def test_a_file_only_the_full_check_refuses_is_a_fail_line_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an output declared [batch, 4] that computes [batch, 3]: the plain checker passes it, the full
    # check's strict shape inference refuses it (with InferenceError, not ValidationError)
    def wrong_output_dim(model: Any) -> None:
        model.graph.output[0].type.tensor_type.shape.dim[1].dim_value = 4

    _then(monkeypatch, wrong_output_dim)
    rep = ec.check_export(Lin(), torch.rand(1, 6), tmp_path / "l.onnx")
    assert not rep.checker_ok and not rep.passed
    assert "onnx.checker FAIL" in rep.format()
    assert rep.dynamic_batch and rep.max_rel_diff <= ec.MAX_REL_DIFF  # the rest still measured


class Norm(torch.nn.Module):  # type: ignore[misc]
    """Linear + LayerNorm: one LayerNormalization node from opset 17, primitives below it."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin, self.ln = torch.nn.Linear(8, 8), torch.nn.LayerNorm(8)

    def forward(self, x: Any) -> Any:
        return self.ln(self.lin(x))


def test_the_export_is_made_at_the_asked_opset(tmp_path: Path) -> None:
    # torch's own default (20) converted down would need LayerNormalization at 16, where it does
    # not exist: the exporter itself must write 16 (LayerNorm as primitives), 17 as one node
    ops = {}
    for opset in (16, 17):
        ec.export(Norm(), torch.rand(1, 4, 8), tmp_path / f"n{opset}.onnx", opset)
        m = onnx.load(str(tmp_path / f"n{opset}.onnx"))
        assert [(o.domain, o.version) for o in m.opset_import] == [("", opset)]
        ops[opset] = {n.op_type for n in m.graph.node}
    assert "LayerNormalization" not in ops[16] and {"ReduceMean", "Sqrt"} <= ops[16]
    assert "LayerNormalization" in ops[17]


def test_a_file_newer_than_every_known_onnxruntime_says_question_mark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # IR 12 is past the table's newest row (1.22 reads IR 11); the installed onnxruntime loads it
    def ir_12(model: Any) -> None:
        model.ir_version = 12

    _then(monkeypatch, ir_12)
    rep = ec.check_export(Lin(), torch.rand(1, 6), tmp_path / "l.onnx")
    assert rep.min_onnxruntime == "?" and rep.passed
    assert rep.format().splitlines()[0].endswith("loads on onnxruntime >= ?")


class Seen(torch.nn.Module):  # type: ignore[misc]
    """Keeps every batch it is called with; the mean of the last axis, as float."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Any] = []

    def forward(self, x: Any) -> Any:
        self.seen.append(x.clone())
        return x.float().mean(-1)


EXAMPLES = {
    "grayscale image": lambda: torch.rand(1, 1, 6, 8),
    "token ids": lambda: torch.randint(0, 50, (1, 12)),
    "sensor window": lambda: torch.rand(1, 6, 16),
}


@pytest.mark.parametrize("kind", list(EXAMPLES))
def test_batch_2_holds_the_example_and_another_sample(tmp_path: Path, kind: str) -> None:
    # two equal samples would hide an export that answers every sample with the first one's
    # result; a mirror along an axis of size 1 (the channel of a grayscale image, the batch of
    # token ids) is no other sample
    torch.manual_seed(0)
    example, net = EXAMPLES[kind](), Seen()
    assert ec.check_export(net, example, tmp_path / "s.onnx").passed
    (pair,) = [x for x in net.seen if x.shape[0] == 2]
    assert pair.dtype == example.dtype and tuple(pair.shape[1:]) == tuple(example.shape[1:])
    assert torch.equal(pair[0], example[0]) and not torch.equal(pair[1], pair[0])
    assert sorted(pair[1].flatten().tolist()) == sorted(pair[0].flatten().tolist())  # same values


def test_every_timed_session_has_the_same_options_on_the_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fp32 = tmp_path / "l.onnx"
    ec.run_export_check(Lin(), (1, 6), fp32, runs=0)
    int8 = tmp_path / "l.int8-dynamic.onnx"
    real, made = onnxruntime.InferenceSession, []

    def session(path: str, *args: Any, **kw: Any) -> Any:
        made.append((Path(path), args, kw))
        return real(path, *args, **kw)

    monkeypatch.setattr(onnxruntime, "InferenceSession", session)
    # the INT8 copy passed as the static one, then as the dynamic one: both paths of time_runtimes
    ec.time_runtimes(Lin(), torch.rand(1, 6), fp32, int8, runs=1, threads=1)
    ec.time_runtimes(Lin(), torch.rand(1, 6), fp32, None, runs=1, threads=1, dynamic=int8)
    assert [p for p, _a, _k in made] == [fp32, int8, fp32, int8]
    for _path, args, kw in made:
        assert kw == {"providers": ["CPUExecutionProvider"]} and len(args) == 1
        so = args[0]
        assert so.intra_op_num_threads == 1 and so.log_severity_level == 3
        assert so.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert made[0][1][0] is made[1][1][0] and made[2][1][0] is made[3][1][0]


class Tiny(torch.nn.Module):  # type: ignore[misc]
    """[N, 3, H, W] -> 4: an image net small enough to calibrate in a second."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x: Any) -> Any:
        return self.conv(x).mean((2, 3))


def test_the_calibration_images_are_in_a_temporary_folder_of_ours_removed_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a run killed mid-calibration leaves the folder behind: its name says whose it is
    folders: list[Path] = []
    real = ec._synthetic_calibration

    def spy(folder: Path, hw: tuple[int, int], n: int = 16) -> list[Path]:
        folders.append(folder)
        files = real(folder, hw, n)
        assert sorted(folder.iterdir()) == files
        return files

    monkeypatch.setattr(ec, "_synthetic_calibration", spy)
    rep = ec.run_export_check(Tiny(), (1, 3, 16, 16), tmp_path / "t.onnx", runs=0)
    assert rep.int8 == "static" and (tmp_path / "t.int8.onnx").is_file()
    (folder,) = folders
    assert folder.parent == Path(tempfile.gettempdir()) and folder.name.startswith("edge-agent-calib-")
    assert not folder.exists()

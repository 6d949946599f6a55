"""export-check's verdict, report and helpers that need no PyTorch (issue 19): what passes, what
the report says, which runtime an opset is stamped for, how ``--module`` is loaded, the output
shapes made static again. The export itself is tests/tools/test_export_check.py (needs torch)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from typing import Any

import cv2
import onnx
import pytest
from onnx import TensorProto, helper

from edge_agent.tools import ToolingDependencyError
from edge_agent.tools.export_check import (
    MAX_REL_DIFF,
    ExportReport,
    _static_output_dims,
    _synthetic_calibration,
    load_factory,
    require_torch,
    runtime_for_opset,
    set_export_mode,
)


def _report(**kw: Any) -> ExportReport:
    base: dict[str, Any] = {
        "onnx_path": Path("/m/net.onnx"),
        "opset": 16,
        "checker_ok": True,
        "dynamic_batch": True,
        "max_abs_diff": 1e-6,
        "max_rel_diff": 1e-5,
        "batch2_rel_diff": 2e-5,
    }
    base.update(kw)
    return ExportReport(**base)


def test_a_good_export_passes() -> None:
    assert _report().passed
    assert _report(max_rel_diff=MAX_REL_DIFF, batch2_rel_diff=MAX_REL_DIFF, opset=13).passed


@pytest.mark.parametrize(
    "bad",
    [
        {"checker_ok": False},
        {"dynamic_batch": False},
        {"opset": 12},
        {"max_rel_diff": MAX_REL_DIFF * 1.01},
        {"batch2_rel_diff": MAX_REL_DIFF * 1.01},
        {"batch2_rel_diff": math.inf},
    ],
)
def test_each_failed_check_fails_the_export(bad: dict[str, Any]) -> None:
    rep = _report(**bad)
    assert not rep.passed and rep.format().splitlines()[-1] == "FAIL"


def test_the_report_names_each_check_and_the_timings() -> None:
    rep = _report(timings_ms={"pytorch": 10.0, "onnxruntime fp32": 4.0}, min_onnxruntime="1.11")
    lines = rep.format().splitlines()
    assert lines[0] == (
        "export-check net.onnx: opset 16 (ok), onnx.checker ok, dynamic batch ok, loads on onnxruntime >= 1.11"
    )
    assert lines[1] == "  ONNX vs PyTorch: max abs 1e-06, max rel 1e-05 (batch 2: 2e-05; limit 0.0001) ok"
    assert lines[2].split() == ["runtime", "p50", "ms", "vs", "PyTorch"]
    assert lines[3].split() == ["pytorch", "10.00", "1.00x"]
    assert lines[4].split() == ["onnxruntime", "fp32", "4.00", "2.50x"]
    assert lines[5] == "PASS"
    bad = _report(opset=12, checker_ok=False, dynamic_batch=False, batch2_rel_diff=1.0).format().splitlines()
    assert bad[0] == (
        "export-check net.onnx: opset 12 (FAIL), onnx.checker FAIL, dynamic batch FAIL, loads on onnxruntime >= ?"
    )
    assert bad[1].endswith("(batch 2: 1; limit 0.0001) FAIL") and len(bad) == 3


def test_timings_without_pytorch_have_no_ratio() -> None:
    lines = _report(timings_ms={"onnxruntime fp32": 4.0}).format().splitlines()
    assert lines[3].split() == ["onnxruntime", "fp32", "4.00", "nanx"]


@pytest.mark.parametrize(
    ("opset", "runtime"), [(13, "1.6"), (15, "1.9"), (16, "1.11"), (17, "1.12"), (99, "1.22")]
)
def test_an_export_is_stamped_for_the_oldest_runtime_of_its_opset(opset: int, runtime: str) -> None:
    assert runtime_for_opset(opset) == runtime


def test_module_factories_from_a_file_or_a_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))  # load_factory puts the file's folder first
    (tmp_path / "helper_mod.py").write_text("WIDTH = 7\n")
    f = tmp_path / "nets.py"
    f.write_text("from helper_mod import WIDTH\n\ndef make(scale=1):\n    return ('net', WIDTH * scale)\n")
    assert load_factory(f"{f}:make") == ("net", 7)
    assert load_factory(f"{f}:make", {"scale": 3}) == ("net", 21)
    assert load_factory("collections:OrderedDict", {"a": 1}) == {"a": 1}
    for spec in ("nets.py", ":make", f"{f}:"):
        with pytest.raises(ToolingDependencyError) as err:
            load_factory(spec)
        assert str(err.value) == f"--module {spec!r}: expected MODULE:CALLABLE or FILE.py:CALLABLE"


def test_export_mode_is_set_on_every_submodule_with_the_flag() -> None:
    class M:
        def __init__(self, export: Any) -> None:
            self.export = export

    class Net:
        def __init__(self) -> None:
            self.parts = [M(False), M(True), M("no"), M(None), object()]

        def modules(self) -> list[Any]:
            return self.parts

    net = Net()
    assert set_export_mode(net) == 2
    assert [getattr(p, "export", "-") for p in net.parts] == [True, True, "no", None, "-"]


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed here")
def test_without_torch_one_line_says_how_to_install_it() -> None:
    with pytest.raises(
        ToolingDependencyError, match=r"^export checks need PyTorch; install it with: .*torch"
    ):
        require_torch()


def test_output_dims_are_made_static_again(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Reshape", ["x", "s"], ["y"]),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 7, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "d1", "d2"])],
    )
    p = tmp_path / "m.onnx"
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
    m.graph.value_info.append(helper.make_tensor_value_info("s", TensorProto.INT64, ["k"]))
    onnx.save(m, str(p))
    _static_output_dims(p)
    dims = onnx.load(str(p)).graph.output[0].type.tensor_type.shape.dim
    assert [d.dim_param or d.dim_value for d in dims] == ["batch", 7, 5]


def test_synthetic_calibration_images_have_the_model_size(tmp_path: Path) -> None:
    files = _synthetic_calibration(tmp_path, (24, 40), n=3)
    assert [f.name for f in files] == ["calib000.png", "calib001.png", "calib002.png"]
    imgs = [cv2.imread(str(f)) for f in files]
    assert all(i.shape == (24, 40, 3) for i in imgs)
    assert (imgs[0] != imgs[1]).any()


def test_the_int8_kind_follows_the_input_and_static_is_refused_for_tokens() -> None:
    from edge_agent.tools import ToolingDependencyError
    from edge_agent.tools.export_check import int8_kind

    assert int8_kind((1, 3, 64, 64), "float32", None) == "static"
    assert int8_kind((1, 128), "int64", None) == "dynamic"
    assert int8_kind((1, 6, 128), "float32", None) == "dynamic"  # a sensor window
    assert int8_kind((1, 3, 64, 64), "float32", "dynamic") == "dynamic"
    assert int8_kind((1, 3, 64, 64), "float32", "both") == "both"
    with pytest.raises(ToolingDependencyError, match=r"input \[1, 6, 128\] float32 is not an image"):
        int8_kind((1, 6, 128), "float32", "both")
    with pytest.raises(
        ToolingDependencyError, match=r"input \[1, 128\] int64 is not an image.*--int8 dynamic"
    ):
        int8_kind((1, 128), "int64", "static")


def test_the_report_lines_agree_with_the_verdict_at_the_limits() -> None:
    # opset 13 and a difference of exactly the limit pass: each line says ok, as the verdict does
    lines = _report(opset=13, max_rel_diff=MAX_REL_DIFF, batch2_rel_diff=MAX_REL_DIFF).format().splitlines()
    assert lines[0].startswith("export-check net.onnx: opset 13 (ok), ")
    assert lines[1].endswith("(batch 2: 0.0001; limit 0.0001) ok") and lines[-1] == "PASS"


def test_a_file_factory_in_a_folder_with_a_colon_and_its_siblings_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the callable is after the last colon; the file's own folder wins over sys.path's first entry
    folder, other = tmp_path / "run:2", tmp_path / "other"
    folder.mkdir()
    other.mkdir()
    (folder / "bite_sibling.py").write_text("WIDTH = 7\n")
    (other / "bite_sibling.py").write_text("WIDTH = 99\n")
    f = folder / "bite_nets.py"
    f.write_text("from bite_sibling import WIDTH\n\ndef make():\n    return WIDTH\n")
    monkeypatch.setattr(sys, "path", [str(other), *sys.path])
    monkeypatch.delitem(sys.modules, "bite_sibling", raising=False)
    assert load_factory(f"{f}:make") == 7
    assert sys.path[0] == str(folder)


def test_without_torch_one_line_says_how_to_install_it_wherever_torch_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` then raises ImportError
    with pytest.raises(ToolingDependencyError) as err:
        require_torch()
    assert str(err.value) == (
        "export checks need PyTorch; install it with: pip install '.[torch]' in the edge-agent checkout "
        "(once published on the package index: pip install 'onnx-edge-agent[torch]')"
    )
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_an_image_is_n_1_or_3_h_w_float_and_the_refusal_names_both_ways_out() -> None:
    from edge_agent.tools.export_check import int8_kind

    assert int8_kind((1, 1, 32, 32), "float32", None) == "static"  # grayscale
    assert int8_kind((1, 3), "int64", None) == "dynamic"  # 3 token ids, not 3 channels
    assert int8_kind((1, 1, 128), "float32", None) == "dynamic"  # one sensor channel
    assert int8_kind((1, 2, 32, 32), "float32", None) == "dynamic"
    with pytest.raises(ToolingDependencyError) as err:
        int8_kind((1, 128), "int64", "static")
    assert str(err.value) == (
        "--int8 static calibrates on images, and input [1, 128] int64 is not an image [N, 3, H, W] "
        "float32; use --int8 dynamic"
    )

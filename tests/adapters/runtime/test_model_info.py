"""What a model file says about itself: class names (metadata or a labels file), input size, input
dtypes and the description ``edge-agent inspect --json`` prints, in process."""

from __future__ import annotations

import hashlib
import json
import locale
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from edge_agent.adapters.runtime.model_info import (
    ModelInfo,
    TensorInfo,
    parse_imgsz,
    parse_names,
    read_labels_file,
)
from edge_agent.app.cli import main as cli
from edge_agent.core.runtime.onnx_wire import GraphSummary
from edge_agent.errors import ModelError


@pytest.mark.parametrize(
    ("raw", "names"),
    [
        ("{0: 'person', 1: 'bus'}", {0: "person", 1: "bus"}),  # Ultralytics' Python literal
        ('{"0": "person", "1": "bus"}', {0: "person", 1: "bus"}),
        ('["a", "b"]', {0: "a", 1: "b"}),
        ("('a', 'b')", {0: "a", 1: "b"}),
        # JSON that is no Python literal (an exporter's null for an unnamed class): ids stay in place
        ('["person", null, "car"]', {0: "person", 1: "None", 2: "car"}),
        ("garbage(", {}),
        ("42", {}),
        ("", {}),
        (None, {}),
    ],
)
def test_class_names_from_the_metadata(raw: str | None, names: dict[int, str]) -> None:
    assert parse_names(raw) == names


@pytest.mark.parametrize(
    ("raw", "hw"),
    [
        ("640", (640, 640)),
        ("[480, 640]", (480, 640)),  # height, width: a wide model stays wide
        ("(480, 640)", (480, 640)),
        ("[1, 2, 3]", None),
        ('["480", "640"]', None),
        ("[480.0, 640]", None),
        ("garbage(", None),
        ("", None),
        (None, None),
    ],
)
def test_the_input_size_from_the_metadata(raw: str | None, hw: tuple[int, int] | None) -> None:
    assert parse_imgsz(raw) == hw


def test_a_labels_file_is_one_name_per_line_or_a_json_list_or_dict(tmp_path: Path) -> None:
    lines = tmp_path / "labels.txt"
    lines.write_text("\n person \n\n  bicycle\n\n", encoding="utf-8")
    assert read_labels_file(lines) == {0: "person", 1: "bicycle"}
    as_list = tmp_path / "list.json"
    as_list.write_text(' ["person", "bicycle"]\n', encoding="utf-8")
    assert read_labels_file(as_list) == {0: "person", 1: "bicycle"}
    as_dict = tmp_path / "dict.json"
    as_dict.write_text('{"3": "car", "7": "truck"}', encoding="utf-8")
    assert read_labels_file(str(as_dict)) == {3: "car", 7: "truck"}


@pytest.mark.parametrize("text", ['{"a": }', "[1, 2", "{}", "[]"])
def test_a_labels_file_that_looks_like_json_but_holds_no_names_is_one_line(tmp_path: Path, text: str) -> None:
    p = tmp_path / "labels.json"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(ModelError) as ei:
        read_labels_file(p)
    assert str(ei.value) == f"{p}: labels file looks like JSON but is not a list or dict of names"


def test_a_missing_labels_file_is_one_line_naming_it(tmp_path: Path) -> None:
    p = tmp_path / "nope.txt"
    with pytest.raises(ModelError) as ei:
        read_labels_file(p)
    assert str(ei.value) == f"{p}: cannot read labels file: No such file or directory"


@pytest.fixture
def ascii_locale() -> Iterator[None]:
    # a service started without LANG on an image without C.UTF-8: Python's default encoding is ASCII
    old = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, old)


def test_labels_are_read_as_utf8_whatever_the_locale(tmp_path: Path, ascii_locale: None) -> None:
    p = tmp_path / "labels.txt"
    p.write_text("café\nStraßenbahn\n行人\n", encoding="utf-8")
    assert read_labels_file(p) == {0: "café", 1: "Straßenbahn", 2: "行人"}


def test_a_labels_file_that_is_not_utf8_is_one_line_not_a_traceback(
    tmp_path: Path, bright_detector: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "labels.txt"
    p.write_bytes(b"person\ncaf\xe9\n")  # Latin-1
    with pytest.raises(ModelError) as ei:
        read_labels_file(p)
    assert str(ei.value) == f"{p}: labels file is not UTF-8 text (byte 10: invalid continuation byte)"
    assert cli.main(["inspect", str(bright_detector), "--labels", str(p)]) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"edge-agent inspect: error: {ei.value}"]


@pytest.mark.parametrize(
    ("ort_type", "dtype"),
    [
        ("tensor(float)", np.float32),
        ("tensor(float16)", np.float16),
        ("tensor(double)", np.float64),
        ("tensor(uint8)", np.uint8),
        ("tensor(int8)", np.int8),
        ("tensor(int32)", np.int32),
        ("tensor(int64)", np.int64),
        ("tensor(bfloat16)", np.float32),  # a type the preprocessing cannot make: float32 is fed
    ],
)
def test_the_input_blob_is_made_in_the_tensors_type(ort_type: str, dtype: type) -> None:
    assert np.dtype(TensorInfo("images", (1, 3, 64, 64), ort_type).dtype) == np.dtype(dtype)


def test_the_description_carries_every_figure_of_the_model() -> None:
    graph = GraphSummary(
        ir_version=8,
        producer="pytorch 2.1",
        opsets={"": 17, "com.microsoft": 1},
        op_counts=Counter({"Conv": 5, "Relu": 9, "Concat": 1}),
    )
    info = ModelInfo(
        path="/models/det.onnx",
        sha256="ab" * 32,
        size_bytes=1234,
        inputs=[TensorInfo("images", (1, 3, "h", None), "tensor(float)")],
        outputs=[TensorInfo("output0", (1, 84, 8400), "tensor(float16)")],
        metadata={"names": "{0: 'a'}", "imgsz": "[480, 640]", "author": "me"},
        names={0: "a", 5: "b"},
        task="detect",
        imgsz=(480, 640),
        stride=32,
        graph=graph,
        providers=["XnnpackExecutionProvider", "CPUExecutionProvider"],
        provider_reason="board default",
        load_ms=12.345,
    )
    assert info.model_id == "det.onnx@" + "ab" * 6
    assert info.quant_kind == graph.quant_kind == "fp32"
    assert info.to_json() == {
        "path": "/models/det.onnx",
        "sha256": "ab" * 32,
        "size_bytes": 1234,
        "inputs": [{"name": "images", "shape": [1, 3, "h", None], "type": "tensor(float)"}],
        "outputs": [{"name": "output0", "shape": [1, 84, 8400], "type": "tensor(float16)"}],
        "task": "detect",
        "imgsz": [480, 640],
        "stride": 32,
        "names": {"0": "a", "5": "b"},
        "quantization": "fp32",
        "opsets": {"": 17, "com.microsoft": 1},
        "producer": "pytorch 2.1",
        "op_counts": {"Relu": 9, "Conv": 5, "Concat": 1},
        "metadata": {"imgsz": "[480, 640]", "author": "me"},  # the names are shown parsed, once
        "providers": ["XnnpackExecutionProvider", "CPUExecutionProvider"],
        "provider_reason": "board default",
        "load_ms": 12.3,
    }
    assert list(info.to_json()["op_counts"]) == ["Relu", "Conv", "Concat"]  # the most used first
    info.imgsz = None
    assert info.to_json()["imgsz"] is None


def test_inspect_json_describes_the_file(bright_detector: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["inspect", str(bright_detector), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    data = bright_detector.read_bytes()
    assert got["path"] == str(bright_detector)
    assert got["sha256"] == hashlib.sha256(data).hexdigest() and got["size_bytes"] == len(data)
    assert got["inputs"] == [{"name": "images", "shape": [1, 3, 64, 64], "type": "tensor(float)"}]
    assert got["names"] == {"0": "bright"} and got["task"] == "detect"
    assert got["imgsz"] == [64, 64] and got["stride"] == 8
    assert got["metadata"] == {"imgsz": "[64, 64]", "stride": "8", "task": "detect"}
    assert got["quantization"] == "fp32" and got["providers"] == ["CPUExecutionProvider"]

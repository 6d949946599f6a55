"""core.ort_compat: the onnxruntime -> IR/opset table, the oldest runtime of a model, the load refusal."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edge_agent.core.runtime.onnx_wire import summarize
from edge_agent.core.runtime.ort_compat import (
    _ROWS,
    TABLE,
    _minor,
    describe_stamps,
    limits_for,
    load_refusal,
    oldest_runtime,
    parse_version,
    refusals,
)

MODELS = Path(__file__).resolve().parents[3] / "models"


def test_table_is_sorted_and_never_loses_support() -> None:
    for older, newer in zip(TABLE, TABLE[1:]):
        assert older.ort < newer.ort
        assert (older.ir, older.opset, older.ml_opset) <= (newer.ir, newer.opset, newer.ml_opset)
        assert older.ir <= newer.ir and older.opset <= newer.opset and older.ml_opset <= newer.ml_opset


@pytest.mark.parametrize(
    ("version", "limits"),
    [
        ("1.11.1", (8, 16, 3)),  # JetPack 4.6, measured: IR 9 / opset 17 refused, ai.onnx.ml 3 loads
        ("1.16.3", (9, 19, 3)),  # JetPack 5, measured: opset 20 / ai.onnx.ml 5 refused
        ("1.16.3+cu118", (9, 19, 3)),
        ("1.17.0", (9, 20, 4)),
    ],
)
def test_limits_of_the_jetson_runtimes(version: str, limits: tuple[int, int, int]) -> None:
    row = limits_for(version)
    assert row is not None and (row.ir, row.opset, row.ml_opset) == limits


def test_newer_or_unknown_runtime_is_not_checked() -> None:
    assert limits_for("1.99.0") is None and limits_for("") is None and limits_for("dev") is None


def test_yolov8_export_needs_1_17_and_names_both_limits_on_a_nano() -> None:
    opsets = {"ai.onnx": 20}
    row = oldest_runtime(9, opsets)
    assert row is not None and row.name == "1.17"
    nano = limits_for("1.11.1")
    assert nano is not None and refusals(9, opsets, nano) == ["IR 9 > 8", "opset 20 > 16"]


def test_unused_ml_import_of_the_quantizer_is_what_1_16_refuses() -> None:
    jp5 = limits_for("1.16.3")
    assert jp5 is not None and refusals(8, {"ai.onnx": 17, "ai.onnx.ml": 5}, jp5) == [
        "ai.onnx.ml opset 5 > 3"
    ]


@pytest.mark.arm_smoke
@pytest.mark.parametrize(
    "name", ["demo-detector", "demo-detector-int8", "demo-classifier", "demo-classifier-int8"]
)
def test_bundled_demo_models_load_on_a_jetson_nano(name: str) -> None:
    g = summarize((MODELS / f"{name}.onnx").read_bytes())
    row = oldest_runtime(g.ir_version, g.opsets)
    assert row is not None and row.name == "1.11", describe_stamps(g.ir_version, g.opsets)


def test_refusal_is_one_line_with_the_fix() -> None:
    line = load_refusal("/m/yolo.onnx", 9, {"ai.onnx": 20}, "1.11.1")
    assert line is not None and "\n" not in line
    assert "IR 9 > 8" in line and "onnxruntime 1.11.1" in line
    # the output goes to the current folder: the model's own (here /m) may be read-only
    assert "edge-agent model convert /m/yolo.onnx --target-ort 1.11 -o ./yolo-ort1.11.onnx`" in line
    assert "-o /m/" not in line
    ro = load_refusal("/usr/share/edge-agent/models/det.model", 9, {"ai.onnx": 20}, "1.11.1")
    assert ro is not None and "-o ./det.model-ort1.11.onnx`" in ro
    assert load_refusal("/m/yolo.onnx", 8, {"ai.onnx": 16, "ai.onnx.ml": 3}, "1.11.1") is None


@given(st.text(max_size=40))
def test_parse_version_never_raises(text: str) -> None:
    v = parse_version(text)
    assert v is None or (len(v) == 2 and all(0 <= x < 10**4 for x in v))


@given(
    st.integers(min_value=0, max_value=2**63),
    st.dictionaries(st.sampled_from(["", "ai.onnx", "ai.onnx.ml", "com.microsoft"]), st.integers(0, 2**63)),
    st.text(max_size=12),
)
def test_load_refusal_never_raises_on_hostile_stamps(ir: int, opsets: dict[str, int], version: str) -> None:
    line = load_refusal("m.onnx", ir, opsets, version)
    assert line is None or ("\n" not in line and "model convert" in line)


def test_the_newest_row_is_checked_and_a_runtime_older_than_the_table_gets_the_oldest_row() -> None:
    newest = limits_for("1.22.0")
    assert newest is not None and newest.name == "1.22" and newest.ir == 11  # not "newer: unchecked"
    assert limits_for("1.23.0") is None
    for old in ("1.5.2", "0.9"):
        row = limits_for(old)
        assert row is not None and row.name == "1.6", old  # the strictest limits we know of
    assert refusals(8, {"ai.onnx": 14}, TABLE[0]) == ["IR 8 > 7", "opset 14 > 13"]


def test_the_table_versions_read_as_major_minor() -> None:
    # TABLE is built from _ROWS at import; every version string must read back as its own name
    assert [_minor(row[0]) for row in _ROWS] == [r.ort for r in TABLE]
    assert _minor("1.11") == (1, 11) and [r.name for r in TABLE] == [row[0] for row in _ROWS]


def test_the_default_domain_may_be_spelled_as_the_empty_string() -> None:
    # onnx writes the default domain as "" in opset_import; "ai.onnx" is its other name
    nano = limits_for("1.11.1")
    assert nano is not None
    assert refusals(8, {"": 17}, nano) == ["opset 17 > 16"]
    assert refusals(8, {"": 16}, nano) == []
    assert refusals(8, {"ai.onnx": 16, "": 17}, nano) == []  # the named domain wins
    assert refusals(8, {}, nano) == []  # a model with no opset import has nothing too new
    assert describe_stamps(8, {"": 17}) == "IR 8, opset 17"
    assert describe_stamps(8, {}) == "IR 8, opset 0"


def test_stamps_are_described_as_inspect_prints_them() -> None:
    assert describe_stamps(9, {"ai.onnx": 20}) == "IR 9, opset 20"
    assert describe_stamps(8, {"ai.onnx": 17, "ai.onnx.ml": 5}) == "IR 8, opset 17, ai.onnx.ml 5"
    assert describe_stamps(7, {"ai.onnx": 13, "ai.onnx.ml": 0}) == "IR 7, opset 13, ai.onnx.ml 0"


def test_the_refusal_line_lists_every_limit_the_model_passes() -> None:
    line = load_refusal("m.onnx", 9, {"ai.onnx": 20, "ai.onnx.ml": 5}, "1.11.1")
    assert line == (
        "m.onnx: this onnxruntime 1.11.1 cannot load the model "
        "(IR 9 > 8, opset 20 > 16, ai.onnx.ml opset 5 > 3); convert it on a PC with "
        "`edge-agent model convert m.onnx --target-ort 1.11 -o ./m-ort1.11.onnx` (into the current "
        "folder), then use the converted file"
    )

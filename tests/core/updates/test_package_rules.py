"""Model package rules in process, without building a package: the manifest's consistency checks,
the version gates, the MQTT transfer's ``begin`` bounds, resume ranges and the trial's collapse rule."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from edge_agent.core.config.schema import parse_config
from edge_agent.core.updates.package import (
    MAX_CHUNK,
    MIN_CHUNK,
    check_agent_version,
    check_runtime_version,
    check_transfer_id,
    manifest_bytes,
    missing_ranges,
    parse_manifest,
    rate_collapsed,
    update_warnings,
    version_tuple,
)
from edge_agent.core.updates.plan import MAX_PLAN_CHUNKS, TransferPlan, plan_chunk_size
from edge_agent.errors import ModelError

SHA = "ab" * 32


def _file(path: str) -> dict[str, Any]:
    return {"path": path, "sha256": SHA, "size": 1}


def _manifest(**over: Any) -> dict[str, Any]:
    m: dict[str, Any] = {
        "name": "demo",
        "version": "1.0",
        "created_at": "2026-11-30T00:00:00Z",
        "files": {"detector": _file("detector.onnx")},
    }
    m.update(over)
    return m


def _parse(**over: Any) -> Any:
    return parse_manifest(json.dumps(_manifest(**over)).encode(), "p.pkg")


# ---- manifest ---------------------------------------------------------------------------------
def test_a_minimal_manifest_parses_and_round_trips() -> None:
    m = _parse()
    assert (m.name, m.version, m.task, m.force) == ("demo", "1.0", "detect", False)
    assert m.version_id == f"demo-1.0-{SHA[:8]}"
    assert m.summary() == {"name": "demo", "version": "1.0", "detector_sha256": SHA}
    assert parse_manifest(manifest_bytes(m), "p.pkg") == m


@pytest.mark.parametrize(
    ("over", "why"),
    [
        ({"format": 3}, "p.pkg: package format 3, this agent reads formats [1, 2]"),
        (
            {"files": {"detector": _file("d.onnx"), "extra": _file("e.onnx")}},
            "p.pkg: manifest.json files has unknown role(s) ['extra']; "
            "expected ['detector', 'classifier', 'float_source']",
        ),
        ({"files": {"classifier": _file("c.onnx")}}, "p.pkg: manifest.json lists no 'detector' file"),
        (
            {"task": "detect+classify"},
            "p.pkg: task 'detect+classify' does not match the files listed ['detector']",
        ),
        (
            {"files": {"detector": _file("d.onnx"), "classifier": _file("c.onnx")}},
            "p.pkg: task 'detect' does not match the files listed ['classifier', 'detector']",
        ),
        (
            {"files": {"detector": _file("d.onnx"), "float_source": _file("d.onnx")}},
            "p.pkg: manifest.json lists a file path twice or a reserved name: ['d.onnx', 'd.onnx']",
        ),
        ({"probe": [_file("detector.onnx")]}, "lists a file path twice"),
        ({"files": {"detector": _file("manifest.json")}}, "a reserved name: ['manifest.json']"),
        ({"probe": [_file("manifest.sig")]}, "a reserved name"),
        ({"name": "a b"}, "p.pkg: manifest.json field name = 'a b': "),
        ({"files": {"detector": _file("../x")}}, "p.pkg: manifest.json field files.detector.path = '../x'"),
    ],
)
def test_an_inconsistent_manifest_is_refused_naming_what(over: dict[str, Any], why: str) -> None:
    with pytest.raises(ModelError) as err:
        _parse(**over)
    assert why in str(err.value)


def test_a_classifier_package_and_probe_images_are_accepted() -> None:
    m = _parse(
        task="detect+classify",
        files={"detector": _file("d.onnx"), "classifier": _file("c.onnx"), "float_source": _file("f.onnx")},
        probe=[_file("probe/a.jpg"), _file("probe/b.jpg")],
    )
    assert sorted(m.files) == ["classifier", "detector", "float_source"] and len(m.probe) == 2


def test_a_manifest_that_is_not_utf8_json_is_one_error() -> None:
    for data in (b"\xff\xfe", b"[1,"):
        with pytest.raises(ModelError, match=r"^p\.pkg: manifest\.json is not JSON \("):
            parse_manifest(data, "p.pkg")


# ---- versions ---------------------------------------------------------------------------------
def test_version_tuple_keeps_the_leading_numbers_of_each_part() -> None:
    assert version_tuple("0.10.2rc1") == (0, 10, 2)
    assert version_tuple("1.2.x.4") == (1, 2)
    assert version_tuple("1.16.3") == (1, 16, 3) and version_tuple("dev") == ()


def test_the_agent_version_gate_compares_numbers_not_strings() -> None:
    m = _parse(min_agent_version="0.10")
    check_agent_version(m, "0.10", "p.pkg")  # equal: fine
    check_agent_version(m, "0.10.0", "p.pkg")
    check_agent_version(m, "0.11", "p.pkg")
    with pytest.raises(ModelError, match=r"^p\.pkg: needs edge-agent >= 0\.10, this agent is 0\.9$"):
        check_agent_version(m, "0.9", "p.pkg")


def test_the_runtime_gate_refuses_an_older_onnxruntime_and_says_how_to_convert() -> None:
    m = _parse(min_onnxruntime="1.16")
    check_runtime_version(m, "1.16.3", "p.pkg")
    check_runtime_version(m, "1.16", "p.pkg")  # equal: fine
    check_runtime_version(m, "unknown", "p.pkg")  # no version known: not refused here
    with pytest.raises(ModelError) as err:
        check_runtime_version(m, "1.11.0", "p.pkg")
    msg = str(err.value)
    assert msg.startswith("p.pkg: its models need onnxruntime >= 1.16, this device has 1.11.0")
    assert "--target-ort 1.11.0" in msg
    check_runtime_version(_parse(), "1.11.0", "p.pkg")  # "0": not recorded, never refused


def test_updates_without_a_trusted_key_are_warned_about_once() -> None:
    assert update_warnings(parse_config("")) == [
        "model_update is enabled with no trusted_keys: unsigned packages are installed from the "
        "inbox and `model install`; MQTT delivery stays off until a key is set "
        "(`edge-agent model keygen`, docs/threat-model.md)"
    ]
    (off,) = update_warnings(parse_config("[mqtt]\nenabled = false\n"))
    assert "; MQTT delivery is off anyway (`edge-agent model keygen`" in off
    (off,) = update_warnings(parse_config("[model_update]\nmqtt = false\n"))
    assert "MQTT delivery is off anyway" in off
    assert update_warnings(parse_config("[model_update]\nenabled = false\n")) == []
    key = "[model_update]\ntrusted_keys = ['" + "A" * 43 + "=']\n"
    assert update_warnings(parse_config(key)) == []


# ---- the MQTT transfer plan (signed, in the manifest) --------------------------------------
def _plan(size: int = 2500, chunk_size: int = 1024, n: int = 3, **over: Any) -> TransferPlan:
    return TransferPlan(**{"size": size, "chunk_size": chunk_size, "chunks": [SHA] * n, **over})


def test_a_good_plan_gives_every_chunk_its_exact_length() -> None:
    p = _plan()
    assert (p.count, [p.chunk_len(i) for i in range(3)]) == (3, [1024, 1024, 452])
    assert _plan(size=1, chunk_size=MIN_CHUNK, n=1).chunk_len(0) == 1
    assert [_plan(size=2048, n=2).chunk_len(i) for i in range(2)] == [1024, 1024]
    assert _plan(chunk_size=MAX_CHUNK, n=1).count == 1


@pytest.mark.parametrize(
    ("over", "why"),
    [
        ({"n": 4}, "4 chunk hashes for 2500 bytes in chunks of 1024: expected 3"),
        ({"n": 2}, "2 chunk hashes for 2500 bytes in chunks of 1024: expected 3"),
        ({"size": 0}, "greater than or equal to 1"),
        ({"chunk_size": MIN_CHUNK - 1}, "greater than or equal to 1024"),
        ({"chunk_size": MAX_CHUNK + 1, "n": 1}, f"less than or equal to {MAX_CHUNK}"),
        ({"chunks": [SHA.upper()] * 3}, "expected 64 lowercase hex digits"),
        ({"chunks": [SHA, SHA, SHA + "0"]}, "expected 64 lowercase hex digits"),
        ({"chunks": [SHA, SHA, SHA[:-1] + "\n"]}, "expected 64 lowercase hex digits"),
        ({"size": 4097 * 1024, "n": 4097}, "at most 4096 items"),
    ],
)
def test_a_bad_plan_is_refused_naming_what(over: dict[str, Any], why: str) -> None:
    # a copy: the parameter dict is shared by every run in this process (mutmut's stats run and
    # its clean run are two pytest runs in one process; popping from it made the second pass)
    over = dict(over)
    n = over.pop("n", 3)
    with pytest.raises(ValidationError) as err:
        _plan(n=n, **over)
    assert why in str(err.value)


def test_the_chunk_size_grows_only_to_keep_the_plan_under_its_hash_count() -> None:
    assert plan_chunk_size(1000) == 256 << 10
    assert plan_chunk_size(4096 * (256 << 10)) == 256 << 10  # exactly MAX_PLAN_CHUNKS chunks
    big = plan_chunk_size(4096 * (256 << 10) + 1)
    assert big == (256 << 10) + 1024 and -(-(4096 * (256 << 10) + 1) // big) <= MAX_PLAN_CHUNKS
    assert plan_chunk_size(10, wanted=MIN_CHUNK) == MIN_CHUNK
    with pytest.raises(ValueError, match="needs chunks over"):
        plan_chunk_size(MAX_PLAN_CHUNKS * MAX_CHUNK + 1)


def test_transfer_ids_are_one_short_topic_level() -> None:
    assert check_transfer_id("A_z-9" * 12 + "abcd") == "A_z-9" * 12 + "abcd"  # 64 characters
    for bad in ("x" * 65, "a b", "a\n"):
        with pytest.raises(ValueError, match="transfer id"):
            check_transfer_id(bad)


# ---- resume ranges and the trial rule ---------------------------------------------------------
def test_missing_ranges_are_bounded_and_ignore_indexes_outside_the_transfer() -> None:
    assert missing_ranges(set(), 5) == [[0, 4]]
    assert missing_ranges({0, 1, 2}, 3) == [] and missing_ranges({2}, 3) == [[0, 1]]
    assert missing_ranges({1, 3, -1, 99}, 5) == [[0, 0], [2, 2], [4, 4]]
    every_other = set(range(1, 200, 2))
    assert missing_ranges(every_other, 200, limit=3) == [[0, 0], [2, 2], [4, 4]]
    assert len(missing_ranges(every_other, 200)) == 20
    assert missing_ranges({0, 1}, 4, limit=1) == [[2, 3]]
    assert missing_ranges({2}, 4, limit=1) == [[0, 1]]  # the limit reached: the tail is not added


def test_the_collapse_rule_at_its_boundaries() -> None:
    assert not rate_collapsed(None, 0.0, 100, 30, 0.2)
    assert rate_collapsed(0.5, 0.0, 30, 30, 0.2)  # a baseline of exactly 0.5 counts
    assert not rate_collapsed(0.49, 0.0, 30, 30, 0.2)
    assert not rate_collapsed(2.0, 1.0, 30, 30, 0.5)  # exactly ratio x baseline: not below
    assert rate_collapsed(2.0, 0.99, 30, 30, 0.5)


def test_long_bad_values_are_shortened_in_the_error() -> None:
    with pytest.raises(ValueError) as err:
        check_transfer_id("x" * 500)
    assert str(err.value) == f"transfer id '{'x' * 70}': expected 1 to 64 of [A-Za-z0-9_-]"
    with pytest.raises(ModelError) as err2:
        _parse(version="v" * 50)
    assert f"version '{'v' * 50}' is not a PEP 440 version" in str(err2.value)
    from edge_agent.core.updates.package import parse_version

    with pytest.raises(ValueError) as err:
        parse_version("v" * 100)
    assert str(err.value).startswith(f"version '{'v' * 60}' is not a PEP 440 version (e.g. 1.2")


def test_a_manifest_that_is_not_an_object_names_the_root() -> None:
    with pytest.raises(ModelError, match=r"^p\.pkg: manifest\.json field <root> = \[1\]: "):
        parse_manifest(b"[1]", "p.pkg")

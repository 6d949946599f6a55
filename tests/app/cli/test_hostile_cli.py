"""Config and CLI guards against a hostile world, through the real entry point."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from support import cli


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("edge/#", "wildcard '#'"),
        ("edge/+/x", "wildcard '+'"),
        ("$SYS", "must not start with '$'"),
        ("a\u0000b", "must not contain NUL"),
        ("x" * 70_000, "70000 bytes long"),
        ("", "must not be empty"),
    ],
)
def test_config_check_refuses_unusable_topic_prefixes(tmp_path: Path, prefix: str, expected: str) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[detector]\nmodel = "m.onnx"\n[mqtt]\ntopic_prefix = {json.dumps(prefix)}\n')
    r = cli("config", "check", str(cfg))
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "mqtt.topic_prefix" in lines[0] and expected in lines[0]
    assert len(lines[0]) < 400  # the 70 000-character value is not echoed whole


def test_device_id_must_be_a_safe_client_id_and_topic_level(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    for bad in ("cam/1", "cam+1", "$cam", "x" * 65):
        cfg.write_text(f'[device]\nid = {json.dumps(bad)}\n[detector]\nmodel = "m.onnx"\n')
        r = cli("config", "check", str(cfg))
        assert r.returncode == 1 and "device.id" in r.stderr, bad


def test_a_config_without_a_detector_model_is_an_error_naming_the_key(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[queue]\npath = "{tmp_path}/q.db"\n[health]\nstatus_file = "{tmp_path}/s.json"\n')
    for args in (("config", "check", str(cfg)), ("run", "--config", str(cfg), "--max-frames", "1")):
        r = cli(*args)
        assert r.returncode == 1
        assert (
            r.stderr.count("\n") == 1
            and "detector.model is not set" in r.stderr
            and "edge-agent demo" in r.stderr
        )
    assert not (tmp_path / "q.db").exists()  # refused before anything was opened


def test_infer_save_into_the_input_folder_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    """bus_1.jpg beside bus.jpg would be an input of the next run over the folder."""
    folder = tmp_path / "imgs"
    folder.mkdir()
    for name in ("a.jpg", "b.png"):
        cv2.imwrite(str(folder / name), np.full((64, 80, 3), 90, np.uint8))
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    for given in (folder, folder / "a.jpg"):
        r = cli("infer", str(given), "--save", str(folder))
        assert r.returncode == 1 and r.stdout == ""
        assert r.stderr.splitlines() == [
            f"edge-agent infer: error: --save {folder}: is the folder of the input {given}; the annotated "
            "images would become inputs of the next run there: save to another folder (e.g. --save "
            "runs/infer)"
        ]
        assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_infer_save_does_not_follow_a_symlink_out_of_the_output_folder(tmp_path: Path) -> None:
    src = tmp_path / "in"
    out = tmp_path / "out"
    src.mkdir()
    out.mkdir()
    cv2.imwrite(str(src / "cat.png"), np.full((64, 80, 3), 90, np.uint8))
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (out / "cat.jpg").symlink_to(victim)
    r = cli("infer", str(src), "--save", str(out))
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "precious"
    assert (out / "cat.jpg").is_symlink() and (out / "cat_1.jpg").stat().st_size > 0

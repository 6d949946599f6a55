"""The page editor's drop-in (``[web] scene_file``, else <state_dir>/scene.toml) is part of the
config for every command: its zones and lines replace the file's, and a bad one fails ``config
check`` naming both files."""

from __future__ import annotations

from pathlib import Path

from support.clip import REPO, SAMPLES
from support.runner import cli
from support.world import agent_toml

from edge_agent.app.cli.configfile import load_config

GATE = '[[lines]]\nname = "gate"\npoints = [[0.5, 0.0], [0.5, 1.0]]\n'


def write(tmp: Path, scene_file: str = "") -> Path:
    cfg = tmp / "c.toml"
    web = {"scene_file": scene_file} if scene_file else {}
    cfg.write_text(
        agent_toml(tmp / "state", SAMPLES, REPO / "models" / "demo-detector.onnx", web=web, extra=GATE)
    )
    return cfg


def test_the_drop_in_replaces_the_configs_zones_and_lines(tmp_path: Path) -> None:
    cfg = write(tmp_path)
    assert [ln.name for ln in load_config(cfg).lines] == ["gate"]
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "scene.toml").write_text(
        '[[lines]]\nname = "door"\npoints = [[0.1, 0.0], [0.1, 1.0]]\n'
    )
    assert [ln.name for ln in load_config(cfg).lines] == ["door"]
    other = tmp_path / "elsewhere.toml"
    other.write_text('[[zones]]\nname = "bay"\npolygon = [[0, 0], [1, 0], [1, 1]]\n')
    cfg2 = write(tmp_path, str(other))
    got = load_config(cfg2)
    assert got.lines == [] and [z.name for z in got.zones] == ["bay"]


def test_a_bad_drop_in_fails_config_check_naming_it(tmp_path: Path) -> None:
    cfg = write(tmp_path)
    (tmp_path / "state").mkdir()
    drop_in = tmp_path / "state" / "scene.toml"
    drop_in.write_text('[[lines]]\nname = "door"\npoints = [[0.1, 0.1], [0.1, 0.1]]\n')
    proc = cli("config", "check", "--config", str(cfg))
    assert proc.returncode == 1 and f"{cfg} + {drop_in}: lines.0.points" in proc.stderr
    drop_in.write_text("[mqtt]\nenabled = true\n")
    proc = cli("config", "check", "--config", str(cfg))
    assert proc.returncode == 1 and f"{drop_in}: unknown key 'mqtt'" in proc.stderr
    assert "Traceback" not in proc.stderr

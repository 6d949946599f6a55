"""The editor's rules: an edit replaces one camera's zones and lines, checked by the whole schema
(the same lines as ``config check``), and written as a drop-in that reads back the same."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_agent.core.config.schema import parse_config, toml_data
from edge_agent.core.web.scene_edit import checked_config, edited_scene, merge_scene, scene_toml
from edge_agent.errors import ConfigError

TWO = """
[[cameras]]
id = "gate"
source = "/tmp/a"
[[cameras]]
id = "yard"
source = "/tmp/b"
[[lines]]
name = "door"
camera = "gate"
points = [[0.5, 0.0], [0.5, 1.0]]
[[lines]]
name = "fence"
camera = "yard"
points = [[0.1, 0.1], [0.9, 0.1]]
"""


def test_an_edit_replaces_its_cameras_lines_and_keeps_the_others() -> None:
    cfg = parse_config(TWO)
    edit = {
        "camera": "gate",
        "lines": [{"name": "new", "points": [[0.2, 0.0], [0.2, 1.0]], "in_side": "left"}],
    }
    zones, lines = edited_scene(cfg, edit)
    assert zones == []
    assert [(ln["name"], ln["camera"]) for ln in lines] == [("fence", "yard"), ("new", "gate")]
    new = checked_config(toml_data(TWO), (zones, lines), "c.toml")
    assert [(ln.name, ln.camera, ln.in_side) for ln in new.lines] == [
        ("fence", "yard", "right"),
        ("new", "gate", "left"),
    ]


def test_a_bad_edit_is_refused_with_the_config_check_line() -> None:
    cfg = parse_config(TWO)
    same = {"camera": "gate", "lines": [{"name": "d", "points": [[0.1, 0.1], [0.9, 0.9]]}] * 2}
    with pytest.raises(ConfigError, match=r"lines.\d.name = 'd' is used twice"):
        checked_config(toml_data(TWO), edited_scene(cfg, same), "c.toml")
    flat = {"camera": "gate", "lines": [{"name": "d", "points": [[0.1, 0.1], [0.1, 0.1]]}]}
    with pytest.raises(ConfigError, match=r"c\.toml: lines\.1\.points"):
        checked_config(toml_data(TWO), edited_scene(cfg, flat), "c.toml")
    crossed = {"camera": "gate", "zones": [{"name": "z", "polygon": [[0, 0], [1, 1], [1, 0], [0, 1]]}]}
    with pytest.raises(ConfigError, match=r"zones\.0\.polygon"):
        checked_config(toml_data(TWO), edited_scene(cfg, crossed), "c.toml")


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        ([], "expected a JSON object"),
        ({"camera": "gate", "extra": 1}, "unknown key 'extra'"),
        ({"camera": "nope"}, "expected one of gate, yard"),
        ({"camera": "gate", "lines": {"a": 1}}, "expected a list"),
        ({"camera": "gate", "lines": ["x"]}, "expected a table"),
        ({"camera": "gate", "lines": [{"camera": "yard"}]}, "this edit is for camera 'gate'"),
    ],
)
def test_what_is_not_an_edit_says_so(edit: Any, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        edited_scene(parse_config(TWO), edit)


def test_one_camera_takes_null_only() -> None:
    cfg = parse_config('[camera]\nsource = "/tmp/a"\n')
    with pytest.raises(ConfigError, match="send null"):
        edited_scene(cfg, {"camera": "gate"})
    assert edited_scene(cfg, {"camera": None, "zones": [], "lines": []}) == ([], [])


def test_the_drop_in_holds_zones_and_lines_only() -> None:
    with pytest.raises(ConfigError, match=r"s\.toml: unknown key 'mqtt'"):
        merge_scene({}, {"lines": [], "mqtt": {}}, "s.toml")
    assert merge_scene({"lines": [1], "zones": [2], "device": {}}, {"lines": []}, "s")["zones"] == []


names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20)
coords = st.floats(0, 1, allow_nan=False)


@settings(max_examples=100, deadline=None)
@given(names, st.lists(st.tuples(coords, coords), min_size=2, max_size=2), st.sampled_from(["left", "right"]))
def test_the_drop_in_reads_back_what_was_written(name: str, points: list[Any], side: str) -> None:
    line = {"name": name, "points": [list(p) for p in points], "in_side": side}
    zone = {"name": name, "polygon": [[0.0, 0.0], [1.0, 0.0], [0.5, 1.0]], "min_dwell_s": 1.5}
    back = toml_data(scene_toml(([zone], [line]), "a header\nof two lines"))
    assert back == {"zones": [zone], "lines": [line]}


# ---- issue 36: what mutation testing (core-scene-edit) found loose --------------------------------
ONE = '[camera]\nsource = "/tmp/a"\n[[lines]]\nname = "door"\npoints = [[0.5, 0.0], [0.5, 1.0]]\n'


def test_an_edit_of_the_one_camera_may_say_camera_null_and_writes_no_camera() -> None:
    cfg = parse_config(ONE)
    edit = {"camera": None, "lines": [{"camera": None, "name": "gate", "points": [[0.1, 0.0], [0.1, 1.0]]}]}
    zones, lines = edited_scene(cfg, edit)
    assert lines == [{"name": "gate", "points": [[0.1, 0.0], [0.1, 1.0]]}]
    assert "camera" not in scene_toml((zones, lines))


def test_the_edit_takes_its_camera_and_the_kept_items_only_their_own_keys() -> None:
    cfg = parse_config(TWO)
    zone = {"name": "q", "polygon": [[0.1, 0.1], [0.5, 0.1], [0.3, 0.5]]}
    zones, lines = edited_scene(cfg, {"camera": "gate", "zones": [zone], "lines": []})
    assert zones == [{**zone, "camera": "gate"}]
    # the yard's line as it was written: no defaults (in_side, classes) spelled out in the drop-in
    assert lines == [{"name": "fence", "points": [(0.1, 0.1), (0.9, 0.1)], "camera": "yard"}]


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        ([1], "got list"),
        ({"camera": 5}, r"camera = 5: expected a \[\[cameras\]\] id or null"),
    ],
)
def test_a_wrong_edit_names_what_it_got(edit: Any, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        edited_scene(parse_config(TWO), edit)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (float("nan"), "nan is not a finite number"),
        ("a\ud800", "not valid Unicode text"),
        ({"x": 1}, "not a value a zone or line has"),
    ],
)
def test_a_value_the_drop_in_cannot_hold_is_one_line(value: object, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        scene_toml(([{"name": "z", "extra": value}], []))


def test_booleans_and_a_delete_character_read_back_and_no_header_is_no_comment() -> None:
    zone = {"name": "a\x7fb", "on": True, "off": False, "polygon": [[0.0, 0.0], [1.0, 0.0], [0.5, 1.0]]}
    text = scene_toml(([zone], []))
    assert text.startswith("[[zones]]\n") and "on = true\noff = false\n" in text
    assert toml_data(text) == {"zones": [zone]}

"""``[[cameras]]`` (core/config/cameras.py): each refusal in one line naming the key, the views a
pipeline reads, and the single ``[camera]`` unchanged."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_agent.core.config.cameras import DEFAULT_CAMERA, camera_ids, camera_views
from edge_agent.core.config.schema import Config, parse_config
from edge_agent.errors import ConfigError

LINE = "points = [[0.5, 0.0], [0.5, 1.0]]"
ZONE = "polygon = [[0.1, 0.1], [0.5, 0.1], [0.5, 0.5]]"
TWO = f"""
[detector]
model = "d.onnx"
[output]
mode = "objects"
[motion]
width = 120
[[cameras]]
id = "gate"
source = "rtsp://cam/gate"
weight = 2
classes = ["person"]
[[cameras.lines]]
name = "door"
{LINE}
[[cameras]]
id = "yard"
source = "/srv/yard"
mode = "event"
interval_s = 0.5
[cameras.motion]
enabled = true
[[zones]]
name = "door"
camera = "yard"
{ZONE}
"""


def parse(text: str) -> Config:
    return parse_config(text, "site.toml")


def refusal(text: str) -> str:
    with pytest.raises(ConfigError) as err:
        parse(text)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("site.toml: "), msg
    return msg


def test_each_camera_reads_as_a_file_with_that_camera_alone() -> None:
    gate, yard = camera_views(parse(TWO))
    assert (gate.id, gate.named, gate.weight, tuple(gate.classes)) == ("gate", True, 2, ("person",))
    assert gate.cfg.camera.source == "rtsp://cam/gate" and gate.cfg.output.mode == "objects"
    assert [ln.name for ln in gate.cfg.lines] == ["door"] and gate.cfg.zones == []
    assert gate.cfg.motion.width == 120 and not gate.cfg.motion.enabled  # the top-level [motion]
    assert yard.cfg.camera.source == "/srv/yard" and yard.cfg.camera.interval_s == 0.5
    assert yard.cfg.output.mode == "event" and yard.cfg.motion.enabled  # its own [cameras.motion]
    assert [z.name for z in yard.cfg.zones] == ["door"] and yard.cfg.lines == []  # the zone naming it
    assert (yard.weight, tuple(yard.classes)) == (1, ())
    # shared sections are the file's
    assert gate.cfg.detector is yard.cfg.detector or gate.cfg.detector == yard.cfg.detector


def test_the_single_camera_is_default_and_unnamed() -> None:
    cfg = parse('[detector]\nmodel = "d.onnx"\n[camera]\nsource = "/srv/x"\n')
    (view,) = camera_views(cfg)
    assert (view.id, view.named, view.cfg) == (DEFAULT_CAMERA, False, cfg)
    # one plain share and no class filter: the old single camera's output stays as it was
    assert (view.weight, tuple(view.classes)) == (1, ())
    assert camera_ids(cfg) == [DEFAULT_CAMERA]


def test_a_lone_camera_takes_the_top_level_zones_and_lines() -> None:
    cfg = parse(
        f'[[cameras]]\nid = "a"\nsource = "/x"\n[[lines]]\nname = "l"\n{LINE}\n[[zones]]\nname = "z"\n{ZONE}\n'
    )
    (view,) = camera_views(cfg)
    assert [ln.name for ln in view.cfg.lines] == ["l"] and [z.name for z in view.cfg.zones] == ["z"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (('id = "yard"', 'id = "gate"'), "cameras.1.id = 'gate' is used twice; camera ids must be unique"),
        (
            ('camera = "yard"', 'camera = "nope"'),
            "zones.0.camera = 'nope' names no camera (the cameras: gate, yard)",
        ),
        (
            ('camera = "yard"\n', ""),
            "zones.0.camera is not set: with several cameras a top-level zone names its camera",
        ),
        (('id = "yard"', 'id = "ya/rd"'), "cameras.1.id = 'ya/rd': Value error, not a usable camera id"),
        (('id = "yard"', 'id = "ya+rd"'), "not a usable camera id"),
        (('id = "yard"', 'id = "ya rd"'), "only ASCII letters, digits"),
        (('id = "yard"', 'id = "model"'), "cameras.1.id = 'model': Value error, 'model' is reserved"),
        (("weight = 2", "weight = 0"), "cameras.0.weight = 0"),
        (("weight = 2", "weight = 1000000000"), "cameras.0.weight = 1000000000"),
        (('mode = "event"', 'mode = "sometimes"'), "cameras.1.mode = 'sometimes'"),
        (('source = "/srv/yard"', 'source = "/srv/yard"\nsorce = 1'), "unknown key 'cameras.1.sorce'"),
    ],
)
def test_a_bad_camera_file_is_one_line_naming_the_key(change: tuple[str, str], expected: str) -> None:
    assert expected in refusal(TWO.replace(*change, 1))


def test_more_cameras_than_the_maximum_is_refused() -> None:
    assert (
        "cameras: 2 cameras, more than device.max_cameras = 1 (raise it if the board carries them: "
        'docs/performance.md "Several cameras" says how to measure)'
    ) in refusal("[device]\nmax_cameras = 1\n" + TWO)
    assert [v.id for v in camera_views(parse("[device]\nmax_cameras = 2\n" + TWO))] == ["gate", "yard"]
    assert "device.max_cameras = 65" in refusal("[device]\nmax_cameras = 65\n" + TWO)


def test_camera_and_cameras_together_are_refused() -> None:
    assert (
        "[camera] and [[cameras]] are both set: move [camera]'s keys into a [[cameras]] table with an id"
    ) in refusal("[camera]\nsource = 1\n" + TWO)


@pytest.mark.parametrize("kind", ["zones", "lines"])
def test_an_unnamed_top_level_zone_or_line_with_several_cameras_lists_them(kind: str) -> None:
    body = ZONE if kind == "zones" else LINE
    text = TWO + f'[[{kind}]]\nname = "extra"\n{body}\n'
    assert (
        f"{kind}.{1 if kind == 'zones' else 0}.camera is not set: with several cameras a top-level "
        f"{kind[:-1]} names its camera (one of gate, yard), or goes into [[cameras.{kind}]]"
    ) in refusal(text)


def test_a_zone_of_the_single_camera_naming_another_is_refused() -> None:
    text = f'[camera]\nsource = 1\n[[zones]]\nname = "z"\ncamera = "gate"\n{ZONE}\n'
    assert "zones.0.camera = 'gate' names no camera: there is only [camera] ('default')" in refusal(text)
    ok = parse(text.replace('"gate"', '"default"'))
    assert [z.name for z in camera_views(ok)[0].cfg.zones] == ["z"]


def test_a_zone_inside_a_camera_naming_another_is_refused() -> None:
    text = TWO.replace('name = "door"\npoints', 'name = "door"\ncamera = "yard"\npoints', 1)
    assert "cameras.0.lines.0.camera = 'yard': a line inside camera 'gate'" in refusal(text)


def test_names_are_unique_per_camera_not_per_file() -> None:
    # "door" is a line on gate and a zone on yard: fine; two "door" lines on gate: refused
    twice = TWO + f'[[lines]]\nname = "door"\ncamera = "gate"\n{LINE}\n'
    assert "cameras.0 (gate): line name 'door' is used twice on this camera" in refusal(twice)
    other = TWO + f'[[lines]]\nname = "door"\ncamera = "yard"\n{LINE}\n'
    assert [ln.name for ln in camera_views(parse(other))[1].cfg.lines] == ["door"]
    dup_top = TWO + f'[[zones]]\nname = "door"\ncamera = "yard"\n{ZONE}\n'
    assert "zones.1.name = 'door' is used twice" in refusal(dup_top)


@given(
    st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=80)
)  # TOML holds no surrogate
@settings(max_examples=200, deadline=None)
def test_any_camera_id_is_a_safe_topic_level_or_one_clear_refusal(cid: str) -> None:
    text = '[[cameras]]\nid = "ID"\nsource = "/x"\n'.replace('"ID"', _toml_str(cid))
    try:
        cfg = parse(text)
    except ConfigError as exc:
        assert "\n" not in str(exc) and "cameras.0.id" in str(exc)
        return
    (view,) = camera_views(cfg)
    assert view.id == cid and len(cid) <= 64 and cid != "model"
    assert all(c.isascii() and (c.isalnum() or c in "_.-") for c in cid)


def _toml_str(s: str) -> str:
    return '"' + "".join(c if c.isprintable() and c not in '"\\' else f"\\U{ord(c):08x}" for c in s) + '"'

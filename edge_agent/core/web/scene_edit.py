"""The zone and line editor's rules (pure): an edit in, the new scene and its drop-in text out.

The editor saves one camera's zones and lines. They are checked as ``config check`` checks a file:
the config's own table with the new ``[[zones]]`` and ``[[lines]]`` in it goes through the same
schema (:func:`edge_agent.core.config.schema.config_from_data`), so a name used twice, a crossed
polygon or a line of zero length is refused with the same line. The result is written to the
drop-in file (``[web] scene_file``), which from then on holds every camera's zones and lines and
replaces the config's own (:func:`merge_scene`, read by every command that loads the config).
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Mapping, Optional, Tuple

from edge_agent.core.config.schema import Config, config_from_data
from edge_agent.errors import ConfigError

SCENE_KEYS = ("zones", "lines")
EDIT_KEYS = {"camera", "zones", "lines"}
Scene = Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]


def merge_scene(data: Mapping[str, Any], scene: Mapping[str, Any], source: str) -> Dict[str, Any]:
    """The config table with the drop-in's zones and lines in place of its own."""
    extra = sorted(set(scene) - set(SCENE_KEYS))
    if extra:
        raise ConfigError(
            f"{source}: unknown key '{extra[0]}': this drop-in holds [[zones]] and [[lines]] only"
        )
    out = dict(data)
    for key in SCENE_KEYS:
        out[key] = list(scene.get(key, []))
    return out


def _items(edit: Mapping[str, Any], key: str, camera: Optional[str]) -> List[Dict[str, Any]]:
    items = edit.get(key, [])
    if not isinstance(items, list):
        raise ConfigError(f"editor: {key} = {items!r}: expected a list of tables")
    out = []
    for n, item in enumerate(items):
        if not isinstance(item, dict):
            raise ConfigError(f"editor: {key}.{n} = {item!r}: expected a table")
        given = item.get("camera", camera)
        if given != camera:
            raise ConfigError(f"editor: {key}.{n}.camera = {given!r}: this edit is for camera {camera!r}")
        out.append(
            {**{k: v for k, v in item.items() if k != "camera"}, **({"camera": camera} if camera else {})}
        )
    return out


def edited_scene(cfg: Config, edit: object) -> Scene:
    """Every camera's zones and lines after ``edit`` (``{"camera", "zones", "lines"}``) replaced
    its camera's; the others are kept as they are."""
    if not isinstance(edit, dict):
        raise ConfigError(
            f"editor: expected a JSON object with camera, zones and lines, got {type(edit).__name__}"
        )
    unknown = sorted(set(edit) - EDIT_KEYS)
    if unknown:
        raise ConfigError(f"editor: unknown key {unknown[0]!r} (expected camera, zones, lines)")
    camera = edit.get("camera")
    if camera is not None and not isinstance(camera, str):
        raise ConfigError(f"editor: camera = {camera!r}: expected a [[cameras]] id or null")
    ids = [c.id for c in cfg.cameras]
    if cfg.cameras and camera not in ids:
        raise ConfigError(f"editor: camera = {camera!r}: expected one of {', '.join(ids)}")
    if not cfg.cameras and camera is not None:
        raise ConfigError(f"editor: camera = {camera!r}: this config has one [camera] (send null)")

    def kept(items: List[Any]) -> List[Dict[str, Any]]:
        return [i.model_dump(exclude_defaults=True) for i in items if i.camera != camera]

    zones = kept(cfg.zones) + _items(edit, "zones", camera)
    lines = kept(cfg.lines) + _items(edit, "lines", camera)
    return zones, lines


def checked_config(data: Mapping[str, Any], scene: Scene, source: str) -> Config:
    """The config ``data`` (its file's table) with ``scene`` in it, through the whole schema."""
    zones, lines = scene
    return config_from_data(merge_scene(data, {"zones": zones, "lines": lines}, source), source)


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not math.isfinite(v):
            raise ConfigError(f"editor: {v!r} is not a finite number")
        return repr(v)
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(f"editor: {v!r}: not valid Unicode text") from None
        # a TOML basic string: JSON's escapes are TOML's; no \uD800 pairs (TOML wants scalars: the
        # characters go as they are) and DEL escaped, which TOML requires and JSON does not
        return json.dumps(v, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise ConfigError(f"editor: {v!r}: not a value a zone or line has")


def scene_toml(scene: Scene, header: str = "") -> str:
    """The drop-in's text: ``[[zones]]`` then ``[[lines]]``, keys in the order given."""
    out = [f"# {line}" for line in header.splitlines()]
    for key, items in zip(SCENE_KEYS, scene):
        for item in items:
            if out:
                out.append("")
            out.append(f"[[{key}]]")
            out.extend(f"{k} = {_value(v)}" for k, v in item.items())
    return "\n".join(out).lstrip("\n") + "\n"

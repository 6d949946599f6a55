"""The editor's save: check an edit as ``config check`` would, write the drop-in, apply it live.

The drop-in (``[web] scene_file``, else ``<state_dir>/scene.toml``) is written atomically and
durably (adapters/host/durable.py); the config file itself is never rewritten, so its comments stay.
Applying runs on the loop thread between two frames (``Agent.call_in_loop``): each objects-mode
camera's ObjectEvents takes the new zones and lines with their totals kept
(core/objects/lifecycle.ObjectEvents.set_scene). No restart.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from edge_agent.adapters.host.durable import write_durable
from edge_agent.app.agent.output_steps import ObjectsOutput
from edge_agent.core.config.cameras import camera_views
from edge_agent.core.config.schema import Config, toml_data
from edge_agent.core.config.web import scene_path
from edge_agent.core.web.request_limits import RequestError
from edge_agent.core.web.scene_edit import checked_config, edited_scene, scene_toml
from edge_agent.errors import ConfigError

if TYPE_CHECKING:
    from edge_agent.app.agent.agent import Agent

APPLY_WAIT_S = 10.0
HEADER = (
    "Zones and lines saved by the device page (edge-agent [web]); they replace the config's own.\n"
    "Edit here or in the page; `edge-agent config check` reads this file with the config."
)


def scene_of(cfg: Config, camera: Optional[str]) -> Dict[str, Any]:
    """A camera's zones and lines for the editor: ``zones``/``lines`` it may change (top-level ones
    of that camera), ``fixed``: those written inside [[cameras]] (shown, not editable)."""

    def dump(items: List[Any]) -> List[Dict[str, Any]]:
        return [i.model_dump(mode="json", exclude_defaults=True, exclude={"camera"}) for i in items]

    own_z = [z for z in cfg.zones if z.camera == camera]
    own_l = [ln for ln in cfg.lines if ln.camera == camera]
    fixed: Dict[str, Any] = {"zones": [], "lines": []}
    for cam in cfg.cameras:
        if cam.id == camera:
            fixed = {"zones": dump(cam.zones), "lines": dump(cam.lines)}
    return {"camera": camera, "zones": dump(own_z), "lines": dump(own_l), "fixed": fixed}


def apply_scene(agent: Agent, new_cfg: Config) -> None:
    """On the loop thread: every camera's objects step takes its new zones and lines."""
    views = {v.id: v for v in camera_views(new_cfg)}
    for pipe in agent.pipelines:
        view = views.get(pipe.id)
        if view is None:
            continue
        step = pipe.output
        if isinstance(step, ObjectsOutput):
            step.objects.events.set_scene(view.cfg.zones, view.cfg.lines)
        if pipe.cfg is not agent.cfg:  # [[cameras]]: the view's own copy, checked as the whole file was
            vars(pipe.cfg).update(lines=view.cfg.lines, zones=view.cfg.zones)
    agent.cfg.lines, agent.cfg.zones = new_cfg.lines, new_cfg.zones


class SceneSaver:
    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.saves = 0
        self._lock = threading.Lock()

    def save(self, edit: object) -> Dict[str, Any]:
        from edge_agent.app.cli.configfile import load_config

        path = self.agent.config_path
        if path is None:
            raise RequestError(409, "this agent runs without a config file: nothing to save into")
        with self._lock:
            try:
                text = path.read_text(encoding="utf-8")
                current = load_config(path)  # with the drop-in as it is now
                drop_in = scene_path(current.web.scene_file, current.device.state_dir)
                scene = edited_scene(current, edit)
                new_cfg = checked_config(toml_data(text, str(path)), scene, f"{path} + {drop_in}")
            except ConfigError as exc:
                raise RequestError(422, str(exc)) from None
            except OSError as exc:
                raise RequestError(500, f"{path}: cannot read the config: {exc.strerror or exc}") from None
            try:
                drop_in.parent.mkdir(parents=True, exist_ok=True)
                write_durable(drop_in, scene_toml(scene, HEADER).encode("utf-8"))
            except OSError as exc:
                raise RequestError(
                    500, f"{drop_in}: cannot write the drop-in: {exc.strerror or exc}"
                ) from None
            done = threading.Event()

            def apply() -> None:
                try:
                    apply_scene(self.agent, new_cfg)
                finally:
                    done.set()

            self.agent.call_in_loop(apply)
            applied = done.wait(APPLY_WAIT_S)
            self.saves += 1
        zones, lines = scene
        return {"saved": str(drop_in), "zones": len(zones), "lines": len(lines), "applied": applied}

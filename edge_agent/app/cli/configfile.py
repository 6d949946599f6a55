"""Read the TOML config from disk (the one place config touches the filesystem).

Every command that reads a config (``run``, ``queue``, ``status``, ``doctor``, ``config check``)
finds it the same way: ``--config FILE``, else ``$EDGE_AGENT_CONFIG``, else
``/etc/edge-agent/config.toml`` -- so ``edge-agent status`` on a board reads what the service runs.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Union

from edge_agent.core.config.schema import (
    DEFAULT_CONFIG_PATH,
    Config,
    config_from_data,
    parse_config,
    toml_data,
)
from edge_agent.errors import ConfigError

CONFIG_ENV = "EDGE_AGENT_CONFIG"

if TYPE_CHECKING:
    # what every command module's ``register(sub)`` gets: ``parser.add_subparsers()`` (app/cli/main.py)
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]


def add_config_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        "-c",
        metavar="FILE",
        help=f"config TOML (default: ${CONFIG_ENV}, else {DEFAULT_CONFIG_PATH})",
    )


def config_path(given: Optional[Union[str, Path]] = None) -> Path:
    """The config file a command uses: the flag, else the environment, else the system path."""
    if given:
        return Path(given)
    env = os.environ.get(CONFIG_ENV, "").strip()
    return Path(env) if env else DEFAULT_CONFIG_PATH


def load_config(path: Optional[Union[str, Path]] = None) -> Config:
    """Load and validate the config :func:`config_path` names."""
    p = config_path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"{p}: config file not found (pass --config FILE or set {CONFIG_ENV}; "
            "'edge-agent config example' prints a starting point)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read config: {exc}") from None
    return with_scene_file(parse_config(text, source=str(p)), text, str(p))


def with_scene_file(cfg: Config, text: str, source: str) -> Config:
    """The config with the page editor's drop-in (``[web] scene_file``) in it, when that exists:
    its [[zones]] and [[lines]] replace the config's (docs/web.md)."""
    from edge_agent.core.config.web import scene_path
    from edge_agent.core.web.scene_edit import merge_scene

    drop_in = scene_path(cfg.web.scene_file, cfg.device.state_dir)
    try:
        scene_text = drop_in.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):  # none (a state_dir that is a file: doctor says so)
        return cfg
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{drop_in}: cannot read the zones and lines drop-in: {exc}") from None
    both = f"{source} + {drop_in}"
    merged = merge_scene(toml_data(text, source), toml_data(scene_text, str(drop_in)), str(drop_in))
    return config_from_data(merged, both)

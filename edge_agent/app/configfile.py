"""Read the TOML config from disk (the one place config touches the filesystem)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Union

from edge_agent.core.config import DEFAULT_CONFIG_PATH, Config, parse_config
from edge_agent.errors import ConfigError


def load_config(path: Optional[Union[str, Path]] = None) -> Config:
    """Load and validate ``path`` (default ``/etc/edge-agent/config.toml``)."""
    p = Path(path) if path is not None else DEFAULT_CONFIG_PATH
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{p}: config file not found (pass --config FILE)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read config: {exc}") from None
    return parse_config(text, source=str(p))

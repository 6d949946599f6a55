"""What ``edge-agent run`` checks about its state folders before it starts anything.

A ``[device] state_dir`` that is a file made the loop start, log an error per write and report a
false "kept as .corrupt"; root running the service's folders (owned by the service user) leaves
root-owned files the service then cannot rewrite. Both are one line at start instead.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from edge_agent.errors import ConfigError

if TYPE_CHECKING:
    from edge_agent.core.config.schema import Config


def _user_name(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"


def check_state_folders(
    cfg: Config,
    *,
    euid: Optional[int] = None,
    user_name: Callable[[int], str] = _user_name,
) -> None:
    """Raise ConfigError (one line naming the key and the path) when the service cannot use them."""
    if euid is None:
        euid = os.geteuid() if hasattr(os, "geteuid") else -1
    folders = [
        ("[device] state_dir", Path(cfg.device.state_dir), True),
        ("[queue] path", Path(cfg.queue.path).parent, False),
        ("[health] status_file", Path(cfg.health.status_file).parent, False),
    ]
    for key, folder, is_key in folders:
        shown = f"{key} = {folder}" if is_key else f"{key}'s folder {folder}"
        if folder.exists() and not folder.is_dir():
            raise ConfigError(f"{shown}: is a file, expected a folder (or a path the agent may create)")
        if not folder.is_dir():
            continue
        owner = folder.stat().st_uid
        if euid == 0 and owner != 0:
            name = user_name(owner)
            raise ConfigError(
                f"{shown} belongs to {name} and this is root: files root writes there would lock the "
                f"service out; run it as {name} (sudo -u {name} edge-agent run ..., or systemctl start "
                "edge-agent)"
            )
        if euid != 0 and not os.access(folder, os.W_OK | os.X_OK):
            raise ConfigError(f"{shown}: not writable by {user_name(euid)}; fix its owner/mode or set {key}")

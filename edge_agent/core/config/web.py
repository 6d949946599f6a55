"""Config section ``[web]``: the device page and its HTTP API (docs/web.md); off by default.

As in core/config/inputs.py: each key's default and explanation live once, in its ``Field``.
Anything beyond loopback needs a token file: the rule is here, so ``config check`` says it
before a start does (the file's mode is checked at start: adapters/web/auth.py).
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Optional

from pydantic import Field, field_validator, model_validator

from edge_agent.core.config.inputs import Section
from edge_agent.core.vision.image_header import DEFAULT_MAX_PIXELS

SCENE_FILE_NAME = "scene.toml"


def is_loopback(bind: str) -> bool:
    """``bind`` only reachable from this machine (127.0.0.0/8, ::1, "localhost")."""
    if bind == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind).is_loopback
    except ValueError:
        return False


class WebConfig(Section):
    enabled: bool = Field(
        default=False, description="serve the device page and the HTTP API from the agent (docs/web.md)"
    )
    bind: str = Field(
        default="127.0.0.1",
        description="the address to listen on: an IP address or localhost; anything beyond loopback "
        "needs token_file",
    )
    port: int = Field(default=8080, ge=0, lt=65536, description="the TCP port (0: any free port, logged)")
    token_file: Optional[str] = Field(
        default=None,
        examples=["/etc/edge-agent/web-token"],
        description="a file (mode 0600) holding the token every request must carry as "
        "'Authorization: Bearer <token>'; required when bind is not loopback",
    )
    scene_file: Optional[str] = Field(
        default=None,
        examples=["/var/lib/edge-agent/scene.toml"],
        description="the drop-in file the page's zone and line editor writes; when it exists its "
        "[[zones]] and [[lines]] replace the config's (unset: scene.toml in [device] state_dir)",
    )
    live_fps: float = Field(
        default=2.0,
        gt=0,
        le=15,
        description="the live view's highest frame rate per camera (JPEGs per second)",
    )
    max_body_mb: float = Field(
        default=16.0, gt=0, le=256, description="a request body above this is refused (413) before it is read"
    )
    max_pixels: int = Field(
        default=DEFAULT_MAX_PIXELS,
        ge=1,
        description="POST /api/v1/infer refuses a larger image (413) from its header, before decoding",
    )
    infer_queue: int = Field(
        default=2,
        ge=0,
        le=64,
        description="inference requests waiting behind the running one; one more is refused (429)",
    )

    # the rules are plain functions below: mutmut 3 does not mutate decorated methods
    @field_validator("bind")
    @classmethod
    def _address(cls, bind: str) -> str:
        problem = bind_problem(bind)
        if problem is not None:
            raise ValueError(problem)
        return bind

    @model_validator(mode="after")
    def _token_beyond_loopback(self) -> WebConfig:
        problem = token_problem(self.enabled, self.bind, self.token_file)
        if problem is not None:
            raise ValueError(problem)
        return self


def bind_problem(bind: str) -> Optional[str]:
    """Why ``bind`` is not an address to listen on, or None."""
    if bind == "localhost":
        return None
    try:
        ipaddress.ip_address(bind)
    except ValueError:
        return "expected an IP address (e.g. 127.0.0.1, 0.0.0.0, ::1) or localhost"
    return None


def token_problem(enabled: bool, bind: str, token_file: Optional[str]) -> Optional[str]:
    """A page reachable from the network without a token file, or None."""
    if enabled and not is_loopback(bind) and not token_file:
        return (
            f"web.bind = {bind!r} is reachable from the network: set web.token_file "
            "(a file of mode 0600 holding the token), or bind 127.0.0.1"
        )
    return None


def scene_path(scene_file: Optional[str], state_dir: str) -> Path:
    """Where the editor's drop-in lives: ``[web] scene_file``, else ``<state_dir>/scene.toml``."""
    return Path(scene_file) if scene_file else Path(state_dir) / SCENE_FILE_NAME

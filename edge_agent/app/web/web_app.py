"""``[web]`` started by the agent: the page server in its own thread, beside the loop.

Off by default. A bind beyond loopback without a readable owner-only token file stops the start
with one line (ConfigError): a page that says nothing about who may use it is never served. A port
that is taken is the same: the operator asked for the page, so the agent does not run without it
silently.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Optional

from edge_agent.adapters.web.access import Access, read_token
from edge_agent.adapters.web.page_server import PageServer
from edge_agent.app.web.infer_api import InferApi
from edge_agent.app.web.live_view import LiveView
from edge_agent.app.web.scene_save import SceneSaver
from edge_agent.app.web.web_routes import EventLog, routes
from edge_agent.core.config.web import is_loopback
from edge_agent.errors import ConfigError

if TYPE_CHECKING:
    from edge_agent.app.agent.agent import Agent

log = logging.getLogger(__name__)


class WebApp:
    """The parts the page's routes use; kept on the agent for its figures."""

    def __init__(self, agent: Agent) -> None:
        web = agent.cfg.web
        loopback = is_loopback(web.bind)
        token = read_token(Path(web.token_file)) if web.token_file else None
        self.token_required = token is not None
        if token is None and not loopback:  # the schema says so too; a config built in code may not
            raise ConfigError(f"web.bind = {web.bind!r} is not loopback: set web.token_file")
        self.live = LiveView(web.live_fps)
        self.events = EventLog()
        self.infer = InferApi(lambda: agent.models, web.max_pixels, web.infer_queue)
        self.saver = SceneSaver(agent)
        for pipe in agent.pipelines:
            pipe.add_observer(self.live.observer(pipe))
        chained = agent.on_result

        def on_result(body: Dict[str, Any]) -> None:
            self.events.add(body)
            if chained is not None:
                chained(body)

        agent.on_result = on_result
        table = routes(agent, self.live, self.events, self.infer, self.saver)
        try:
            self.server = PageServer(
                web.bind, web.port, table, Access(token, loopback), int(web.max_body_mb * 2**20)
            )
        except OSError as exc:
            raise ConfigError(f"web: cannot listen on {web.bind}:{web.port}: {exc.strerror or exc}") from None
        self.url = f"http://{web.bind if ':' not in web.bind else f'[{web.bind}]'}:{self.server.port}/"

    def start(self) -> None:
        self.server.start()
        log.info("device page on %s%s", self.url, " (token required)" if self.token_required else "")

    def stop(self) -> None:
        self.server.stop()


def start_web(agent: Agent) -> Optional[WebApp]:
    """The page when ``[web] enabled``, started; else None."""
    if not agent.cfg.web.enabled:
        return None
    app = WebApp(agent)
    app.start()
    return app

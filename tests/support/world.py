"""A small agent world for end-to-end tests: test-built models, a folder camera, a config file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import cv2

from edge_agent.core.config import Config, parse_config
from support.models import bright_scene, make_bright_detector, make_color_classifier

if TYPE_CHECKING:
    from edge_agent.app.agent import Agent


def make_world(root: Path, scenes: int = 4) -> dict[str, Path]:
    """Models, a folder of ``scenes`` images (0, 1, 2 ... red squares), and a state dir."""
    imgs = root / "camera"
    imgs.mkdir(parents=True, exist_ok=True)
    for n in range(scenes):
        squares = [(32 + 64 * i, 64, 32) for i in range(n % 4)]
        cv2.imwrite(str(imgs / f"{n:03d}.png"), bright_scene(128, 256, squares, color=(0, 0, 255)))
    return {
        "root": root,
        "camera": imgs,
        "det": make_bright_detector(root / "det.onnx"),
        "cls": make_color_classifier(root / "cls.onnx"),
        "state": root / "state",
    }


def agent_config(
    w: dict[str, Path],
    *,
    port: Optional[int] = None,
    loop: bool = True,
    mode: str = "every_frame",
    queue_path: Optional[Path] = None,
    extra: str = "",
    interval: float = 0.0,
    queue_extra: str = "",
    output_extra: str = "",
) -> Path:
    cfg = w["root"] / "config.toml"
    mqtt = (
        f'[mqtt]\nhost = "127.0.0.1"\nport = {port}\nreconnect_min_s = 0.2\nreconnect_max_s = 1.0\nstatus_interval_s = 1.0\n'
        if port
        else "[mqtt]\nenabled = false\n"
    )
    cfg.write_text(
        f"""[device]
id = "cam-1"
state_dir = "{w["state"]}"
[camera]
source = "{w["camera"]}"
loop = {str(loop).lower()}
interval_s = {interval}
[detector]
model = "{w["det"]}"
conf_threshold = 0.6
{mqtt}
[queue]
path = "{queue_path or (w["state"] / "outbox.db")}"
flush_interval_s = 0.2
{queue_extra}
[output]
mode = "{mode}"
{output_extra}
[health]
status_file = "{w["state"]}/status.json"
{extra}
"""
    )
    return cfg


def run_agent(agent: Agent, timeout_s: float = 15.0) -> int:
    """``agent.run()`` with a bound: a loop that does not stop (at the end of its camera, at
    ``max_frames``) fails the test within ``timeout_s`` instead of hanging it. Exceptions from
    the run (an assert in ``on_result``) are raised here."""
    out: list[Any] = []

    def target() -> None:
        try:
            out.append(agent.run())
        except BaseException as exc:  # noqa: BLE001 -- handed to the test's thread
            out.append(exc)

    t = threading.Thread(target=target, name="agent-run", daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        agent.stop_event.set()
        t.join(10)
        raise AssertionError(f"the agent did not stop by itself within {timeout_s} s")
    if isinstance(out[0], BaseException):
        raise out[0]
    return int(out[0])


def start_agent(cfg: Path, *args: str, env: Optional[dict[str, str]] = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "edge_agent", "run", "--config", str(cfg), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


class PtySensor:
    """A serial sensor on a pty: a thread writes ``temp=.. hum=..`` lines like a microcontroller
    would; with ``garbage_every`` N, every Nth line is garbage (counted and skipped by the agent)."""

    def __init__(self, link: Path, garbage_every: int = 0) -> None:
        self.master, slave = os.openpty()
        self.link = link
        self.garbage_every = garbage_every
        link.symlink_to(os.ttyname(slave))
        os.close(slave)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        i = 0
        while not self.stop.wait(0.1):
            garbage = self.garbage_every and i % self.garbage_every == 0
            line = b"%% garbage \xff line\n" if garbage else b"temp=21.5 hum=40\n"
            try:
                os.write(self.master, line)
            except OSError:
                return
            i += 1

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2)
        os.close(self.master)


def offline_config(
    state: Path,
    source: object,
    model: Path,
    *,
    camera: str = "",
    detector: str = "",
    mode: str = "every_frame",
    extra: str = "",
    updates: bool = False,
    mqtt_port: Optional[int] = None,
    queue: str = "",
) -> Config:
    """An in-process agent config with no broker: ``state`` holds the queue and status file;
    ``camera``/``detector`` are extra lines for those sections, ``extra`` whole sections.
    Model updates are off unless ``updates``: their thread polls its inbox once a second, so
    stopping them adds ~0.7 s to every run (mutation runs repeat these runs for each mutant).
    ``mqtt_port``: sync to a broker on 127.0.0.1 there (device id ``cam-9``, prefix ``site7``);
    ``queue``: the ``[queue]`` keys instead of a ``q.db`` in ``state``."""
    mqtt = (
        f'host = "127.0.0.1"\nport = {mqtt_port}\ntopic_prefix = "site7"\n'
        "reconnect_min_s = 0.1\nreconnect_max_s = 0.2\nstatus_interval_s = 1.0"
        if mqtt_port
        else "enabled = false"
    )
    return parse_config(
        f"""
[device]
id = "cam-9"
state_dir = "{state}"
[camera]
source = "{source}"
{camera}
[detector]
model = "{model}"
{detector}
[mqtt]
{mqtt}
[queue]
{queue or f'path = "{state}/q.db"'}
[output]
mode = "{mode}"
[model_update]
enabled = {str(updates).lower()}
[health]
status_file = "{state}/status.json"
{extra}
"""
    )


def status(w: dict[str, Path]) -> dict[str, Any]:
    """The agent's status file, or {} while it is not (completely) written yet."""
    try:
        return json.loads((w["state"] / "status.json").read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return {}

"""One agent world for end-to-end tests: a state dir, a camera folder, models, a config written from
one place, an optional broker, and the agent started in process or as ``python -m edge_agent run``.

Where to start: ``w = make_world(tmp_path)`` (test-built models, a folder of 4 scenes), then
``w.config(...)`` for an in-process ``Agent(cfg)``, or ``w.write_config(...)`` and ``AgentProc(path)``
(runs until stopped) / ``start_agent(path)`` (a bare Popen) / ``cli("run", ...)`` for a subprocess;
``port=broker.port`` adds the real mosquitto of the ``broker`` fixture. Every agent config in the
tests comes from :func:`agent_toml`: the world's sections (device, camera, detector, mqtt, queue,
output, health), then per-section overrides (``camera={"loop": True}`` or ``camera="loop = true"``;
``None`` removes a key or a section), then ``extra``: TOML text read as if written after the last
section (``[health]``), merged the same way. A test on other paths (the demo detector, a clip) calls
:func:`agent_toml` itself; nothing else writes an agent's config.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Optional, Union

import cv2
import tomllib

from edge_agent.core.config.schema import Config, parse_config
from support.models import bright_scene, make_bright_detector, make_color_classifier
from support.toml_text import merged, toml_text
from support.waiting import wait_until

if TYPE_CHECKING:
    from edge_agent.app.agent.agent import Agent

# a section override: a table, TOML lines of that section, or None to leave the section out
Section = Union[Mapping[str, Any], str, None]


def broker_section(port: int) -> dict[str, Any]:
    """``[mqtt]`` for a loopback broker on ``port``: quick reconnects, a status a second."""
    return {
        "host": "127.0.0.1",
        "port": port,
        "reconnect_min_s": 0.2,
        "reconnect_max_s": 1.0,
        "status_interval_s": 1.0,
    }


def agent_toml(
    state: Path,
    source: Union[Path, str, None],
    model: Optional[Path],
    *,
    port: Optional[int] = None,
    extra: str = "",
    **sections: Section,
) -> str:
    """An agent's config: its state under ``state``, the camera ``source`` (a folder, a URL), the
    detector ``model`` (None: no such section); no broker unless ``port`` (loopback); then
    ``sections`` and ``extra`` over it."""
    doc: dict[str, Any] = {
        "device": {"id": "cam-1", "state_dir": str(state)},
        "camera": None if source is None else {"source": str(source)},
        "detector": None if model is None else {"model": str(model)},
        "mqtt": broker_section(port) if port else {"enabled": False},
        "queue": {"path": str(state / "outbox.db")},
        "output": {"mode": "every_frame"},
        "health": {"status_file": str(state / "status.json")},
    }
    doc = merged(
        {k: v for k, v in doc.items() if v is not None},
        {k: tomllib.loads(v) if isinstance(v, str) else v for k, v in sections.items()},
    )
    # extra reads as text written after the last section, [health] (lines before a header are its)
    return toml_text(merged(doc, tomllib.loads(f"[health]\n{extra}")))


@dataclass(frozen=True)
class World:
    """Test-built models, a folder camera and a state dir under ``root``."""

    root: Path
    camera: Path
    det: Path
    cls: Path
    state: Path

    def __getitem__(self, name: str) -> Path:
        """``w["camera"]``: the mapping form many tests were written with."""
        value: Path = getattr(self, name)
        return value

    def toml(self, *, port: Optional[int] = None, extra: str = "", **sections: Section) -> str:
        return agent_toml(self.state, self.camera, self.det, port=port, extra=extra, **sections)

    def write_config(
        self,
        name: str = "config.toml",
        *,
        port: Optional[int] = None,
        extra: str = "",
        **sections: Section,
    ) -> Path:
        """The config file ``root/name`` (for ``edge-agent run``, ``queue``, reloads)."""
        path = self.root / name
        path.write_text(self.toml(port=port, extra=extra, **sections))
        return path

    def config(self, *, port: Optional[int] = None, extra: str = "", **sections: Section) -> Config:
        """The same config parsed, for an in-process ``Agent(cfg)``."""
        return parse_config(self.toml(port=port, extra=extra, **sections))

    def status(self) -> dict[str, Any]:
        return read_status(self.state / "status.json")


def make_world(root: Path, scenes: int = 4) -> World:
    """Models, a folder of ``scenes`` images (0, 1, 2 ... red squares), and a state dir."""
    imgs = root / "camera"
    imgs.mkdir(parents=True, exist_ok=True)
    for n in range(scenes):
        squares = [(32 + 64 * i, 64, 32) for i in range(n % 4)]
        cv2.imwrite(str(imgs / f"{n:03d}.png"), bright_scene(128, 256, squares, color=(0, 0, 255)))
    return World(
        root=root,
        camera=imgs,
        det=make_bright_detector(root / "det.onnx"),
        cls=make_color_classifier(root / "cls.onnx"),
        state=root / "state",
    )


def agent_config(
    w: World,
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
    """The world's config file for a subprocess agent: conf 0.6, a 0.2 s flush, a looping camera;
    ``queue_extra``/``output_extra`` are extra lines of those sections, ``extra`` whole sections."""
    return w.write_config(
        port=port,
        extra=extra,
        camera={"loop": loop, "interval_s": interval},
        detector={"conf_threshold": 0.6},
        queue={
            "path": str(queue_path or w.state / "outbox.db"),
            "flush_interval_s": 0.2,
            **tomllib.loads(queue_extra),
        },
        output={"mode": mode, **tomllib.loads(output_extra)},
    )


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
    Model updates are off unless ``updates``: their worker polls its inbox once a second, so
    stopping them added ~0.7 s to every run (mutation runs repeat these runs for each mutant).
    ``mqtt_port``: sync to a loopback broker there, as device ``cam-9`` under the prefix ``site7``;
    ``queue``: more ``[queue]`` keys (a ``path`` replaces ``state/q.db``)."""
    return parse_config(
        agent_toml(
            state,
            str(source),
            model,
            port=mqtt_port,
            extra=extra,
            device={"id": "cam-9" if mqtt_port else None},
            camera=camera,
            detector=detector,
            mqtt={"topic_prefix": "site7"} if mqtt_port else {},
            queue=merged({"path": str(state / "q.db")}, tomllib.loads(queue)),
            output={"mode": mode},
            model_update={"enabled": updates},
        )
    )


def run_agent(agent: Agent, timeout_s: float = 15.0) -> int:
    """``agent.run()`` with a bound: a loop that does not stop by itself (at the end of its
    camera, at ``max_frames``) fails the test within ``timeout_s`` instead of hanging it (and a
    mutant that stalls the loop fails fast instead of at mutmut's timeout). Exceptions from the
    run (an assert in ``on_result``) are raised here."""
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


@contextlib.contextmanager
def running(agent: Agent, stop_s: float = 30.0) -> Iterator[threading.Thread]:
    """``agent.run()`` in a thread for the ``with`` block, then stopped as SIGTERM would
    (``stop_event``); the agent must have stopped within ``stop_s``."""
    t = threading.Thread(target=agent.run, daemon=True)
    t.start()
    try:
        yield t
    finally:
        agent.stop_event.set()
        t.join(stop_s)
    assert not t.is_alive(), f"the agent still runs {stop_s:g} s after its stop_event"


def start_agent(
    cfg: Path, *args: str, env: Optional[dict[str, str]] = None, log: Optional[IO[bytes]] = None
) -> subprocess.Popen[str]:
    """``python -m edge_agent run --config CFG ARGS``: output to pipes (text), or both to ``log``."""
    return subprocess.Popen(
        [sys.executable, "-m", "edge_agent", "run", "--config", str(cfg), *args],
        stdout=log or subprocess.PIPE,
        stderr=log or subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def read_status(path: Path) -> dict[str, Any]:
    """An agent's status file, or {} while it is not (completely) written yet."""
    try:
        return json.loads(path.read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return {}


def status(w: World) -> dict[str, Any]:
    """The world's status file, or {} while it is not (completely) written yet."""
    return w.status()


class AgentProc:
    """A long-running ``edge-agent run`` of config ``cfg``: its output in ``cfg``'s ``.log``,
    started until it has run a frame, stopped with SIGTERM or killed with SIGKILL."""

    def __init__(self, cfg: Path) -> None:
        from edge_agent.app.cli.configfile import load_config

        self.cfg_path = cfg
        self.cfg = load_config(cfg)
        self.state = Path(self.cfg.device.state_dir)
        self.log = cfg.with_suffix(".log")
        self.proc: Optional[subprocess.Popen[str]] = None

    def start(self) -> AgentProc:
        with open(self.log, "ab") as out:
            self.proc = start_agent(self.cfg_path, log=out)
        wait_until(
            lambda: (self.status() or {}).get("frames", 0) > 0,
            what=lambda: f"agent running\n{self.log_text()}",
        )
        return self

    def status(self) -> Optional[dict[str, Any]]:
        """The status while the agent runs, else None (a stale file of a dead agent is not read)."""
        data = read_status(self.state / "status.json")
        return data if data.get("state") == "running" and self.proc and self.proc.poll() is None else None

    def detector_sha(self) -> Optional[str]:
        s = self.status()
        return s["models"]["detector"]["sha256"] if s and s.get("models") else None

    def last(self) -> dict[str, Any]:
        """The last model-update outcome the agent recorded (``models/active.json``), or {}."""
        try:
            return dict(json.loads((self.state / "models" / "active.json").read_text()).get("last") or {})
        except FileNotFoundError:
            return {}

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        (self.state / "status.json").unlink(missing_ok=True)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        (self.state / "status.json").unlink(missing_ok=True)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


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

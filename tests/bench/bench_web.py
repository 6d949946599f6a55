"""The device page's cost to the loop: [web] off vs on with nobody watching (vs on and watched).

    python tests/bench/bench_web.py [--model M] [--frames N] [--repeat R] [--watch]

One process, the agent in process on a looping folder camera (free-running, every_frame mode), the
variants alternated ``--repeat`` times so they share the machine's load: each run's loop rate is
its frames over the time from READY to its last result. Prints the median fps per variant and
the ratio on/off. ``--watch`` adds a run with a viewer polling the live JPEG at 2 per second.
"""

from __future__ import annotations

import argparse
import http.client
import logging
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from support.ports import free_port  # noqa: E402

from edge_agent.app.agent.agent import Agent  # noqa: E402
from edge_agent.core.config.schema import parse_config  # noqa: E402

SHARED = next(
    (p for p in (REPO.parent / "shared", REPO.parent.parent / "shared") if p.is_dir()), REPO.parent / "shared"
)


def one_run(model: Path, images: list[Path], frames: int, web: str) -> float:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        cam = root / "cam"
        cam.mkdir()
        for n, img in enumerate(images * 4):
            shutil.copy(img, cam / f"{n:03d}{img.suffix}")
        port = free_port()
        web_toml = f"[web]\nenabled = true\nport = {port}\n" if web != "off" else ""
        cfg = parse_config(
            f'[device]\nid = "bench"\nstate_dir = "{root}"\n[camera]\nsource = "{cam}"\nloop = true\n'
            f'[detector]\nmodel = "{model}"\n[mqtt]\nenabled = false\n[queue]\npath = "{root}/q.db"\n'
            f'[output]\nmode = "every_frame"\n[health]\nstatus_file = "{root}/status.json"\n{web_toml}'
        )
        last: list[float] = []
        agent = Agent(cfg, None, max_frames=frames, on_result=lambda _b: last.append(time.monotonic()))
        stop = threading.Event()
        viewer = None
        if web == "watched":

            def watch() -> None:
                while not stop.wait(0.5):
                    try:
                        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                        c.request("GET", "/api/v1/live.jpg")
                        c.getresponse().read()
                        c.close()
                    except OSError:
                        pass

            viewer = threading.Thread(target=watch, daemon=True)
            viewer.start()
        agent.run()
        stop.set()
        if viewer is not None:
            viewer.join(5)
        assert agent.ready_s is not None
        start = agent.started_mono + agent.ready_s
        return agent.frames / (last[-1] - start)


def observer_ns(calls: int = 200_000) -> float:
    """The live view's observer with nobody watching, per call (median of 5 rounds), in ns."""
    import timeit
    from types import SimpleNamespace

    import numpy as np

    from edge_agent.app.web.live_view import LiveView
    from edge_agent.core.camera.source_spec import Frame

    fn = LiveView(2.0).observer(SimpleNamespace(id="default", output=None))  # type: ignore[arg-type]
    frame = Frame(np.zeros((4, 4, 3), np.uint8), 0.0, 0.0, 1, "bench")
    rounds = timeit.repeat(lambda: fn(None, frame, []), number=calls, repeat=5)  # type: ignore[arg-type]
    return statistics.median(rounds) / calls * 1e9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    default = SHARED / "models" / "yolov8n-coco-int8-dynamic.onnx"
    ap.add_argument(
        "--model", type=Path, default=default if default.is_file() else REPO / "models" / "demo-detector.onnx"
    )
    ap.add_argument("--frames", type=int, default=150)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--watch", action="store_true")
    a = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    photos = sorted((SHARED / "images").glob("*.jpg")) or sorted((REPO / "models" / "samples").glob("*.jpg"))
    variants = ["off", "on"] + (["watched"] if a.watch else [])
    fps: dict[str, list[float]] = {v: [] for v in variants}
    one_run(a.model, photos, 20, "off")  # warm the page cache and the imports
    for r in range(a.repeat):
        order = variants if r % 2 == 0 else variants[::-1]
        for v in order:
            fps[v].append(one_run(a.model, photos, a.frames, v))
    med: dict[str, Any] = {v: statistics.median(x) for v, x in fps.items()}
    print(f"model {a.model.name}, {a.frames} frames x {a.repeat} runs per variant, alternated")
    for v in variants:
        print(f"  web {v:8s} median {med[v]:.2f} fps  runs {', '.join(f'{x:.2f}' for x in fps[v])}")
    print(f"  ratio on (nobody watching) / off: {med['on'] / med['off']:.3f}")
    print(f"  the observer with nobody watching: {observer_ns():.0f} ns per frame")
    if a.watch:
        print(f"  ratio watched / off: {med['watched'] / med['off']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Bytes an hour sent in objects mode vs event and every_frame mode, on the same clip.

    python tests/bench/bench_objects_bytes.py

The clip of tests/app/agent/test_objects_e2e.py (5 objects crossing a line, 2 dwelling in a zone, one
passer-by, 19 s at 10 fps; frames made from real photos) through ``edge-agent run`` once per mode;
the bytes are the stored payload sizes in the queue (what MQTT would publish), scaled to an hour.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support.objects import FPS, config, make_clip, run_agent


def main() -> int:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        cam = root / "cam"
        cam.mkdir()
        clip = make_clip(cam)
        seconds = clip["frames"] / FPS
        print(f"clip: {clip['frames']} frames, {seconds:.1f} s")
        print("| mode | messages | bytes | bytes/hour |")
        print("|---|---|---|---|")
        for mode in ("objects", "event", "every_frame"):
            rows = run_agent(config(root, cam, mode))
            size = sum(s for _, _, s in rows)
            print(f"| {mode} | {len(rows)} | {size} | {size * 3600 / seconds:,.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``edge-agent bench --sensor FILE MODEL...``: sensor models timed on the windows of a recording.

Per model: the median and 90th percentile of one window's inference (normalise + session.run +
the task's outcome), the windowing cost per reading (the agent's sensor thread), the CPU time per
window (process time, so a model that spins threads shows it), and the CPU share of one core at the
model's own rate (windows per second = rate_hz / hop) -- what running it costs the board.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Dict, List


def bench_sensor(args: argparse.Namespace) -> int:
    from edge_agent.app.workbench.infer_sensor import read_recording
    from edge_agent.inference.sensor_model import SensorModel

    readings = list(read_recording(Path(args.sensor)))
    rows: List[Dict[str, Any]] = []
    for path in args.models:
        model = SensorModel.load(path, threads=args.threads, provider=args.provider)
        spec = model.spec
        for _ in range(2):  # the second pass is timed: the first pays Python's warm-up
            windower = model.windower()
            t0 = time.perf_counter()
            windows = [w for i, r in enumerate(readings) for w in windower.push(r, float(r.get("t", i)))]
            push_us = (time.perf_counter() - t0) / max(1, len(readings)) * 1e6
        if not windows:
            from edge_agent.errors import EdgeAgentError

            raise EdgeAgentError(
                f"--sensor {args.sensor}: no complete window of {spec.window} readings for {path}"
            )
        for w in windows[: args.warmup]:
            model.infer(w)
        times: List[float] = []
        cpu0, wall0 = time.process_time(), time.perf_counter()
        n = 0
        while n < args.runs:
            for w in windows:
                t = time.perf_counter()
                model.infer(w)
                times.append((time.perf_counter() - t) * 1000.0)
                n += 1
                if n >= args.runs:
                    break
        cpu_ms = (time.process_time() - cpu0) * 1000.0 / n
        wall_ms = (time.perf_counter() - wall0) * 1000.0 / n
        times.sort()
        per_s = (spec.rate_hz or 0.0) / spec.hop
        rows.append(
            {
                "model": path,
                "quantization": model.model.info.quant_kind,
                "window": spec.window,
                "hop": spec.hop,
                "rate_hz": spec.rate_hz,
                "runs": n,
                "ms_p50": round(times[len(times) // 2], 4),
                "ms_p90": round(times[int(len(times) * 0.9)], 4),
                "cpu_ms_per_window": round(cpu_ms, 4),
                "wall_ms_per_window": round(wall_ms, 4),
                "windowing_us_per_reading": round(push_us, 2),
                "windows_per_s_at_rate": round(per_s, 4),
                "cpu_share_at_rate": round((cpu_ms + push_us / 1000.0 * spec.hop) * per_s / 1000.0, 8),
            }
        )
    base = rows[0]["ms_p50"]
    for r in rows:
        r["ratio_p50"] = round(r["ms_p50"] / base, 3) if base else None
    if args.json:
        sys.stdout.write(json.dumps({"recording": args.sensor, "models": rows}, indent=2) + "\n")
        return 0
    out = sys.stdout.write
    out(f"recording {args.sensor}: {len(readings)} readings, {args.runs} timed windows per model\n")
    out(
        f"{'model':<32} {'quant':<9} {'p50 ms':>7} {'p90 ms':>7} {'cpu ms':>7} {'x':>5} "
        f"{'us/reading':>10} {'win/s':>6} {'cpu share':>10}\n"
    )
    for r in rows:
        out(
            f"{Path(r['model']).name:<32} {r['quantization']:<9} {r['ms_p50']:>7.3f} {r['ms_p90']:>7.3f} "
            f"{r['cpu_ms_per_window']:>7.3f} {r['ratio_p50']:>5.2f} {r['windowing_us_per_reading']:>10.1f} "
            f"{r['windows_per_s_at_rate']:>6.2f} {r['cpu_share_at_rate'] * 100:>9.4f}%\n"
        )
    return 0

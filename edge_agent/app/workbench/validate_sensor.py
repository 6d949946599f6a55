"""``edge-agent validate REF CAND --sensor FILE``: two sensor models on the same recorded windows.

Both models must read the same windows (channels, window, hop: the reference's spec windows the
file once, the candidate runs on those windows). Classify: top-1 agreement and, with a ``label``
column, both accuracies over the single-label windows; PASS when the agreement is at least
``--min-top1-agreement`` and the accuracy drops by at most ``--max-top1-drop``. Score: anomaly-flag
agreement and the mean |score difference|; regress: the largest |value difference| (reported only).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import deque
from pathlib import Path
from typing import Any, Deque, Dict, List, Optional, Tuple

from edge_agent.errors import EdgeAgentError


def validate_sensor(args: argparse.Namespace) -> int:
    report = sensor_report(args.reference, args.candidate, args.sensor, args)
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        sys.stdout.write(format_report(report) + "\n")
    return 0 if report["verdict"] == "PASS" else 1


def format_report(report: Dict[str, Any]) -> str:
    return "\n".join(f"{k:<22} {v}" for k, v in report.items())


def sensor_report(reference: str, candidate: str, recording: str, args: argparse.Namespace) -> Dict[str, Any]:
    """The comparison (``args``: threads, provider, min_top1_agreement, max_top1_drop)."""
    from edge_agent.app.workbench.infer_sensor import SERIES, TRUTH, read_recording
    from edge_agent.inference.sensor_model import SensorModel

    ref = SensorModel.load(reference, threads=args.threads, provider=args.provider)
    cand = SensorModel.load(candidate, threads=args.threads, provider=args.provider)
    a, b = ref.spec, cand.spec
    if (a.channels, a.window, a.layout, a.task) != (b.channels, b.window, b.layout, b.task):
        raise EdgeAgentError(
            f"validate --sensor: {candidate} reads {b.task} {b.window}x{len(b.channels)} ({b.layout}), "
            f"the reference {a.task} {a.window}x{len(a.channels)} ({a.layout}): not the same windows"
        )
    windower = ref.windower()
    # the last readings counted, as (row, label, series): rows count the holes of lost readings
    # too, and a window is the `window` rows before row window + index * hop
    recent: Deque[Tuple[int, Optional[str], object]] = deque(maxlen=windower.window)
    pairs: List[Dict[str, Any]] = []
    for i, r in enumerate(read_recording(Path(recording))):
        t = r.get("t")
        when = float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else i / (a.rate_hz or 1.0)
        counted = windower.readings
        windows = windower.push(r, when)
        if windower.readings > counted:  # not a reading of another sensor
            row = windower.readings + windower.late - 1
            recent.append((row, str(r[TRUTH]) if TRUTH in r else None, r.get(SERIES)))
        for w in windows:
            end = windower.window + w.index * windower.hop
            inside = [(label, s) for row, label, s in recent if end - windower.window <= row < end]
            labels = {label for label, _ in inside}
            one = len(labels) == 1 and None not in labels and len({s for _, s in inside}) == 1
            pairs.append({"ref": ref.infer(w), "cand": cand.infer(w), "truth": labels.pop() if one else None})
    if not pairs:
        raise EdgeAgentError(f"--sensor {recording}: no complete window of {a.window} readings")
    report: Dict[str, Any] = {"reference": reference, "candidate": candidate, "windows": len(pairs)}
    verdict = "PASS"
    if a.task == "classify":
        agree = sum(p["ref"].label == p["cand"].label for p in pairs) / len(pairs)
        report["top1_agreement"] = round(agree, 4)
        if agree < args.min_top1_agreement:
            verdict = "FAIL"
        labelled = [p for p in pairs if p["truth"] is not None]
        if labelled:
            acc_r = sum(p["ref"].label == p["truth"] for p in labelled) / len(labelled)
            acc_c = sum(p["cand"].label == p["truth"] for p in labelled) / len(labelled)
            report.update(labelled_windows=len(labelled), accuracy_reference=round(acc_r, 4))
            report["accuracy_candidate"] = round(acc_c, 4)
            if acc_r - acc_c > args.max_top1_drop:
                verdict = "FAIL"
    elif a.task == "score":
        agree = sum(p["ref"].anomaly == p["cand"].anomaly for p in pairs) / len(pairs)
        report["anomaly_agreement"] = round(agree, 4)
        report["mean_abs_score_diff"] = round(
            sum(abs(p["ref"].score - p["cand"].score) for p in pairs) / len(pairs), 6
        )
        if agree < args.min_top1_agreement:
            verdict = "FAIL"
    else:
        report["max_abs_value_diff"] = round(
            max(
                abs(v - p["cand"].values.get(k, float("nan")))
                for p in pairs
                for k, v in p["ref"].values.items()
            ),
            6,
        )
    report["verdict"] = verdict
    return report

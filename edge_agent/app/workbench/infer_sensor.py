"""``edge-agent infer --sensor FILE.csv|.jsonl -m MODEL``: a sensor model over a recorded file.

The file holds one reading per row: a CSV with a header naming its columns, or one JSON object
per line (what ``[sensor] protocol = "jsonl"`` reads). The rows are windowed exactly as the agent
windows the serial readings (core/sensor/window.py, the same spec), so the windows and their
results are the ones the agent publishes for the same readings. A ``label`` column (and a
``series`` column, when recordings are concatenated) makes it an evaluation: the accuracy over the
windows whose readings all carry one label (and one series).
"""

from __future__ import annotations

import argparse
import bisect
import csv
import json
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from edge_agent.core.sensor.parse import convert_value
from edge_agent.errors import EdgeAgentError, SensorError

TRUTH = "label"
SERIES = "series"


def read_recording(path: Path) -> Iterator[Dict[str, Any]]:
    """The readings of a .csv (header row) or .jsonl file; a bad row is one error naming its line."""
    from edge_agent.core.sensor.parse import parse_jsonl

    try:
        f = path.open(encoding="utf-8", newline="")
    except OSError as exc:
        raise EdgeAgentError(f"--sensor {path}: cannot read: {exc.strerror or exc}") from None
    with f:
        if path.suffix.lower() == ".jsonl":
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    yield parse_jsonl(line)
                except SensorError as exc:
                    raise EdgeAgentError(f"--sensor {path}: line {n}: {exc}") from None
            return
        if path.suffix.lower() != ".csv":
            raise EdgeAgentError(f"--sensor {path}: expected a .csv (with a header) or .jsonl file")
        reader = csv.reader(f)
        header = next(reader, None)
        if not header:
            raise EdgeAgentError(f"--sensor {path}: empty file, expected a header row naming the columns")
        for n, row in enumerate(reader, 2):
            if len(row) != len(header):
                raise EdgeAgentError(
                    f"--sensor {path}: line {n}: {len(row)} columns, the header has {len(header)}"
                )
            yield {k: convert_value(v) for k, v in zip(header, row)}


def run_sensor(args: argparse.Namespace) -> int:
    from edge_agent.app.cli.assets import DEMO_SENSOR, demo_file
    from edge_agent.inference.sensor_model import SensorModel

    path = Path(args.sensor)
    model_path = args.model or str(demo_file(DEMO_SENSOR))
    model = SensorModel.load(model_path, threads=args.threads, provider=args.provider)
    spec = model.spec
    windower = model.windower()
    sys.stderr.write(f"{model_path}: {spec.describe()}\n")
    truths: List[Optional[str]] = []  # per reading, for the labelled windows
    series: List[object] = []
    stream_rows: List[int] = []  # per reading: its row in the windower's stream (lost readings are rows too)
    time_field = args.time_field
    correct = labelled = published = 0
    for reading in read_recording(path):
        # the default on the first reading the model takes: another sensor's line (a JSONL log
        # of several) without a "t" made every reading timed by its count, lost ones unseen
        if time_field is None and any(c in reading for c in spec.channels):
            time_field = "t" if "t" in reading else ""
        t = reading.get(time_field) if time_field else None
        counted = windower.readings  # without a time: at the model's rate, over the readings it takes
        when = (
            float(t)
            if isinstance(t, (int, float)) and not isinstance(t, bool)
            else counted / (spec.rate_hz or 1.0)
        )
        truths.append(str(reading[TRUTH]) if TRUTH in reading else None)
        series.append(reading.get(SERIES))
        wins = windower.push(reading, when)
        if windower.readings == counted:  # no channel of the model (another sensor's line): not in a window
            truths.pop()
            series.pop()
        else:  # after the rows of the readings it says were lost before it
            stream_rows.append(windower.readings + windower.late - 1)
        for win in wins:
            outcome = model.infer(win)
            published += 1
            # the readings among the window's rows: window k ends at row window + k * hop, whether
            # lost readings came before it (and how long ago) or a later reading's holes complete it
            end = windower.window + win.index * windower.hop
            taken = slice(
                bisect.bisect_left(stream_rows, end - windower.window), bisect.bisect_left(stream_rows, end)
            )
            labels = set(truths[taken])
            one = len(labels) == 1 and None not in labels and len(set(series[taken])) == 1
            truth = labels.pop() if one else None
            if truth is not None and outcome.task == "classify":
                labelled += 1
                correct += outcome.label == truth
            row = {"window": win.index, "task": outcome.task, "filled": win.filled}
            if outcome.task == "classify":
                row.update(label=outcome.label, confidence=outcome.confidence)
            elif outcome.task == "score":
                row.update(score=outcome.score, anomaly=outcome.anomaly)
            else:
                row.update(values=outcome.values)
            if truth is not None:
                row["truth"] = truth
            row["infer_ms"] = round(outcome.infer_ms, 3)
            sys.stdout.write(json.dumps(row, separators=(",", ":")) + "\n" if args.json else _line(row))
    stats = windower.stats()
    summary: Dict[str, Any] = {
        "readings": stats["readings"],
        "windows_due": stats["windows_due"],
        "windows": published,
    }
    summary["dropped"] = stats["dropped"]
    if labelled:
        summary["labelled_windows"] = labelled
        summary["accuracy"] = round(correct / labelled, 4)
    sys.stdout.flush()
    sys.stderr.write("summary: " + json.dumps(summary) + "\n")
    if stats["readings"] == 0:
        raise EdgeAgentError(
            f"--sensor {path}: no readings with any of the channels {', '.join(spec.channels)}"
        )
    return 0


def _line(row: Dict[str, Any]) -> str:
    what = (
        f"{row.get('label')} {row.get('confidence', 0):.3f}"
        if row["task"] == "classify"
        else f"score {row.get('score')} anomaly {row.get('anomaly')}"
        if row["task"] == "score"
        else json.dumps(row.get("values"))
    )
    truth = f"  (truth {row['truth']})" if "truth" in row else ""
    return f"window {row['window']:>5}  {what}{truth}  {row['infer_ms']:.2f} ms\n"

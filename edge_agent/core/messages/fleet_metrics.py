"""The collector's Prometheus exposition (pure): its own counters and one series per device.

The collector exported fleet-wide counters only, every one typed gauge and without ``# HELP``,
so no alert could say "cam-17 silent for 10 min" (issue 33). Here every family has its HELP and
its TYPE (``_total`` = counter), units are base units (seconds, bytes), and the per-device
families carry one label, ``device`` (ids are bounded by enrollment/admission, and the collector
exports at most ``metrics_devices_max`` of them); the model info series adds the model id and
version, both bounded printable text, escaped as the exposition format wants.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

ONLINE_STATES = ("running", "draining")


class Family(NamedTuple):
    name: str  # without the edge_agent_ prefix
    type: str  # counter | gauge
    help: str
    samples: list[tuple[dict[str, str], float]]


# name -> (type, help) of Metrics.values() (app/collector/round_stats.py)
COLLECTOR = {
    "collector_taken_total": ("counter", "MQTT messages taken from the inbox (committed or not)"),
    "collector_messages_total": ("counter", "MQTT messages committed and acknowledged"),
    "collector_records_total": ("counter", "sequenced records (results, readings) stored"),
    "collector_duplicates_dropped_total": ("counter", "redelivered records already stored"),
    "collector_rejected_total": ("counter", "messages rejected (kept in the rejected table)"),
    "collector_db_errors_total": ("counter", "transient database errors (the round was retried)"),
    "collector_conflicts_total": (
        "counter",
        "messages kept in conflicts (a seq taken twice, or implausible)",
    ),
    "collector_dead_letters_total": ("counter", "messages dead-lettered after deliveries_max failed stores"),
    "collector_round_failures_total": ("counter", "rounds that failed for their data, stored one by one"),
    "collector_new_devices_refused_total": ("counter", "messages of devices refused by admission"),
    "collector_confirms_total": ("counter", "commit watermarks published to devices"),
    "collector_ingest_rate_per_second": ("gauge", "records stored per second over the last 10 s"),
    "collector_lag_seconds": ("gauge", "receive time minus the device time of the newest record stored"),
    "collector_ingest_delay_seconds": (
        "gauge",
        "seconds from the receipt of the oldest message of the last round to its commit",
    ),
    "collector_devices_online": ("gauge", "devices whose latest status is running or draining"),
    "collector_devices_known": ("gauge", "devices in the database"),
    "collector_devices_exported": ("gauge", "devices with per-device series here (metrics_devices_max)"),
    "collector_inbox": ("gauge", "messages received, not yet stored"),
    "collector_inbox_bytes": ("gauge", "bytes of messages received, not yet stored"),
    "collector_broker_connected": ("gauge", "1 while connected to the broker"),
}


def label(value: object) -> str:
    """A label value as the text exposition format escapes it (backslash, quote, newline)."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def number(value: float) -> str:
    f = float(value)
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f.is_integer() and abs(f) < 2**53:
        return str(int(f))
    return repr(f)


def render(families: Sequence[Family]) -> str:
    """Text exposition format 0.0.4: ``# HELP``, ``# TYPE``, then the samples, per family."""
    lines: list[str] = []
    for fam in families:
        full = f"edge_agent_{fam.name}"
        lines.append(f"# HELP {full} {fam.help.replace(chr(92), chr(92) * 2).replace(chr(10), ' ')}")
        lines.append(f"# TYPE {full} {fam.type}")
        for labels, value in fam.samples:
            lab = ",".join(f'{k}="{label(v)}"' for k, v in sorted(labels.items()))
            lines.append(f"{full}{{{lab}}} {number(value)}" if lab else f"{full} {number(value)}")
    return "\n".join(lines) + "\n"


def collector_families(values: Mapping[str, float], labels: Mapping[str, str]) -> list[Family]:
    """The collector's own series (Metrics.values()), each with its type and help."""
    out = []
    for name, value in sorted(values.items()):
        kind, text = COLLECTOR.get(name, ("gauge", name.replace("_", " ")))
        out.append(Family(name, kind, text, [(dict(labels), float(value))]))
    return out


def expired_family(purged: Mapping[str, int], labels: Mapping[str, str]) -> Family:
    """Rows deleted for age (retention), one sample per class: results, objects, counts, statuses."""
    return Family(
        "collector_expired_rows_total",
        "counter",
        "rows deleted for age by the retention (kind: results, objects, counts, statuses)",
        [({**labels, "kind": k}, float(v)) for k, v in sorted(purged.items())],
    )


DEVICE = (
    ("device_online", "gauge", "1 when the device's latest status is running or draining, else 0"),
    ("device_last_seen_seconds", "gauge", "unix time anything of the device was last received"),
    ("device_backlog", "gauge", "messages queued on the device, not confirmed yet (its latest status)"),
    ("device_oldest_unconfirmed_seconds", "gauge", "age of the device's oldest sent, unconfirmed message"),
    ("device_fps", "gauge", "frames per second the device infers (its latest status)"),
    ("device_disk_free_bytes", "gauge", "free bytes on the filesystem of the device's queue"),
    ("device_disk_full", "gauge", "1 when the device's queue is in its full-disk mode"),
    ("device_crashes_total", "counter", "unclean stops of the device's agent (its queue's count)"),
    ("device_gaps", "gauge", "seq ranges of the device never received (may shrink when late ones come)"),
    ("device_missing_messages", "gauge", "seqs of the device never received"),
    ("device_conflicts_total", "counter", "messages of the device kept as conflicts"),
    ("device_update_refused", "gauge", "1 while the device's last model update verdict is refused"),
    ("device_update_rolled_back", "gauge", "1 while the device's last model update verdict is rolled_back"),
    ("device_model_info", "gauge", "the device's model: id and version as labels, value 1"),
)


def device_families(rows: Sequence[Mapping[str, Any]]) -> list[Family]:
    """One family per DEVICE entry, a sample per device (adapters.collector.history.metric_rows);
    a figure the device did not report has no sample (an absent series, not a made-up 0)."""
    fams = {name: Family(name, kind, text, []) for name, kind, text in DEVICE}

    def put(name: str, dev: str, value: object, **extra: str) -> None:
        if isinstance(value, bool):
            value = 1.0 if value else 0.0
        if isinstance(value, (int, float)):
            fams[name].samples.append(({"device": dev, **extra}, float(value)))

    for r in rows:
        dev = str(r["device"])
        h = r.get("health")
        put("device_online", dev, 1.0 if r.get("state") in ONLINE_STATES else 0.0)
        put("device_last_seen_seconds", dev, r.get("last_seen"))
        put("device_crashes_total", dev, r.get("crashes") or 0)
        put("device_gaps", dev, r.get("gaps", 0))
        put("device_missing_messages", dev, r.get("missing", 0))
        put("device_conflicts_total", dev, r.get("conflicts", 0))
        if h is None:
            continue
        put("device_backlog", dev, h.backlog)
        put("device_oldest_unconfirmed_seconds", dev, h.oldest_unconfirmed_s)
        put("device_fps", dev, h.fps)
        put("device_disk_free_bytes", dev, h.disk_free_bytes)
        put("device_disk_full", dev, h.disk_full)
        put("device_update_refused", dev, h.update_outcome == "refused")
        put("device_update_rolled_back", dev, h.update_outcome == "rolled_back")
        put("device_model_info", dev, 1.0, model_id=h.model_id, version=h.model_version)
    return list(fams.values())

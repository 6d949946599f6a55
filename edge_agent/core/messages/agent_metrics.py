"""The agent's Prometheus families: the flattened status snapshot (``status.prometheus_values``)
named and typed as Prometheus expects (prometheus.io/docs/practices/naming).

- a figure that only grows while the agent runs (frames, results, errors, the queue's and the
  broker's tallies, the receiver's counts) is a **counter** named ``..._total``;
- every other figure is a **gauge**, never ending in ``_total``;
- times are **seconds**: ``uptime_s`` -> ``uptime_seconds``, ``latency_ms_infer`` ->
  ``latency_seconds{stage="infer"}`` (the value / 1000);
- every family has a ``# HELP`` line.
``promtool check metrics`` passes on the page (tests/adapters/host/test_metrics_promtool.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from edge_agent.core.messages.fleet_metrics import Family

# leaf names of the snapshot that count events since the start (or over the queue's life)
COUNTER_LEAVES = (
    "frames", "results", "errors", "reloads", "reload_failures", "processed", "dropped", "skipped",
    "stale_dropped", "open_failures", "reconnects", "connect_attempts", "connects", "published",
    "acked", "thread_restarts", "corrupt_files", "crashes", "expired", "lost", "rejected",
    "salvaged", "sent", "seq_skipped", "callback_errors", "garbage", "lines", "readings",
    "triggers", "messages", "refused", "failed", "discarded_at_start", "restarts", "unsigned",
    "not_for_device", "rolled_back", "unknown_transfer", "bad_chunk", "low_space",
    "observer_errors",
)  # fmt: skip

HELP = {
    "up": "1 while the agent's state is running, else 0",
    "fps": "frames per second over the recent window",
    "frames_total": "frames processed since the start",
    "results_total": "messages queued since the start",
    "errors_total": "errors counted since the start (each logged)",
    "latency_seconds": "recent median time per frame by stage (pre, infer, post, classify, total; age: "
    "the frame's age when its result was made)",
    "uptime_seconds": "seconds since the agent started",
    "ready_seconds": "seconds the agent took from start to its first frame",
    "broker_connected": "1 while the MQTT connection is up",
    "queue_pending": "messages waiting in the outbox for the broker",
    "queue_bytes": "bytes the outbox's waiting messages take",
    "queue_disk_free_bytes": "free bytes on the outbox's filesystem",
    "clock_synced": "1 when the system clock is synchronised (NTP), else 0",
}


GAUGES = ("model_update_ring_frames",)  # a leaf name of a counter, but a count held now


def _counter(name: str) -> bool:
    return name not in GAUGES and any(name == leaf or name.endswith("_" + leaf) for leaf in COUNTER_LEAVES)


def _named(name: str, value: float) -> tuple[str, dict[str, str], float]:
    """A flat snapshot name -> the family name, its own labels and the value in base units."""
    if name.startswith("latency_ms_"):
        return "latency_seconds", {"stage": name[len("latency_ms_") :]}, value / 1000
    if name.endswith("_ms"):
        return name[: -len("_ms")] + "_seconds", {}, value / 1000
    if name.endswith("_s"):
        return name[: -len("_s")] + "_seconds", {}, value
    if _counter(name):
        return name + "_total", {}, value
    if name.endswith("_total"):  # a gauge must not read as a counter
        return name[: -len("_total")] + "_sum", {}, value
    return name, {}, value


def _labels(own: str) -> dict[str, str]:
    """``camera="gate"`` (escaped by prometheus_values) -> {"camera": "gate"} (unescaped)."""
    out: dict[str, str] = {}
    if own:
        key, _, quoted = own.partition("=")
        out[key] = re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), quoted[1:-1])
    return out


def agent_families(values: Mapping[str, float], labels: Mapping[str, str]) -> list[Family]:
    """Every flattened figure in its family, sorted by name; ``labels`` on every sample."""
    families: dict[str, Family] = {}
    for flat, value in sorted(values.items()):
        base, _, own = flat.partition("{")
        name, extra, v = _named(base, float(value))
        kind = "counter" if name.endswith("_total") else "gauge"
        fam = families.get(name)
        if fam is None:
            text = HELP.get(name) or f"the status snapshot's {base} (edge-agent status --json)"
            fam = families[name] = Family(name, kind, text, [])
        fam.samples.append(({**labels, **_labels(own.rstrip("}")), **extra}, v))
    return [families[k] for k in sorted(families)]

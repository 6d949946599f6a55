"""What a collector round did (:class:`Outcome`) and the counters Prometheus reads (:class:`Metrics`):
written by the loop's thread, read by the HTTP thread."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping
from typing import Any, NamedTuple, Optional

from edge_agent.core.messages.fleet_metrics import collector_families, device_families, expired_family, render

RATE_WINDOW_S = 10.0


class Outcome(NamedTuple):
    inserted: int
    duplicates: int
    rejected: int
    conflicts: dict[str, int]
    newest: Optional[float]  # device time of the newest record stored
    confirms: dict[str, bytes]  # device -> its commit watermark to publish (the latest store's)

    def plus(self, o: Outcome) -> Outcome:
        c = dict(self.conflicts)
        for k, v in o.conflicts.items():
            c[k] = c.get(k, 0) + v
        newest = max((t for t in (self.newest, o.newest) if t is not None), default=None)
        return Outcome(
            self.inserted + o.inserted,
            self.duplicates + o.duplicates,
            self.rejected + o.rejected,
            c,
            newest,
            {**self.confirms, **o.confirms},
        )


class Metrics:
    """Counters for Prometheus; written by the loop's thread, read by the HTTP thread."""

    def __init__(self) -> None:
        self.taken = 0  # MQTT messages taken from the inbox (committed or not)
        self.messages = 0  # MQTT messages committed and acknowledged
        self.records = 0  # results/readings stored
        self.duplicates = 0
        self.rejected = 0
        self.db_errors = 0
        self.lag_s = 0.0  # receive time - device time of the newest record stored
        self.devices_online = 0
        self.rounds = 0
        self.conflicts = 0  # messages kept in conflicts (same key, other content; implausible seq)
        self.dead_letters = 0
        self.round_failures = 0  # rounds that failed for their data and were stored one by one
        self.new_devices_refused = 0
        self.inbox_bytes = 0
        self.confirms = 0  # commit watermarks published (one per device per round)
        self.ingest_delay_s = 0.0  # receipt of the oldest message of the last round -> its commit
        self.devices_known = 0
        # the per-device rows (adapters.collector.history.metric_rows), refreshed by the writer
        self.device_rows: list[dict[str, Any]] = []
        # rows deleted for age by class (the maintenance's dict, shared: app.collector.maintenance)
        self.purged: dict[str, int] = {}
        self._window: deque[tuple[float, int]] = deque()

    def stored(self, now: float, n: int) -> None:
        self._window.append((now, n))
        while self._window and self._window[0][0] < now - RATE_WINDOW_S:
            self._window.popleft()

    def rate(self, now: float) -> float:
        recent = [n for t, n in list(self._window) if t >= now - RATE_WINDOW_S]
        return sum(recent) / RATE_WINDOW_S

    def values(self, inbox: int, connected: bool) -> dict[str, float]:
        now = time.monotonic()
        return {
            "collector_taken_total": self.taken,
            "collector_messages_total": self.messages,
            "collector_records_total": self.records,
            "collector_duplicates_dropped_total": self.duplicates,
            "collector_rejected_total": self.rejected,
            "collector_db_errors_total": self.db_errors,
            "collector_conflicts_total": self.conflicts,
            "collector_dead_letters_total": self.dead_letters,
            "collector_round_failures_total": self.round_failures,
            "collector_new_devices_refused_total": self.new_devices_refused,
            "collector_ingest_rate_per_second": round(self.rate(now), 1),
            "collector_lag_seconds": round(self.lag_s, 3),
            "collector_ingest_delay_seconds": round(self.ingest_delay_s, 3),
            "collector_devices_known": self.devices_known,
            "collector_devices_exported": len(self.device_rows),
            "collector_devices_online": self.devices_online,
            "collector_confirms_total": self.confirms,
            "collector_inbox": inbox,
            "collector_inbox_bytes": self.inbox_bytes,
            "collector_broker_connected": 1.0 if connected else 0.0,
        }

    def exposition(self, inbox: int, connected: bool, labels: Mapping[str, str]) -> str:
        """The /metrics text: the collector's own families, then the per-device ones."""
        rows = self.device_rows  # one reference: the writer replaces the list, never mutates it
        own = collector_families(self.values(inbox, connected), labels)
        return render([*own, expired_family(dict(self.purged), labels), *device_families(rows)])

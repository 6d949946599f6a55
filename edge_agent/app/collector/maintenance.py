"""The collector's housekeeping between ingest rounds: the health history thinned and expired,
the messages past their class's retention age deleted (adapters.collector.purge; on a
partitioned PostgreSQL ``messages``, partitions made ahead and old ones dropped whole), and the
per-device metrics refreshed, all on the loop's thread between rounds (one connection).

Never a long transaction: each step is one batch of at most ``maintenance_batch`` rows in its own
transaction, and one call stops after ``BUDGET_S`` (ingest goes on; the rest waits for the next
call, ``2 * BUDGET_S`` later while there is work left, else ``maintenance_every_s``). Measured
(tests/bench/bench_history.py, docs/performance.md): a 5000-row batch takes 47-484 ms on a loaded
2-core box.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from edge_agent.adapters.collector import history, partitions, purge
from edge_agent.core.messages.retention import CLASSES

if TYPE_CHECKING:
    from edge_agent.adapters.collector.db import CollectorDb
    from edge_agent.app.collector.round_stats import Metrics
    from edge_agent.core.config.collector import CollectorConfig

log = logging.getLogger("edge_agent.collector")
BUDGET_S = 0.5
METRICS_EVERY_S = 10.0
DAY_S = 86400.0


class Maintenance:
    def __init__(self, cfg: CollectorConfig) -> None:
        self.cfg = cfg
        self._next = 0.0  # monotonic time of the next history pass (0: at once)
        self._metrics_at = -1e9
        self.expired = 0  # history rows deleted for age
        self.thinned = 0  # history rows deleted by thinning
        # rows deleted for age, by class (statuses: the health history's expiry); /metrics reads it
        self.purged: dict[str, int] = {c: 0 for c in (*CLASSES, "statuses")}
        self._partitions_at = -1e9  # monotonic time partitions were last made ahead

    def history(self, db: CollectorDb, now: float) -> bool:
        """One bounded pass (``now``: unix time); True when work is left for the next call."""
        mono = time.monotonic()
        if mono < self._next:
            return False
        c = self.cfg
        start = mono
        left = False
        try:
            while True:
                n = history.expire(db, now - c.history_keep_days * DAY_S, c.maintenance_batch)
                self.expired += n
                self.purged["statuses"] += n
                if n < c.maintenance_batch:
                    break
                if time.monotonic() - start > BUDGET_S:
                    left = True
                    break
            while not left:
                deleted, fetched = history.thin_batch(
                    db, now - c.history_full_days * DAY_S, c.history_bucket_s, c.maintenance_batch
                )
                self.thinned += deleted
                if fetched < c.maintenance_batch:
                    break
                if time.monotonic() - start > BUDGET_S:
                    left = True
        except db.errors() as exc:  # the next pass tries again; ingest is what matters
            log.warning("collector: health history maintenance failed: %s", exc)
            left = False
        if not left:
            left = self.retention(db, now, start)
        # work left: again after twice the budget (ingest keeps at least 2/3 of the time)
        self._next = time.monotonic() + (2 * BUDGET_S if left else c.maintenance_every_s)
        return left

    def ages(self) -> purge.Ages:
        c = self.cfg
        return purge.Ages(c.retention_results_days, c.retention_objects_days, c.retention_counts_days)

    def retention(self, db: CollectorDb, now: float, start: float) -> bool:
        """The messages past their age, in batches until ``BUDGET_S`` after ``start``; True when
        work is left. A partitioned ``messages`` first gets its partitions ahead and drops those
        past every class's age."""
        cutoffs = self.ages().cutoffs(now)
        try:
            if db.dialect == "postgresql" and time.monotonic() - self._partitions_at > 3600:
                if partitions.is_partitioned(db):
                    partitions.ensure_ahead(db, now)
                self._partitions_at = time.monotonic()
            if len(cutoffs) == len(CLASSES) and partitions.leaves(db) is not None:
                for cls, n in partitions.drop_before(db, min(cutoffs.values()))[1].items():
                    self.purged[cls] += n
            for cls, before in cutoffs.items():
                while True:
                    n = purge.purge_batch(db, cls, before, self.cfg.maintenance_batch)
                    self.purged[cls] += n
                    if n < self.cfg.maintenance_batch:
                        break
                    if time.monotonic() - start > BUDGET_S:
                        return True
        except db.errors() as exc:  # the next pass tries again
            log.warning("collector: retention failed: %s", exc)
        return False

    def device_metrics(self, db: CollectorDb, metrics: Metrics) -> None:
        """Refresh the per-device rows /metrics renders (every METRICS_EVERY_S, when exported)."""
        mono = time.monotonic()
        if not self.cfg.metrics_port or mono - self._metrics_at < METRICS_EVERY_S:
            return
        self._metrics_at = mono
        try:
            rows, total = history.metric_rows(db, self.cfg.metrics_devices_max)
        except db.errors() as exc:
            log.warning("collector: reading the per-device metrics failed: %s", exc)
            return
        metrics.device_rows = rows  # replaced whole: the HTTP thread reads one list or the other
        metrics.devices_known = total

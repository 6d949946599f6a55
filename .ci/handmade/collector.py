"""Hand-made bugs in the collector, its database, the durable-write helper and the count checkpoint."""

C = "edge_agent/app/collector/loop.py"
D = "edge_agent/adapters/collector/db.py"
Q = "edge_agent/adapters/collector/sql/sqlite/0001_init.sql"
CS = "edge_agent/adapters/outbox/count_store.py"
DU = "edge_agent/adapters/host/durable.py"
T_COLL = "tests/app/collector/test_collector_round.py tests/app/collector/test_no_ack_on_failed_commit.py tests/app/collector/test_poison_message.py tests/app/collector/test_collector_e2e.py tests/app/collector/test_collect_cmd.py tests/app/collector/test_collect_leave.py tests/adapters/collector/test_collector_db.py tests/adapters/collector/test_collector_mqtt.py tests/core/messages/test_batch_and_parse.py"
T_DB = "tests/app/collector/test_collector_round.py tests/adapters/collector/test_collector_db.py tests/adapters/collector/test_fleet_retire.py tests/app/collector/test_no_ack_on_failed_commit.py tests/app/collector/test_collector_e2e.py"
T_CS = "tests/adapters/outbox/test_count_store.py tests/app/agent/test_objects_step.py"
T_DU = "tests/adapters/host/test_durable.py tests/test_durable_writes.py"
BUGS = [
    ("c1", C, "        self.sub.ack(batch)  # only now: the rows are committed\n", "", T_COLL),
    (
        "c2",
        C,
        "        while len(batch) < self.cfg.batch_max:",
        "        while len(batch) <= self.cfg.batch_max:",
        T_COLL,
    ),
    (
        "c3",
        C,
        "                if stop.wait(min(30.0, 0.5 * 2 ** min(failures, 6))):\n                    return",
        "                if stop.wait(min(30.0, 0.5 * 2 ** min(failures, 6))):\n                    self.sub.ack(batch)\n                    return",
        T_COLL,
    ),
    (
        "c4",
        C,
        "        met.duplicates += len(records) - inserted",
        "        met.duplicates += len(batch) - inserted",
        T_COLL,
    ),
    ("c5", C, "        met.rejected += len(rejected)", "        met.rejected += 0", T_COLL),
    (
        "c6",
        C,
        "            met.lag_s = max(0.0, received - max(r.time for r in records))",
        "            met.lag_s = max(0.0, received - min(r.time for r in records))",
        T_COLL,
    ),
    ("c7", C, "        if now - self._online_at < ONLINE_EVERY_S:\n            return\n", "", T_COLL),
    ("c8", C, "            and self.sub.inbox.empty()\n", "", T_COLL),
    (
        "c9",
        C,
        "                rejected.append(Rejected(m.topic[:1024], why[:1024], received))\n                continue",
        "                rejected.append(Rejected(m.topic[:1024], why[:1024], received))",
        T_COLL,
    ),
    (
        "c10",
        C,
        "        while self._window and self._window[0][0] < now - RATE_WINDOW_S:",
        "        while self._window and self._window[0][0] > now - RATE_WINDOW_S:",
        T_COLL,
    ),
    ("d1", D, 'newer = "excluded.status_order >= COALESCE(devices.status_order, 0)"', 'newer = "1"', T_DB),
    (
        "d2",
        D,
        '        order = max(s.ts, received) if s.state == "offline" else s.ts',
        "        order = s.ts",
        T_DB,
    ),
    ("d3", D, "        records = sorted(records, key=lambda r: (r.device, r.boot, r.seq))\n", "", T_DB),
    ("d4", D, '                self.conn.execute("PRAGMA synchronous = FULL")\n', "", T_DB),
    (
        "d6",
        D,
        "SET last_seen = max(COALESCE(devices.last_seen, 0), excluded.last_seen)",
        "SET last_seen = excluded.last_seen",
        T_DB,
    ),
    ("d7", D, "            if have > len(todo):", "            if have > len(todo) + 1:", T_DB),
    ("d8", D, "            known = known or any(counts)\n", "", T_DB),
    ("d9", D, "        if version != i:", "        if version < i:", T_DB),
    (
        "d11",
        D,
        "\"SELECT COUNT(*) FROM devices WHERE state IN ('running', 'draining')\"",
        "\"SELECT COUNT(*) FROM devices WHERE state IN ('running')\"",
        T_DB,
    ),
    (
        "d12",
        D,
        '        sets = ", ".join(f"{c} = excluded.{c}" for c in cols if c != "last_seen")',
        '        sets = ", ".join(f"{c} = excluded.{c}" for c in cols if c not in ("last_seen", "backlog"))',
        T_DB,
    ),
    ("q1", Q, "WHERE seq > COALESCE(prev_seq, 0) + 1;", "WHERE seq > COALESCE(prev_seq, 0) + 2;", T_DB),
    (
        "q2",
        Q,
        "       COALESCE(prev_seq, 0) + 1 AS first_seq,",
        "       COALESCE(prev_seq, 1) + 1 AS first_seq,",
        T_DB,
    ),
    ("cs1", CS, "    if len(raw) > MAX_BYTES:", "    if len(raw) > MAX_BYTES + 1:", T_CS),
    ("cs2", CS, "        write_durable(path, data, 0o644)", "        path.write_bytes(data)", T_CS),
    ("du1", DU, "            f.flush()\n            os.fsync(f.fileno())\n", "            f.flush()\n", T_DU),
    (
        "du2",
        DU,
        "        os.replace(tmp, path)\n    except BaseException:",
        "        os.replace(tmp, path)\n    except Exception:",
        T_DU,
    ),
    ("du3", DU, "    fsync_dir(path.parent)\n\n\ndef write_durable", "\n\ndef write_durable", T_DU),
    ("du4", DU, "            os.fchmod(f.fileno(), mode)\n", "", T_DU),
    (
        "du5",
        DU,
        "    os.replace(written, dst)\n    fsync_dir(dst.parent)",
        "    os.replace(written, dst)",
        T_DU,
    ),
]

"""Hand-made bugs: the MQTT sync (adapters/mqtt/sync.py), the way issue 19's reviewer tries it.

Late PUBACKs at the session's end, in-flight rows of a restarted thread, the backoff after a drop,
QoS, a row deleted only after its PUBACK, config keys ignored, boundaries moved.
"""

MS = "edge_agent/adapters/mqtt/sync.py"
T = (
    "tests/adapters/mqtt/test_sync_session.py tests/adapters/mqtt/test_sync_accounting.py tests/adapters/mqtt/test_sync_guarantees.py "
    "tests/adapters/mqtt/test_sync_lifecycle.py tests/adapters/mqtt/test_sync_windows.py tests/adapters/mqtt/test_batch_sync.py "
    "tests/adapters/mqtt/test_mqtt_sync.py"
)
BUGS = [
    # PUBACKs that arrive as the session ends are not applied: their rows are sent again
    ("ms1", MS, "        self._apply_acks(session)  # PUBACKs that arrived", "        # (", T),
    # a restarted sync thread keeps its in-flight rows claimed
    ("ms2", MS, "                self.outbox.release()  # un-acked rows go back to pending\n", "", T),
    # any connection resets the backoff, however short it lasted
    ("ms3", MS, "    if lasted is not None and lasted >= stable_s:", "    if lasted is not None:", T),
    # a drop straight after connecting reconnects at once
    ("ms4", MS, "    return failures + 1", "    return 0 if lasted is not None else failures + 1", T),
    # QoS 0 for single results, for batches, for the status
    (
        "ms5",
        MS,
        "            info = client.publish(msg.topic, msg.payload, qos=1)",
        "            info = client.publish(msg.topic, msg.payload, qos=0)",
        T,
    ),
    (
        "ms6",
        MS,
        "            info = client.publish(self.batch_topic, packed.payload, qos=1)",
        "            info = client.publish(self.batch_topic, packed.payload, qos=0)",
        T,
    ),
    (
        "ms7",
        MS,
        "        info = client.publish(self.status_topic, encode(snapshot), qos=1, retain=True)",
        "        info = client.publish(self.status_topic, encode(snapshot), qos=1, retain=False)",
        T,
    ),
    # a row deleted when published, not when acknowledged
    (
        "ms8",
        MS,
        "            if session.register(info.mid, [msg.rowid]):",
        "            self.outbox.ack([msg.rowid])\n            if session.register(info.mid, []):",
        T,
    ),
    # un-acked rows of a session that ends are not released
    (
        "ms9",
        MS,
        "        if unacked:\n            self.outbox.release(unacked)",
        "        if False:\n            self.outbox.release(unacked)",
        T,
    ),
    # config keys ignored
    (
        "ms10",
        MS,
        "        client.max_inflight_messages_set(self.cfg.inflight)",
        "        client.max_inflight_messages_set(20)",
        T,
    ),
    (
        "ms11",
        MS,
        "            client.connect(self.cfg.host, self.cfg.port, self.cfg.keepalive_s)",
        "            client.connect(self.cfg.host, self.cfg.port)",
        T,
    ),
    (
        "ms12",
        MS,
        "        msgs = self.outbox.claim(n, self.cfg.newest_first)",
        "        msgs = self.outbox.claim(n, False)",
        T,
    ),
    (
        "ms13",
        MS,
        "        bucket = TokenBucket(self.cfg.rate_limit_per_s, time.monotonic())",
        "        bucket = TokenBucket(0, time.monotonic())",
        T,
    ),
    (
        "ms14",
        MS,
        "        if self.cfg.username is not None:",
        "        if self.cfg.username is not None and self._password is None:",
        T,
    ),
    ("ms15", MS, "            client.tls_set_context(self._tls)", "            pass", T),
    (
        "ms16",
        MS,
        "packed = pack([(kind_of(m.topic), m.payload) for m in msgs], self.cfg.batch_max_kib * 1024)",
        "packed = pack([(kind_of(m.topic), m.payload) for m in msgs], self.cfg.batch_max_kib * 1000)",
        T,
    ),
    # boundaries moved
    ("ms17", MS, 'self.outbox.stats()["pending"] >= t)', 'self.outbox.stats()["pending"] > t)', T),
    ("ms18", MS, "BATCHES_IN_FLIGHT = 2 ", "BATCHES_IN_FLIGHT = 3 ", T),
    (
        "ms19",
        MS,
        "                room = min(self.cfg.inflight - publishes, bucket.available(now))",
        "                room = min(self.cfg.inflight + 1 - publishes, bucket.available(now))",
        T,
    ),
    # a stop that does not wait for in-flight PUBACKs
    ("ms20", MS, "STOP_GRACE_S = 2.0", "STOP_GRACE_S = 0.0", T),
    # the will not retained / the session not clean
    (
        "ms21",
        MS,
        "encode(offline_status(self.status_fn())), qos=1, retain=True)",
        "encode(offline_status(self.status_fn())), qos=1, retain=False)",
        T,
    ),
    ("ms22", MS, "            clean_session=True,", "            clean_session=False,", T),
    # a failed publish releases one row too few (that row stays claimed until a restart)
    (
        "ms23",
        MS,
        "                self.outbox.release([m.rowid for m in msgs[i:]])",
        "                self.outbox.release([m.rowid for m in msgs[i + 1 :]])",
        T,
    ),
    # the rows a batch could not hold are not released
    (
        "ms24",
        MS,
        "            if packed.rows < len(msgs):\n",
        "            if packed.rows < len(msgs) - 1:\n",
        T,
    ),
    # drain: one row left counts as drained; a drain that never flushes
    (
        "ms25",
        MS,
        '            while self.outbox.stats()["pending"] > 0:',
        '            while self.outbox.stats()["pending"] > 1:',
        T,
    ),
    # a stop on a lost connection still tries the offline status; a stop that never disconnects
    (
        "ms26",
        MS,
        "            client.disconnect()\n        client.loop_stop()",
        "        client.loop_stop()",
        T,
    ),
    # stats: the counters
    ("ms27", MS, "        self.connects += 1\n", "", T),
    ("ms28", MS, "            self.acked += len(rowids)", "            self.acked += 1", T),
    # the status on connect skipped
    ("ms29", MS, "                self.publish_status(self.status_fn())\n", "                pass\n", T),
    # a refused connection taken for a connected one
    (
        "ms30",
        MS,
        "        if session.refused or session.lost.is_set() or not session.answered.is_set():",
        "        if session.lost.is_set() or not session.answered.is_set():",
        T,
    ),
]

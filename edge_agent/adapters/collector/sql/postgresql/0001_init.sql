-- edge-agent collector schema 1 (PostgreSQL). "time" is the device's clock: the column a
-- TimescaleDB hypertable is partitioned on (docs/collector.md).
CREATE TABLE messages (
    device   TEXT        NOT NULL,
    boot     BIGINT      NOT NULL,
    seq      BIGINT      NOT NULL,
    kind     TEXT        NOT NULL,
    msg_id   TEXT,
    time     TIMESTAMPTZ NOT NULL,
    received TIMESTAMPTZ NOT NULL,
    body     JSONB       NOT NULL,
    PRIMARY KEY (device, boot, seq)
);
CREATE INDEX messages_device_seq ON messages (device, seq);
CREATE INDEX messages_time ON messages (time);

CREATE TABLE devices (
    device          TEXT PRIMARY KEY,
    state           TEXT,
    status_time     TIMESTAMPTZ,
    -- which status wins: its ts; an offline one (a last will carries the ts of its connect) at
    -- max(ts, receive time)
    status_order TIMESTAMPTZ,
    last_seen       TIMESTAMPTZ,
    version         TEXT,
    model_version   TEXT,
    backlog         BIGINT,
    dropped         BIGINT,
    expired         BIGINT,
    rejected        BIGINT,
    lost            BIGINT,
    crashes         BIGINT,
    seq_skipped     BIGINT,
    salvaged        BIGINT,
    disk_full       BOOLEAN,
    status          JSONB
);

CREATE TABLE events (
    id       BIGSERIAL PRIMARY KEY,
    device   TEXT        NOT NULL,
    kind     TEXT        NOT NULL,
    received TIMESTAMPTZ NOT NULL,
    body     JSONB       NOT NULL
);

CREATE TABLE rejected (
    id       BIGSERIAL PRIMARY KEY,
    received TIMESTAMPTZ NOT NULL,
    topic    TEXT        NOT NULL,
    reason   TEXT        NOT NULL
);

CREATE VIEW gaps AS
SELECT device,
       COALESCE(prev_seq, 0) + 1 AS first_seq,
       seq - 1                   AS last_seq,
       prev_boot                 AS boot_before,
       boot                      AS boot_after
FROM (SELECT device, seq, boot,
             LAG(seq)  OVER w AS prev_seq,
             LAG(boot) OVER w AS prev_boot
      FROM messages
      WINDOW w AS (PARTITION BY device ORDER BY seq)) AS t
WHERE seq > COALESCE(prev_seq, 0) + 1;

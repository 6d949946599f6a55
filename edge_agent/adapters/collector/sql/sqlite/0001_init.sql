-- edge-agent collector schema 1 (SQLite). Times are unix seconds (REAL).
-- Every message with (boot, seq), whatever its kind; a redelivery hits the primary key.
CREATE TABLE messages (
    device   TEXT    NOT NULL,
    boot     INTEGER NOT NULL,
    seq      INTEGER NOT NULL,
    kind     TEXT    NOT NULL,
    msg_id   TEXT,
    time     REAL    NOT NULL,
    received REAL    NOT NULL,
    body     TEXT    NOT NULL,
    PRIMARY KEY (device, boot, seq)
) WITHOUT ROWID;
CREATE INDEX messages_device_seq ON messages (device, seq);
CREATE INDEX messages_time ON messages (time);

-- One row per device: its last status snapshot (or last will) and when anything was last heard.
CREATE TABLE devices (
    device          TEXT PRIMARY KEY,
    state           TEXT,
    status_time     REAL,
    -- which status wins: its ts; an offline one (a last will carries the ts of its connect) at
    -- max(ts, receive time)
    status_order REAL,
    last_seen       REAL,
    version         TEXT,
    model_version   TEXT,
    backlog         INTEGER,
    dropped         INTEGER,
    expired         INTEGER,
    rejected        INTEGER,
    lost            INTEGER,
    crashes         INTEGER,
    seq_skipped     INTEGER,
    salvaged        INTEGER,
    disk_full       INTEGER,
    status          TEXT
);

-- Messages without a seq (kinds that do not go through the outbox).
CREATE TABLE events (
    id       INTEGER PRIMARY KEY,
    device   TEXT NOT NULL,
    kind     TEXT NOT NULL,
    received REAL NOT NULL,
    body     TEXT NOT NULL
);

-- Messages that could not be stored, with the reason (they are acknowledged, not retried).
CREATE TABLE rejected (
    id       INTEGER PRIMARY KEY,
    received REAL NOT NULL,
    topic    TEXT NOT NULL,
    reason   TEXT NOT NULL
);

-- The gap table: per device, every seq range never received (seq is per device, never reused).
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

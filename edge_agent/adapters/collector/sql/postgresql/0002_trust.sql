-- edge-agent collector schema 2 (PostgreSQL): what the collector does not trust (docs/collector.md).
-- Statuses are ordered by (boot, link, offline, status_seq) when the agent sends them, not by its clock.
ALTER TABLE devices ADD COLUMN status_boot BIGINT;
ALTER TABLE devices ADD COLUMN status_link BIGINT;
ALTER TABLE devices ADD COLUMN status_rank BIGINT;
ALTER TABLE devices ADD COLUMN status_seq BIGINT;
-- the outbox seq the device reports (queue.seq): the base of the seq plausibility check
ALTER TABLE devices ADD COLUMN reported_seq BIGINT;
-- conflicting messages of the device, all of them (the conflicts table keeps the first N)
ALTER TABLE devices ADD COLUMN conflicts BIGINT NOT NULL DEFAULT 0;

-- A message with a (device, boot, seq) already stored with another id or body, or with an
-- implausible seq: kept here, never silently dropped. digest = sha256 of id and body.
CREATE TABLE conflicts (
    id       BIGSERIAL PRIMARY KEY,
    device   TEXT    NOT NULL,
    boot     BIGINT      NOT NULL,
    seq      BIGINT      NOT NULL,
    kind     TEXT    NOT NULL,
    msg_id   TEXT,
    time     TIMESTAMPTZ NOT NULL,
    received TIMESTAMPTZ NOT NULL,
    reason   TEXT    NOT NULL,
    digest   TEXT    NOT NULL,
    body     JSONB   NOT NULL,
    UNIQUE (device, boot, seq, digest)
);
CREATE INDEX conflicts_device_seq ON conflicts (device, seq);

-- A message whose store failed deliveries_max times: acknowledged, kept here (payload prefix only).
CREATE TABLE dead_letters (
    digest     TEXT    PRIMARY KEY,
    first_seen TIMESTAMPTZ   NOT NULL,
    last_seen  TIMESTAMPTZ   NOT NULL,
    topic      TEXT    NOT NULL,
    reason     TEXT    NOT NULL,
    payload    TEXT    NOT NULL,
    count      BIGINT  NOT NULL
);
CREATE INDEX dead_letters_last_seen ON dead_letters (last_seen);

-- Rows deleted from a bounded table (rejected, dead_letters), counted.
CREATE TABLE trimmed (
    name    TEXT    PRIMARY KEY,
    dropped BIGINT  NOT NULL
);

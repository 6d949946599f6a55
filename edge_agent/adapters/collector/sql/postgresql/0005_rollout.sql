-- edge-agent collector schema 4 (PostgreSQL): staged rollouts (`edge-agent model rollout`).
-- The rollout's whole state is here, so that a rollout survives the operator's process: its
-- stages (the canaries first, as sorted device ids), where it is, and every verdict a device gave.
CREATE TABLE rollouts (
    id             TEXT        PRIMARY KEY,
    created        TIMESTAMPTZ NOT NULL,
    updated        TIMESTAMPTZ NOT NULL,
    package        TEXT        NOT NULL,
    package_sha256 TEXT        NOT NULL,
    name           TEXT        NOT NULL,
    version        TEXT        NOT NULL,
    vid            TEXT        NOT NULL,
    grp            TEXT        NOT NULL,
    canary         TEXT        NOT NULL,
    halt_after     INTEGER     NOT NULL,
    wave           INTEGER     NOT NULL,
    -- JSON: a list of stages, each a list of device ids; stage 0 the canaries
    stages         TEXT        NOT NULL,
    -- running, halted, done
    state          TEXT        NOT NULL,
    stage          INTEGER     NOT NULL,
    -- the highest stage whose every chunk the broker acknowledged (-1: none yet)
    pushed         INTEGER     NOT NULL,
    reason         TEXT
);
-- one row per device and verdict (switched, then passed; or refused; or rolled_back)
CREATE TABLE rollout_verdicts (
    rollout     TEXT        NOT NULL,
    device      TEXT        NOT NULL,
    stage       INTEGER     NOT NULL,
    transfer_id TEXT        NOT NULL,
    verdict     TEXT        NOT NULL,
    detail      TEXT        NOT NULL,
    at          TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (rollout, device, verdict)
);
CREATE INDEX rollout_verdicts_device ON rollout_verdicts (device, at);

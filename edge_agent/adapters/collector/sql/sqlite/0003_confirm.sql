-- edge-agent collector schema 3 (SQLite): the commit watermark the devices are confirmed from.
-- One row per island: every seq lo..hi of (device, boot) is in messages (or, for a kept conflict, in conflicts). Kept in the same
-- transaction as the inserts (a crash never confirms an uncommitted row).
CREATE TABLE confirmed (
    device TEXT    NOT NULL,
    boot   INTEGER NOT NULL,
    lo     INTEGER NOT NULL,
    hi     INTEGER NOT NULL,
    PRIMARY KEY (device, boot, lo)
) WITHOUT ROWID;

-- edge-agent collector schema 3 (PostgreSQL): the commit watermark the devices are confirmed from.
-- One row per island: every seq lo..hi of (device, boot) is in messages (or, for a kept conflict, in conflicts). Kept in the same
-- transaction as the inserts, under the device's row lock (devices upsert) so two collectors of
-- a group writing one database never merge the same islands at once.
CREATE TABLE confirmed (
    device TEXT   NOT NULL,
    boot   BIGINT NOT NULL,
    lo     BIGINT NOT NULL,
    hi     BIGINT NOT NULL,
    PRIMARY KEY (device, boot, lo)
);

-- edge-agent collector schema 8 (PostgreSQL): a write counter per device row, so a collector can
-- tell that nobody wrote the device since its own last round and skip re-reading what it knows
-- (adapters/collector/known.py). Every round's last-seen upsert adds 1, and so do the purge and a
-- partition drop; a new row (a new device, or one retired and back) starts a new epoch of 2^32.
CREATE SEQUENCE devices_epoch;
ALTER TABLE devices ADD COLUMN writes BIGINT NOT NULL DEFAULT (nextval('devices_epoch') * 4294967296);

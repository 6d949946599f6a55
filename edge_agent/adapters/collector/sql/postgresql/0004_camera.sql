-- edge-agent collector schema 4 (PostgreSQL): the camera of a message ([[cameras]] on the device).
-- NULL for the single [camera] (its topics have no camera level, its bodies no camera field).
-- ADD COLUMN without a default changes no existing row (no table rewrite).
ALTER TABLE messages ADD COLUMN camera TEXT;
ALTER TABLE conflicts ADD COLUMN camera TEXT;
-- "this device's camera's rows by time". Partial: a fleet without [[cameras]] writes no entry
-- into it (its rows are NULL), and "camera = $1" implies "camera IS NOT NULL", so it serves.
CREATE INDEX messages_device_camera_time ON messages (device, camera, time) WHERE camera IS NOT NULL;

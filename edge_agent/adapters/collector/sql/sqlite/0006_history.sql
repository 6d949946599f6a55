-- edge-agent collector schema 4 (SQLite): every status kept as a time series per device, and
-- the views the dashboards read (docs/collector.md, "Health history" and "Views"). Times are
-- unix seconds (REAL). The collector's maintenance thins rows older than history_full_days to
-- one per device, state and history_bucket_s (thinned = 1 marks the ones kept) and deletes rows
-- older than history_keep_days, in bounded batches.
CREATE TABLE status_history (
    id                   INTEGER PRIMARY KEY,
    device               TEXT    NOT NULL,
    time                 REAL    NOT NULL,
    received             REAL    NOT NULL,
    state                TEXT    NOT NULL,
    fps                  REAL,
    backlog              INTEGER,
    sent                 INTEGER,
    oldest_unconfirmed_s REAL,
    disk_free_bytes      INTEGER,
    disk_full            INTEGER,
    crashes              INTEGER,
    errors               INTEGER,
    model_id             TEXT,
    model_version        TEXT,
    provider             TEXT,
    link                 INTEGER,
    broker               TEXT,
    update_outcome       TEXT,
    update_at            REAL,
    update_detail        TEXT,
    thinned              INTEGER NOT NULL DEFAULT 0,
    body                 TEXT    NOT NULL
);
CREATE INDEX status_history_device_time ON status_history (device, time);
CREATE INDEX status_history_time ON status_history (time);
CREATE INDEX status_history_unthinned ON status_history (time) WHERE thinned = 0;

CREATE VIEW device_health AS
SELECT device, time, state,
       CASE WHEN state IN ('running', 'draining') THEN 1 ELSE 0 END AS online,
       fps, backlog, oldest_unconfirmed_s, disk_free_bytes, disk_full, crashes, errors,
       model_id, model_version, provider, update_outcome
FROM status_history;

CREATE VIEW line_counts AS
SELECT m.device, json_extract(m.body, '$.camera') AS camera, m.time, l.key AS line,
       CASE WHEN json_type(l.value, '$.in') IN ('integer', 'real') THEN json_extract(l.value, '$.in') END AS crossed_in,
       CASE WHEN json_type(l.value, '$.out') IN ('integer', 'real') THEN json_extract(l.value, '$.out') END AS crossed_out
FROM messages AS m, json_each(m.body, '$.lines') AS l
WHERE m.kind = 'counts' AND json_type(m.body, '$.lines') = 'object' AND l.type = 'object';

CREATE VIEW zone_counts AS
SELECT m.device, json_extract(m.body, '$.camera') AS camera, m.time, z.key AS zone,
       CASE WHEN json_type(z.value, '$.entered') IN ('integer', 'real') THEN json_extract(z.value, '$.entered') END AS entered,
       CASE WHEN json_type(z.value, '$.occupancy') IN ('integer', 'real') THEN json_extract(z.value, '$.occupancy') END AS occupancy
FROM messages AS m, json_each(m.body, '$.zones') AS z
WHERE m.kind = 'counts' AND json_type(m.body, '$.zones') = 'object' AND z.type = 'object';

CREATE VIEW detection_labels AS
SELECT m.device, json_extract(m.body, '$.camera') AS camera, m.time,
       CASE WHEN d.type = 'object' THEN json_extract(d.value, '$.label') END AS label,
       CASE WHEN d.type = 'object' AND json_type(d.value, '$.confidence') IN ('integer', 'real')
            THEN json_extract(d.value, '$.confidence') END AS confidence
FROM messages AS m, json_each(m.body, '$.detections') AS d
WHERE m.kind = 'detections' AND json_type(m.body, '$.detections') = 'array';

CREATE VIEW detections_per_hour AS
SELECT device, CAST(time / 3600 AS INTEGER) * 3600 AS hour, label, COUNT(*) AS detections
FROM detection_labels
GROUP BY device, CAST(time / 3600 AS INTEGER) * 3600, label;

-- edge-agent collector schema 4 (PostgreSQL): every status kept as a time series per device, and
-- the views the dashboards read (docs/collector.md, "Health history" and "Views").
-- One row per status received; the collector's maintenance thins rows older than
-- history_full_days to one per device, state and history_bucket_s (thinned = 1 marks the ones kept)
-- and deletes rows older than history_keep_days, in bounded batches.
CREATE TABLE status_history (
    id                   BIGSERIAL PRIMARY KEY,
    device               TEXT        NOT NULL,
    -- the device's ts, clamped to the receive time
    time                 TIMESTAMPTZ NOT NULL,
    received             TIMESTAMPTZ NOT NULL,
    state                TEXT        NOT NULL,
    fps                  DOUBLE PRECISION,
    backlog              BIGINT,
    sent                 BIGINT,
    oldest_unconfirmed_s DOUBLE PRECISION,
    disk_free_bytes      BIGINT,
    disk_full            BOOLEAN,
    crashes              BIGINT,
    errors               BIGINT,
    model_id             TEXT,
    model_version        TEXT,
    provider             TEXT,
    link                 BIGINT,
    broker               TEXT,
    -- the model update's last verdict as this status reports it (model_update.last)
    update_outcome       TEXT,
    update_at            DOUBLE PRECISION,
    update_detail        TEXT,
    thinned              SMALLINT    NOT NULL DEFAULT 0,
    body                 JSONB       NOT NULL
);
CREATE INDEX status_history_device_time ON status_history (device, time);
CREATE INDEX status_history_time ON status_history (time);
CREATE INDEX status_history_unthinned ON status_history (time) WHERE thinned = 0;

-- Device health over time (Grafana: WHERE $__timeFilter(time)).
CREATE VIEW device_health AS
SELECT device, time, state,
       CASE WHEN state IN ('running', 'draining') THEN 1 ELSE 0 END AS online,
       fps, backlog, oldest_unconfirmed_s, disk_free_bytes, disk_full, crashes, errors,
       model_id, model_version, provider, update_outcome
FROM status_history;

-- One row per line of each counts message (objects mode): crossings in that interval.
CREATE VIEW line_counts AS
SELECT m.device, m.body->>'camera' AS camera, m.time, l.key AS line,
       CASE WHEN jsonb_typeof(l.value->'in') = 'number' THEN (l.value->>'in')::numeric END AS crossed_in,
       CASE WHEN jsonb_typeof(l.value->'out') = 'number' THEN (l.value->>'out')::numeric END AS crossed_out
FROM messages AS m,
     jsonb_each(CASE WHEN jsonb_typeof(m.body->'lines') = 'object' THEN m.body->'lines' ELSE '{}'::jsonb END) AS l
WHERE m.kind = 'counts' AND jsonb_typeof(l.value) = 'object';

-- One row per zone of each counts message: entries in that interval, occupancy at its end.
CREATE VIEW zone_counts AS
SELECT m.device, m.body->>'camera' AS camera, m.time, z.key AS zone,
       CASE WHEN jsonb_typeof(z.value->'entered') = 'number' THEN (z.value->>'entered')::numeric END AS entered,
       CASE WHEN jsonb_typeof(z.value->'occupancy') = 'number' THEN (z.value->>'occupancy')::numeric END AS occupancy
FROM messages AS m,
     jsonb_each(CASE WHEN jsonb_typeof(m.body->'zones') = 'object' THEN m.body->'zones' ELSE '{}'::jsonb END) AS z
WHERE m.kind = 'counts' AND jsonb_typeof(z.value) = 'object';

-- One row per detection of each result (filter on time: the messages_time index serves it).
CREATE VIEW detection_labels AS
SELECT m.device, m.body->>'camera' AS camera, m.time, d->>'label' AS label,
       CASE WHEN jsonb_typeof(d->'confidence') = 'number' THEN (d->>'confidence')::float8 END AS confidence
FROM messages AS m,
     jsonb_array_elements(CASE WHEN jsonb_typeof(m.body->'detections') = 'array' THEN m.body->'detections' ELSE '[]'::jsonb END) AS d
WHERE m.kind = 'detections';

-- Detections per class per hour (a full scan: filter detection_labels by time for a dashboard).
CREATE VIEW detections_per_hour AS
SELECT device, date_trunc('hour', time) AS hour, label, COUNT(*) AS detections
FROM detection_labels
GROUP BY device, date_trunc('hour', time), label;

-- edge-agent collector schema 7 (PostgreSQL): retention (docs/collector.md, "Retention").
-- The rows deleted for age, as spans of seq: every seq lo..hi of (device, boot) was stored (the
-- span never straddles a gap; kept rows of other kinds may lie inside it). The gaps view reads
-- them with the messages, so an expired row is not a gap and a gap stays one after expiry.
CREATE TABLE expired (
    device TEXT   NOT NULL,
    boot   BIGINT NOT NULL,
    lo     BIGINT NOT NULL,
    hi     BIGINT NOT NULL,
    -- rows deleted in lo..hi, and the newest device time among them
    rows   BIGINT NOT NULL,
    newest TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (device, boot, lo)
);

-- The gap table: per device, every seq range never received, stored or expired alike.
DROP VIEW gaps;
CREATE VIEW gaps AS
SELECT device,
       COALESCE(prev_hi, 0) + 1 AS first_seq,
       lo - 1                   AS last_seq,
       prev_boot                AS boot_before,
       boot                     AS boot_after
FROM (SELECT device, lo, boot,
             MAX(hi) OVER (PARTITION BY device ORDER BY lo ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_hi,
             LAG(boot) OVER (PARTITION BY device ORDER BY lo) AS prev_boot
      FROM (SELECT device, boot, seq AS lo, seq AS hi FROM messages
            UNION ALL
            SELECT device, boot, lo, hi FROM expired) AS u) AS t
WHERE lo > COALESCE(prev_hi, 0) + 1;

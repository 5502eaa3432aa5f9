-- The executions rollup trigger returns at once when the statement changed no execution with an
-- outcome. An intent (the row a durable first execution commits before its tool runs) has none, nor
-- does a lease extended by a heartbeat: the rollups count executions with an outcome only, so those
-- statements now skip the grouping query over their transition table (about 25 µs of an intent's
-- INSERT, and twice that in the commit it waits for). Every other change is counted as before.
CREATE OR REPLACE FUNCTION "tool_stats_executions_changed"() RETURNS trigger
  LANGUAGE plpgsql AS $$
DECLARE
  deltas tool_stats_delta[];
BEGIN
  IF TG_OP = 'INSERT' THEN
    IF NOT EXISTS (SELECT 1 FROM new_rows WHERE outcome IS NOT NULL) THEN RETURN NULL; END IF;
    SELECT array_agg(ROW(tool, half_hour, n, outcome, bucket, NULL, NULL, NULL, NULL)::tool_stats_delta) INTO deltas
    FROM (SELECT tool, tool_stats_half_hour(started_at) AS half_hour, outcome, tool_stats_log_bucket(duration_ms) AS bucket, count(*) AS n
          FROM new_rows WHERE outcome IS NOT NULL GROUP BY 1, 2, 3, 4) g;
  ELSIF TG_OP = 'DELETE' THEN
    IF NOT EXISTS (SELECT 1 FROM old_rows WHERE outcome IS NOT NULL) THEN RETURN NULL; END IF;
    SELECT array_agg(ROW(tool, half_hour, n, outcome, bucket, NULL, NULL, NULL, NULL)::tool_stats_delta) INTO deltas
    FROM (SELECT tool, tool_stats_half_hour(started_at) AS half_hour, outcome, tool_stats_log_bucket(duration_ms) AS bucket, -count(*) AS n
          FROM old_rows WHERE outcome IS NOT NULL GROUP BY 1, 2, 3, 4) g;
  ELSE
    IF NOT EXISTS (SELECT 1 FROM new_rows WHERE outcome IS NOT NULL) AND NOT EXISTS (SELECT 1 FROM old_rows WHERE outcome IS NOT NULL) THEN
      RETURN NULL;
    END IF;
    SELECT array_agg(ROW(tool, half_hour, n, outcome, bucket, NULL, NULL, NULL, NULL)::tool_stats_delta) INTO deltas
    FROM (SELECT tool, tool_stats_half_hour(started_at) AS half_hour, outcome, tool_stats_log_bucket(duration_ms) AS bucket, sum(d) AS n
          FROM (SELECT tool, started_at, outcome, duration_ms, 1 AS d FROM new_rows WHERE outcome IS NOT NULL
                UNION ALL
                SELECT tool, started_at, outcome, duration_ms, -1 FROM old_rows WHERE outcome IS NOT NULL) c
          GROUP BY 1, 2, 3, 4 HAVING sum(d) <> 0) g;
  END IF;
  IF deltas IS NOT NULL THEN
    PERFORM tool_stats_apply(deltas, (CASE TG_OP WHEN 'INSERT' THEN 1 WHEN 'UPDATE' THEN 2 ELSE 3 END)::smallint);
  END IF;
  RETURN NULL;
END
$$;

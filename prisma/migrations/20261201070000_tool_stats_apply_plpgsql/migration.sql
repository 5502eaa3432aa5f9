-- tool_stats_apply in PL/pgSQL rather than SQL: a SQL function's statement is planned again on every
-- call, a PL/pgSQL one's plan is kept for the session; this took most of the triggers' cost per audit batch.
CREATE OR REPLACE FUNCTION "tool_stats_apply"(deltas tool_stats_delta[], src SMALLINT) RETURNS void
  LANGUAGE plpgsql AS $$
BEGIN
  WITH d AS (
    SELECT * FROM unnest(deltas)
  ), counts AS (
    SELECT tool, half_hour,
      sum(n) FILTER (WHERE kind IS NULL) AS executions,
      sum(n) FILTER (WHERE outcome = 'succeeded') AS succeeded,
      sum(n) FILTER (WHERE outcome = 'failed') AS failed,
      sum(n) FILTER (WHERE outcome = 'final_error') AS final_error,
      sum(n) FILTER (WHERE outcome = 'late_completion') AS late_completion,
      sum(n) FILTER (WHERE outcome = 'released') AS released,
      sum(n) FILTER (WHERE kind = 'replay') AS replay,
      sum(n) FILTER (WHERE kind = 'conflict') AS conflict,
      sum(n) FILTER (WHERE kind = 'stuck') AS stuck,
      sum(n) FILTER (WHERE kind = 'unknown') AS unknown,
      sum(n) FILTER (WHERE kind = 'mismatch') AS mismatch,
      sum(n) FILTER (WHERE kind = 'fresh_key') AS fresh_key,
      sum(n) FILTER (WHERE kind IS NOT NULL AND fallback) AS fallback
    FROM d GROUP BY 1, 2
  ), hists AS (
    SELECT tool, half_hour,
      tool_stats_hist(bucket, n) FILTER (WHERE which = 1) AS durations,
      tool_stats_hist(bucket, n) FILTER (WHERE which = 2) AS gaps,
      tool_stats_hist(bucket, n) FILTER (WHERE which = 3) AS display
    FROM (SELECT tool, half_hour, 1 AS which, duration_bucket AS bucket, sum(n)::bigint AS n FROM d WHERE duration_bucket IS NOT NULL GROUP BY 1, 2, 4
          UNION ALL
          SELECT tool, half_hour, 2, gap_bucket, sum(n)::bigint FROM d WHERE gap_bucket IS NOT NULL GROUP BY 1, 2, 4
          UNION ALL
          SELECT tool, half_hour, 3, gap_display, sum(n)::bigint FROM d WHERE gap_display IS NOT NULL GROUP BY 1, 2, 4) b
    GROUP BY 1, 2
  )
  INSERT INTO tool_stats_half_hours AS t (tool, half_hour, source, executions, succeeded, failed, final_error, late_completion, released,
    replay, conflict, stuck, unknown, mismatch, fresh_key, fallback, duration_hist, gap_hist, gap_display)
  SELECT c.tool, c.half_hour, src, coalesce(c.executions, 0), coalesce(c.succeeded, 0), coalesce(c.failed, 0), coalesce(c.final_error, 0),
    coalesce(c.late_completion, 0), coalesce(c.released, 0), coalesce(c.replay, 0), coalesce(c.conflict, 0), coalesce(c.stuck, 0),
    coalesce(c.unknown, 0), coalesce(c.mismatch, 0), coalesce(c.fresh_key, 0), coalesce(c.fallback, 0), h.durations, h.gaps, h.display
  FROM counts c
  LEFT JOIN hists h ON h.tool = c.tool AND h.half_hour = c.half_hour
  ORDER BY c.tool, c.half_hour
  ON CONFLICT (tool, half_hour, source) DO UPDATE SET
    executions = t.executions + EXCLUDED.executions, succeeded = t.succeeded + EXCLUDED.succeeded, failed = t.failed + EXCLUDED.failed,
    final_error = t.final_error + EXCLUDED.final_error, late_completion = t.late_completion + EXCLUDED.late_completion,
    released = t.released + EXCLUDED.released, replay = t.replay + EXCLUDED.replay, conflict = t.conflict + EXCLUDED.conflict,
    stuck = t.stuck + EXCLUDED.stuck, unknown = t.unknown + EXCLUDED.unknown, mismatch = t.mismatch + EXCLUDED.mismatch,
    fresh_key = t.fresh_key + EXCLUDED.fresh_key, fallback = t.fallback + EXCLUDED.fallback,
    duration_hist = tool_stats_hist_add(t.duration_hist, EXCLUDED.duration_hist),
    gap_hist = tool_stats_hist_add(t.gap_hist, EXCLUDED.gap_hist),
    gap_display = tool_stats_hist_add(t.gap_display, EXCLUDED.gap_display);
END
$$;

-- Per-tool rollups of the audit log for the console's tool pages and tool list: per tool and half
-- hour (UTC, aligned to the epoch), the executions with an outcome by outcome, the suppressions by
-- kind, and log-scale histograms of durations and replay gaps. A tool page over 24 h or 7 d sums
-- at most 49 or 337 half hours of one tool instead of reading that tool's audit rows.
--
-- Statement-level triggers keep them, so every writer (the audit writer's batches, operators'
-- decisions, retention, imports) is counted in the same transaction as its rows, on PostgreSQL and
-- PGlite alike. Counts are exact: each rollup row holds the changes of one kind of statement
-- (`source`: 1-3 executions INSERT/UPDATE/DELETE, 4-6 suppressions INSERT/UPDATE/DELETE, 0 the
-- backfill and compacted history); a half hour's figure is the sum of its rows.
--
-- Executions without an outcome are not in the rollups: an intent (the durable hot path) fires the
-- trigger but changes no rollup row, so concurrent intents never wait on one another here. Readers
-- count the open executions of a window from the log (executions_open_tool_started_at_idx, which
-- holds only them).
--
-- Locks: a statement locks its rollup rows in (tool, half_hour) order within its own source, so
-- two writers never wait on each other in opposite orders (the audit writer's batch statement runs
-- its three triggers in one fixed order).
--
-- Histograms (int[] whose subscripts are bucket numbers; unused buckets are NULL):
--   duration_hist, gap_hist  bucket 0 holds 0 ms, bucket k ≥ 1 holds [2^((k-1)/16), 2^(k/16)) ms:
--                            a percentile read from them is within 2.2 % (2^(1/32) − 1) of the
--                            exact one
--   gap_display              the console's gap histogram (GAP_BUCKETS_MS, upper bounds inclusive),
--                            bucket i for the i-th bound: exact

-- CreateTable
CREATE TABLE "tool_stats_half_hours" (
    "tool" TEXT NOT NULL,
    "half_hour" TIMESTAMP(3) NOT NULL,
    "source" SMALLINT NOT NULL,
    "executions" INTEGER NOT NULL DEFAULT 0,
    "succeeded" INTEGER NOT NULL DEFAULT 0,
    "failed" INTEGER NOT NULL DEFAULT 0,
    "final_error" INTEGER NOT NULL DEFAULT 0,
    "late_completion" INTEGER NOT NULL DEFAULT 0,
    "released" INTEGER NOT NULL DEFAULT 0,
    "replay" INTEGER NOT NULL DEFAULT 0,
    "conflict" INTEGER NOT NULL DEFAULT 0,
    "stuck" INTEGER NOT NULL DEFAULT 0,
    "unknown" INTEGER NOT NULL DEFAULT 0,
    "mismatch" INTEGER NOT NULL DEFAULT 0,
    "fresh_key" INTEGER NOT NULL DEFAULT 0,
    "fallback" INTEGER NOT NULL DEFAULT 0,
    "duration_hist" INTEGER[],
    "gap_hist" INTEGER[],
    "gap_display" INTEGER[],

    CONSTRAINT "tool_stats_half_hours_pkey" PRIMARY KEY ("tool","half_hour","source")
);

-- CreateIndex: every tool's half hours of a window (the tool list)
CREATE INDEX "tool_stats_half_hours_half_hour_idx" ON "tool_stats_half_hours"("half_hour");

-- CreateIndex: the open executions of one tool by time, counted next to the rollups
CREATE INDEX "executions_open_tool_started_at_idx" ON "executions"("tool", "started_at") WHERE "outcome" IS NULL;

CREATE FUNCTION "tool_stats_half_hour"(t TIMESTAMP(3)) RETURNS TIMESTAMP(3)
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT date_bin(interval '30 minutes', t, TIMESTAMP '1970-01-01') $$;

CREATE FUNCTION "tool_stats_log_bucket"(ms INTEGER) RETURNS INTEGER
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT CASE WHEN ms IS NULL OR ms < 0 THEN NULL WHEN ms = 0 THEN 0 ELSE 1 + floor(16 * ln(ms::float8) / ln(2::float8))::int END $$;

-- GAP_BUCKETS_MS of lib/anomalies/retry-gaps.ts, upper bounds inclusive
CREATE FUNCTION "tool_stats_gap_display_bucket"(ms INTEGER) RETURNS INTEGER
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT CASE WHEN ms IS NULL THEN NULL WHEN ms <= 100 THEN 1 WHEN ms <= 250 THEN 2 WHEN ms <= 500 THEN 3 WHEN ms <= 1000 THEN 4
    WHEN ms <= 2500 THEN 5 WHEN ms <= 5000 THEN 6 WHEN ms <= 10000 THEN 7 WHEN ms <= 30000 THEN 8 WHEN ms <= 60000 THEN 9
    WHEN ms <= 300000 THEN 10 WHEN ms <= 900000 THEN 11 WHEN ms <= 3600000 THEN 12 WHEN ms <= 21600000 THEN 13 WHEN ms <= 86400000 THEN 14
    ELSE 15 END $$;

-- a histogram from (bucket, count) pairs; the array's subscripts are the buckets
CREATE FUNCTION "tool_stats_hist_step"(h INTEGER[], bucket INTEGER, n BIGINT) RETURNS INTEGER[]
  LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  IF bucket IS NOT NULL AND n <> 0 THEN
    h[bucket] := coalesce(h[bucket], 0) + n;
  END IF;
  RETURN h;
END
$$;
CREATE AGGREGATE "tool_stats_hist"(INTEGER, BIGINT) (SFUNC = tool_stats_hist_step, STYPE = INTEGER[]);

-- the sum of two histograms
CREATE FUNCTION "tool_stats_hist_add"(a INTEGER[], b INTEGER[]) RETURNS INTEGER[]
  LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  IF b IS NULL THEN
    RETURN a;
  END IF;
  IF a IS NULL THEN
    RETURN b;
  END IF;
  FOR i IN array_lower(b, 1) .. array_upper(b, 1) LOOP
    IF b[i] IS NOT NULL THEN
      a[i] := coalesce(a[i], 0) + b[i];
    END IF;
  END LOOP;
  RETURN a;
END
$$;
CREATE AGGREGATE "tool_stats_hist_sum"(INTEGER[]) (SFUNC = tool_stats_hist_add, STYPE = INTEGER[]);

-- Audit rows' contributions, grouped: n rows (negative: removed, or the old versions of updated
-- rows) of one tool and half hour alike in everything counted.
CREATE TYPE "tool_stats_delta" AS (
    "tool" TEXT,
    "half_hour" TIMESTAMP(3),
    "n" BIGINT,
    -- executions: the outcome (never null here); suppressions: null
    "outcome" TEXT,
    "duration_bucket" INTEGER,
    -- suppressions: the kind; executions: null
    "kind" TEXT,
    "fallback" BOOLEAN,
    -- replays only
    "gap_bucket" INTEGER,
    "gap_display" INTEGER
);

CREATE FUNCTION "tool_stats_apply"(deltas tool_stats_delta[], src SMALLINT) RETURNS void
  LANGUAGE sql AS $$
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
    gap_display = tool_stats_hist_add(t.gap_display, EXCLUDED.gap_display)
$$;

-- An UPDATE counts +1 for each new version and −1 for each old one; groups that cancel out (the
-- fields counted did not change) are left out, so most updates change no rollup row.
CREATE FUNCTION "tool_stats_executions_changed"() RETURNS trigger
  LANGUAGE plpgsql AS $$
DECLARE
  deltas tool_stats_delta[];
BEGIN
  IF TG_OP = 'INSERT' THEN
    SELECT array_agg(ROW(tool, half_hour, n, outcome, bucket, NULL, NULL, NULL, NULL)::tool_stats_delta) INTO deltas
    FROM (SELECT tool, tool_stats_half_hour(started_at) AS half_hour, outcome, tool_stats_log_bucket(duration_ms) AS bucket, count(*) AS n
          FROM new_rows WHERE outcome IS NOT NULL GROUP BY 1, 2, 3, 4) g;
  ELSIF TG_OP = 'DELETE' THEN
    SELECT array_agg(ROW(tool, half_hour, n, outcome, bucket, NULL, NULL, NULL, NULL)::tool_stats_delta) INTO deltas
    FROM (SELECT tool, tool_stats_half_hour(started_at) AS half_hour, outcome, tool_stats_log_bucket(duration_ms) AS bucket, -count(*) AS n
          FROM old_rows WHERE outcome IS NOT NULL GROUP BY 1, 2, 3, 4) g;
  ELSE
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

CREATE FUNCTION "tool_stats_suppressions_changed"() RETURNS trigger
  LANGUAGE plpgsql AS $$
DECLARE
  deltas tool_stats_delta[];
BEGIN
  IF TG_OP = 'INSERT' THEN
    SELECT array_agg(ROW(tool, half_hour, n, NULL, NULL, kind, fallback, gap_bucket, gap_display)::tool_stats_delta) INTO deltas
    FROM (SELECT tool, tool_stats_half_hour(at) AS half_hour, kind, fallback,
            CASE WHEN kind = 'replay' THEN tool_stats_log_bucket(gap_ms) END AS gap_bucket,
            CASE WHEN kind = 'replay' THEN tool_stats_gap_display_bucket(gap_ms) END AS gap_display, count(*) AS n
          FROM new_rows GROUP BY 1, 2, 3, 4, 5, 6) g;
  ELSIF TG_OP = 'DELETE' THEN
    SELECT array_agg(ROW(tool, half_hour, n, NULL, NULL, kind, fallback, gap_bucket, gap_display)::tool_stats_delta) INTO deltas
    FROM (SELECT tool, tool_stats_half_hour(at) AS half_hour, kind, fallback,
            CASE WHEN kind = 'replay' THEN tool_stats_log_bucket(gap_ms) END AS gap_bucket,
            CASE WHEN kind = 'replay' THEN tool_stats_gap_display_bucket(gap_ms) END AS gap_display, -count(*) AS n
          FROM old_rows GROUP BY 1, 2, 3, 4, 5, 6) g;
  ELSE
    SELECT array_agg(ROW(tool, half_hour, n, NULL, NULL, kind, fallback, gap_bucket, gap_display)::tool_stats_delta) INTO deltas
    FROM (SELECT tool, tool_stats_half_hour(at) AS half_hour, kind, fallback,
            CASE WHEN kind = 'replay' THEN tool_stats_log_bucket(gap_ms) END AS gap_bucket,
            CASE WHEN kind = 'replay' THEN tool_stats_gap_display_bucket(gap_ms) END AS gap_display, sum(d) AS n
          FROM (SELECT tool, at, kind, fallback, gap_ms, 1 AS d FROM new_rows
                UNION ALL
                SELECT tool, at, kind, fallback, gap_ms, -1 FROM old_rows) c
          GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(d) <> 0) g;
  END IF;
  IF deltas IS NOT NULL THEN
    PERFORM tool_stats_apply(deltas, (CASE TG_OP WHEN 'INSERT' THEN 4 WHEN 'UPDATE' THEN 5 ELSE 6 END)::smallint);
  END IF;
  RETURN NULL;
END
$$;

CREATE FUNCTION "tool_stats_truncated"() RETURNS trigger
  LANGUAGE plpgsql AS $$
BEGIN
  IF TG_TABLE_NAME = 'executions' THEN
    UPDATE tool_stats_half_hours SET executions = 0, succeeded = 0, failed = 0, final_error = 0, late_completion = 0, released = 0,
      duration_hist = NULL;
  ELSE
    UPDATE tool_stats_half_hours SET replay = 0, conflict = 0, stuck = 0, unknown = 0, mismatch = 0, fresh_key = 0, fallback = 0,
      gap_hist = NULL, gap_display = NULL;
  END IF;
  RETURN NULL;
END
$$;

-- Creating them locks out writers until this migration commits, so the backfill below misses nothing.
CREATE TRIGGER "executions_tool_stats_insert" AFTER INSERT ON "executions"
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION tool_stats_executions_changed();
CREATE TRIGGER "executions_tool_stats_update" AFTER UPDATE ON "executions"
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION tool_stats_executions_changed();
CREATE TRIGGER "executions_tool_stats_delete" AFTER DELETE ON "executions"
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION tool_stats_executions_changed();
CREATE TRIGGER "executions_tool_stats_truncate" AFTER TRUNCATE ON "executions"
  FOR EACH STATEMENT EXECUTE FUNCTION tool_stats_truncated();
CREATE TRIGGER "suppressions_tool_stats_insert" AFTER INSERT ON "suppressions"
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION tool_stats_suppressions_changed();
CREATE TRIGGER "suppressions_tool_stats_update" AFTER UPDATE ON "suppressions"
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION tool_stats_suppressions_changed();
CREATE TRIGGER "suppressions_tool_stats_delete" AFTER DELETE ON "suppressions"
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION tool_stats_suppressions_changed();
CREATE TRIGGER "suppressions_tool_stats_truncate" AFTER TRUNCATE ON "suppressions"
  FOR EACH STATEMENT EXECUTE FUNCTION tool_stats_truncated();

-- Backfill (source 0): grouped in SQL, not through the triggers' arrays
INSERT INTO tool_stats_half_hours (tool, half_hour, source, executions, succeeded, failed, final_error, late_completion, released, duration_hist)
SELECT c.tool, c.half_hour, 0, c.executions, c.succeeded, c.failed, c.final_error, c.late_completion, c.released, du.h
FROM (SELECT tool, tool_stats_half_hour(started_at) AS half_hour, count(*) AS executions,
        count(*) FILTER (WHERE outcome = 'succeeded') AS succeeded, count(*) FILTER (WHERE outcome = 'failed') AS failed,
        count(*) FILTER (WHERE outcome = 'final_error') AS final_error, count(*) FILTER (WHERE outcome = 'late_completion') AS late_completion,
        count(*) FILTER (WHERE outcome = 'released') AS released
      FROM executions WHERE outcome IS NOT NULL GROUP BY 1, 2) c
LEFT JOIN (SELECT tool, half_hour, tool_stats_hist(bucket, n) AS h
           FROM (SELECT tool, tool_stats_half_hour(started_at) AS half_hour, tool_stats_log_bucket(duration_ms) AS bucket, count(*) AS n
                 FROM executions WHERE outcome IS NOT NULL AND duration_ms IS NOT NULL GROUP BY 1, 2, 3) b
           GROUP BY 1, 2) du ON du.tool = c.tool AND du.half_hour = c.half_hour;

INSERT INTO tool_stats_half_hours AS t (tool, half_hour, source, replay, conflict, stuck, unknown, mismatch, fresh_key, fallback, gap_hist, gap_display)
SELECT c.tool, c.half_hour, 0, c.replay, c.conflict, c.stuck, c.unknown, c.mismatch, c.fresh_key, c.fallback, g.h, g.display
FROM (SELECT tool, tool_stats_half_hour(at) AS half_hour,
        count(*) FILTER (WHERE kind = 'replay') AS replay, count(*) FILTER (WHERE kind = 'conflict') AS conflict,
        count(*) FILTER (WHERE kind = 'stuck') AS stuck, count(*) FILTER (WHERE kind = 'unknown') AS unknown,
        count(*) FILTER (WHERE kind = 'mismatch') AS mismatch, count(*) FILTER (WHERE kind = 'fresh_key') AS fresh_key,
        count(*) FILTER (WHERE fallback) AS fallback
      FROM suppressions GROUP BY 1, 2) c
LEFT JOIN (SELECT tool, half_hour, tool_stats_hist(bucket, n) FILTER (WHERE fine) AS h, tool_stats_hist(bucket, n) FILTER (WHERE NOT fine) AS display
           FROM (SELECT tool, tool_stats_half_hour(at) AS half_hour, true AS fine, tool_stats_log_bucket(gap_ms) AS bucket, count(*) AS n
                 FROM suppressions WHERE kind = 'replay' AND gap_ms IS NOT NULL GROUP BY 1, 2, 4
                 UNION ALL
                 SELECT tool, tool_stats_half_hour(at), false, tool_stats_gap_display_bucket(gap_ms), count(*)
                 FROM suppressions WHERE kind = 'replay' AND gap_ms IS NOT NULL GROUP BY 1, 2, 4) b
           GROUP BY 1, 2) g ON g.tool = c.tool AND g.half_hour = c.half_hour
ON CONFLICT (tool, half_hour, source) DO UPDATE SET
  replay = EXCLUDED.replay, conflict = EXCLUDED.conflict, stuck = EXCLUDED.stuck, unknown = EXCLUDED.unknown, mismatch = EXCLUDED.mismatch,
  fresh_key = EXCLUDED.fresh_key, fallback = EXCLUDED.fallback, gap_hist = EXCLUDED.gap_hist, gap_display = EXCLUDED.gap_display;

-- Retention (lib/audit/purge-audit.ts) removes old audit rows through the triggers, which leaves a
-- half hour's rows summing to what is left of it (zero once all its rows are gone). This folds the
-- rows of the half hours before `before` into one (source 0) each and drops those that sum to
-- nothing; the figures are unchanged. Returns the rollup rows dropped.
CREATE FUNCTION "tool_stats_compact"(before TIMESTAMP(3)) RETURNS INTEGER
  LANGUAGE plpgsql AS $$
DECLARE
  dropped INTEGER;
  emptied INTEGER;
BEGIN
  WITH gone AS (
    DELETE FROM tool_stats_half_hours WHERE half_hour < tool_stats_half_hour(before) AND source <> 0 RETURNING *
  ), merged AS (
    INSERT INTO tool_stats_half_hours AS t (tool, half_hour, source, executions, succeeded, failed, final_error, late_completion, released,
      replay, conflict, stuck, unknown, mismatch, fresh_key, fallback, duration_hist, gap_hist, gap_display)
    SELECT tool, half_hour, 0, sum(executions), sum(succeeded), sum(failed), sum(final_error), sum(late_completion), sum(released),
      sum(replay), sum(conflict), sum(stuck), sum(unknown), sum(mismatch), sum(fresh_key), sum(fallback),
      tool_stats_hist_sum(duration_hist), tool_stats_hist_sum(gap_hist), tool_stats_hist_sum(gap_display)
    FROM gone GROUP BY tool, half_hour ORDER BY tool, half_hour
    ON CONFLICT (tool, half_hour, source) DO UPDATE SET
      executions = t.executions + EXCLUDED.executions, succeeded = t.succeeded + EXCLUDED.succeeded, failed = t.failed + EXCLUDED.failed,
      final_error = t.final_error + EXCLUDED.final_error, late_completion = t.late_completion + EXCLUDED.late_completion,
      released = t.released + EXCLUDED.released, replay = t.replay + EXCLUDED.replay, conflict = t.conflict + EXCLUDED.conflict,
      stuck = t.stuck + EXCLUDED.stuck, unknown = t.unknown + EXCLUDED.unknown, mismatch = t.mismatch + EXCLUDED.mismatch,
      fresh_key = t.fresh_key + EXCLUDED.fresh_key, fallback = t.fallback + EXCLUDED.fallback,
      duration_hist = tool_stats_hist_add(t.duration_hist, EXCLUDED.duration_hist),
      gap_hist = tool_stats_hist_add(t.gap_hist, EXCLUDED.gap_hist),
      gap_display = tool_stats_hist_add(t.gap_display, EXCLUDED.gap_display)
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM gone) - (SELECT count(*) FROM merged) INTO dropped;
  DELETE FROM tool_stats_half_hours
  WHERE half_hour < tool_stats_half_hour(before) AND source = 0
    AND executions = 0 AND succeeded = 0 AND failed = 0 AND final_error = 0 AND late_completion = 0 AND released = 0
    AND replay = 0 AND conflict = 0 AND stuck = 0 AND unknown = 0 AND mismatch = 0 AND fresh_key = 0 AND fallback = 0
    AND NOT EXISTS (SELECT 1 FROM unnest(duration_hist || gap_hist || gap_display) AS n WHERE n <> 0);
  GET DIAGNOSTICS emptied = ROW_COUNT;
  RETURN dropped + emptied;
END
$$;

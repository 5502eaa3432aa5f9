-- State counts without reading the keys. Triggers keep, per (scope, tool, stored status), how many
-- rows idempotency_keys holds (key_counts) and how many of them fall in each hour of deadline_ms
-- (key_deadline_counts). The store derives stuck and expired from whole hours plus an index count
-- inside the half hour nearest to now.
--
-- A counter row's slot and hour come from the row version counted (its token's low bits, its
-- deadline), so each counter row's n is exactly its number of keys: rows at zero can be deleted at
-- any time. Consecutive tokens land in different slots, so concurrent writers of one (scope, tool)
-- seldom wait on one counter row. Writers of idempotency_keys are expected at READ COMMITTED (the
-- store's single statements are): under REPEATABLE READ a concurrent increment of the same counter
-- row is a serialization failure.

-- CreateTable
CREATE TABLE "key_counts" (
    "scope" TEXT NOT NULL,
    "tool" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "slot" SMALLINT NOT NULL,
    "n" BIGINT NOT NULL,

    CONSTRAINT "key_counts_pkey" PRIMARY KEY ("scope","tool","status","slot")
);

-- CreateTable
CREATE TABLE "key_deadline_counts" (
    "status" TEXT NOT NULL,
    "deadline_hour" BIGINT NOT NULL,
    "scope" TEXT NOT NULL,
    "tool" TEXT NOT NULL,
    "slot" SMALLINT NOT NULL,
    "n" BIGINT NOT NULL,

    CONSTRAINT "key_deadline_counts_pkey" PRIMARY KEY ("status","deadline_hour","scope","tool","slot")
);

-- CreateIndex: counts for one scope read the keys of one half hour of deadlines by this index
CREATE INDEX "idempotency_keys_status_scope_deadline_ms_idx" ON "idempotency_keys"("status", "scope", "deadline_ms");

-- Floor division, exact for every bigint; the store computes the same hours (HOUR_MS).
CREATE FUNCTION "key_counts_hour"(ms BIGINT) RETURNS BIGINT
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT (ms - ((ms % 3600000) + 3600000) % 3600000) / 3600000 $$;

CREATE FUNCTION "idempotency_keys_count_changes"() RETURNS trigger
  LANGUAGE plpgsql AS $$
DECLARE
  deltas key_deadline_counts[];
BEGIN
  IF TG_OP = 'INSERT' THEN
    SELECT array_agg(ROW(status, hour, scope, tool, slot, n)::key_deadline_counts) INTO deltas
    FROM (SELECT status, key_counts_hour(deadline_ms) AS hour, scope, tool, (token & 7)::smallint AS slot, count(*) AS n
          FROM new_rows GROUP BY 1, 2, 3, 4, 5) g;
  ELSIF TG_OP = 'DELETE' THEN
    SELECT array_agg(ROW(status, hour, scope, tool, slot, n)::key_deadline_counts) INTO deltas
    FROM (SELECT status, key_counts_hour(deadline_ms) AS hour, scope, tool, (token & 7)::smallint AS slot, -count(*) AS n
          FROM old_rows GROUP BY 1, 2, 3, 4, 5) g;
  ELSE
    SELECT array_agg(ROW(status, hour, scope, tool, slot, n)::key_deadline_counts) INTO deltas
    FROM (SELECT status, hour, scope, tool, slot, sum(d) AS n
          FROM (SELECT status, key_counts_hour(deadline_ms) AS hour, scope, tool, (token & 7)::smallint AS slot, 1 AS d FROM new_rows
                UNION ALL
                SELECT status, key_counts_hour(deadline_ms), scope, tool, (token & 7)::smallint, -1 FROM old_rows) c
          GROUP BY 1, 2, 3, 4, 5 HAVING sum(d) <> 0) g;
  END IF;
  IF deltas IS NULL THEN
    RETURN NULL;
  END IF;
  -- Counter rows are locked in key order, totals before hours, by every statement: no deadlocks.
  INSERT INTO key_counts AS c (scope, tool, status, slot, n)
  SELECT scope, tool, status, slot, sum(n) FROM unnest(deltas)
  GROUP BY scope, tool, status, slot HAVING sum(n) <> 0
  ORDER BY scope, tool, status, slot
  ON CONFLICT (scope, tool, status, slot) DO UPDATE SET n = c.n + EXCLUDED.n;
  INSERT INTO key_deadline_counts AS c (status, deadline_hour, scope, tool, slot, n)
  SELECT status, deadline_hour, scope, tool, slot, n FROM unnest(deltas)
  ORDER BY status, deadline_hour, scope, tool, slot
  ON CONFLICT (status, deadline_hour, scope, tool, slot) DO UPDATE SET n = c.n + EXCLUDED.n;
  RETURN NULL;
END
$$;

CREATE FUNCTION "idempotency_keys_count_truncate"() RETURNS trigger
  LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM key_counts;
  DELETE FROM key_deadline_counts;
  RETURN NULL;
END
$$;

-- Statement-level, so a bulk INSERT … SELECT costs one upsert per counter row, not per key.
-- Creating them locks out writers until this migration commits, so the backfill below misses nothing.
CREATE TRIGGER "idempotency_keys_count_insert" AFTER INSERT ON "idempotency_keys"
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION idempotency_keys_count_changes();
CREATE TRIGGER "idempotency_keys_count_update" AFTER UPDATE ON "idempotency_keys"
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION idempotency_keys_count_changes();
CREATE TRIGGER "idempotency_keys_count_delete" AFTER DELETE ON "idempotency_keys"
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION idempotency_keys_count_changes();
CREATE TRIGGER "idempotency_keys_count_truncate" AFTER TRUNCATE ON "idempotency_keys"
  FOR EACH STATEMENT EXECUTE FUNCTION idempotency_keys_count_truncate();

-- Backfill
INSERT INTO key_deadline_counts (status, deadline_hour, scope, tool, slot, n)
SELECT status, key_counts_hour(deadline_ms), scope, tool, (token & 7)::smallint, count(*)
FROM idempotency_keys GROUP BY 1, 2, 3, 4, 5;
INSERT INTO key_counts (scope, tool, status, slot, n)
SELECT scope, tool, status, slot, sum(n) FROM key_deadline_counts GROUP BY 1, 2, 3, 4;

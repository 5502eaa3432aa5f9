import { Prisma, type PrismaClient } from "@/generated/prisma/client";

/**
 * The search by an argument value (find-executions.ts) reads a copy of each execution's kept
 * arguments in execution_argument_index, which holds the two GIN indexes; the arguments themselves
 * stay on the execution's row. The copy is written after the intent's commit, so those indexes
 * are not in the commit a reservation waits for (docs/benchmarks.md): the audit writer writes the
 * copies of the intents it committed with its next batch (audit-writer.ts, writeArgumentIndex),
 * and a call becomes findable by its arguments one batch after its intent.
 *
 * Nothing is lost when the process stops in between: the arguments are committed with the intent,
 * and the copies missing are written again from executions (`INSERT … SELECT … WHERE NOT EXISTS`):
 * by every reconciler pass over the rows since its previous one (indexMissingArgumentsAfter, a
 * cursor like its other scans'), and once at the server's start over what no pass has read yet
 * (indexMissingArguments from that cursor less a margin, or over the whole log when there is none:
 * lib/anomalies/reconcile.ts, indexMissingArgumentsAtStart). Every statement copies from executions, never from what a caller sent, so a copy is
 * always what the log holds; ON CONFLICT DO NOTHING makes writing one twice harmless.
 */

/**
 * The copies of these executions ($1, a JSON array of ids): the writer's statement. Each id is
 * looked up by the primary key (a LATERAL subquery with LIMIT is never flattened into a join):
 * written as `id IN (SELECT …)`, PostgreSQL planned a hash join over a sequential scan of all of
 * executions up to tens of thousands of rows, so every batch read the whole log.
 */
export const INDEX_EXECUTIONS = `
  INSERT INTO execution_argument_index (execution_id, scope, started_at, arguments)
  SELECT e.id, e.scope, e.started_at, e.arguments FROM jsonb_array_elements_text($1::jsonb) AS wanted(id)
  CROSS JOIN LATERAL (
    SELECT id, scope, started_at, arguments FROM executions WHERE id = wanted.id AND arguments IS NOT NULL LIMIT 1
  ) e
  ON CONFLICT DO NOTHING`;

/**
 * Writes the copies missing of executions started at or after `since` (every execution when null):
 * the pass at the server's start, which finds what a process that stopped between an intent and its
 * copy left while no reconciler pass ran (it may have been down for longer than the reconciler looks
 * back). One anti-join over those executions; returns how many copies it wrote.
 */
export async function indexMissingArguments(prisma: PrismaClient, since: Date | null = null): Promise<number> {
  return prisma.$executeRaw`
    INSERT INTO execution_argument_index (execution_id, scope, started_at, arguments)
    SELECT e.id, e.scope, e.started_at, e.arguments FROM executions e
    WHERE e.arguments IS NOT NULL AND (${since?.toISOString() ?? null}::timestamptz IS NULL OR e.started_at >= (${since?.toISOString() ?? null}::timestamptz AT TIME ZONE 'UTC'))
      AND NOT EXISTS (SELECT 1 FROM execution_argument_index a WHERE a.execution_id = e.id)
    ON CONFLICT DO NOTHING`;
}

/**
 * The reconciler's scan: up to `batch` executions after `after` in (started_at, id) order (through
 * executions_started_at_idx, and each one's copy through the side table's primary key), writing
 * the copies missing among them. What it read and wrote, and the last row's position, from which
 * the next pass continues (the reconciler keeps it as the `argument_index` cursor, never past its
 * settle time: an async intent may be written a little after its time).
 */
export async function indexMissingArgumentsAfter(
  prisma: PrismaClient,
  after: { at: Date; id: string },
  batch: number,
): Promise<{ examined: number; indexed: number; last: { at: Date; id: string } | null }> {
  const [row] = await prisma.$queryRaw<{ examined: number; indexed: number; last_at: number | null; last_id: string | null }[]>(argumentIndexScanSql(after, batch));
  return {
    examined: Number(row.examined),
    indexed: Number(row.indexed),
    last: row.last_id === null || row.last_at === null ? null : { at: new Date(Number(row.last_at)), id: row.last_id },
  };
}

/** The statement of indexMissingArgumentsAfter (lib/audit/query-plans.test.ts EXPLAINs it). */
export function argumentIndexScanSql(after: { at: Date; id: string }, batch: number): Prisma.Sql {
  // an ISO instant read as UTC wall-clock time, as the audit's timestamp(3) columns hold it (audit-writer.ts)
  const at = after.at.toISOString();
  return Prisma.sql`
    WITH scanned AS MATERIALIZED (
      SELECT id, scope, started_at, arguments FROM executions
      WHERE started_at >= (${at}::timestamptz AT TIME ZONE 'UTC') AND (started_at, id) > ((${at}::timestamptz AT TIME ZONE 'UTC'), ${after.id})
      ORDER BY started_at, id LIMIT ${batch}
    ), indexed AS (
      INSERT INTO execution_argument_index (execution_id, scope, started_at, arguments)
      SELECT s.id, s.scope, s.started_at, s.arguments FROM scanned s
      WHERE s.arguments IS NOT NULL AND NOT EXISTS (SELECT 1 FROM execution_argument_index a WHERE a.execution_id = s.id)
      ON CONFLICT DO NOTHING
      RETURNING 1
    ), last AS (
      SELECT started_at, id FROM scanned ORDER BY started_at DESC, id DESC LIMIT 1
    )
    SELECT (SELECT count(*) FROM scanned)::int AS examined, (SELECT count(*) FROM indexed)::int AS indexed,
           (SELECT (extract(epoch FROM started_at) * 1000)::float8 FROM last) AS last_at, (SELECT id FROM last) AS last_id`;
}

/**
 * Deletes the copies whose execution is gone among the next `limit` copies after `after` (in
 * execution id order, through the copies' primary key, each execution looked up by its own): the
 * background's sweep, a slice per pass (lib/process/background.ts). Retention deletes a copy with
 * its execution (purge-audit.ts); nothing ties the two in the database (migration 20261207000000),
 * so a copy written from an execution while retention deleted it would stay, counted by the search
 * (find-executions.ts reads the copies and joins their executions, so it never shows one). A copy is
 * only ever written from its execution's committed row, so one without an execution is such a
 * leftover. Returns where the next slice starts: "" after the last copy (start again).
 */
export async function deleteOrphanCopies(prisma: PrismaClient, after: string, limit: number): Promise<{ examined: number; deleted: number; next: string }> {
  const [row] = await prisma.$queryRaw<{ examined: number; deleted: number; last: string | null }[]>(orphanCopiesSql(after, limit));
  return { examined: row.examined, deleted: row.deleted, next: row.examined < limit || row.last === null ? "" : row.last };
}

/** The statement of deleteOrphanCopies (lib/audit/query-plans.test.ts EXPLAINs it). */
export function orphanCopiesSql(after: string, limit: number): Prisma.Sql {
  // each execution looked up by its primary key (a LATERAL subquery with LIMIT is never flattened
  // into a join, which PostgreSQL would plan as a scan of all of executions), and the copies to
  // delete named in one array, which their primary key finds
  return Prisma.sql`
    WITH slice AS MATERIALIZED (
      SELECT execution_id FROM execution_argument_index WHERE execution_id > ${after} ORDER BY execution_id LIMIT ${limit}
    ), orphans AS MATERIALIZED (
      SELECT s.execution_id FROM slice s
      LEFT JOIN LATERAL (SELECT true AS found FROM executions e WHERE e.id = s.execution_id LIMIT 1) x ON true
      WHERE x.found IS NULL
    ), gone AS (
      DELETE FROM execution_argument_index WHERE execution_id = ANY ((SELECT array_agg(execution_id) FROM orphans)::text[])
      RETURNING 1
    )
    SELECT (SELECT count(*) FROM slice)::int AS examined, (SELECT count(*) FROM gone)::int AS deleted, (SELECT max(execution_id) FROM slice) AS last`;
}

import { Prisma, type PrismaClient } from "@/generated/prisma/client";
import { analyzeGaps, gapHistogram, type GapAnalysis } from "@/lib/audit/retry-gaps";

/**
 * Per-tool statistics of the audit log for the console: executions against suppressions over time,
 * outcomes, durations and the retry gaps behind the suggested fallback TTL.
 *
 * Everything is aggregated in SQL (date_bin, count … FILTER, percentile_cont) over the
 * (tool, started_at) and (tool, at) indexes, which carry the columns aggregated (INCLUDE): a window
 * costs index-only range scans proportional to that tool's rows in it, and returns ~48 rows, not
 * the rows themselves. PostgreSQL 14+ and PGlite both have date_bin.
 *
 * Next to the duplicates it suppressed, a tool's page counts the duplicates that got through under
 * fresh keys: the reconciler's fresh_key_duplicate anomalies of the window by status (open,
 * acknowledged as a genuine repeat, resolved as a confirmed duplicate), from the
 * (tool, type, detected_at) index of anomalies, which INCLUDEs status.
 */

export const STATS_WINDOWS = { "1h": 3_600_000, "24h": 86_400_000, "7d": 604_800_000 } as const;
export type StatsWindow = keyof typeof STATS_WINDOWS;
export const DEFAULT_WINDOW: StatsWindow = "24h";

export function isStatsWindow(value: unknown): value is StatsWindow {
  return typeof value === "string" && Object.hasOwn(STATS_WINDOWS, value);
}

/** Round bucket sizes; the one nearest (on a log scale) to window / TARGET_BUCKETS is used. */
const NICE_BUCKETS_MS = [60_000, 120_000, 300_000, 600_000, 900_000, 1_800_000, 3_600_000, 7_200_000, 10_800_000, 14_400_000, 21_600_000, 43_200_000, 86_400_000];
const TARGET_BUCKETS = 48;
/** Enough replays for a stable p99.9 without reading an unbounded number of rows. */
export const MAX_GAP_SAMPLES = 20_000;
export const SUPPRESSION_LOG_LIMIT = 50;

/** unknown: the key's earlier call ended without an outcome; fresh_key: an advisory key's identical call within the arguments window */
export const SUPPRESSION_KINDS = ["replay", "conflict", "stuck", "unknown", "mismatch", "fresh_key"] as const;
export type SuppressionKind = (typeof SUPPRESSION_KINDS)[number];
/** unknown: no outcome recorded (still running, or orphaned); released: an operator released its key instead */
export const OUTCOMES = ["succeeded", "failed", "final_error", "late_completion", "released", "unknown"] as const;
export type Outcome = (typeof OUTCOMES)[number];

export function bucketSizeMs(windowMs: number): number {
  const ideal = windowMs / TARGET_BUCKETS;
  let best = NICE_BUCKETS_MS[0];
  for (const size of NICE_BUCKETS_MS) {
    if (Math.abs(Math.log(size / ideal)) < Math.abs(Math.log(best / ideal))) best = size;
  }
  return best;
}

/**
 * Buckets aligned to the epoch (so a refresh does not shift them), from the bucket holding
 * `nowMs - windowMs` to the one holding `nowMs`: the range covers the whole window and reaches up
 * to one bucket further back.
 */
export function bucketRange(windowMs: number, nowMs: number): { bucketMs: number; fromMs: number; toMs: number; count: number } {
  const bucketMs = bucketSizeMs(windowMs);
  const fromMs = Math.floor((nowMs - windowMs) / bucketMs) * bucketMs;
  const toMs = Math.floor(nowMs / bucketMs) * bucketMs + bucketMs;
  return { bucketMs, fromMs, toMs, count: Math.round((toMs - fromMs) / bucketMs) };
}

export interface StatsBucket {
  startMs: number;
  executions: number;
  replay: number;
  conflict: number;
  stuck: number;
  unknown: number;
  mismatch: number;
  fresh_key: number;
  /** suppressions (of any kind) answered through a fallback key */
  fallback: number;
}

/**
 * Fresh-key duplicates of the window: identical calls under different keys that ran twice (the
 * reconciler's fresh_key_duplicate anomalies), next to those an advisory key's arguments window
 * suppressed.
 */
export interface FreshKeyCounts {
  /** flagged, not decided yet */
  open: number;
  /** an operator said the caller meant the action twice */
  genuineRepeats: number;
  /** an operator confirmed a duplicate that got through */
  confirmed: number;
  /** identical calls under fresh advisory keys answered as duplicates (suppression kind fresh_key) */
  suppressed: number;
}

export interface SuppressionLogEntry {
  id: string;
  at: Date;
  tool: string;
  scope: string;
  key: string;
  kind: string;
  fallback: boolean;
  gapMs: number | null;
  session: string | null;
  originalSession: string | null;
  caller: string | null;
}

export interface ToolStats {
  tool: string | null;
  windowMs: number;
  bucketMs: number;
  fromMs: number;
  toMs: number;
  buckets: StatsBucket[];
  totals: { executions: number; suppressions: number } & Record<SuppressionKind | "fallback", number>;
  outcomes: Record<Outcome, number>;
  durationMs: { p50: number | null; p95: number | null };
  gaps: GapAnalysis & { histogram: { upToMs: number; count: number }[]; truncated: boolean };
  suppressionLog: SuppressionLogEntry[];
  freshKeyDuplicates: FreshKeyCounts;
}

export interface ToolStatsQuery {
  /** null or absent: every tool */
  tool?: string | null;
  windowMs?: number;
  nowMs?: number;
}

// Audit times are `timestamp(3)` holding UTC; an ISO string cast to timestamp drops its "Z".
const ts = (ms: number) => Prisma.sql`${new Date(ms).toISOString()}::timestamp`;
const epochMs = (column: Prisma.Sql) => Prisma.sql`(extract(epoch from ${column}) * 1000)::float8`;

/** The statements behind one stats view, exposed so tests can EXPLAIN exactly what runs. */
export function toolStatsSql(query: ToolStatsQuery = {}) {
  const tool = query.tool ?? null;
  const windowMs = query.windowMs ?? STATS_WINDOWS[DEFAULT_WINDOW];
  const range = bucketRange(windowMs, query.nowMs ?? Date.now());
  const { bucketMs, fromMs, toMs } = range;

  const toolIs = tool === null ? Prisma.empty : Prisma.sql`tool = ${tool} AND`;
  const execWhere = Prisma.sql`WHERE ${toolIs} started_at >= ${ts(fromMs)} AND started_at < ${ts(toMs)}`;
  const suppWhere = Prisma.sql`WHERE ${toolIs} at >= ${ts(fromMs)} AND at < ${ts(toMs)}`;
  const anomalyWhere = Prisma.sql`WHERE ${toolIs} type = 'fresh_key_duplicate' AND detected_at >= ${ts(fromMs)} AND detected_at < ${ts(toMs)}`;
  const bin = (column: Prisma.Sql) => Prisma.sql`date_bin(${bucketMs}::int * interval '1 millisecond', ${column}, ${ts(fromMs)})`;

  return {
    tool,
    windowMs,
    ...range,
    sql: {
      executionBuckets: Prisma.sql`
        SELECT ${epochMs(Prisma.sql`b`)} AS start_ms, count(*)::int AS executions
        FROM (SELECT ${bin(Prisma.sql`started_at`)} AS b FROM executions ${execWhere}) e
        GROUP BY b`,
      suppressionBuckets: Prisma.sql`
        SELECT ${epochMs(Prisma.sql`b`)} AS start_ms,
          count(*) FILTER (WHERE kind = 'replay')::int AS replay,
          count(*) FILTER (WHERE kind = 'conflict')::int AS conflict,
          count(*) FILTER (WHERE kind = 'stuck')::int AS stuck,
          count(*) FILTER (WHERE kind = 'unknown')::int AS unknown,
          count(*) FILTER (WHERE kind = 'mismatch')::int AS mismatch,
          count(*) FILTER (WHERE kind = 'fresh_key')::int AS fresh_key,
          count(*) FILTER (WHERE fallback)::int AS fallback
        FROM (SELECT ${bin(Prisma.sql`at`)} AS b, kind, fallback FROM suppressions ${suppWhere}) s
        GROUP BY b`,
      outcomes: Prisma.sql`
        SELECT coalesce(outcome, 'unknown') AS outcome, count(*)::int AS n FROM executions ${execWhere} GROUP BY 1`,
      durations: Prisma.sql`
        SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms)::float8 AS p50,
               percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms)::float8 AS p95
        FROM executions ${execWhere} AND duration_ms IS NOT NULL`,
      gaps: Prisma.sql`
        SELECT gap_ms FROM suppressions ${suppWhere} AND kind = 'replay' AND gap_ms IS NOT NULL
        ORDER BY at DESC LIMIT ${MAX_GAP_SAMPLES + 1}::int`,
      suppressionLog: Prisma.sql`
        SELECT id, at, tool, scope, key, kind, fallback, gap_ms AS "gapMs", session, original_session AS "originalSession", caller
        FROM suppressions ${suppWhere}
        ORDER BY at DESC, id DESC LIMIT ${SUPPRESSION_LOG_LIMIT}::int`,
      freshKeyDuplicates: Prisma.sql`
        SELECT status, count(*)::int AS n FROM anomalies ${anomalyWhere} GROUP BY status`,
    },
  };
}

export async function getToolStats(prisma: PrismaClient, query: ToolStatsQuery = {}): Promise<ToolStats> {
  const { tool, windowMs, bucketMs, fromMs, toMs, count, sql } = toolStatsSql(query);
  const [execBuckets, suppBuckets, outcomeRows, durationRows, gapRows, log, freshKeyRows] = await Promise.all([
    prisma.$queryRaw<{ start_ms: number; executions: number }[]>(sql.executionBuckets),
    prisma.$queryRaw<({ start_ms: number; fallback: number } & Record<SuppressionKind, number>)[]>(sql.suppressionBuckets),
    prisma.$queryRaw<{ outcome: string; n: number }[]>(sql.outcomes),
    prisma.$queryRaw<{ p50: number | null; p95: number | null }[]>(sql.durations),
    prisma.$queryRaw<{ gap_ms: number }[]>(sql.gaps),
    prisma.$queryRaw<SuppressionLogEntry[]>(sql.suppressionLog),
    prisma.$queryRaw<{ status: string; n: number }[]>(sql.freshKeyDuplicates),
  ]);

  const buckets: StatsBucket[] = Array.from({ length: count }, (_, i) => ({
    startMs: fromMs + i * bucketMs,
    executions: 0,
    replay: 0,
    conflict: 0,
    stuck: 0,
    unknown: 0,
    mismatch: 0,
    fresh_key: 0,
    fallback: 0,
  }));
  const at = (startMs: number) => buckets[Math.round((Number(startMs) - fromMs) / bucketMs)];
  for (const row of execBuckets) {
    const b = at(row.start_ms);
    if (b) b.executions = row.executions;
  }
  for (const row of suppBuckets) {
    const b = at(row.start_ms);
    if (!b) continue;
    for (const kind of SUPPRESSION_KINDS) b[kind] = row[kind];
    b.fallback = row.fallback;
  }

  const totals = { executions: 0, suppressions: 0, replay: 0, conflict: 0, stuck: 0, unknown: 0, mismatch: 0, fresh_key: 0, fallback: 0 };
  for (const b of buckets) {
    totals.executions += b.executions;
    for (const kind of SUPPRESSION_KINDS) {
      totals[kind] += b[kind];
      totals.suppressions += b[kind];
    }
    totals.fallback += b.fallback;
  }

  const outcomes = Object.fromEntries(OUTCOMES.map((o) => [o, 0])) as Record<Outcome, number>;
  for (const row of outcomeRows) {
    // an outcome this version does not know is still an outcome nobody can vouch for
    const key: Outcome = (OUTCOMES as readonly string[]).includes(row.outcome) ? (row.outcome as Outcome) : "unknown";
    outcomes[key] += row.n;
  }

  const byStatus = (status: string) => freshKeyRows.find((r) => r.status === status)?.n ?? 0;
  const freshKeyDuplicates: FreshKeyCounts = {
    open: byStatus("open"),
    genuineRepeats: byStatus("acknowledged"),
    confirmed: byStatus("resolved"),
    suppressed: totals.fresh_key,
  };

  const truncated = gapRows.length > MAX_GAP_SAMPLES;
  const gaps = gapRows.slice(0, MAX_GAP_SAMPLES).map((r) => r.gap_ms);

  return {
    tool,
    windowMs,
    bucketMs,
    fromMs,
    toMs,
    buckets,
    totals,
    outcomes,
    durationMs: { p50: durationRows[0]?.p50 ?? null, p95: durationRows[0]?.p95 ?? null },
    gaps: { ...analyzeGaps(gaps), histogram: gapHistogram(gaps), truncated },
    suppressionLog: log,
    freshKeyDuplicates,
  };
}

export interface ToolTotals {
  executions: number;
  suppressions: number;
  /** suppressions / (executions + suppressions): the share of calls that did not run; null without calls */
  suppressionRate: number | null;
}

/** The two grouped counts behind getToolTotals, exposed for EXPLAIN in tests. */
export function toolTotalsSql(options: { windowMs?: number; nowMs?: number } = {}) {
  const nowMs = options.nowMs ?? Date.now();
  const since = ts(nowMs - (options.windowMs ?? STATS_WINDOWS[DEFAULT_WINDOW]));
  const until = ts(nowMs);
  return {
    executions: Prisma.sql`SELECT tool, count(*)::int AS n FROM executions WHERE started_at >= ${since} AND started_at <= ${until} GROUP BY tool`,
    suppressions: Prisma.sql`SELECT tool, count(*)::int AS n FROM suppressions WHERE at >= ${since} AND at <= ${until} GROUP BY tool`,
  };
}

/** Executions and suppressions per tool over the last `windowMs`, for the tool list: two grouped counts. */
export async function getToolTotals(prisma: PrismaClient, options: { windowMs?: number; nowMs?: number } = {}): Promise<Map<string, ToolTotals>> {
  const sql = toolTotalsSql(options);
  const [executions, suppressions] = await Promise.all([
    prisma.$queryRaw<{ tool: string; n: number }[]>(sql.executions),
    prisma.$queryRaw<{ tool: string; n: number }[]>(sql.suppressions),
  ]);
  const out = new Map<string, ToolTotals>();
  const entry = (tool: string) => {
    let e = out.get(tool);
    if (!e) out.set(tool, (e = { executions: 0, suppressions: 0, suppressionRate: null }));
    return e;
  };
  for (const row of executions) entry(row.tool).executions = row.n;
  for (const row of suppressions) entry(row.tool).suppressions = row.n;
  for (const e of out.values()) {
    const calls = e.executions + e.suppressions;
    e.suppressionRate = calls === 0 ? null : e.suppressions / calls;
  }
  return out;
}

import { Prisma, type PrismaClient } from "@/generated/prisma/client";
import { analyzeGapRuns, analyzeGaps, GAP_BUCKETS_MS, gapHistogram, type GapAnalysis } from "@/lib/audit/retry-gaps";

/**
 * Per-tool statistics of the audit log for the console: executions against suppressions over time,
 * outcomes, durations and the retry gaps behind the suggested fallback TTL.
 *
 * Windows whose buckets are whole half hours (24 h, 7 d, and the tool list's 24 h) read the
 * rollups of migration 20261201060000_tool_stats_rollups: per tool and half hour, executions with
 * an outcome by outcome, suppressions by kind, and histograms of durations and replay gaps, kept by
 * triggers in the same transaction as the audit rows. A page sums at most 49 or 337 half hours of
 * one tool (a few rows each), whatever the number of audit rows. Counts are exact: the executions
 * still without an outcome, which the rollups leave out, are counted from the log through an index
 * that holds only them. Duration percentiles and the retry-gap analysis come from the stored
 * log-scale histograms (HISTOGRAM_ERROR); the console's gap histogram is stored bucket for bucket
 * and exact.
 *
 * Shorter windows (1 h, one-minute buckets) read the log itself, as aggregates over the
 * (tool, started_at) and (tool, at) indexes, which carry the columns aggregated (INCLUDE): an hour
 * of one tool's rows, with exact percentiles over the newest MAX_GAP_SAMPLES replays.
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
  /** rollups: summed from tool_stats_half_hours (percentiles within HISTOGRAM_ERROR); log: read from the audit rows */
  source: "rollups" | "log";
  buckets: StatsBucket[];
  totals: { executions: number; suppressions: number } & Record<SuppressionKind | "fallback", number>;
  outcomes: Record<Outcome, number>;
  /** of the executions with an outcome */
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
  /** "log": read the audit rows even where the rollups serve the window (the reference the rollups are tested against) */
  source?: "log";
}

// Audit times are `timestamp(3)` holding UTC; an ISO string cast to timestamp drops its "Z".
const ts = (ms: number) => Prisma.sql`${new Date(ms).toISOString()}::timestamp`;
const epochMs = (column: Prisma.Sql) => Prisma.sql`(extract(epoch from ${column}) * 1000)::float8`;

/** The rollups' grain (tool_stats_half_hours): a window whose bucket range is made of whole half hours reads them. */
export const ROLLUP_MS = 1_800_000;
/** Histogram buckets per doubling: bucket k ≥ 1 holds [2^((k−1)/16), 2^(k/16)) ms, bucket 0 holds 0 ms. */
export const HISTOGRAM_STEPS = 16;
/**
 * The largest relative error of a duration percentile or a retry-gap figure read from the rollups'
 * histograms: each value is taken as its bucket's geometric middle (or the one whole millisecond
 * the bucket holds), 2^(1/32) − 1 ≈ 2.2 %. A percentile between two ranks interpolates two such
 * values, so it keeps the bound.
 */
export const HISTOGRAM_ERROR = 2 ** (1 / (2 * HISTOGRAM_STEPS)) - 1;

/** The value a histogram bucket stands for (see HISTOGRAM_ERROR). */
export function histogramValue(bucket: number): number {
  if (bucket <= 0) return 0;
  const lo = 2 ** ((bucket - 1) / HISTOGRAM_STEPS);
  const hi = 2 ** (bucket / HISTOGRAM_STEPS);
  // durations and gaps are whole milliseconds: [lo, hi) holds ceil(lo) … ceil(hi) − 1
  const first = Math.ceil(lo);
  const last = Math.ceil(hi) - 1;
  if (last <= first) return first;
  return Math.min(last, Math.max(first, Math.sqrt(lo * hi)));
}

/** percentile_cont over a histogram ([bucket, count] in any order): the value at rank p·(n − 1), interpolated. */
export function histogramPercentile(histogram: readonly (readonly [number, number])[], p: number): number | null {
  const runs = histogram.filter(([, n]) => n > 0).sort((a, b) => a[0] - b[0]);
  const n = runs.reduce((sum, [, c]) => sum + c, 0);
  if (n === 0) return null;
  const rank = p * (n - 1);
  const at = (r: number) => {
    let seen = 0;
    for (const [bucket, count] of runs) {
      seen += count;
      if (r < seen) return histogramValue(bucket);
    }
    return histogramValue(runs[runs.length - 1][0]);
  };
  const lower = at(Math.floor(rank));
  return lower + (rank - Math.floor(rank)) * (at(Math.ceil(rank)) - lower);
}

/** Adds a histogram read as "lower subscript:count,count,…" (NULL: none) to `sums` (bucket → count). */
function addHistogramText(sums: Map<number, number>, text: string | null): void {
  if (text === null) return;
  const colon = text.indexOf(":");
  let bucket = Number(text.slice(0, colon));
  let start = colon + 1;
  for (let i = start; i <= text.length; i++) {
    if (i < text.length && text.charCodeAt(i) !== 44 /* , */) continue;
    const n = Number(text.slice(start, i));
    if (n !== 0) sums.set(bucket, (sums.get(bucket) ?? 0) + n);
    bucket++;
    start = i + 1;
  }
}

/** The statements behind one stats view, exposed so tests can EXPLAIN exactly what runs. */
export function toolStatsSql(query: ToolStatsQuery = {}) {
  const tool = query.tool ?? null;
  const windowMs = query.windowMs ?? STATS_WINDOWS[DEFAULT_WINDOW];
  const range = bucketRange(windowMs, query.nowMs ?? Date.now());
  const { bucketMs, fromMs, toMs } = range;

  const toolIs = tool === null ? Prisma.empty : Prisma.sql`tool = ${tool} AND`;
  const execWhere = Prisma.sql`WHERE ${toolIs} started_at >= ${ts(fromMs)} AND started_at < ${ts(toMs)}`;
  const suppWhere = Prisma.sql`WHERE ${toolIs} at >= ${ts(fromMs)} AND at < ${ts(toMs)}`;
  const rollupWhere = Prisma.sql`WHERE ${toolIs} half_hour >= ${ts(fromMs)} AND half_hour < ${ts(toMs)}`;
  const anomalyWhere = Prisma.sql`WHERE ${toolIs} type = 'fresh_key_duplicate' AND detected_at >= ${ts(fromMs)} AND detected_at < ${ts(toMs)}`;
  const bin = (column: Prisma.Sql) => Prisma.sql`date_bin(${bucketMs}::int * interval '1 millisecond', ${column}, ${ts(fromMs)})`;

  const common = {
    suppressionLog: Prisma.sql`
      SELECT id, at, tool, scope, key, kind, fallback, gap_ms AS "gapMs", session, original_session AS "originalSession", caller
      FROM suppressions ${suppWhere}
      ORDER BY at DESC, id DESC LIMIT ${SUPPRESSION_LOG_LIMIT}::int`,
    freshKeyDuplicates: Prisma.sql`
      SELECT status, count(*)::int AS n FROM anomalies ${anomalyWhere} GROUP BY status`,
  };

  if (bucketMs % ROLLUP_MS === 0 && query.source !== "log") {
    return {
      tool,
      windowMs,
      ...range,
      source: "rollups" as const,
      sql: {
        ...common,
        rollupBuckets: Prisma.sql`
          SELECT ${epochMs(Prisma.sql`b`)} AS start_ms,
            sum(executions)::int AS executions, sum(succeeded)::int AS succeeded, sum(failed)::int AS failed,
            sum(final_error)::int AS final_error, sum(late_completion)::int AS late_completion, sum(released)::int AS released,
            sum(replay)::int AS replay, sum(conflict)::int AS conflict, sum(stuck)::int AS stuck, sum(unknown)::int AS unknown,
            sum(mismatch)::int AS mismatch, sum(fresh_key)::int AS fresh_key, sum(fallback)::int AS fallback
          FROM (SELECT ${bin(Prisma.sql`half_hour`)} AS b, * FROM tool_stats_half_hours ${rollupWhere}) r
          GROUP BY b`,
        // executions without an outcome yet are not in the rollups: the partial index holds only them
        openExecutions: Prisma.sql`
          SELECT ${epochMs(Prisma.sql`b`)} AS start_ms, count(*)::int AS n
          FROM (SELECT ${bin(Prisma.sql`started_at`)} AS b FROM executions ${execWhere} AND outcome IS NULL) e
          GROUP BY b`,
        // the half hours' histograms as text ("lower subscript:counts"), summed here: cheaper than unnesting them in SQL
        histograms: Prisma.sql`
          SELECT array_lower(duration_hist, 1) || ':' || array_to_string(duration_hist, ',', '0') AS durations,
            array_lower(gap_hist, 1) || ':' || array_to_string(gap_hist, ',', '0') AS gaps,
            array_lower(gap_display, 1) || ':' || array_to_string(gap_display, ',', '0') AS display
          FROM tool_stats_half_hours
          ${rollupWhere} AND (duration_hist IS NOT NULL OR gap_hist IS NOT NULL OR gap_display IS NOT NULL)`,
      },
    };
  }

  return {
    tool,
    windowMs,
    ...range,
    source: "log" as const,
    sql: {
      ...common,
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
    },
  };
}

type SuppressionCounts = { fallback: number } & Record<SuppressionKind, number>;
type RollupBucketRow = { start_ms: number; executions: number } & Record<Exclude<Outcome, "unknown">, number> & SuppressionCounts;

export async function getToolStats(prisma: PrismaClient, query: ToolStatsQuery = {}): Promise<ToolStats> {
  const q = toolStatsSql(query);
  const { tool, windowMs, bucketMs, fromMs, count } = q;

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
  const outcomes = Object.fromEntries(OUTCOMES.map((o) => [o, 0])) as Record<Outcome, number>;
  const countOutcome = (outcome: string, n: number) => {
    // an outcome this version does not know is still an outcome nobody can vouch for
    const key: Outcome = (OUTCOMES as readonly string[]).includes(outcome) ? (outcome as Outcome) : "unknown";
    outcomes[key] += n;
  };
  const addSuppressions = (b: StatsBucket | undefined, row: SuppressionCounts) => {
    if (!b) return;
    for (const kind of SUPPRESSION_KINDS) b[kind] += row[kind];
    b.fallback += row.fallback;
  };

  let durationMs: ToolStats["durationMs"];
  let gaps: ToolStats["gaps"];
  let log: SuppressionLogEntry[];
  let freshKeyRows: { status: string; n: number }[];

  if (q.source === "rollups") {
    const { sql } = q;
    const [rollupRows, openRows, histogramRows, logRows, freshRows] = await Promise.all([
      prisma.$queryRaw<RollupBucketRow[]>(sql.rollupBuckets),
      prisma.$queryRaw<{ start_ms: number; n: number }[]>(sql.openExecutions),
      prisma.$queryRaw<{ durations: string | null; gaps: string | null; display: string | null }[]>(sql.histograms),
      prisma.$queryRaw<SuppressionLogEntry[]>(sql.suppressionLog),
      prisma.$queryRaw<{ status: string; n: number }[]>(sql.freshKeyDuplicates),
    ]);
    for (const row of rollupRows) {
      const b = at(row.start_ms);
      if (b) b.executions += row.executions;
      addSuppressions(b, row);
      let known = 0;
      for (const o of OUTCOMES) {
        if (o === "unknown") continue;
        countOutcome(o, row[o]);
        known += row[o];
      }
      // stored outcomes other than these (an execution a retry superseded, …)
      countOutcome("unknown", row.executions - known);
    }
    for (const row of openRows) {
      const b = at(row.start_ms);
      if (b) b.executions += row.n;
      countOutcome("unknown", row.n);
    }
    const histogram = (name: "durations" | "gaps" | "display") => {
      const sums = new Map<number, number>();
      for (const row of histogramRows) addHistogramText(sums, row[name]);
      return [...sums];
    };
    const durations = histogram("durations");
    durationMs = { p50: histogramPercentile(durations, 0.5), p95: histogramPercentile(durations, 0.95) };
    const runs = histogram("gaps")
      .filter(([, n]) => n > 0)
      .sort((a, b) => a[0] - b[0])
      .map(([bucket, n]) => ({ gapMs: histogramValue(bucket), count: n }));
    const display = new Map(histogram("display"));
    gaps = {
      ...analyzeGapRuns(runs),
      histogram: GAP_BUCKETS_MS.map((upToMs, i) => ({ upToMs, count: display.get(i + 1) ?? 0 })),
      truncated: false,
    };
    log = logRows;
    freshKeyRows = freshRows;
  } else {
    const { sql } = q;
    const [execBuckets, suppBuckets, outcomeRows, durationRows, gapRows, logRows, freshRows] = await Promise.all([
      prisma.$queryRaw<{ start_ms: number; executions: number }[]>(sql.executionBuckets),
      prisma.$queryRaw<({ start_ms: number } & SuppressionCounts)[]>(sql.suppressionBuckets),
      prisma.$queryRaw<{ outcome: string; n: number }[]>(sql.outcomes),
      prisma.$queryRaw<{ p50: number | null; p95: number | null }[]>(sql.durations),
      prisma.$queryRaw<{ gap_ms: number }[]>(sql.gaps),
      prisma.$queryRaw<SuppressionLogEntry[]>(sql.suppressionLog),
      prisma.$queryRaw<{ status: string; n: number }[]>(sql.freshKeyDuplicates),
    ]);
    for (const row of execBuckets) {
      const b = at(row.start_ms);
      if (b) b.executions += row.executions;
    }
    for (const row of suppBuckets) addSuppressions(at(row.start_ms), row);
    for (const row of outcomeRows) countOutcome(row.outcome, row.n);
    durationMs = { p50: durationRows[0]?.p50 ?? null, p95: durationRows[0]?.p95 ?? null };
    const truncated = gapRows.length > MAX_GAP_SAMPLES;
    const samples = gapRows.slice(0, MAX_GAP_SAMPLES).map((r) => r.gap_ms);
    gaps = { ...analyzeGaps(samples), histogram: gapHistogram(samples), truncated };
    log = logRows;
    freshKeyRows = freshRows;
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

  const byStatus = (status: string) => freshKeyRows.find((r) => r.status === status)?.n ?? 0;
  const freshKeyDuplicates: FreshKeyCounts = {
    open: byStatus("open"),
    genuineRepeats: byStatus("acknowledged"),
    confirmed: byStatus("resolved"),
    suppressed: totals.fresh_key,
  };

  return {
    tool,
    windowMs,
    bucketMs,
    fromMs,
    toMs: q.toMs,
    source: q.source,
    buckets,
    totals,
    outcomes,
    durationMs,
    gaps,
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

/**
 * The grouped counts behind getToolTotals, exposed for EXPLAIN in tests: the range of the tool
 * page's view of the same window (for 24 h: 49 half hours up to the end of the current one), so
 * the list and the page show the same numbers.
 */
export function toolTotalsSql(options: Omit<ToolStatsQuery, "tool"> = {}) {
  const { fromMs, toMs } = bucketRange(options.windowMs ?? STATS_WINDOWS[DEFAULT_WINDOW], options.nowMs ?? Date.now());
  if (fromMs % ROLLUP_MS === 0 && toMs % ROLLUP_MS === 0 && options.source !== "log") {
    return {
      fromMs,
      toMs,
      source: "rollups" as const,
      sql: {
        rollups: Prisma.sql`
          SELECT tool, sum(executions)::int AS executions,
            sum(replay + conflict + stuck + unknown + mismatch + fresh_key)::int AS suppressions
          FROM tool_stats_half_hours WHERE half_hour >= ${ts(fromMs)} AND half_hour < ${ts(toMs)} GROUP BY tool`,
        openExecutions: Prisma.sql`
          SELECT tool, count(*)::int AS n FROM executions
          WHERE outcome IS NULL AND started_at >= ${ts(fromMs)} AND started_at < ${ts(toMs)} GROUP BY tool`,
      },
    };
  }
  return {
    fromMs,
    toMs,
    source: "log" as const,
    sql: {
      executions: Prisma.sql`SELECT tool, count(*)::int AS n FROM executions WHERE started_at >= ${ts(fromMs)} AND started_at < ${ts(toMs)} GROUP BY tool`,
      suppressions: Prisma.sql`
        SELECT tool, count(*)::int AS n FROM suppressions
        WHERE at >= ${ts(fromMs)} AND at < ${ts(toMs)} AND kind IN (${Prisma.join([...SUPPRESSION_KINDS])}) GROUP BY tool`,
    },
  };
}

/** Executions and suppressions per tool over the last `windowMs` (as the tool page counts it), for the tool list. */
export async function getToolTotals(prisma: PrismaClient, options: Omit<ToolStatsQuery, "tool"> = {}): Promise<Map<string, ToolTotals>> {
  const q = toolTotalsSql(options);
  const out = new Map<string, ToolTotals>();
  const entry = (tool: string) => {
    let e = out.get(tool);
    if (!e) out.set(tool, (e = { executions: 0, suppressions: 0, suppressionRate: null }));
    return e;
  };
  if (q.source === "rollups") {
    const [rollups, open] = await Promise.all([
      prisma.$queryRaw<{ tool: string; executions: number; suppressions: number }[]>(q.sql.rollups),
      prisma.$queryRaw<{ tool: string; n: number }[]>(q.sql.openExecutions),
    ]);
    for (const row of rollups) {
      const e = entry(row.tool);
      e.executions += row.executions;
      e.suppressions += row.suppressions;
    }
    for (const row of open) entry(row.tool).executions += row.n;
  } else {
    const [executions, suppressions] = await Promise.all([
      prisma.$queryRaw<{ tool: string; n: number }[]>(q.sql.executions),
      prisma.$queryRaw<{ tool: string; n: number }[]>(q.sql.suppressions),
    ]);
    for (const row of executions) entry(row.tool).executions += row.n;
    for (const row of suppressions) entry(row.tool).suppressions += row.n;
  }
  for (const [tool, e] of out) {
    // half hours whose rows were all removed again
    if (e.executions === 0 && e.suppressions === 0) {
      out.delete(tool);
      continue;
    }
    const calls = e.executions + e.suppressions;
    e.suppressionRate = calls === 0 ? null : e.suppressions / calls;
  }
  return out;
}

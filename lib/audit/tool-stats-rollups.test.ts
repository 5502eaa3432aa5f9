import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "@/lib/db/database";
import { createTestPglite, createTestPostgres } from "@/test/support/databases";
import { purgeAuditRows } from "./purge-audit";
import { GAP_BUCKETS_MS } from "./retry-gaps";
import { getToolStats, getToolTotals, HISTOGRAM_ERROR, histogramValue, STATS_WINDOWS, type ToolStats } from "./tool-stats";

/**
 * The rollups (tool_stats_half_hours, kept by triggers) against the audit rows themselves: random
 * executions and suppressions written by several kinds of statement (bulk inserts, outcome
 * updates, an operator's release and the late completion after it, deletions, retention), then
 * every tool's page over 24 h and 7 d read both ways. Counts must be equal; percentiles within
 * HISTOGRAM_ERROR.
 */

const NOW = Date.UTC(2026, 2, 10, 12, 10, 0);
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const TOOLS = ["payments.charge", "email.send", "tickets.create"];
const OUTCOMES = ["succeeded", "succeeded", "succeeded", "failed", "final_error", "late_completion", "released", "retried", "unknown"];
const KINDS = ["replay", "replay", "replay", "conflict", "stuck", "unknown", "mismatch", "fresh_key", "other"];

/** A small deterministic generator (mulberry32), so a failure can be replayed. */
function random(seed: number) {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

const iso = (ms: number) => new Date(ms).toISOString().replace("Z", "");

async function seed(db: Database, seedValue: number): Promise<void> {
  const rnd = random(seedValue);
  const pick = <T,>(xs: readonly T[]) => xs[Math.floor(rnd() * xs.length)];
  // log-uniform durations, 0 ms to 20 min
  const duration = () => (rnd() < 0.05 ? 0 : Math.floor(Math.exp(rnd() * Math.log(1_200_000))));
  const execs: unknown[][] = [];
  for (let i = 0; i < 1_500; i++) {
    const open = rnd() < 0.1;
    const outcome = open ? null : pick(OUTCOMES);
    // a row as the audit writer's batches carry it: its columns' values in order, times in epoch ms
    const tool = pick(TOOLS);
    const startedMs = NOW - Math.floor(rnd() * 8 * DAY) + HOUR;
    execs.push([`e-${i}`, "s", `k-${i}`, tool, startedMs, outcome, outcome === null || rnd() < 0.1 ? null : duration()]);
  }
  const supps: unknown[][] = [];
  for (let i = 0; i < 1_500; i++) {
    // retries within seconds, genuine repeats hours later: two clusters far apart
    const gap = rnd() < 0.05 ? null : rnd() < 0.9 ? Math.floor(50 + rnd() * 5_000) : Math.floor(HOUR + rnd() * 3 * HOUR);
    const tool = pick(TOOLS);
    const kind = pick(KINDS);
    const fallback = rnd() < 0.2;
    supps.push([`s-${i}`, "s", `k-${i}`, tool, kind, fallback, gap, NOW - Math.floor(rnd() * 8 * DAY) + HOUR]);
  }
  // statements of the audit writer's form (lib/audit/audit-writer.ts, WRITE_BATCH): a JSON array of rows
  const utc = (value: string) => `to_timestamp((${value})::float8 / 1000) AT TIME ZONE 'UTC'`;
  const insertExecutions = `
    INSERT INTO executions (id, scope, key, tool, fingerprint, token, started_at, lease_until, outcome, duration_ms)
    SELECT r->>0, r->>1, r->>2, r->>3, 'f', 1, ${utc("r->>4")}, ${utc("r->>4")}, r->>5, (r->>6)::int
    FROM jsonb_array_elements($1::jsonb) AS r`;
  const insertSuppressions = `
    INSERT INTO suppressions (id, scope, key, tool, kind, fallback, gap_ms, at)
    SELECT r->>0, r->>1, r->>2, r->>3, r->>4, (r->>5)::boolean, (r->>6)::int, ${utc("r->>7")}
    FROM jsonb_array_elements($1::jsonb) AS r`;
  // in statements of several sizes, as the audit writer's batches come
  for (let i = 0; i < execs.length; ) {
    const n = 1 + Math.floor(rnd() * 400);
    await db.execute(insertExecutions, [JSON.stringify(execs.slice(i, i + n))]);
    i += n;
  }
  for (let i = 0; i < supps.length; ) {
    const n = 1 + Math.floor(rnd() * 400);
    await db.execute(insertSuppressions, [JSON.stringify(supps.slice(i, i + n))]);
    i += n;
  }
  // statements that touch open executions only, which the rollups leave out and their trigger returns
  // from at once: intents (alone, and several in one statement), a heartbeat's lease extension, an
  // open execution deleted; some of these executions get their outcome below
  const intents = Array.from({ length: 21 }, (_, i) => [`e-open-${i}`, "s", `k-open-${i}`, pick(TOOLS), NOW - i * HOUR, null, null]);
  await db.execute(insertExecutions, [JSON.stringify(intents.slice(0, 1))]);
  await db.execute(insertExecutions, [JSON.stringify(intents.slice(1))]);
  await db.execute(`UPDATE executions SET lease_until = lease_until + interval '1 minute' WHERE outcome IS NULL`, []);
  await db.execute(`DELETE FROM executions WHERE id = 'e-open-3'`, []);
  // outcomes arrive for half of the open executions (the audit writer's update)
  await db.execute(
    `UPDATE executions SET outcome = CASE WHEN length(id) % 2 = 0 THEN 'succeeded' ELSE 'failed' END, duration_ms = (hashtext(id) & 65535)
     WHERE outcome IS NULL AND hashtext(id) % 2 = 0`,
    [],
  );
  // an operator releases some; a late result turns a few of those into late completions
  await db.execute(`UPDATE executions SET outcome = 'released', duration_ms = NULL WHERE outcome = 'succeeded' AND hashtext(id) % 7 = 0`, []);
  await db.execute(`UPDATE executions SET outcome = 'late_completion', duration_ms = 42 WHERE outcome = 'released' AND hashtext(id) % 3 = 0`, []);
  // updates that change nothing counted, and ones that move rows between half hours and tools
  await db.execute(`UPDATE executions SET error = 'noted' WHERE hashtext(id) % 5 = 0`, []);
  await db.execute(`UPDATE suppressions SET at = at + interval '17 minutes', tool = 'email.send' WHERE hashtext(id) % 11 = 0`, []);
  await db.execute(`DELETE FROM suppressions WHERE hashtext(id) % 13 = 0`, []);
  await db.execute(`DELETE FROM executions WHERE hashtext(id) % 17 = 0`, []);
}

function expectSame(rollups: ToolStats, log: ToolStats): void {
  expect(rollups.source).toBe("rollups");
  expect(log.source).toBe("log");
  expect(rollups.buckets).toEqual(log.buckets);
  expect(rollups.totals).toEqual(log.totals);
  expect(rollups.outcomes).toEqual(log.outcomes);
  expect(rollups.freshKeyDuplicates).toEqual(log.freshKeyDuplicates);
  expect(rollups.suppressionLog).toEqual(log.suppressionLog);
  expect(rollups.gaps.histogram).toEqual(log.gaps.histogram);
  expect(rollups.gaps.samples).toBe(log.gaps.samples);
  expect(rollups.gaps.repeats).toBe(log.gaps.repeats);
  const close = (a: number | null, b: number | null, what: string) => {
    expect(a === null, what).toBe(b === null);
    if (a !== null && b !== null) expect(Math.abs(a - b), `${what}: ${a} vs ${b}`).toBeLessThanOrEqual(HISTOGRAM_ERROR * b + 1e-9);
  };
  close(rollups.durationMs.p50, log.durationMs.p50, "duration p50");
  close(rollups.durationMs.p95, log.durationMs.p95, "duration p95");
  close(rollups.gaps.p50Ms, log.gaps.p50Ms, "gap p50");
  close(rollups.gaps.p99Ms, log.gaps.p99Ms, "gap p99");
  close(rollups.gaps.p999Ms, log.gaps.p999Ms, "gap p99.9");
  close(rollups.gaps.retryClusterMaxMs, log.gaps.retryClusterMaxMs, "retry cluster max");
  close(rollups.gaps.firstRepeatGapMs, log.gaps.firstRepeatGapMs, "first repeat");
}

async function compareEverything(db: Database): Promise<number> {
  let compared = 0;
  for (const window of ["24h", "7d"] as const) {
    for (const tool of [...TOOLS, null]) {
      const query = { tool, windowMs: STATS_WINDOWS[window], nowMs: NOW };
      const [rollups, log] = await Promise.all([getToolStats(db.prisma, query), getToolStats(db.prisma, { ...query, source: "log" })]);
      expectSame(rollups, log);
      compared += rollups.totals.executions + rollups.totals.suppressions;
    }
    const [totals, logTotals] = await Promise.all([
      getToolTotals(db.prisma, { windowMs: STATS_WINDOWS[window], nowMs: NOW }),
      getToolTotals(db.prisma, { windowMs: STATS_WINDOWS[window], nowMs: NOW, source: "log" }),
    ]);
    expect(totals.size).toBeGreaterThan(0);
    expect(totals).toEqual(logTotals);
  }
  return compared;
}

describe.each([
  ["PostgreSQL", () => createTestPostgres("tool_stats_rollups")],
  ["PGlite", () => createTestPglite()],
] as const)("tool-stats rollups on %s", (_name, open) => {
  let t: { db: Database; drop: () => Promise<void> };
  beforeAll(async () => {
    t = await open();
    await seed(t.db, 20261201);
  }, 120_000);
  afterAll(async () => {
    await t?.drop();
  });

  it("equal the audit rows' own figures after inserts, outcome updates, releases, moves and deletions", async () => {
    const compared = await compareEverything(t.db);
    expect(compared).toBeGreaterThan(1_000);
  });

  it("stay equal through retention, which folds the purged half hours away", async () => {
    const purged = await purgeAuditRows(t.db.prisma, new Date(NOW - 4 * DAY - 7 * 60_000), 100);
    expect(purged.executions + purged.suppressions).toBeGreaterThan(100);
    expect(purged.rollupRows).toBeGreaterThan(0);
    // before the cutoff's half hour nothing counted is left (open executions are not in the rollups): no rollup rows either
    const old = await t.db.prisma.$queryRaw<{ source: number; n: number }[]>`
      SELECT source, count(*)::int AS n FROM tool_stats_half_hours WHERE half_hour < ${iso(NOW - 4 * DAY - HOUR)}::timestamp GROUP BY source`;
    expect(old).toEqual([]);
    const kept = await t.db.prisma.$queryRaw<{ n: number }[]>`
      SELECT count(*)::int AS n FROM executions WHERE started_at < ${iso(NOW - 4 * DAY - HOUR)}::timestamp`;
    expect(kept[0].n).toBeGreaterThan(0); // the open ones
    await compareEverything(t.db);
  });

  it("count a TRUNCATE of either table", async () => {
    await t.db.execute("TRUNCATE suppressions", []);
    const stats = await getToolStats(t.db.prisma, { windowMs: STATS_WINDOWS["7d"], nowMs: NOW });
    expect(stats.totals.suppressions).toBe(0);
    expect(stats.totals.executions).toBeGreaterThan(0);
    await compareEverything(t.db);
  });
});

describe("histogram buckets", () => {
  let t: Awaited<ReturnType<typeof createTestPostgres>>;
  beforeAll(async () => {
    t = await createTestPostgres("tool_stats_buckets");
  });
  afterAll(async () => {
    await t?.drop();
  });

  it("stand for every whole millisecond within HISTOGRAM_ERROR", async () => {
    // every value to 20 000, then a sparser sweep to 2^31 − 1
    const rows = await t.db.prisma.$queryRaw<{ v: number; bucket: number }[]>`
      SELECT v, tool_stats_log_bucket(v) AS bucket
      FROM (SELECT generate_series(0, 20000) AS v UNION ALL SELECT (1.0007 ^ i)::int FROM generate_series(14000, 30600) AS i) s`;
    let worst = 0;
    for (const { v, bucket } of rows) {
      const value = histogramValue(bucket);
      if (v === 0) expect(value).toBe(0);
      else worst = Math.max(worst, Math.abs(value - v) / v);
    }
    expect(worst).toBeLessThanOrEqual(HISTOGRAM_ERROR);
    expect(worst).toBeGreaterThan(HISTOGRAM_ERROR / 2); // the bound is tight, not loose
    expect(HISTOGRAM_ERROR).toBeLessThan(0.022);
  });

  it("put each gap in the console's histogram bucket (GAP_BUCKETS_MS, upper bounds inclusive)", async () => {
    const values = GAP_BUCKETS_MS.filter(Number.isFinite).flatMap((b) => [b - 1, b, b + 1]);
    const rows = await t.db.prisma.$queryRaw<{ v: number; bucket: number }[]>`
      SELECT v, tool_stats_gap_display_bucket(v) AS bucket FROM unnest(${values}::int[]) AS v`;
    expect(rows).toHaveLength(values.length);
    for (const { v, bucket } of rows) expect(bucket, String(v)).toBe(GAP_BUCKETS_MS.findIndex((b) => v <= b) + 1);
  });
});

import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { analyzeGaps } from "@/lib/audit/retry-gaps";
import { createTestPostgres, type TestPostgres } from "@/test/support/databases";
import { bucketRange, bucketSizeMs, getToolStats, getToolTotals, HISTOGRAM_ERROR, MAX_GAP_SAMPLES, STATS_WINDOWS } from "./tool-stats";

// A fixed "now" inside a 30-minute bucket: the 24 h range runs from 12:00 on the 9th to 12:30 on the 10th.
const NOW = Date.UTC(2026, 2, 10, 12, 10, 0);
const MIN = 60_000;
const HOUR = 60 * MIN;

let t: TestPostgres;

function execution(tool: string, startedAtMs: number, extra: Partial<{ outcome: string | null; durationMs: number | null; fallback: boolean }> = {}) {
  return {
    id: randomUUID(),
    scope: "demo",
    key: randomUUID(),
    tool,
    fingerprint: "f".repeat(64),
    token: 1n,
    startedAt: new Date(startedAtMs),
    leaseUntil: new Date(startedAtMs + MIN),
    outcome: extra.outcome === undefined ? "succeeded" : extra.outcome,
    durationMs: extra.durationMs === undefined ? 10 : extra.durationMs,
    fallback: extra.fallback ?? false,
  };
}

function suppression(tool: string, atMs: number, kind: string, gapMs: number | null, extra: Partial<{ fallback: boolean; session: string; originalSession: string; key: string }> = {}) {
  return {
    id: randomUUID(),
    scope: "demo",
    key: extra.key ?? randomUUID(),
    tool,
    kind,
    gapMs,
    fallback: extra.fallback ?? false,
    session: extra.session ?? null,
    originalSession: extra.originalSession ?? null,
    at: new Date(atMs),
  };
}

// 30 retries within 3.1 s and 3 genuine repeats about 40 minutes later
const RETRY_GAPS = Array.from({ length: 30 }, (_, i) => 200 + i * 100);
const REPEAT_GAPS = [40 * MIN, 42 * MIN, 55 * MIN];

beforeAll(async () => {
  // fails (never skips) when PostgreSQL is down: the connection error fails the suite
  t = await createTestPostgres("idemgate_test_stats");
  const { prisma } = t.db;
  const { fromMs } = bucketRange(STATS_WINDOWS["24h"], NOW);

  await prisma.execution.createMany({
    data: [
      // 3 in the first bucket of the 24 h range (12:00 on the 9th), 2 in the last (now's) one
      execution("payments.charge", fromMs + 1_000, { durationMs: 10 }),
      execution("payments.charge", fromMs + 2_000, { durationMs: 20 }),
      execution("payments.charge", fromMs + 29 * MIN, { durationMs: 30, outcome: "failed" }),
      execution("payments.charge", NOW - 5 * MIN, { durationMs: 40, outcome: "final_error" }),
      execution("payments.charge", NOW - 1_000, { durationMs: null, outcome: null, fallback: true }),
      // outside the window, before and after
      execution("payments.charge", fromMs - 1, { durationMs: 9_999 }),
      execution("payments.charge", NOW + HOUR, { durationMs: 9_999 }),
      // another tool
      execution("email.send", NOW - 2 * HOUR),
      execution("email.send", NOW - 2 * HOUR),
    ],
  });

  const at = NOW - 3 * HOUR; // one bucket holds every suppression of the gap set
  await prisma.suppression.createMany({
    data: [
      ...RETRY_GAPS.map((g, i) => suppression("payments.charge", at + i, "replay", g)),
      ...REPEAT_GAPS.map((g, i) => suppression("payments.charge", at + 100 + i, "replay", g, { fallback: true })),
      // other kinds carry gaps too, but only replays are retry evidence
      suppression("payments.charge", at + 200, "conflict", 5),
      suppression("payments.charge", at + 201, "stuck", 90 * MIN),
      suppression("payments.charge", at + 202, "mismatch", 7),
      // the newest: in now's bucket, with sessions for the log
      suppression("payments.charge", NOW - 10, "replay", 1_500, { session: "run-2", originalSession: "run-1", key: "order/42 é" }),
      // outside the window
      suppression("payments.charge", NOW - 25 * HOUR, "replay", 1),
      suppression("email.send", NOW - 2 * HOUR, "replay", 800),
    ],
  });
});

afterAll(async () => {
  await t?.drop();
});

describe("bucket sizes", () => {
  it("gives about 48 round buckets per window", () => {
    expect(bucketSizeMs(STATS_WINDOWS["1h"])).toBe(MIN);
    expect(bucketSizeMs(STATS_WINDOWS["24h"])).toBe(30 * MIN);
    expect(bucketSizeMs(STATS_WINDOWS["7d"])).toBe(4 * HOUR);
  });

  it("aligns buckets to the epoch and ends with the bucket holding now", () => {
    const r = bucketRange(STATS_WINDOWS["24h"], NOW);
    expect(r.count).toBe(49);
    expect(r.fromMs).toBe(Date.UTC(2026, 2, 9, 12, 0));
    expect(r.toMs).toBe(Date.UTC(2026, 2, 10, 12, 30));
    expect(r.toMs - r.fromMs).toBe(49 * 30 * MIN);
  });
});

describe("getToolStats", () => {
  it("counts executions and suppressions by kind per bucket", async () => {
    const stats = await getToolStats(t.db.prisma, { tool: "payments.charge", windowMs: STATS_WINDOWS["24h"], nowMs: NOW });
    expect(stats.bucketMs).toBe(30 * MIN);
    expect(stats.buckets).toHaveLength(49);
    expect(stats.buckets.map((b) => b.startMs)).toEqual(Array.from({ length: 49 }, (_, i) => stats.fromMs + i * 30 * MIN));

    expect(stats.buckets[0].executions).toBe(3);
    expect(stats.buckets[48].executions).toBe(2);
    expect(stats.buckets.slice(1, 48).every((b) => b.executions === 0)).toBe(true);

    const gapBucket = stats.buckets.find((b) => b.replay > 1)!;
    expect(gapBucket.startMs).toBe(Date.UTC(2026, 2, 10, 9, 0));
    expect(gapBucket).toMatchObject({ replay: 33, conflict: 1, stuck: 1, mismatch: 1, fallback: 3 });
    expect(stats.buckets[48]).toMatchObject({ replay: 1, conflict: 0, fallback: 0 });

    expect(stats.totals).toEqual({ executions: 5, suppressions: 37, replay: 34, conflict: 1, stuck: 1, unknown: 0, mismatch: 1, fresh_key: 0, fallback: 3 });
    expect(stats.freshKeyDuplicates).toEqual({ open: 0, genuineRepeats: 0, confirmed: 0, suppressed: 0 });
  });

  it("counts fresh-key duplicates that got through (by their status) next to the fresh_key suppressions, and unknown suppressions", async () => {
    const tool = "orders.place";
    const at = NOW - 2 * HOUR;
    await t.db.prisma.suppression.createMany({
      data: [
        suppression(tool, at, "fresh_key", 900),
        suppression(tool, at + 1, "fresh_key", 1_200, { fallback: true }),
        suppression(tool, at + 2, "unknown", 3_000),
      ],
    });
    const anomaly = (status: string, detectedAtMs: number, extra: { type?: string; tool?: string } = {}) => ({
      id: randomUUID(),
      type: extra.type ?? "fresh_key_duplicate",
      dedupeKey: `test:${randomUUID()}`,
      tool: extra.tool ?? tool,
      scope: "demo",
      key: randomUUID(),
      status,
      summary: "seeded",
      evidence: {},
      detectedAt: new Date(detectedAtMs),
      updatedAt: new Date(detectedAtMs),
    });
    await t.db.prisma.anomaly.createMany({
      data: [
        anomaly("open", at),
        anomaly("open", NOW - MIN),
        anomaly("acknowledged", at),
        anomaly("resolved", at),
        anomaly("resolved", at + 5),
        // not counted: before the window, another type, another tool
        anomaly("resolved", NOW - 2 * 24 * HOUR),
        anomaly("open", at, { type: "stale_suppression" }),
        anomaly("open", at, { tool: "email.send" }),
      ],
    });
    const stats = await getToolStats(t.db.prisma, { tool, nowMs: NOW });
    expect(stats.freshKeyDuplicates).toEqual({ open: 2, genuineRepeats: 1, confirmed: 2, suppressed: 2 });
    expect(stats.totals).toMatchObject({ suppressions: 3, fresh_key: 2, unknown: 1, replay: 0, fallback: 1 });
    expect(stats.buckets.find((b) => b.fresh_key > 0)).toMatchObject({ fresh_key: 2, unknown: 1, replay: 0 });
    // the last hour holds only the newest open one
    const hour = await getToolStats(t.db.prisma, { tool, windowMs: STATS_WINDOWS["1h"], nowMs: NOW });
    expect(hour.freshKeyDuplicates).toEqual({ open: 1, genuineRepeats: 0, confirmed: 0, suppressed: 0 });
  });

  it("counts outcomes (no outcome yet is unknown) and takes duration percentiles", async () => {
    const stats = await getToolStats(t.db.prisma, { tool: "payments.charge", nowMs: NOW });
    expect(stats.outcomes).toEqual({ succeeded: 2, failed: 1, final_error: 1, late_completion: 0, released: 0, unknown: 1 });
    // 10, 20, 30, 40: continuous percentiles, the outside rows' 9 999 ms left out; from the
    // rollups' histogram, within its error (10, 20 and 30 ms have buckets of their own)
    expect(stats.source).toBe("rollups");
    expect(stats.durationMs.p50).toBe(25);
    expect(Math.abs(stats.durationMs.p95! - 38.5)).toBeLessThanOrEqual(38.5 * HISTOGRAM_ERROR);
    expect(stats.durationMs.p95).not.toBeCloseTo(38.5);
    // the log's exact figures, read the other way
    const log = await getToolStats(t.db.prisma, { tool: "payments.charge", nowMs: NOW, source: "log" });
    expect(log.outcomes).toEqual(stats.outcomes);
    expect(log.durationMs.p95).toBeCloseTo(38.5);
  });

  it("analyzes the window's replay gaps only", async () => {
    const stats = await getToolStats(t.db.prisma, { tool: "payments.charge", nowMs: NOW });
    const expected = analyzeGaps([...RETRY_GAPS, ...REPEAT_GAPS, 1_500]);
    // the log gives the exact analysis; the rollups the same within the histograms' error
    const log = await getToolStats(t.db.prisma, { tool: "payments.charge", nowMs: NOW, source: "log" });
    expect(log.gaps).toMatchObject(expected);
    expect(log.gaps.histogram).toEqual(stats.gaps.histogram);
    for (const field of ["p50Ms", "p99Ms", "p999Ms", "retryClusterMaxMs", "firstRepeatGapMs", "staleThresholdMs", "suggestedTtlMs"] as const) {
      expect(Math.abs(stats.gaps[field]! - expected[field]!), field).toBeLessThanOrEqual(expected[field]! * 2 * HISTOGRAM_ERROR);
    }
    expect(stats.gaps.samples).toBe(34);
    expect(stats.gaps.repeats).toBe(3);
    expect(log.gaps.firstRepeatGapMs).toBe(40 * MIN);
    expect(stats.gaps.suggestedTtlMs).not.toBeNull();
    expect(stats.gaps.suggestedTtlMs!).toBeGreaterThan(3_100);
    expect(stats.gaps.suggestedTtlMs!).toBeLessThan(40 * MIN);
    expect(stats.gaps.reasoning).toMatch(/31 duplicates arrived within 3\.1 s/);
    expect(stats.gaps.truncated).toBe(false);

    const histogram = Object.fromEntries(stats.gaps.histogram.map((h) => [h.upToMs, h.count]));
    expect(histogram[250]).toBe(1); // 200
    expect(histogram[500]).toBe(3); // 300, 400, 500
    expect(histogram[1_000]).toBe(5);
    expect(histogram[2_500]).toBe(16); // 1 100 … 2 500 and the 1 500 of now's bucket
    expect(histogram[5_000]).toBe(6);
    expect(histogram[3_600_000]).toBe(3);
    expect(stats.gaps.histogram.reduce((n, h) => n + h.count, 0)).toBe(34);
  });

  it("lists the newest suppressions first, with sessions and gaps", async () => {
    const stats = await getToolStats(t.db.prisma, { tool: "payments.charge", nowMs: NOW });
    expect(stats.suppressionLog).toHaveLength(37);
    expect(stats.suppressionLog[0]).toMatchObject({
      kind: "replay",
      key: "order/42 é",
      gapMs: 1_500,
      session: "run-2",
      originalSession: "run-1",
      fallback: false,
    });
    const times = stats.suppressionLog.map((s) => s.at.getTime());
    expect(times).toEqual([...times].sort((a, b) => b - a));
  });

  it("aggregates every tool when none is named", async () => {
    const stats = await getToolStats(t.db.prisma, { nowMs: NOW });
    expect(stats.tool).toBeNull();
    expect(stats.totals.executions).toBe(7);
    expect(stats.totals.replay).toBe(35);
    expect(stats.gaps.samples).toBe(35);
  });

  it("narrows to the last hour with one-minute buckets", async () => {
    const stats = await getToolStats(t.db.prisma, { tool: "payments.charge", windowMs: STATS_WINDOWS["1h"], nowMs: NOW });
    expect(stats.bucketMs).toBe(MIN);
    expect(stats.buckets).toHaveLength(61);
    expect(stats.totals).toMatchObject({ executions: 2, replay: 1, suppressions: 1 });
    expect(stats.buckets[59]).toMatchObject({ replay: 1, executions: 1 }); // 12:09
    expect(stats.buckets[55].executions).toBe(1); // 12:05
  });

  it("returns empty buckets and no suggestion for a tool without traffic", async () => {
    const stats = await getToolStats(t.db.prisma, { tool: "tickets.create", nowMs: NOW });
    expect(stats.buckets).toHaveLength(49);
    expect(stats.totals.executions + stats.totals.suppressions).toBe(0);
    expect(stats.durationMs).toEqual({ p50: null, p95: null });
    expect(stats.gaps.samples).toBe(0);
    expect(stats.gaps.suggestedTtlMs).toBeNull();
    expect(stats.suppressionLog).toEqual([]);
  });

  // last: it adds 20 000 rows of another tool
  it("caps the suppression log at 50 rows; the log's gap samples at the newest MAX_GAP_SAMPLES, the rollups' not at all", async () => {
    const base = NOW - 30 * MIN;
    // generated in SQL: createMany of 20 000 rows takes seconds
    await t.db.prisma.$executeRaw`
      INSERT INTO suppressions (id, scope, key, tool, kind, gap_ms, at)
      SELECT gen_random_uuid()::text, 'demo', 'k' || i, 'payments.refund', 'replay', CASE WHEN i < 5 THEN 999999 ELSE 1000 END,
             ${new Date(base).toISOString()}::timestamp + i * interval '1 millisecond'
      FROM generate_series(0, ${MAX_GAP_SAMPLES + 4}::int) AS i`;
    // the last hour reads the log
    const stats = await getToolStats(t.db.prisma, { tool: "payments.refund", windowMs: STATS_WINDOWS["1h"], nowMs: NOW });
    expect(stats.source).toBe("log");
    expect(stats.totals.replay).toBe(MAX_GAP_SAMPLES + 5);
    expect(stats.suppressionLog).toHaveLength(50);
    expect(stats.suppressionLog[0].at.getTime()).toBe(base + MAX_GAP_SAMPLES + 4);
    expect(stats.gaps.truncated).toBe(true);
    expect(stats.gaps.samples).toBe(MAX_GAP_SAMPLES);
    // the five oldest (the long gaps) are the ones left out
    expect(stats.gaps.retryClusterMaxMs).toBe(1_000);
    expect(stats.gaps.repeats).toBe(0);
    // 24 h reads the rollups: every replay of the window, the five long gaps a cluster of their own
    const day = await getToolStats(t.db.prisma, { tool: "payments.refund", nowMs: NOW });
    expect(day.source).toBe("rollups");
    expect(day.suppressionLog).toEqual(stats.suppressionLog);
    expect(day.gaps.truncated).toBe(false);
    expect(day.gaps.samples).toBe(MAX_GAP_SAMPLES + 5);
    expect(day.gaps.repeats).toBe(5);
    expect(Math.abs(day.gaps.retryClusterMaxMs! - 1_000)).toBeLessThanOrEqual(1_000 * HISTOGRAM_ERROR);
    expect(Math.abs(day.gaps.firstRepeatGapMs! - 999_999)).toBeLessThanOrEqual(999_999 * HISTOGRAM_ERROR);
    expect(day.gaps.histogram.find((h) => h.upToMs === 1_000)?.count).toBe(MAX_GAP_SAMPLES);
  });
});

describe("getToolTotals", () => {
  it("counts the tool page's 24 h per tool with the suppression rate", async () => {
    const totals = await getToolTotals(t.db.prisma, { nowMs: NOW });
    // the page's 49 half hours: the rows at 12:00:01 and 12:00:02 on the 9th are in, the one before 12:00 is not
    expect(totals.get("payments.charge")).toEqual({ executions: 5, suppressions: 37, suppressionRate: 37 / 42 });
    const page = await getToolStats(t.db.prisma, { tool: "payments.charge", nowMs: NOW });
    expect(totals.get("payments.charge")).toMatchObject({ executions: page.totals.executions, suppressions: page.totals.suppressions });
    expect(totals.get("email.send")).toEqual({ executions: 2, suppressions: 1, suppressionRate: 1 / 3 });
    expect(totals.has("tickets.create")).toBe(false);
  });
});

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Prisma } from "@/generated/prisma/client";
import { createTestPostgres, type TestPostgres } from "@/test/support/databases";
import { readRunCalls, runCallsSql } from "./run-calls";

// A run of 10,000 executions and 10,000 duplicates among 60,000 other calls: every page, the first
// and one deep in the run, is read from the (session, scope, time, id) indexes, and the pages
// together are the run's calls in time order, each once.

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  Plans?: PlanNode[];
}

const NOW = Date.UTC(2026, 2, 10, 12, 0, 0);
const RUN = 10_000;
let t: TestPostgres;

beforeAll(async () => {
  t = await createTestPostgres("run_calls");
  const at = (i: string) => `(to_timestamp((${NOW}::float8 - ${i}::float8 * 1000) / 1000) AT TIME ZONE 'UTC')`;
  // the run: execution i at NOW - 2i s, its duplicate a second later; the others, at the same times: other sessions, other scopes, no session
  await t.db.prisma.$executeRawUnsafe(`
    INSERT INTO executions (id, scope, key, tool, fingerprint, token, session, fallback, started_at, lease_until, outcome)
    SELECT 'e-' || lpad(i::text, 6, '0'), CASE WHEN i <= ${RUN} THEN 'tenant-a' ELSE 'tenant-' || (i % 7) END, 'key-' || i, 'tool-' || (i % 5), md5(i::text), i,
      CASE WHEN i <= ${RUN} THEN 'run-1' WHEN i % 3 = 0 THEN NULL ELSE 'run-' || (i % 400) END, false, ${at(`(i % ${RUN}) * 2`)}, ${at(`(i % ${RUN}) * 2`)} + interval '1 minute', 'succeeded'
    FROM generate_series(1, ${RUN * 4}) AS i`);
  await t.db.prisma.$executeRawUnsafe(`
    INSERT INTO suppressions (id, scope, key, tool, kind, fallback, session, at)
    SELECT 's-' || lpad(i::text, 6, '0'), CASE WHEN i <= ${RUN} THEN 'tenant-a' ELSE 'tenant-' || (i % 7) END, 'key-' || i, 'tool-' || (i % 5), 'replay', false,
      CASE WHEN i <= ${RUN} THEN 'run-1' WHEN i % 3 = 0 THEN NULL ELSE 'run-' || (i % 400) END, ${at(`(i % ${RUN}) * 2 - 1`)}
    FROM generate_series(1, ${RUN * 4}) AS i`);
  // the same session in another tenant: not part of tenant-a's run
  await t.db.prisma.$executeRawUnsafe(`
    INSERT INTO executions (id, scope, key, tool, fingerprint, token, session, fallback, started_at, lease_until)
    SELECT 'x-' || i, 'tenant-b', 'key-' || i, 'tool-1', md5(i::text), i, 'run-1', false, ${at("i")}, ${at("i")}
    FROM generate_series(1, 500) AS i`);
  await t.db.prisma.$executeRawUnsafe("VACUUM ANALYZE executions, suppressions");
}, 180_000);

afterAll(async () => {
  await t?.drop();
});

async function plan(sql: Prisma.Sql): Promise<PlanNode[]> {
  const rows = await t.db.prisma.$queryRaw<{ "QUERY PLAN": [{ Plan: PlanNode }] }[]>`EXPLAIN (FORMAT JSON) ${sql}`;
  const flat = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(flat)];
  return flat(rows[0]["QUERY PLAN"][0].Plan);
}

describe("a run's calls", () => {
  it("pages from the session indexes, the first page and one deep in a run of 20,000 calls", async () => {
    const first = await readRunCalls(t.db.prisma, { session: "run-1", scope: "tenant-a", limit: 100 });
    const deepCursor = (await readRunCalls(t.db.prisma, { session: "run-1", scope: "tenant-a", limit: 15_000 })).nextCursor;
    expect(deepCursor).not.toBeNull();
    for (const cursor of [null, first.nextCursor, deepCursor]) {
      const nodes = await plan(runCallsSql({ session: "run-1", scope: "tenant-a", limit: 100, cursor }));
      expect(nodes.filter((n) => n["Node Type"] === "Seq Scan").map((n) => n["Relation Name"])).toEqual([]);
      expect(nodes.map((n) => n["Index Name"]).filter(Boolean).sort()).toEqual(["executions_session_scope_started_at_idx", "suppressions_session_scope_at_idx"]);
      // read in index order: nothing sorts the run
      expect(nodes.filter((n) => n["Node Type"] === "Sort")).toEqual([]);
    }
  });

  it("gives every call of the run once, oldest first, across pages", async () => {
    const ids: string[] = [];
    let last = -Infinity;
    let cursor: string | null = null;
    do {
      const page: Awaited<ReturnType<typeof readRunCalls>> = await readRunCalls(t.db.prisma, { session: "run-1", scope: "tenant-a", limit: 500, cursor });
      for (const row of page.items) {
        expect(row.at.getTime()).toBeGreaterThanOrEqual(last);
        last = row.at.getTime();
        ids.push(row.id);
      }
      cursor = page.nextCursor;
    } while (cursor);
    expect(ids).toHaveLength(RUN * 2);
    expect(new Set(ids).size).toBe(RUN * 2);
    expect(ids.some((id) => id.startsWith("x-"))).toBe(false);
    // the oldest call: the run's execution 10,000 (i % 10,000 = 0 puts it at NOW, the newest)
    expect(ids[ids.length - 1]).toBe("e-010000");
  });
});

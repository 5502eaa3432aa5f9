import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Prisma } from "@/generated/prisma/client";
import { anomaliesSql, listAnomalies, openAnomalyCountsSql } from "@/lib/anomalies/anomalies";
import { freshKeyScanSql, freshKeyTwinsSql, type ScannedExecution } from "@/lib/anomalies/checks/fresh-key-duplicates";
import { createTestPostgres, type TestPostgres } from "@/test/support/databases";
import { OVER_LIMIT_PREFIX } from "@/lib/idempotency/scope-result-limit";
import { argumentIndexScanSql, INDEX_EXECUTIONS, orphanCopiesSql } from "./argument-index";
import { argumentSearchSql } from "./find-executions";
import { keyAuditTrailSql, readKeyAuditTrail } from "./key-audit-trail";
import { operatorActionFacets, operatorActionFacetsSql } from "./operator-action-facets";
import { listOperatorActions, operatorActionsSql } from "./operator-actions";
import { recentActivitySql } from "./recent-activity";
import { STATS_WINDOWS, toolStatsSql, toolTotalsSql } from "./tool-stats";

/**
 * The console's audit queries, EXPLAINed against a migrated database holding enough rows that the
 * planner reads a table whole only when no index serves the query.
 */

const NOW = Date.UTC(2026, 2, 10, 12, 10, 0);
const DAY = 86_400_000;
const ROWS = 40_000;
const AUDIT_TABLES = ["executions", "suppressions", "operator_actions", "anomalies", "execution_argument_index"];

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Index Cond"?: string;
  Plans?: PlanNode[];
}

let t: TestPostgres;

beforeAll(async () => {
  t = await createTestPostgres("audit_plans");
  const { prisma } = t.db;
  // spread over the last 7 days, 5 tools, 2 000 keys; row i is older the larger i is
  const at = (i: string) => `(to_timestamp((${NOW}::float8 - ${i}::float8 * ${(7 * DAY) / ROWS}) / 1000) AT TIME ZONE 'UTC')`;
  await prisma.$executeRawUnsafe(`
    INSERT INTO executions (id, scope, key, tool, fingerprint, token, fallback, started_at, lease_until, outcome, finished_at, duration_ms, arguments)
    SELECT 'e-' || i, 'scope-' || (i % 10), 'key-' || (i % 2000), 'tool-' || (i % 5), md5(i::text), i, false, ${at("i")},
      ${at("i")} + interval '1 minute', CASE WHEN i % 50 = 0 THEN 'failed' ELSE 'succeeded' END, ${at("i")} + interval '50 ms', i % 500,
      jsonb_build_object('customerId', 'cus_' || (i % 4000), 'amountCents', i % 700, 'note', 'n' || i)
    FROM generate_series(1, ${ROWS}) AS i`);
  await prisma.$executeRawUnsafe(`
    INSERT INTO suppressions (id, scope, key, tool, kind, fallback, gap_ms, at)
    SELECT 's-' || i, 'scope-' || (i % 10), 'key-' || (i % 2000), 'tool-' || (i % 5),
      CASE i % 20 WHEN 0 THEN 'conflict' WHEN 1 THEN 'mismatch' ELSE 'replay' END, i % 7 = 0, i % 30000, ${at("i")}
    FROM generate_series(1, ${ROWS}) AS i`);
  await prisma.$executeRawUnsafe(`
    INSERT INTO operator_actions (id, actor, action, scope, key, reason, state_before, at)
    SELECT 'o-' || lpad(i::text, 6, '0'),
      CASE WHEN i % 2000 = 11 THEN 'auditor@example.com' ELSE 'operator-' || (i % 20) || '@example.com' END,
      CASE WHEN i % 2000 = 7 THEN 'token_revoke' ELSE (ARRAY['release','resolve_anomaly','acknowledge_anomaly','reconcile','token_create'])[i % 5 + 1] END,
      'scope-' || (i % 10), 'key-' || (i % 2000), 'seeded', '{"state":"stuck"}'::jsonb, ${at("i")}
    FROM generate_series(1, ${ROWS}) AS i`);
  // most anomalies were resolved long ago; the open ones are recent
  await prisma.$executeRawUnsafe(`
    INSERT INTO anomalies (id, type, dedupe_key, tool, scope, key, status, summary, evidence, detected_at, updated_at)
    SELECT 'a-' || lpad(i::text, 6, '0'), (ARRAY['orphan_unknown_outcome','stale_suppression','orphan_lost_completion'])[i % 3 + 1], 'seed:' || i,
      'tool-' || (i % 5), 'scope-' || (i % 10), 'key-' || (i % 2000),
      CASE WHEN i < 500 THEN 'open' WHEN i < 1000 THEN 'acknowledged' ELSE 'resolved' END, 'seeded', '{}'::jsonb, ${at("i")}, ${at("i")}
    FROM generate_series(1, ${ROWS}) AS i`);
  // fresh-key duplicates: a tenth as many, of every tool, most decided
  await prisma.$executeRawUnsafe(`
    INSERT INTO anomalies (id, type, dedupe_key, tool, scope, key, status, summary, evidence, detected_at, updated_at)
    SELECT 'f-' || lpad(i::text, 6, '0'), 'fresh_key_duplicate', 'seed-fresh:' || i, 'tool-' || (i % 5), 'scope-' || (i % 10), 'key-' || (i % 2000),
      (ARRAY['open','acknowledged','resolved'])[i % 3 + 1], 'seeded', '{}'::jsonb, ${at("i * 10")}, ${at("i * 10")}
    FROM generate_series(1, ${ROWS / 10}) AS i`);
  // the search's copy of the kept arguments, as the audit writer writes it after each intent
  await prisma.$executeRawUnsafe(`
    INSERT INTO execution_argument_index (execution_id, scope, started_at, arguments)
    SELECT id, scope, started_at, arguments FROM executions WHERE arguments IS NOT NULL`);
  // autovacuum's steady state for insert-mostly tables: statistics, and the visibility map index-only scans rely on
  await prisma.$executeRawUnsafe("VACUUM ANALYZE executions, suppressions, operator_actions, anomalies, execution_argument_index");
}, 120_000);

afterAll(async () => {
  await t?.drop();
});

async function plan(sql: Prisma.Sql): Promise<PlanNode> {
  const rows = await t.db.prisma.$queryRaw<{ "QUERY PLAN": [{ Plan: PlanNode }] }[]>`EXPLAIN (FORMAT JSON) ${sql}`;
  const root = rows[0]["QUERY PLAN"][0].Plan;
  if (process.env.SHOW_PLANS) console.log(JSON.stringify(root, null, 1));
  return root;
}

function nodes(root: PlanNode): PlanNode[] {
  return [root, ...(root.Plans ?? []).flatMap(nodes)];
}

const unbounded = (n: PlanNode) => n["Index Name"] !== undefined && n["Index Cond"] === undefined;

/**
 * The plan reads no audit table whole, and sorts no unbounded index scan (a range or a tie-break is
 * fine); returns the indexes it uses.
 */
async function indexBacked(sql: Prisma.Sql): Promise<string[]> {
  const all = nodes(await plan(sql));
  const seq = all.filter((n) => n["Node Type"] === "Seq Scan" && AUDIT_TABLES.includes(n["Relation Name"] ?? ""));
  expect(seq.map((n) => n["Relation Name"]), "sequential scans").toEqual([]);
  const sorted = all.filter((n) => n["Node Type"] === "Sort").flatMap((n) => nodes(n).filter(unbounded));
  expect(sorted.map((n) => n["Index Name"]), "whole indexes sorted").toEqual([]);
  return all.map((n) => n["Index Name"]).filter((name): name is string => name !== undefined);
}

describe("tool list and tool page", () => {
  it("counts the tool list's 24 h from the rollups, and the open executions from their own index", async () => {
    const q = toolTotalsSql({ nowMs: NOW });
    if (q.source !== "rollups") throw new Error("the 24 h tool list reads the rollups");
    await indexBacked(q.sql.rollups);
    expect(await indexBacked(q.sql.openExecutions)).toEqual(["executions_open_tool_started_at_idx"]);
    // the log's grouped counts, which a window not made of half hours falls back on
    const log = toolTotalsSql({ nowMs: NOW, source: "log" });
    if (log.source !== "log") throw new Error("unreachable");
    expect(await indexBacked(log.sql.executions)).toEqual(["executions_started_at_idx"]);
    expect(await indexBacked(log.sql.suppressions)).toEqual(["suppressions_at_idx"]);
    expect(nodes(await plan(log.sql.executions)).some((n) => n["Node Type"] === "Index Only Scan")).toBe(true);
  });

  it("reads one tool's last hour through the (tool, time) indexes", async () => {
    const q = toolStatsSql({ tool: "tool-3", windowMs: STATS_WINDOWS["1h"], nowMs: NOW });
    if (q.source !== "log") throw new Error("an hour of one-minute buckets reads the log");
    const { sql } = q;
    for (const name of ["executionBuckets", "outcomes", "durations"] as const) {
      const p = await plan(sql[name]);
      expect(await indexBacked(sql[name]), name).toEqual(["executions_tool_started_at_idx"]);
      // covering: outcome and duration are in the index, the table is not visited
      expect(nodes(p).map((n) => n["Node Type"]), name).toContain("Index Only Scan");
    }
    for (const name of ["suppressionBuckets", "gaps"] as const) {
      const p = await plan(sql[name]);
      expect(await indexBacked(sql[name]), name).toEqual(["suppressions_tool_at_idx"]);
      expect(nodes(p).map((n) => n["Node Type"]), name).toContain("Index Only Scan");
    }
  });

  it.each(["1h", "24h", "7d"] as const)("reads one tool's %s page through indexes: rollups by key, open executions by their own index", async (window) => {
    const q = toolStatsSql({ tool: "tool-3", windowMs: STATS_WINDOWS[window], nowMs: NOW });
    expect(q.source).toBe(window === "1h" ? "log" : "rollups");
    const { sql } = q;
    if (q.source === "rollups") {
      for (const name of ["rollupBuckets", "histograms"] as const) {
        const used = await indexBacked(q.sql[name]);
        // a handful of rollup rows: the planner may read them whole; never an audit table
        expect(used.every((i) => i.startsWith("tool_stats_half_hours_")), name).toBe(true);
      }
      expect(await indexBacked(q.sql.openExecutions)).toEqual(["executions_open_tool_started_at_idx"]);
    }
    // the newest 50: either time index, bounded by the window, serves it
    expect(["suppressions_tool_at_idx", "suppressions_at_idx"]).toEqual(expect.arrayContaining(await indexBacked(sql.suppressionLog)));
    // fresh-key duplicates that got through, by status: from the (tool, type, detected_at) index alone
    expect(await indexBacked(sql.freshKeyDuplicates)).toEqual(["anomalies_tool_type_detected_at_idx"]);
    expect(nodes(await plan(sql.freshKeyDuplicates)).map((n) => n["Node Type"])).toContain("Index Only Scan");
  });

  it("reads the overview's last hour through the time indexes", async () => {
    const sql = recentActivitySql(NOW - 3_600_000);
    expect(await indexBacked(sql.executions)).toEqual(["executions_started_at_idx"]);
    expect(await indexBacked(sql.suppressions)).toEqual(["suppressions_at_idx"]);
  });
});

describe("audit trail page", () => {
  // a common actor or action is found soon enough walking the time index; a rare one needs its own
  const cases: [string, object, string][] = [
    ["no filter", {}, "operator_actions_at_idx"],
    ["a rare actor", { actor: "auditor@example.com" }, "operator_actions_actor_at_idx"],
    ["a rare action", { action: "token_revoke" }, "operator_actions_action_at_idx"],
    ["a common actor and action", { actor: "operator-7@example.com", action: "acknowledge_anomaly" }, "operator_actions_"],
    ["scope and key", { scope: "scope-3", key: "key-13" }, "operator_actions_scope_key_at_idx"],
    ["a date range", { from: new Date(NOW - 3 * DAY), to: new Date(NOW - 2 * DAY) }, "operator_actions_at_idx"],
    ["an actor within a date range", { actor: "operator-7@example.com", from: new Date(NOW - 5 * DAY), to: new Date(NOW - DAY) }, "operator_actions_"],
    ["a target key", { target: "key-13" }, "operator_actions_"],
  ];

  it.each(cases)("pages by %s through an index, later pages as well", async (_label, filter, index) => {
    // 20 rows per key: two pages of 10
    const first = await listOperatorActions(t.db.prisma, { limit: 10, ...filter });
    expect(first.items).toHaveLength(10);
    expect(first.nextCursor).not.toBeNull();
    for (const cursor of [null, first.nextCursor]) {
      const used = await indexBacked(operatorActionsSql({ limit: 10, ...filter, cursor }));
      expect(used.some((name) => name.startsWith(index))).toBe(true);
    }
    const second = await listOperatorActions(t.db.prisma, { limit: 10, ...filter, cursor: first.nextCursor });
    expect(second.items).toHaveLength(10);
    expect(second.items[0].at.getTime()).toBeLessThanOrEqual(first.items[9].at.getTime());
    expect(new Set([...first.items, ...second.items].map((r) => r.id)).size).toBe(20);
  });

  it("lists the filter menus by probing the actor and action indexes once per value", async () => {
    const sql = operatorActionFacetsSql();
    expect(await indexBacked(sql.actors)).toContain("operator_actions_actor_at_idx");
    expect(await indexBacked(sql.actions)).toContain("operator_actions_action_at_idx");
    const facets = await operatorActionFacets(t.db.prisma);
    expect(facets.actors).toHaveLength(21);
    expect(facets.actors).toEqual([...facets.actors].sort());
    expect(facets.actions).toEqual(["acknowledge_anomaly", "reconcile", "release", "resolve_anomaly", "token_create", "token_revoke"]);
  });
});

describe("anomalies", () => {
  it.each([
    ["no filter", {}, "anomalies_detected_at_idx"],
    ["status", { status: "open" }, "anomalies_status_detected_at_idx"],
    // the open ones are the newest: either time index finds them first
    ["status and type", { status: "open", type: "stale_suppression" }, "anomalies_"],
  ] as const)("pages by %s through an index", async (_label, filter, index) => {
    const first = await listAnomalies(t.db.prisma, { limit: 50, ...filter });
    expect(first.items).toHaveLength(50);
    for (const cursor of [null, first.nextCursor]) {
      const used = await indexBacked(anomaliesSql({ limit: 50, ...filter, cursor }));
      expect(used.some((name) => name.startsWith(index))).toBe(true);
    }
  });

  it("pages by type, tool or a common status without reading the table whole", async () => {
    await indexBacked(anomaliesSql({ limit: 50, type: "orphan_lost_completion" }));
    await indexBacked(anomaliesSql({ limit: 50, tool: "tool-2" }));
    await indexBacked(anomaliesSql({ limit: 50, status: "resolved", type: "stale_suppression" }));
  });

  it("counts open anomalies from the (status, type) index", async () => {
    expect(await indexBacked(openAnomalyCountsSql)).toEqual(["anomalies_status_type_idx"]);
  });
});

describe("key timeline", () => {
  it("reads each table through its (scope, key, time) index", async () => {
    const sql = keyAuditTrailSql("scope-3", "key-13");
    expect(await indexBacked(sql.executions)).toEqual(["executions_scope_key_started_at_idx"]);
    expect(await indexBacked(sql.suppressions)).toEqual(["suppressions_scope_key_at_idx"]);
    expect(await indexBacked(sql.operatorActions)).toEqual(["operator_actions_scope_key_at_idx"]);
    const trail = await readKeyAuditTrail(t.db.prisma, "scope-3", "key-13");
    expect(trail.executions).toHaveLength(ROWS / 2000);
    expect(trail.executions[0].startedAt).toBeInstanceOf(Date);
    expect(typeof trail.executions[0].token).toBe("bigint");
  });
});

describe("reconciler", () => {
  it("scans executions through the started_at index and finds each one's identical calls through (scope, tool, fingerprint, started_at)", async () => {
    const scan = freshKeyScanSql({ at: new Date(NOW - DAY - 3_600_000), id: "" }, new Date(NOW), 5_000);
    expect(await indexBacked(scan)).toEqual(["executions_started_at_idx"]);
    const rows = await t.db.prisma.$queryRaw<ScannedExecution[]>(scan);
    expect(rows).toHaveLength(5_000);
    const twins = freshKeyTwinsSql(rows.map((e) => ({ ...e, windowMs: 60_000 })));
    expect(await indexBacked(twins)).toEqual(["executions_scope_tool_fingerprint_started_at_idx"]);
    // a later page, from a cursor inside the log
    const later = rows[rows.length - 1];
    expect(await indexBacked(freshKeyScanSql({ at: later.startedAt, id: later.id }, new Date(NOW), 5_000))).toEqual(["executions_started_at_idx"]);
  });
});

describe("search by an argument value", () => {
  // the query with its parameters written in, as EXPLAIN needs them
  const inlined = ({ sql, params }: { sql: string; params: unknown[] }) =>
    Prisma.raw(sql.replace(/\$(\d+)/g, (_, n: string) => {
      const v = params[Number(n) - 1];
      return v === null ? "NULL" : typeof v === "number" ? String(v) : `'${String(v).replace(/'/g, "''")}'`;
    }));

  // the GIN indexes of the side table (execution_argument_index), then the newest matches' executions by id
  it("finds a bare value under any top-level name through the index of top-level values, in every scope or one", async () => {
    for (const scope of [undefined, "scope-3"]) {
      const q = argumentSearchSql(['["cus_42"]', '["n7"]'], scope, 50, "top-level values");
      expect(await indexBacked(inlined(q))).toEqual(["execution_argument_index_values_idx", "execution_argument_index_values_idx", "executions_pkey"]);
    }
  });

  it("finds name:value through the index of the arguments", async () => {
    const q = argumentSearchSql(['{"customerId":"cus_42"}'], undefined, 50, "arguments");
    expect(await indexBacked(inlined(q))).toEqual(["execution_argument_index_path_ops_idx", "executions_pkey"]);
  });
});

describe("the reconciler's scan for kept arguments without their searchable copy", () => {
  it("reads executions after its cursor through the started_at index, and each one's copy through the copies' primary key", async () => {
    const q = argumentIndexScanSql({ at: new Date(NOW - DAY), id: "" }, 5_000);
    expect(await indexBacked(q)).toEqual(expect.arrayContaining(["executions_started_at_idx", "execution_argument_index_pkey"]));
  });
});

describe("the background's sweep for argument copies whose execution is gone", () => {
  it("reads a slice of the copies through their primary key, and each one's execution through its own", async () => {
    expect(await indexBacked(orphanCopiesSql("e-2", 2_000))).toEqual(expect.arrayContaining(["execution_argument_index_pkey", "executions_pkey"]));
  });
});

describe("the audit writer's copy of a batch's kept arguments", () => {
  // A log of 15,000 executions: where `id IN (SELECT jsonb_array_elements_text(…))` was planned as a
  // hash join over the whole table (the planner guesses 100 ids, and a scan looks cheaper than 100
  // probes up to a few tens of thousands of rows), so every batch read the log whole.
  let small: TestPostgres;
  beforeAll(async () => {
    small = await createTestPostgres("audit_copy_plan");
    await small.db.prisma.$executeRawUnsafe(`
      INSERT INTO executions (id, scope, key, tool, fingerprint, token, fallback, started_at, lease_until, arguments)
      SELECT 'e-' || i, 'scope-1', 'key-' || i, 'tool-1', md5(i::text), i, false, now(), now(), jsonb_build_object('customerId', 'cus_' || i)
      FROM generate_series(1, 15000) AS i`);
    await small.db.prisma.$executeRawUnsafe("VACUUM ANALYZE executions");
  }, 60_000);
  afterAll(async () => {
    await small?.drop();
  });

  it("looks each execution of the batch up by its primary key, as a prepared statement's generic plan too", async () => {
    const ids = JSON.stringify(Array.from({ length: 400 }, (_, i) => `e-${15000 - i}`));
    for (const mode of ["force_custom_plan", "force_generic_plan"]) {
      const rows = await small.db.prisma.$transaction(async (tx) => {
        await tx.$executeRawUnsafe(`SET LOCAL plan_cache_mode = ${mode}`);
        await tx.$executeRawUnsafe(`PREPARE copy_plan(text) AS ${INDEX_EXECUTIONS.replace("$1::jsonb", "$1::text::jsonb")}`);
        try {
          return await tx.$queryRawUnsafe<{ "QUERY PLAN": [{ Plan: PlanNode }] }[]>(`EXPLAIN (FORMAT JSON) EXECUTE copy_plan('${ids}')`);
        } finally {
          await tx.$executeRawUnsafe("DEALLOCATE copy_plan");
        }
      });
      const all = nodes(rows[0]["QUERY PLAN"][0].Plan);
      expect(all.filter((n) => n["Node Type"] === "Seq Scan").map((n) => n["Relation Name"]), mode).toEqual([]);
      expect(all.map((n) => n["Index Name"]), mode).toContain("executions_pkey");
    }
  });
});

describe("the reconciler's scan of results stored over their scope's limit", () => {
  it("reads the partial index of placeholders only", async () => {
    const q = Prisma.sql`SELECT id, scope, key, tool, finished_at, result_body FROM executions
      WHERE result_body LIKE ${Prisma.raw(`'${OVER_LIMIT_PREFIX}%'`)} AND (finished_at, id) > (${new Date(NOW - DAY)}, ${""})
      ORDER BY finished_at, id LIMIT 5000`;
    expect(await indexBacked(q)).toEqual(["executions_result_over_limit_idx"]);
  });
});

/**
 * The intent's commit with and without the two GIN indexes over the kept arguments on executions,
 * against a bare committed INSERT, call by call: each round issues a bare INSERT, an intent into a
 * database laid out as before migration 20261206130000 (both GIN indexes on executions, no copy
 * written) and an intent into one laid out as now (the GIN indexes on execution_argument_index,
 * written by the writer's next batch), in an order that rotates, so all three meet the same WAL
 * flushes of the one server. Also the WAL each intent's statement writes (EXPLAIN (ANALYZE, WAL),
 * rolled back). Run: npx tsx bench/intent-commit-pairs.ts [calls, default 1500]
 */
import { randomUUID } from "node:crypto";
import os from "node:os";
import { PrismaAuditWriter } from "@/lib/audit/audit-writer";
import { createTestPostgres } from "@/test/support/databases";

const calls = Number(process.argv[2] ?? 1_500);
const ARGS = JSON.stringify({ customerId: "cus_bench", amountCents: 1_000, currency: "EUR" });
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

const before = await createTestPostgres("intent_before");
const after = await createTestPostgres("intent_after");
try {
  // as before migration 20261206130000: the two GIN indexes on executions
  await before.db.execute(`CREATE INDEX executions_arguments_path_ops_idx ON executions USING GIN (arguments jsonb_path_ops)`, []);
  await before.db.execute(`CREATE INDEX executions_argument_values_idx ON executions USING GIN ((jsonb_path_query_array(arguments, '$.*')) jsonb_path_ops)`, []);
  await after.db.execute(`CREATE TABLE bench_bare_insert (id text PRIMARY KEY, scope text, key text, started_at timestamptz)`, []);
  const bare = () => after.db.execute(`INSERT INTO bench_bare_insert VALUES ($1, 'bench', 'k', now())`, [randomUUID()], { prepare: "bench_bare" });
  const writers = {
    // the writer as before: no copies (the statement that writes them does nothing)
    before: new PrismaAuditWriter(before.db.prisma, {
      mode: "durable",
      query: before.db.query,
      execute: (sql, params, options) => (options?.prepare === "idemgate_audit_argument_index" ? Promise.resolve(0) : before.db.execute(sql, params, options)),
    }),
    after: new PrismaAuditWriter(after.db.prisma, { mode: "durable", execute: after.db.execute, query: after.db.query }),
  };
  let token = 0;
  const intent = (which: "before" | "after") => {
    const now = new Date();
    return writers[which].intent({
      id: randomUUID(), scope: "bench", key: `k-${randomUUID()}`, tool: "bench.write", fingerprint: "f".repeat(64), token: ++token,
      session: null, caller: "bench", fallback: false, startedAt: now, leaseUntil: new Date(now.getTime() + 60_000), arguments: ARGS, argumentsKept: "redacted",
    });
  };
  const steps: Record<"bare" | "before" | "after", () => Promise<unknown>> = { bare, before: () => intent("before"), after: () => intent("after") };
  const times: Record<keyof typeof steps, number[]> = { bare: [], before: [], after: [] };
  const order: (keyof typeof steps)[] = ["bare", "before", "after"];
  // warm up: connections, prepared statements
  for (let i = 0; i < 100; i++) for (const s of order) await steps[s]();
  const load0 = os.loadavg();
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < calls; i++) {
    for (let j = 0; j < 3; j++) {
      const s = order[(i + j) % 3];
      const t0 = process.hrtime.bigint();
      await steps[s]();
      times[s].push(Number(process.hrtime.bigint() - t0) / 1_000);
    }
  }
  const cpu = process.cpuUsage(cpu0);
  const load1 = os.loadavg();
  await writers.before.close();
  await writers.after.close();
  // the WAL one intent's statement writes, in each layout (median of 50, each rolled back)
  const wal = async (db: typeof before.db) => {
    const bytes: number[] = [];
    for (let i = 0; i < 50; i++) {
      const rows = await db.prisma.$transaction(async (tx) => {
        const r = await tx.$queryRawUnsafe<{ "QUERY PLAN": [{ Plan: { "WAL Bytes": number } }] }[]>(
          `EXPLAIN (ANALYZE, WAL, FORMAT JSON) INSERT INTO executions (id, scope, key, tool, fingerprint, token, fallback, started_at, lease_until, arguments, arguments_kept)
           VALUES ('${randomUUID()}', 'bench', 'w-${i}', 'bench.write', '${"f".repeat(64)}', ${i}, false, now(), now(), '${ARGS}'::jsonb, 'redacted')`,
        );
        throw Object.assign(new Error("rollback"), { rows: r });
      }).catch((e: { rows?: { "QUERY PLAN": [{ Plan: { "WAL Bytes": number } }] }[] }) => e.rows!);
      bytes.push(rows[0]["QUERY PLAN"][0].Plan["WAL Bytes"]);
    }
    return median(bytes);
  };
  const indexed = await after.db.query(`SELECT count(*)::int AS n FROM execution_argument_index`, []);
  const p = (v: number[]) => `${median(v).toFixed(0)} µs`;
  console.log(JSON.stringify({
    calls,
    load: { start: load0.map((l) => l.toFixed(2)), end: load1.map((l) => l.toFixed(2)) },
    p50: { bare: p(times.bare), before: p(times.before), after: p(times.after) },
    ratio: { before: (median(times.before) / median(times.bare)).toFixed(2), after: (median(times.after) / median(times.bare)).toFixed(2), afterOverBefore: (median(times.after) / median(times.before)).toFixed(2) },
    walBytesPerIntentStatement: { before: await wal(before.db), after: await wal(after.db) },
    copiesWritten: indexed[0].n,
    processCpuPerRoundUs: ((cpu.user + cpu.system) / calls).toFixed(0),
  }, null, 1));
} finally {
  await before.drop();
  await after.drop();
}

import { createHash } from "node:crypto";
import { pathToFileURL } from "node:url";
import { Redis } from "ioredis";
import pg from "pg";
import { BUCKETS, KeySpace, bucketOf } from "@/lib/store/redis/key-names";
import { encodeRecord } from "@/lib/store/redis/record-codec";

/**
 * Fills a Redis key prefix and a PostgreSQL database with a deterministic console-sized dataset:
 * `keys` key records (same records in both stores) and `auditRows` audit rows (70 % executions,
 * 30 % suppressions) plus 1 % as many anomalies. Redis gets the record values and index entries
 * exactly as scripts/begin-3.lua and complete-1.lua write them (record-codec.ts, includes/record.lua,
 * KeySpace); PostgreSQL
 * gets INSERT … SELECT generate_series into the tables the SQL store and the audit log read.
 *
 *   npx tsx bench/seed-scale.ts --keys 1000000 --audit-rows 1000000 \
 *     --redis-prefix idgscale --database idemgate_scale   (creates the database; --drop removes both)
 */

export const SCALE_TOOLS = ["payments.charge", "payments.refund", "email.send", "tickets.create", "bench.write"] as const;
export const SCALE_SCOPES = 10;
const WINDOW_MS = 7 * 86_400_000; // records created over the last 7 days
const TTL_MS = 86_400_000;
const LEASE_MS = 60_000;
/** a payments.charge-like result body, the same for every done record */
export const RESULT_BODY = JSON.stringify({ chargeId: "ch_0123456789abcdef01234567", customerId: "cus_bench", amountCents: 1000, currency: "EUR", createdAt: "2026-11-29T12:00:00.000Z" });

export interface SeedRecord {
  scope: string;
  key: string;
  tool: string;
  fingerprint: string;
  status: "inflight" | "done";
  token: number;
  createdAtMs: number;
  deadlineMs: number;
  session: string | null;
  executionId: string;
}

/** Record i of n (i = n − 1 is the newest); PostgreSQL's seed computes the same in SQL. */
export function seedRecord(i: number, n: number, nowMs: number): SeedRecord {
  const createdAtMs = nowMs - Math.floor(((n - i) * WINDOW_MS) / n);
  const status = i % 100 < 3 ? "inflight" : "done";
  return {
    scope: `scope-${i % SCALE_SCOPES}`,
    key: `key-${String(i).padStart(8, "0")}`,
    tool: SCALE_TOOLS[i % SCALE_TOOLS.length],
    fingerprint: md5(String(i)) + md5(String(i + 1)),
    status,
    token: tokenOf(i),
    createdAtMs,
    deadlineMs: status === "inflight" ? createdAtMs + LEASE_MS : createdAtMs + TTL_MS,
    session: i % 2 === 0 ? `sess-${i % 1000}` : null,
    executionId: executionIdOf(i),
  };
}

const md5 = (s: string) => createHash("md5").update(s).digest("hex");

/**
 * Seeded tokens have the length of the ones begin-3.lua hands out (Redis' clock in microseconds, 16
 * digits), so a seeded record weighs what a real one does, and low bits that vary from record to
 * record as real ones do (the SQL store's state counters pick their slot from `token & 7`).
 */
const TOKEN_BASE = 1_765_000_000_000_000;
const tokenOf = (i: number) => TOKEN_BASE + (i + 1) * 16 + (i % 16);
const tokenSql = (i: string) => `(${TOKEN_BASE}::bigint + (${i} + 1)::bigint * 16 + (${i} % 16)::bigint)`;
const executionIdOf = (i: number) => `00000000-0000-4000-8000-${i.toString(16).padStart(12, "0")}`;

/** The record value as begin (and complete, for done) leave it. */
function recordValue(r: SeedRecord): string {
  const done = r.status === "done";
  return encodeRecord({
    tool: r.tool,
    fingerprint: r.fingerprint,
    status: r.status,
    token: r.token,
    createdAtMs: r.createdAtMs,
    leaseUntilMs: done ? null : r.deadlineMs,
    completedAtMs: done ? r.createdAtMs + 50 : null,
    expiresAtMs: done ? r.deadlineMs : null,
    result: done ? { status: 200, body: RESULT_BODY, final: false } : null,
    fallback: false,
    session: r.session,
    executionId: r.executionId,
    outcomeNote: null,
    unknownAtMs: null,
  });
}

export async function seedRedis(redis: Redis, prefix: string, n: number, nowMs: number): Promise<void> {
  const ks = new KeySpace(prefix);
  const CHUNK = 5_000;
  for (let start = 0; start < n; start += CHUNK) {
    const pipeline = redis.pipeline();
    const zsets = new Map<string, (string | number)[]>();
    /** "bucket \n scope" → the newest createdAtMs: the bucket's scopes index (includes/record.lua) */
    const scopes = new Map<string, number>();
    const add = (index: string, score: number, member: string) => {
      let list = zsets.get(index);
      if (!list) zsets.set(index, (list = []));
      list.push(score, member);
    };
    for (let i = start; i < Math.min(n, start + CHUNK); i++) {
      const r = seedRecord(i, n, nowMs);
      pipeline.set(ks.record(r.scope, r.key), recordValue(r));
      // every index entry addToIndexes (includes/record.lua) writes, and the bucket's scopes set
      for (const [index, score, member] of ks.entriesOf(r)) add(index, score, member);
      const at = `${bucketOf(r.scope, r.key)}\n${r.scope}`;
      scopes.set(at, Math.max(scopes.get(at) ?? 0, r.createdAtMs));
    }
    for (const [index, args] of zsets) pipeline.zadd(index, ...args);
    for (const [at, createdAtMs] of scopes) {
      const [bucket, scope] = at.split("\n");
      pipeline.zadd(ks.scopes(Number(bucket)), "GT", createdAtMs, scope);
    }
    await pipeline.exec();
  }
  // the bucket's epoch predates every record (nothing was lost); tokens continue after the seeded ones
  await Promise.all(BUCKETS.flatMap((b) => [redis.set(ks.epoch(b), String(nowMs - WINDOW_MS - 1)), redis.set(ks.token(b), String(tokenOf(n)))]));
}

/** INSERT … SELECT generate_series with the formulas of seedRecord; the schema must be migrated. */
export async function seedPostgres(client: pg.Client, n: number, auditRows: number, nowMs: number): Promise<void> {
  const tools = `ARRAY[${SCALE_TOOLS.map((t) => `'${t}'`).join(",")}]`;
  const created = (i: string) => `(${nowMs}::bigint - floor((${n}::numeric - ${i}) * ${WINDOW_MS} / ${n})::bigint)`;
  const ts = (ms: string) => `(to_timestamp((${ms})::float8 / 1000) AT TIME ZONE 'UTC')`;
  const keyOf = (i: string) => `'key-' || lpad(${i}::text, 8, '0')`;
  const scopeOf = (i: string) => `'scope-' || (${i} % ${SCALE_SCOPES})`;
  const toolOf = (i: string) => `(${tools})[${i} % ${SCALE_TOOLS.length} + 1]`;
  const fp = (i: string) => `md5(${i}::text) || md5((${i} + 1)::text)`;
  await client.query(`
    INSERT INTO idempotency_keys (scope, key, tool, fingerprint, status, token, created_at_ms, lease_until_ms, completed_at_ms,
      expires_at_ms, deadline_ms, result_status, result_body, final, fallback, session, execution_id)
    SELECT ${scopeOf("i")}, ${keyOf("i")}, ${toolOf("i")}, ${fp("i")}, CASE WHEN inflight THEN 'inflight' ELSE 'done' END, ${tokenSql("i")}, c,
      CASE WHEN inflight THEN c + ${LEASE_MS} END, CASE WHEN NOT inflight THEN c + 50 END, CASE WHEN NOT inflight THEN c + ${TTL_MS} END,
      CASE WHEN inflight THEN c + ${LEASE_MS} ELSE c + ${TTL_MS} END,
      CASE WHEN NOT inflight THEN 200 END, CASE WHEN NOT inflight THEN $1 END, false, false,
      CASE WHEN i % 2 = 0 THEN 'sess-' || (i % 1000) END, '00000000-0000-4000-8000-' || lpad(to_hex(i), 12, '0')
    FROM (SELECT i, ${created("i")} AS c, i % 100 < 3 AS inflight FROM generate_series(0, ${n - 1}) AS i) s`, [RESULT_BODY]);
  const executions = Math.round(auditRows * 0.7);
  const suppressions = auditRows - executions;
  // execution j is of record i = j·n/executions; suppression j replays record i a gap after it started. With more
  // executions than records, only a record's first execution may still be open (one open execution per key).
  await client.query(`
    INSERT INTO executions (id, scope, key, tool, fingerprint, token, session, caller, fallback, started_at, lease_until, outcome,
      finished_at, duration_ms, result_status, result_body, result_final, expires_at, error)
    SELECT 'e-' || j, ${scopeOf("i")}, ${keyOf("i")}, ${toolOf("i")}, ${fp("i")}, ${tokenSql("i")}, NULL, 'tok_bench', false, ${ts("c")},
      ${ts(`c + ${LEASE_MS}`)}, CASE WHEN open THEN NULL WHEN j % 50 = 0 THEN 'failed' ELSE 'succeeded' END,
      CASE WHEN NOT open THEN ${ts("c + 50")} END, CASE WHEN NOT open THEN ((j::bigint * 7919) % 500)::int END,
      CASE WHEN NOT open THEN 200 END, CASE WHEN NOT open THEN $1 END, false, ${ts(`c + ${TTL_MS}`)}, NULL
    FROM (SELECT j, i, ${created("i")} AS c,
            i % 100 < 3 AND (j = 0 OR ((j - 1)::bigint * ${n} / ${executions})::int <> i) AS open
          FROM (SELECT j, (j::bigint * ${n} / ${executions})::int AS i FROM generate_series(0, ${executions - 1}) AS j) x) s`,
    [RESULT_BODY]);
  await client.query(`
    INSERT INTO suppressions (id, scope, key, tool, kind, fallback, gap_ms, session, caller, original_session, original_execution_id, at)
    SELECT 's-' || j, ${scopeOf("i")}, ${keyOf("i")}, ${toolOf("i")},
      CASE j % 20 WHEN 0 THEN 'conflict' WHEN 1 THEN 'mismatch' ELSE 'replay' END, false, g, NULL, 'tok_bench', NULL,
      '00000000-0000-4000-8000-' || lpad(to_hex(i), 12, '0'), ${ts("c + g")}
    FROM (SELECT j, i, ${created("i")} AS c, ((j::bigint * 104729) % 30000)::int AS g
          FROM (SELECT j, (j::bigint * ${n} / ${Math.max(1, suppressions)})::int AS i FROM generate_series(0, ${suppressions - 1}) AS j) x) s`);
  const anomalies = Math.max(10, Math.round(n / 100));
  await client.query(`
    INSERT INTO anomalies (id, type, dedupe_key, tool, scope, key, status, summary, evidence, detected_at, updated_at)
    SELECT 'a-' || j, (ARRAY['orphan_unknown_outcome','stale_suppression','orphan_lost_completion'])[j % 3 + 1], 'bench:' || j,
      ${toolOf("i")}, ${scopeOf("i")}, ${keyOf("i")}, CASE WHEN j % 10 = 0 THEN 'resolved' ELSE 'open' END, 'seeded for the benchmark',
      '{}'::jsonb, ${ts("c + 120000")}, ${ts("c + 120000")}
    FROM (SELECT j, i, ${created("i")} AS c FROM (SELECT j, (j::bigint * ${n} / ${anomalies})::int AS i FROM generate_series(0, ${anomalies - 1}) AS j) x) s`);
  await client.query("ANALYZE idempotency_keys; ANALYZE executions; ANALYZE suppressions; ANALYZE anomalies");
}

async function main(): Promise<void> {
  const arg = (name: string, fallback?: string) => {
    const at = process.argv.indexOf(`--${name}`);
    return at === -1 ? fallback : process.argv[at + 1];
  };
  const keys = Number(arg("keys", "1000000"));
  const auditRows = Number(arg("audit-rows", String(keys)));
  const prefix = arg("redis-prefix", "idgscale")!;
  const database = arg("database", "idemgate_scale")!;
  const { openDatabase } = await import("@/lib/db/database");
  const { POSTGRES_ADMIN_URL, REDIS_TEST_URL } = await import("@/test/support/databases");
  const { deleteRedisPrefix } = await import("@/test/support/stores");
  const adminClient = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
  await adminClient.connect();
  await adminClient.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`);
  await deleteRedisPrefix(prefix);
  if (process.argv.includes("--drop")) {
    await adminClient.end();
    console.log(`dropped database ${database} and Redis prefix ${prefix}`);
    return;
  }
  await adminClient.query(`CREATE DATABASE "${database}"`);
  await adminClient.end();
  const url = new URL(POSTGRES_ADMIN_URL);
  url.pathname = `/${database}`;
  await (await openDatabase({ url: url.toString() })).close(); // migrations
  const nowMs = Date.now();
  const redis = new Redis(REDIS_TEST_URL);
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  const t0 = performance.now();
  await seedRedis(redis, prefix, keys, nowMs);
  const t1 = performance.now();
  await seedPostgres(client, keys, auditRows, nowMs);
  const t2 = performance.now();
  console.log(`seeded ${keys} keys into Redis prefix ${prefix} in ${((t1 - t0) / 1000).toFixed(1)} s and ${keys} keys + ${auditRows} audit rows into ${database} in ${((t2 - t1) / 1000).toFixed(1)} s`);
  await client.end();
  redis.disconnect();
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  main().then(
    () => process.exit(0),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}

/** INFO memory's used_memory: what the Redis server holds, in bytes. */
export async function usedMemory(redis: Redis): Promise<number> {
  const info = await redis.info("memory");
  return Number(/used_memory:(\d+)/.exec(info)![1]);
}

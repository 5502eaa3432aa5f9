import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { PrismaAuditWriter, type AuditMode } from "@/lib/audit/audit-writer";
import { Engine } from "@/lib/idempotency/engine";
import { ReplayCache } from "@/lib/idempotency/replay-cache";
import type { ToolPolicy } from "@/lib/idempotency/tool";
import { createRedisKeyStore } from "@/lib/store/redis/redis-key-store";
import { createTestPostgres, REDIS_TEST_URL } from "@/test/support/databases";
import { deleteRedisPrefix } from "@/test/support/stores";
import { median, timeSequential, type Row } from "./stats";

const tool: ToolPolicy = { name: "bench.write", kind: "write", ttlMs: 86_400_000, leaseMs: 60_000, stuckPolicy: "block", fallbackTtlMs: null, dedupes: false };
const noop = async () => ({ body: { ok: true } });
const ARGS = { customerId: "cus_bench", amountCents: 1_000, currency: "EUR" };

/**
 * Engine on the Redis store against the bare Redis commands it replaces, issued by the same client
 * in the same run: a first execution vs SET NX PX + SET, a replay vs GET. Rounds alternate the
 * measurements so drift hits all of them alike; each figure is the median of the rounds' medians.
 */
export async function benchEngine(options: { iterations: number; rounds: number }): Promise<Row[]> {
  const prefix = `idgbench-${randomUUID().slice(0, 8)}`;
  const pg = await createTestPostgres("bench");
  const redis = new Redis(REDIS_TEST_URL, { maxRetriesPerRequest: 1 });
  // the store as the server opens it; the bare commands go through their own plain connection
  const store = createRedisKeyStore(REDIS_TEST_URL, { prefix });
  await store.waitUntilReady(5_000);
  const writers: Record<AuditMode, PrismaAuditWriter> = {
    async: new PrismaAuditWriter(pg.db.prisma, { mode: "async", execute: pg.db.execute }),
    durable: new PrismaAuditWriter(pg.db.prisma, { mode: "durable", execute: pg.db.execute }),
  };
  const engines = {
    async: new Engine({ store, audit: writers.async }),
    durable: new Engine({ store, audit: writers.durable }),
    // as the server runs it: done keys this process has seen are replayed without the store
    cached: new Engine({ store, audit: writers.async, replayCache: new ReplayCache() }),
  };
  const n = options.iterations;
  const results: Record<string, number[]> = { pair: [], get: [], firstAsync: [], firstDurable: [], replay: [], replayCached: [] };
  try {
    // warm up: scripts loaded, connections open, JIT; then past the first seconds of the store's
    // epoch, in which every first execution also reads the audit log (see Engine.mayRecover)
    const warmStarted = Date.now();
    await timeSequential(200, (i) => engines.async.invoke(tool, noop, { scope: "warm", key: `w${i}`, args: ARGS }));
    await new Promise((r) => setTimeout(r, Math.max(0, 10_500 - (Date.now() - warmStarted))));
    await redis.set(`${prefix}:replay-bare`, "x".repeat(120));
    await engines.async.invoke(tool, noop, { scope: "bench", key: "replayed", args: ARGS });

    for (let round = 0; round < options.rounds; round++) {
      const tag = `${round}-${randomUUID().slice(0, 6)}`;
      results.pair.push(
        median(
          await timeSequential(n, async (i) => {
            const k = `${prefix}:bare:${tag}:${i}`;
            await redis.set(k, "inflight", "PX", 60_000, "NX");
            await redis.set(k, '{"status":200,"body":"{\\"ok\\":true}"}', "PX", 86_400_000);
          }),
        ),
      );
      results.firstAsync.push(median(await timeSequential(n, (i) => engines.async.invoke(tool, noop, { scope: "bench", key: `a:${tag}:${i}`, args: ARGS }))));
      results.firstDurable.push(median(await timeSequential(n, (i) => engines.durable.invoke(tool, noop, { scope: "bench", key: `d:${tag}:${i}`, args: ARGS }))));
      results.get.push(median(await timeSequential(n, () => redis.get(`${prefix}:replay-bare`))));
      results.replay.push(median(await timeSequential(n, () => engines.async.invoke(tool, noop, { scope: "bench", key: "replayed", args: ARGS }))));
      results.replayCached.push(median(await timeSequential(n, () => engines.cached.invoke(tool, noop, { scope: "bench", key: "replayed", args: ARGS }))));
      await writers.async.flush();
    }
    const m = Object.fromEntries(Object.entries(results).map(([k, v]) => [k, median(v)]));
    // the durable write a first execution adds: one committed single-row INSERT, issued bare
    // through the same driver (pg's pool), as the audit writer issues it
    await pg.db.prisma.$executeRawUnsafe(`CREATE TABLE bench_bare_insert (id text PRIMARY KEY, scope text, key text, started_at timestamptz)`);
    const pgWrite = median(
      await timeSequential(n, () => pg.db.execute(`INSERT INTO bench_bare_insert VALUES ($1, 'bench', 'k', now())`, [randomUUID()])),
    );
    return [
      { section: "engine", name: "bare SET NX PX + SET (2 round trips)", value: m.pair, unit: "µs" },
      { section: "engine", name: "engine first execution, audit async", value: m.firstAsync, unit: "µs", baseline: "bare pair", ratio: m.firstAsync / m.pair, target: "≤ 1.3×" },
      { section: "engine", name: "engine first execution, audit durable", value: m.firstDurable, unit: "µs", baseline: "bare pair", ratio: m.firstDurable / m.pair },
      { section: "engine", name: "bare committed INSERT into PostgreSQL", value: pgWrite, unit: "µs" },
      { section: "engine", name: "durable − async (extra per first execution)", value: m.firstDurable - m.firstAsync, unit: "µs", baseline: "bare INSERT", ratio: (m.firstDurable - m.firstAsync) / pgWrite, target: "≤ 1 write round trip" },
      { section: "engine", name: "bare GET", value: m.get, unit: "µs" },
      { section: "engine", name: "engine replay from the key store (replay cache off, or a key this process has not seen)", value: m.replay, unit: "µs", baseline: "bare GET", ratio: m.replay / m.get, target: "≤ 1.2×" },
      { section: "engine", name: "engine replay, replay cache on (server default; a key this process completed or replayed)", value: m.replayCached, unit: "µs", baseline: "bare GET", ratio: m.replayCached / m.get, target: "≤ 1.2×" },
    ];
  } finally {
    await writers.async.close();
    await writers.durable.close();
    await store.close();
    await deleteRedisPrefix(prefix);
    await pg.drop();
  }
}


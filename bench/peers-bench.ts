import { randomUUID } from "node:crypto";
import { IdempotencyConfig, makeIdempotent } from "@aws-lambda-powertools/idempotency";
import { CachePersistenceLayer } from "@aws-lambda-powertools/idempotency/cache";
import { Idempotency } from "@node-idempotency/core";
import { RedisStorageAdapter } from "@node-idempotency/storage-adapter-redis";
import { createClient } from "@redis/client";
import { Redis } from "ioredis";
import { PrismaAuditWriter, type AuditMode } from "@/lib/audit/audit-writer";
import { Engine } from "@/lib/idempotency/engine";
import { ReplayCache } from "@/lib/idempotency/replay-cache";
import type { ToolPolicy } from "@/lib/idempotency/tool";
import { createRedisKeyStore } from "@/lib/store/redis/redis-key-store";
import { createTestPostgres, REDIS_TEST_URL } from "@/test/support/databases";
import { deleteRedisPrefix } from "@/test/support/stores";
import { medianRound, timeConcurrent, type LoadRound, type Row } from "./stats";

const tool: ToolPolicy = { name: "bench.write", kind: "write", ttlMs: 86_400_000, leaseMs: 60_000, stuckPolicy: "block", fallbackTtlMs: null, dedupes: false };
const ARGS = { customerId: "cus_bench", amountCents: 1_000, currency: "EUR" };
const RESULT = { ok: true };

/** One system under test: a call with a key runs the no-op write once and replays it afterwards. */
interface Contender {
  name: string;
  call: (key: string) => Promise<unknown>;
  /** waits until work the calls left behind (queued audit rows) is done, so it does not load the next measurement */
  settle?: () => Promise<void>;
  /** said next to its first-execution row (e.g. how many intents a commit carried) */
  note?: () => string;
  close: () => Promise<void>;
}

export interface PeersOptions {
  calls: number;
  concurrency: number;
  rounds: number;
}

/**
 * Idemgate's engine (audit async and durable) against @aws-lambda-powertools/idempotency (its
 * cache persistence layer on node-redis) and @node-idempotency/core (its Redis storage adapter),
 * all on the same Redis, with bare Redis commands as the baseline: `concurrency` callers in this
 * process share `calls` calls, a fresh key per call for first executions, one fixed key for
 * replays. Rounds rotate through the contenders so drift hits them alike.
 */
export async function benchPeers(options: PeersOptions): Promise<Row[]> {
  const prefix = `idgbench-peers-${randomUUID().slice(0, 8)}`;
  const opened: Contender[] = [];
  const failures: Row[] = [];
  try {
    opened.push(bareRedis(prefix));
    opened.push(await idemgate(prefix, "async", true));
    opened.push(await idemgate(prefix, "async", false));
    opened.push(await idemgate(prefix, "durable", true));
    const peers: [string, () => Promise<Contender>][] = [
      ["@aws-lambda-powertools/idempotency", () => powertools(prefix, false)],
      ["@aws-lambda-powertools/idempotency, useLocalCache", () => powertools(prefix, true)],
      ["@node-idempotency/core", () => nodeIdempotency(prefix)],
    ];
    for (const [name, open] of peers) {
      try {
        opened.push(await open());
      } catch (err) {
        failures.push({ section: "peers", name, value: NaN, unit: "calls/s", note: `could not run: ${(err as Error).message}` });
      }
    }
    // every contender once, so clients connect, scripts load and the JIT warms up; then past the
    // first seconds of Idemgate's store epoch, in which first executions also read the audit log
    const warmStarted = Date.now();
    for (const c of opened) {
      await timeConcurrent(500, options.concurrency, (i) => c.call(`warm:${i}`));
      await c.call("replayed");
    }
    await new Promise((r) => setTimeout(r, Math.max(0, 10_500 - (Date.now() - warmStarted))));
    const first = new Map<string, LoadRound[]>();
    const replay = new Map<string, LoadRound[]>();
    for (let round = 0; round < options.rounds; round++) {
      const tag = `${round}-${randomUUID().slice(0, 6)}`;
      // each round starts one contender later, so no contender always runs right after the same one
      for (const c of [...opened.slice(round % opened.length), ...opened.slice(0, round % opened.length)]) {
        push(first, c.name, await timeConcurrent(options.calls, options.concurrency, (i) => c.call(`f:${tag}:${i}`)));
        await c.settle?.();
        push(replay, c.name, await timeConcurrent(options.calls, options.concurrency, () => c.call("replayed")));
        await c.settle?.();
      }
    }
    const rows: Row[] = [];
    for (const [label, results] of [["first execution", first], ["replay", replay]] as const) {
      const base = medianRound(results.get(BARE)!);
      for (const c of opened) {
        const m = medianRound(results.get(c.name)!);
        const isBase = c.name === BARE;
        rows.push({
          section: "peers",
          name: `${label}: ${isBase ? (label === "replay" ? "bare GET" : "bare SET NX PX + SET") : c.name}`,
          value: m.throughput,
          unit: "calls/s",
          p50: m.p50,
          tail: { label: "p99", ms: m.p99 },
          ...(isBase ? {} : { baseline: label === "replay" ? "bare GET" : "bare pair", ratio: m.throughput / base.throughput }),
          ...(label === "first execution" && c.note ? { note: c.note() } : {}),
        });
      }
    }
    // what writing each intent before its tool runs costs at this concurrency (group commit)
    const durable = medianRound(first.get(idemgateName("durable", true))!);
    const async = medianRound(first.get(idemgateName("async", true))!);
    rows.push({
      section: "peers",
      name: `first execution: audit durable vs audit async, ${options.concurrency} callers`,
      value: durable.throughput,
      unit: "calls/s",
      p50: durable.p50,
      tail: { label: "p99", ms: durable.p99 },
      baseline: "audit async",
      ratio: durable.throughput / async.throughput,
      target: "≥ 0.8×",
    });
    // issue 14: the engine's first executions (audit async, the server's default replay cache) per peer
    for (const [peer, target] of [[POWERTOOLS, "≥ 1.0×"], [NODE_IDEMPOTENCY, "≥ 0.5×"]] as const) {
      const theirs = first.get(peer);
      if (!theirs) continue;
      const p = medianRound(theirs);
      rows.push({
        section: "peers",
        name: `first execution, audit async, ${options.concurrency} callers: Idemgate vs ${peer.split(" (")[0]}`,
        value: async.throughput,
        unit: "calls/s",
        baseline: `${p.throughput.toFixed(0)} calls/s`,
        ratio: async.throughput / p.throughput,
        target,
      });
    }
    return [...rows, ...failures];
  } finally {
    for (const c of opened) await c.close().catch(() => {});
    await deleteRedisPrefix(prefix);
  }
}

const BARE = "bare Redis";
const POWERTOOLS = "@aws-lambda-powertools/idempotency 2.35.0 (cache layer, @redis/client)";
const NODE_IDEMPOTENCY = "@node-idempotency/core 1.0.11 (storage-adapter-redis 1.0.2)";

function push(map: Map<string, LoadRound[]>, name: string, round: LoadRound): void {
  map.set(name, [...(map.get(name) ?? []), round]);
}

/** What any Redis-based layer must at least do: SET NX PX then SET (first), GET (replay). */
function bareRedis(prefix: string): Contender {
  const redis = new Redis(REDIS_TEST_URL, { enableAutoPipelining: true, maxRetriesPerRequest: 1 });
  const body = JSON.stringify({ status: 200, body: JSON.stringify(RESULT) });
  return {
    name: BARE,
    async call(key) {
      const k = `${prefix}:bare:${key}`;
      if (key === "replayed") return redis.get(k);
      await redis.set(k, "inflight", "PX", 60_000, "NX");
      await redis.set(k, body, "PX", 86_400_000);
    },
    close: async () => void (await redis.quit()),
  };
}

async function idemgate(prefix: string, mode: AuditMode, replayCache: boolean): Promise<Contender> {
  // Each its own audit database: a key store is new next to an audit log that already holds results
  // only after a store loss, and then first executions also read the log until their TTL has passed.
  const pg = await createTestPostgres("bench_peers");
  // the production store: one auto-pipelined ioredis connection
  const store = createRedisKeyStore(REDIS_TEST_URL, { prefix: `${prefix}-idg-${mode}-${replayCache ? "c" : "n"}` });
  await store.waitUntilReady(5_000);
  const audit = new PrismaAuditWriter(pg.db.prisma, { mode, execute: pg.db.execute });
  // the server's default keeps a replay cache (IDEMGATE_REPLAY_CACHE_ENTRIES)
  const engine = new Engine({ store, audit, replayCache: replayCache ? new ReplayCache() : null });
  return {
    name: idemgateName(mode, replayCache),
    call: (key) => engine.invoke(tool, async () => ({ body: RESULT }), { scope: "bench", key, args: ARGS }),
    settle: () => audit.flush(),
    // durable: how many intents a commit carried, on average over the whole run
    note:
      mode === "durable"
        ? () => {
            const { commits, intents } = audit.intentStats;
            return `${(intents / commits).toFixed(1)} intents per commit (group commit)`;
          }
        : undefined,
    async close() {
      await audit.close();
      await store.close();
      await pg.drop();
    },
  };
}

function idemgateName(mode: AuditMode, replayCache: boolean): string {
  return `Idemgate engine, audit ${mode}, replay cache ${replayCache ? "on (server default)" : "off"}`;
}

/** Powertools 2.35 outside Lambda: makeIdempotent on a plain function, no Lambda context needed. */
async function powertools(prefix: string, useLocalCache: boolean): Promise<Contender> {
  const client = await createClient({ url: REDIS_TEST_URL }).connect();
  const persistenceStore = new CachePersistenceLayer({ client });
  // The key names the action. No payloadValidationJmesPath: the cache layer's _updateRecord does not
  // keep the validation hash when it completes a record, so every replay with validation on fails
  // with IdempotencyValidationError ("Payload does not match stored record"). Without it the
  // arguments are not checked against the key (Idemgate and @node-idempotency do check them).
  // useLocalCache: its own in-memory LRU of completed records, off by default (the peer of Idemgate's replay cache)
  const config = new IdempotencyConfig({ eventKeyJmesPath: "key", expiresAfterSeconds: 86_400, throwOnNoIdempotencyKey: true, useLocalCache });
  // Outside Lambda there is no context: without one every call logs a warning and the in-progress
  // record gets no lease. A stand-in context gives it the same 60 s lease as Idemgate's tool.
  config.registerLambdaContext({ getRemainingTimeInMillis: () => 60_000 } as Parameters<IdempotencyConfig["registerLambdaContext"]>[0]);
  const run = makeIdempotent(async (_event: { key: string; args: typeof ARGS }) => RESULT, {
    persistenceStore,
    keyPrefix: `${prefix}-powertools-${useLocalCache ? "c" : "n"}`,
    config,
  });
  return {
    name: `${POWERTOOLS}${useLocalCache ? ", useLocalCache" : ""}`,
    call: (key) => run({ key, args: ARGS }),
    close: async () => void (await client.quit()),
  };
}

/** @node-idempotency/core 1.0.11: onRequest (SET NX, GET on a hit) and onResponse (SET) around the handler. */
async function nodeIdempotency(prefix: string): Promise<Contender> {
  const storage = new RedisStorageAdapter({ url: REDIS_TEST_URL });
  await storage.connect();
  const idem = new Idempotency(storage, { cacheKeyPrefix: `${prefix}-nodeidem`, cacheTTLMS: 86_400_000, enforceIdempotency: true });
  return {
    name: NODE_IDEMPOTENCY,
    async call(key) {
      const req = { headers: { "idempotency-key": key }, path: "/tools/bench.write/invoke", method: "POST", body: ARGS };
      const cached = await idem.onRequest(req);
      if (cached) return cached;
      const res = { body: RESULT };
      await idem.onResponse(req, res);
      return res;
    },
    close: () => storage.disconnect(),
  };
}

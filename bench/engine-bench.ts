import { randomBytes, randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import pgDriver from "pg";
import { PrismaAuditWriter, type AuditMode } from "@/lib/audit/audit-writer";
import { Engine } from "@/lib/idempotency/engine";
import { ReplayCache } from "@/lib/idempotency/replay-cache";
import { DEFAULT_SCOPE_RESULT_BYTES, ScopeResultLimit } from "@/lib/idempotency/scope-result-limit";
import type { ToolPolicy } from "@/lib/idempotency/tool";
import { DEFAULT_PREFIX, KeySpace } from "@/lib/store/redis/key-names";
import { createRedisClusterKeyStore, createRedisKeyStore, type RedisKeyStore } from "@/lib/store/redis/redis-key-store";
import { findFreePorts, startRedisCluster } from "@/scripts/redis-cluster.mjs";
import { createTestPostgres, REDIS_TEST_URL } from "@/test/support/databases";
import { deleteRedisPrefix } from "@/test/support/stores";
import { RESULT_BODY, seedRecord, seedRedis, usedMemory } from "./seed-scale";
import { median, medianRound, timeConcurrent, timeSequential, type LoadRound, type Row } from "./stats";

const tool: ToolPolicy = { name: "bench.write", kind: "write", ttlMs: 86_400_000, leaseMs: 60_000, stuckPolicy: "block", fallbackTtlMs: null, dedupes: false };
const noop = async () => ({ body: { ok: true } });
const ARGS = { customerId: "cus_bench", amountCents: 1_000, currency: "EUR" };

/**
 * Engine on the Redis store against the bare Redis commands it replaces, issued by the same client
 * in the same run: a first execution vs SET NX PX + SET, a replay vs GET. Rounds alternate the
 * measurements so drift hits all of them alike; each figure is the median of the rounds' medians.
 */
export async function benchEngine(options: {
  iterations: number;
  rounds: number;
  /** keys seeded for the memory row; default 100,000 (a quick run, fewer than 1,000 iterations: 20,000 and 40,000) */
  memoryKeys?: number;
  /** the cluster rows' load; default 5,000 calls (2,000 quick) by 50 callers, 5 rounds (3 quick) */
  cluster?: { calls: number; concurrency: number; rounds: number };
}): Promise<Row[]> {
  const quick = options.iterations < 1_000;
  const rows = await benchEngineSequential(options);
  // a quick run measures both encodings a scope's own indexes have: compact (listpack, under about
  // 20,500 keys at the seed's 10 scopes) and as a deployment with busy tenants has them (skiplist)
  for (const n of options.memoryKeys !== undefined ? [options.memoryKeys] : quick ? [20_000, 40_000] : [100_000]) rows.push(...(await benchRecordMemory(n)));
  try {
    rows.push(...(await benchCluster(options.cluster ?? { calls: quick ? 2_000 : 5_000, concurrency: 50, rounds: quick ? 3 : 5 })));
  } catch (err) {
    rows.push({ section: "engine cluster", name: "Redis Cluster (3 masters)", value: NaN, unit: "calls/s", note: `could not run: ${(err as Error).message.split("\n")[0]}` });
  }
  return rows;
}

async function benchEngineSequential(options: { iterations: number; rounds: number }): Promise<Row[]> {
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
  // the durable engine's parts, timed where they are awaited: the begin script, the intent's
  // commit, the complete script (the same store and writer, wrapped)
  const spans: Record<"begin" | "intent" | "complete", number[]> = { begin: [], intent: [], complete: [] };
  const timed = <A extends unknown[], R>(span: keyof typeof spans, fn: (...a: A) => Promise<R>) =>
    async (...a: A): Promise<R> => {
      const t0 = process.hrtime.bigint();
      try {
        return await fn(...a);
      } finally {
        spans[span].push(Number(process.hrtime.bigint() - t0) / 1_000);
      }
    };
  // every other member is the original's, bound to it
  const wrap = <T extends object>(target: T, own: Partial<T>): T =>
    new Proxy(target, {
      get: (t, name) => {
        if (name in own) return own[name as keyof T];
        const v = Reflect.get(t, name, t) as unknown;
        return typeof v === "function" ? v.bind(t) : v;
      },
    });
  const timedStore = wrap(store, { begin: timed("begin", store.begin.bind(store)), complete: timed("complete", store.complete.bind(store)) });
  const timedAudit = wrap(writers.durable, { intent: timed("intent", writers.durable.intent.bind(writers.durable)) });
  const engines = {
    async: new Engine({ store, audit: writers.async }),
    durable: new Engine({ store, audit: writers.durable }),
    spans: new Engine({ store: timedStore, audit: timedAudit }),
    // as the server runs it: done keys this process has seen are replayed without the store
    cached: new Engine({ store, audit: writers.async, replayCache: new ReplayCache() }),
    // replays through the begin script, as for a tool whose calls are mostly new keys
    script: new Engine({ store, audit: writers.async, replayReads: "never" }),
    // as lib/server/runtime.ts opens it: the replay cache and the per-scope limit on stored results
    // (whose count a completion adds to the store), so what the server adds to a first execution shows here
    server: new Engine({ store, audit: writers.durable, replayCache: new ReplayCache(), scopeResultLimit: new ScopeResultLimit(store.resultBytes, DEFAULT_SCOPE_RESULT_BYTES) }),
  };
  const n = options.iterations;
  const results: Record<string, number[]> = { pair: [], get: [], firstAsync: [], firstDurable: [], firstServer: [], pgWrite: [], intentPaired: [], barePaired: [], firstSpans: [], begin: [], intent: [], complete: [], rest: [], replay: [], replayScript: [], replayCached: [] };
  // the durable write a first execution adds: one committed single-row INSERT, issued bare through
  // the same driver (pg's pool), as the audit writer issues it; measured in every round, beside the
  // engine, since a commit's time is the machine's WAL flush and moves with the load
  await pg.db.execute(`CREATE TABLE bench_bare_insert (id text PRIMARY KEY, scope text, key text, started_at timestamptz)`, []);
  const bareInsert = () => pg.db.execute(`INSERT INTO bench_bare_insert VALUES ($1, 'bench', 'k', now())`, [randomUUID()]);
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
      results.firstServer.push(median(await timeSequential(n, (i) => engines.server.invoke(tool, noop, { scope: "bench", key: `v:${tag}:${i}`, args: ARGS }))));
      results.pgWrite.push(median(await timeSequential(n, bareInsert)));
      for (const span of Object.values(spans)) span.length = 0;
      const totals = await timeSequential(n, (i) => engines.spans.invoke(tool, noop, { scope: "bench", key: `s:${tag}:${i}`, args: ARGS }));
      results.firstSpans.push(median(totals));
      for (const span of ["begin", "intent", "complete"] as const) results[span].push(median(spans[span]));
      // what the three parts leave of each call (one of each per first execution)
      results.rest.push(median(totals.map((t, i) => t - spans.begin[i] - spans.intent[i] - spans.complete[i])));
      // the intent's commit and a bare committed INSERT in turn, call by call, so that both meet the
      // same WAL flushes (on a shared machine a commit's time moves within seconds)
      for (const span of Object.values(spans)) span.length = 0;
      const bare: number[] = [];
      for (let i = 0; i < n; i++) {
        const t0 = process.hrtime.bigint();
        await bareInsert();
        bare.push(Number(process.hrtime.bigint() - t0) / 1_000);
        await engines.spans.invoke(tool, noop, { scope: "bench", key: `p:${tag}:${i}`, args: ARGS });
      }
      results.intentPaired.push(median(spans.intent));
      results.barePaired.push(median(bare));
      results.get.push(median(await timeSequential(n, () => redis.get(`${prefix}:replay-bare`))));
      results.replay.push(median(await timeSequential(n, () => engines.async.invoke(tool, noop, { scope: "bench", key: "replayed", args: ARGS }))));
      results.replayScript.push(median(await timeSequential(n, () => engines.script.invoke(tool, noop, { scope: "bench", key: "replayed", args: ARGS }))));
      results.replayCached.push(median(await timeSequential(n, () => engines.cached.invoke(tool, noop, { scope: "bench", key: "replayed", args: ARGS }))));
      await writers.async.flush();
    }
    const m = Object.fromEntries(Object.entries(results).map(([k, v]) => [k, median(v)]));
    const pgWrite = m.pgWrite;
    const statement = await intentStatementCost(pg.url, n);
    return [
      { section: "engine", name: "bare SET NX PX + SET (2 round trips)", value: m.pair, unit: "µs" },
      { section: "engine", name: "engine first execution, audit async, sequential p50", value: m.firstAsync, unit: "µs", baseline: "bare pair", ratio: m.firstAsync / m.pair, target: "≤ 2.0×" },
      { section: "engine", name: "engine first execution, audit durable", value: m.firstDurable, unit: "µs", baseline: "bare pair", ratio: m.firstDurable / m.pair },
      {
        section: "engine",
        name: "engine first execution, audit durable, as the server opens it (replay cache, per-scope result limit)",
        value: m.firstServer,
        unit: "µs",
        baseline: "the same without them",
        ratio: m.firstServer / m.firstDurable,
      },
      { section: "engine", name: "bare committed INSERT into PostgreSQL", value: pgWrite, unit: "µs" },
      { section: "engine", name: "durable − async (extra per first execution)", value: m.firstDurable - m.firstAsync, unit: "µs", baseline: "bare INSERT", ratio: (m.firstDurable - m.firstAsync) / pgWrite, target: "≤ 1 write round trip" },
      {
        section: "engine",
        name: "durable first execution's parts (p50 of each): store.begin, audit.intent (the intent's commit), store.complete, the rest",
        value: m.firstSpans,
        unit: "µs",
        note: `begin ${m.begin.toFixed(0)} µs, intent ${m.intent.toFixed(0)} µs, complete ${m.complete.toFixed(0)} µs, the rest of each call (engine, fingerprint, tool, queueing the outcome) ${m.rest.toFixed(0)} µs`,
      },
      { section: "engine", name: "audit.intent, the intent's commit, p50", value: m.intent, unit: "µs", baseline: "bare INSERT", ratio: m.intent / pgWrite, target: "≤ 1.5×" },
      {
        section: "engine",
        name: "audit.intent, the intent's commit, p50, against a bare committed INSERT made just before each one",
        value: m.intentPaired,
        unit: "µs",
        baseline: "bare INSERT, interleaved",
        ratio: m.intentPaired / m.barePaired,
        target: "≤ 1.5×",
        note: `bare committed INSERT ${m.barePaired.toFixed(0)} µs`,
      },
      {
        section: "engine",
        name: "the intent's statement (prepared, as the audit writer sends it) without its commit wait (synchronous_commit off), p50",
        value: statement.intent,
        unit: "µs",
        baseline: "bare INSERT, same",
        ratio: statement.intent / statement.bare,
        note: `bare INSERT ${statement.bare.toFixed(0)} µs; the same intent parsed and planned on every call (unnamed) ${statement.unprepared.toFixed(0)} µs; without kept arguments ${statement.noArguments.toFixed(0)} µs`,
      },
      { section: "engine", name: "bare GET", value: m.get, unit: "µs" },
      { section: "engine", name: "engine replay from the key store (another process's key; replay cache off), sequential p50", value: m.replay, unit: "µs", baseline: "bare GET", ratio: m.replay / m.get, target: "≤ 1.5×", note: "a stream of duplicates: the engine reads the key (one GET) before reserving it" },
      { section: "engine", name: "engine replay from the key store through the begin script (a tool whose calls are mostly new keys)", value: m.replayScript, unit: "µs", baseline: "bare GET", ratio: m.replayScript / m.get },
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


/**
 * What the intent's INSERT costs PostgreSQL apart from waiting for its commit's WAL flush (which on
 * a shared machine is most of a commit, and noisy): the intent as the audit writer sends it (a named
 * statement, kept prepared on the connection), the same parsed and planned on every call (unnamed,
 * as before the writer named it), the same without kept arguments, and a bare one-index INSERT,
 * each on a connection with synchronous_commit off, rounds interleaved.
 */
async function intentStatementCost(url: string, n: number): Promise<{ bare: number; intent: number; unprepared: number; noArguments: number }> {
  const client = new pgDriver.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query("SET synchronous_commit = off");
    const fp = "f".repeat(64);
    const args = JSON.stringify(ARGS);
    const text = `INSERT INTO executions (id, scope, key, tool, fingerprint, token, session, caller, transport, fallback, started_at, lease_until, arguments, arguments_kept)
      VALUES ($1, $2, $3, $4, $5, $6::bigint, $7, $8, $9, $10::boolean, $11::timestamptz AT TIME ZONE 'UTC', $12::timestamptz AT TIME ZONE 'UTC', $13::jsonb, $14)`;
    const intent = (kept: string | null, name?: string) => (i: number) => {
      const now = Date.now();
      const values = [randomUUID(), "stmt", `k-${randomUUID()}`, "bench.write", fp, String(i + 1), null, "bench", "http", false,
        new Date(now).toISOString(), new Date(now + 60_000).toISOString(), kept, kept === null ? null : "redacted"];
      return name ? client.query({ name, text, values }) : client.query(text, values);
    };
    const bare = () => client.query({ name: "bare", text: `INSERT INTO bench_bare_insert VALUES ($1, 'bench', 'k', now())`, values: [randomUUID()] });
    const out = { bare: [] as number[], intent: [] as number[], unprepared: [] as number[], noArguments: [] as number[] };
    for (let round = 0; round < 4; round++) {
      out.bare.push(median(await timeSequential(n, bare)));
      out.intent.push(median(await timeSequential(n, intent(args, "intent"))));
      out.unprepared.push(median(await timeSequential(n, intent(args))));
      out.noArguments.push(median(await timeSequential(n, intent(null, "intent"))));
    }
    // the first round warms the connection and the statements
    const m = (v: number[]) => median(v.slice(1));
    return { bare: m(out.bare), intent: m(out.intent), unprepared: m(out.unprepared), noArguments: m(out.noArguments) };
  } finally {
    await client.end();
  }
}

/**
 * Redis memory per done record without its result: MEMORY USAGE of sampled done records minus
 * the result body, plus their share of each index they are in (MEMORY USAGE of the index over its
 * size). Seeded as the scripts write records (bench/seed-scale.ts), under a key prefix as long as
 * the product's default (DEFAULT_PREFIX, "idg"): every key name starts with it, and a record's key
 * name is part of what it costs. A done record is in its scope's own three indexes (status,
 * created, key), and its scope in its bucket's scopes set (one member per scope and bucket, not
 * per record: not counted). A scope's indexes (10 scopes, 16 buckets) are past their small
 * (listpack) encoding from about 20,500 keys (over 128 entries each), so a quick run's 20,000 keys
 * measure them compact and its 40,000 as every larger store holds them: the note names the encodings.
 */
export async function benchRecordMemory(n: number): Promise<Row[]> {
  const redis = new Redis(REDIS_TEST_URL, { maxRetriesPerRequest: 1 });
  let prefix: string | null = null;
  try {
    prefix = await claimPrefix(redis, DEFAULT_PREFIX.length);
    const nowMs = Date.now();
    // the whole server's view too (INFO used_memory before and after, as the console section
    // measures): it also counts the inflight 3 % and the keyspace's own tables, and moves by
    // whatever else the server does meanwhile
    const usedBefore = await usedMemory(redis);
    await seedRedis(redis, prefix, n, nowMs);
    const usedPerKey = ((await usedMemory(redis)) - usedBefore) / n - RESULT_BODY.length;
    const ks = new KeySpace(prefix);
    const perEntry = new Map<string, number>();
    const encodings = new Set<string>();
    const sampled: string[] = [];
    let record = 0;
    let indexes = 0;
    let samples = 0;
    let entries = 0;
    for (let i = 7; i < n && samples < 300; i += Math.max(1, Math.floor(n / 400))) {
      const r = seedRecord(i, n, nowMs);
      if (r.status !== "done") continue;
      samples++;
      sampled.push(ks.record(r.scope, r.key));
      record += Number(await redis.memory("USAGE", ks.record(r.scope, r.key), "SAMPLES", 0)) - RESULT_BODY.length;
      const listed = ks.indexesOf(r.scope, r.key, r.tool, r.status);
      entries = listed.length;
      for (const index of listed) {
        let bytes = perEntry.get(index);
        if (bytes === undefined) {
          bytes = Number(await redis.memory("USAGE", index, "SAMPLES", 0)) / Number(await redis.zcard(index));
          perEntry.set(index, bytes);
          encodings.add(String(await redis.object("ENCODING", index)));
        }
        indexes += bytes;
      }
    }
    // A value is allocated in a jemalloc size class (64-B steps from 256 to 512 B), so what a record
    // costs over its result depends on the result's length. The same records with their result
    // lengthened by 0–63 B (one step) average that out.
    let spread = 0;
    for (const [j, key] of sampled.entries()) {
      const pad = j % 64;
      // SET, not APPEND: an appended value keeps spare room
      await redis.set(key, (await redis.get(key))! + " ".repeat(pad));
      spread += Number(await redis.memory("USAGE", key, "SAMPLES", 0)) - RESULT_BODY.length - pad;
    }
    const total = (record + indexes) / samples;
    const per = (bytes: number) => `${(bytes / samples).toFixed(0)} B`;
    return [
      {
        section: "engine",
        name: `Redis memory per done record without the result (MEMORY USAGE of the record and its ${entries} index entries, ${n.toLocaleString("en-US")} keys)`,
        value: total,
        unit: "B",
        target: "≤ 800 B",
        note:
          `record ${per(record)} without its ${RESULT_BODY.length} B result (${per(spread)} averaged over results ` +
          `${RESULT_BODY.length}–${RESULT_BODY.length + 63} B long), index entries ${per(indexes)} ` +
          `(the scope's own, ${[...encodings].join(" and ")}); ` +
          `key prefix of the default's length (${DEFAULT_PREFIX.length} characters): a longer one adds to each record's key name; ` +
          `INFO used_memory Δ over the seeding: ${usedPerKey.toFixed(0)} B per key without its result`,
      },
    ];
  } finally {
    if (prefix !== null) await deleteKeySpace(redis, prefix);
    redis.disconnect();
  }
}

/**
 * A key prefix of `length` characters ("m" and random [a-z0-9]) that nothing in Redis uses: claimed
 * with SET NX on a key of its own, then checked free by SCAN (no other key under `{<prefix>:`).
 * Another is drawn when either fails. Delete it with deleteKeySpace.
 */
async function claimPrefix(redis: Redis, length: number): Promise<string> {
  const chars = "abcdefghijklmnopqrstuvwxyz0123456789";
  for (let attempt = 0; attempt < 50; attempt++) {
    let prefix = "m";
    for (const byte of randomBytes(length - 1)) prefix += chars[byte % chars.length];
    const claim = `{${prefix}:claim}`;
    if ((await redis.set(claim, String(process.pid), "EX", 3_600, "NX")) !== "OK") continue;
    if ((await keysOfKeySpace(redis, prefix)).every((k) => k === claim)) return prefix;
    await redis.del(claim); // another's keys are there: leave them
  }
  throw new Error(`no free Redis key prefix of ${length} characters found`);
}

/** Every key under `{<prefix>:` (each KeySpace key starts with its hash tag). */
async function keysOfKeySpace(redis: Redis, prefix: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `{${prefix.replace(/[*?[\]\\]/g, "\\$&")}:*`, "COUNT", 1_000);
    found.push(...keys);
    cursor = next;
  } while (cursor !== "0");
  return found;
}

async function deleteKeySpace(redis: Redis, prefix: string): Promise<void> {
  const keys = await keysOfKeySpace(redis, prefix);
  for (let i = 0; i < keys.length; i += 500) await redis.del(...keys.slice(i, i + 500));
}

/**
 * The engine on a local Redis Cluster of 3 masters (scripts/redis-cluster.mjs) next to one Redis
 * server, in the same run: `concurrency` callers, first executions (a fresh key each) and replays
 * of one key from the store (no replay cache), audit async, rounds alternating the two stores. On
 * one machine the masters share its cores with the benchmark, so this shows what the cluster's
 * routing costs, not what more machines would add.
 */
export async function benchCluster(options: { calls: number; concurrency: number; rounds: number }): Promise<Row[]> {
  const prefix = `idgbench-cl-${randomUUID().slice(0, 8)}`;
  const cluster = await startRedisCluster({ ports: await findFreePorts(3, 7151) });
  // an audit database per store: a store newer than results in its audit log looks like one that
  // lost its data, and its first executions would all read the log (store-loss recovery)
  const pgs = { one: await createTestPostgres("bench_cluster"), cluster: await createTestPostgres("bench_cluster") };
  const stores: Record<"one" | "cluster", RedisKeyStore> = {
    one: createRedisKeyStore(REDIS_TEST_URL, { prefix }),
    cluster: createRedisClusterKeyStore(cluster.nodes, { prefix }),
  };
  const audits = {
    one: new PrismaAuditWriter(pgs.one.db.prisma, { mode: "async", execute: pgs.one.db.execute }),
    cluster: new PrismaAuditWriter(pgs.cluster.db.prisma, { mode: "async", execute: pgs.cluster.db.execute }),
  };
  try {
    await stores.one.waitUntilReady(5_000);
    await stores.cluster.ping();
    const engines = { one: new Engine({ store: stores.one, audit: audits.one }), cluster: new Engine({ store: stores.cluster, audit: audits.cluster }) };
    const run = (which: "one" | "cluster", key: string) => engines[which].invoke(tool, noop, { scope: "bench", key, args: ARGS });
    // warm up (scripts loaded on every node, slot map known), then past the first seconds of both
    // stores' epochs (set by their first call), in which first executions also read the audit log
    for (const which of ["one", "cluster"] as const) {
      await timeConcurrent(1_000, options.concurrency, (i) => run(which, `warm:${i}`));
      await run(which, "replayed");
    }
    await new Promise((r) => setTimeout(r, 10_500));
    const first: Record<string, LoadRound[]> = { one: [], cluster: [] };
    const replay: Record<string, LoadRound[]> = { one: [], cluster: [] };
    for (let round = 0; round < options.rounds; round++) {
      const tag = `${round}-${randomUUID().slice(0, 6)}`;
      for (const which of round % 2 === 0 ? (["one", "cluster"] as const) : (["cluster", "one"] as const)) {
        first[which].push(await timeConcurrent(options.calls, options.concurrency, (i) => run(which, `f:${tag}:${i}`)));
        await audits[which].flush();
        replay[which].push(await timeConcurrent(options.calls, options.concurrency, () => run(which, "replayed")));
        await audits[which].flush();
      }
    }
    const rows: Row[] = [];
    for (const [label, results] of [["first executions", first], ["replays from the key store", replay]] as const) {
      const one = medianRound(results.one);
      const onCluster = medianRound(results.cluster);
      rows.push(
        { section: "engine cluster", name: `${label}, one Redis, ${options.concurrency} callers`, value: one.throughput, unit: "calls/s", p50: one.p50, tail: { label: "p99", ms: one.p99 } },
        {
          section: "engine cluster",
          name: `${label}, Redis Cluster (3 masters, same machine), ${options.concurrency} callers`,
          value: onCluster.throughput,
          unit: "calls/s",
          p50: onCluster.p50,
          tail: { label: "p99", ms: onCluster.p99 },
          baseline: "one Redis",
          ratio: onCluster.throughput / one.throughput,
        },
      );
    }
    return rows;
  } finally {
    await audits.one.close();
    await audits.cluster.close();
    await stores.one.close();
    await stores.cluster.close();
    await deleteRedisPrefix(prefix);
    await cluster.stop();
    await pgs.one.drop();
    await pgs.cluster.drop();
  }
}

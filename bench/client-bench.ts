import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { IdempotencyConfig, makeIdempotent } from "@aws-lambda-powertools/idempotency";
import { CachePersistenceLayer } from "@aws-lambda-powertools/idempotency/cache";
import { createClient } from "@redis/client";
import { IdemgateClient } from "@/lib/client/index";
import type { WireRequest } from "@/lib/client/wire";
import { POSTGRES_ADMIN_URL, REDIS_TEST_URL } from "@/test/support/databases";
import { deleteRedisPrefix } from "@/test/support/stores";
import http from "node:http";
import pg from "pg";
import { admin, bareServerSource, BUILD_LOCK, killGroup, NEXT_BIN, SERVE, spawnGroup, waitFor } from "./gateway-bench";
import { medianRound, quantile, timeConcurrent, type LoadRound, type Row } from "./stats";

export interface ClientOptions {
  /** calls per round, by callers */
  calls: { one: number; many: number };
  rounds: number;
  build: boolean;
  port: number;
  /** the client floor's bare node:http server */
  barePort?: number;
  /** the minimal gateway guard() is also measured against */
  minimalPort?: number;
}

const TOOL = "ledger.record";
const ARGS = { account: "acct-bench", amountCents: 1_000, currency: "EUR" };
const RESULT = { ok: true };
/** the guarded function: a no-op, so what is measured is what guarding it adds */
const fn = async () => RESULT;

interface Contender {
  name: string;
  call: (key: string) => Promise<unknown>;
}

/**
 * A function guarded where it runs with lib/client's guard() (a production server on Redis and
 * PostgreSQL, audit durable): reserve, run, complete, on the client's node:http keep-alive
 * connections (its default in Node). A replay is answered from the client's replay cache by default
 * (no request; the hit reported to the audit log in the background), or with `replayCache: false`
 * by the reservation's 200; and, for the transport's share, over fetch's keep-alive without the
 * cache. Against calling the function directly and against Powertools' in-process wrapper
 * (makeIdempotent, cache layer on node-redis) on the same Redis, without and with its own local
 * cache (`useLocalCache`). First executions get a fresh key per call, replays one fixed key; 1 and
 * 50 callers in this process. Added latency is the contender's p50 (p99) minus the direct call's.
 * The section ends with the targets' rows, each against its baseline in this run.
 */
export async function benchClient(options: ClientOptions): Promise<Row[]> {
  const id = randomUUID().slice(0, 8);
  const dbName = `idemgate_bench_client_${id}`;
  const prefix = `idgbench-client-${id}`;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "idemgate-bench-client-"));
  const metricsToken = randomUUID() + randomUUID();
  await admin(`CREATE DATABASE "${dbName}"`);
  const dbUrl = new URL(POSTGRES_ADMIN_URL);
  dbUrl.pathname = `/${dbName}`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NODE_ENV: "production",
    NEXT_TELEMETRY_DISABLED: "1",
    REDIS_URL: REDIS_TEST_URL,
    DATABASE_URL: dbUrl.toString(),
    IDEMGATE_REDIS_PREFIX: prefix,
    IDEMGATE_DATA_DIR: dataDir,
    IDEMGATE_SECRET: randomUUID() + randomUUID(),
    IDEMGATE_RECONCILE_INTERVAL_MS: "0",
    IDEMGATE_AUDIT_MODE: "durable",
    IDEMGATE_DEMO_TOOLS: "1",
    IDEMGATE_METRICS_TOKEN: metricsToken,
  };
  const start = `exec node ${SERVE} -p ${options.port} -H 127.0.0.1`;
  const server = spawnGroup("flock", [BUILD_LOCK, "sh", "-c", options.build ? `node ${NEXT_BIN} build >&2 && ${start}` : start], env);
  const barePort = options.barePort ?? options.port + 1;
  const bare = spawnGroup(process.execPath, ["-e", bareServerSource(barePort, JSON.stringify({ ok: true }))], process.env);
  const minimalPort = options.minimalPort ?? options.port + 3;
  const minimal = spawnGroup(process.execPath, ["-e", minimalServerSource(minimalPort, REDIS_TEST_URL, dbUrl.toString(), `${prefix}-minimal:`)], process.env);
  const floorDb = new pg.Client({ connectionString: dbUrl.toString() });
  const floorAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  let powertools: Awaited<ReturnType<typeof powertoolsWrapper>> | null = null;
  let powertoolsLocal: Awaited<ReturnType<typeof powertoolsWrapper>> | null = null;
  try {
    const base = `http://127.0.0.1:${options.port}`;
    await waitFor(`${base}/api/health`, server, options.build ? 600_000 : 120_000);
    const token = /API token:\s*(\S+)/.exec(await readFile(path.join(dataDir, "credentials.txt"), "utf8"))?.[1];
    if (!token) throw new Error("no API token in credentials.txt");
    // the client floor: what a guarded first execution cannot do without, by bare means: two
    // keep-alive round trips to a bare node:http server (reserve, complete) and one committed
    // single-row INSERT (the intent), from this process, in sequence
    await waitFor(`http://127.0.0.1:${barePort}/`, bare, 10_000);
    await floorDb.connect();
    await floorDb.query(`CREATE TABLE bench_floor (id text PRIMARY KEY, scope text, key text, started_at timestamptz)`);
    const floorBody = JSON.stringify({ arguments: ARGS });
    const post = () =>
      new Promise<void>((resolve, reject) => {
        const req = http.request(
          { host: "127.0.0.1", port: barePort, method: "POST", path: "/", agent: floorAgent, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(floorBody) } },
          (res) => {
            res.resume();
            res.on("end", resolve);
          },
        );
        req.on("error", reject);
        req.setNoDelay(true);
        req.end(floorBody);
      });
    const floorParts = { trip: [] as number[], insert: [] as number[] };
    const part = async (into: number[], fn: () => Promise<unknown>) => {
      const t0 = performance.now();
      await fn();
      into.push(performance.now() - t0);
    };
    const floor = async () => {
      await part(floorParts.trip, post);
      await part(floorParts.insert, () => floorDb.query(`INSERT INTO bench_floor VALUES ($1, 'bench', 'k', now())`, [randomUUID()]));
      await part(floorParts.trip, post);
    };
    await timeConcurrent(300, 1, floor);
    floorParts.trip.length = floorParts.insert.length = 0;
    // guard() against a minimal gateway doing the same I/O (minimalServerSource): what the machine
    // costs a guarded call, beside what this product's server costs it
    await floorDb.query(`CREATE TABLE bench_minimal (id text PRIMARY KEY, scope text, key text, started_at timestamptz, arguments jsonb)`);
    await waitFor(`http://127.0.0.1:${minimalPort}/`, minimal, 10_000);
    const againstMinimal = new IdemgateClient({ baseUrl: `http://127.0.0.1:${minimalPort}`, token: "bench", replayCache: false });
    const minimalCall = (key: string) => againstMinimal.guard(TOOL, ARGS, fn, { key });
    await timeConcurrent(300, 1, (i) => minimalCall(`minimal-warm-${id}-${i}`));
    const client = new IdemgateClient({ baseUrl: base, token });
    const uncached = new IdemgateClient({ baseUrl: base, token, replayCache: false });
    const overFetch = new IdemgateClient({ baseUrl: base, token, replayCache: false, fetch: globalThis.fetch.bind(globalThis) });
    const wrapper = (powertools = await powertoolsWrapper(`${prefix}-powertools`, false));
    const wrapperLocal = (powertoolsLocal = await powertoolsWrapper(`${prefix}-powertools-local`, true));
    const contenders: Contender[] = [
      { name: DIRECT, call: () => fn() },
      { name: POWERTOOLS, call: (key) => wrapper.run({ key, args: ARGS }) },
      { name: POWERTOOLS_LOCAL, call: (key) => wrapperLocal.run({ key, args: ARGS }) },
      { name: IDEMGATE, call: (key) => client.guard(TOOL, ARGS, fn, { key }) },
      { name: IDEMGATE_UNCACHED, call: (key) => uncached.guard(TOOL, ARGS, fn, { key }) },
      { name: IDEMGATE_FETCH, call: (key) => overFetch.guard(TOOL, ARGS, fn, { key }) },
    ];
    // warm up: connections, scripts, the JIT; the first seconds of the store epoch also read the audit log
    const warmStarted = Date.now();
    for (const [n, c] of contenders.entries()) {
      await timeConcurrent(300, 50, (i) => c.call(`warm-${id}-${n}-${i}`));
      await c.call(`replayed-${id}`);
    }
    await new Promise((r) => setTimeout(r, Math.max(0, 10_500 - (Date.now() - warmStarted))));
    // and again after that pause, one caller at a time: the first contender measured would otherwise
    // pay for what the pause let go cold (idle connections, the JIT's feedback) on the others' behalf
    for (const [n, c] of contenders.entries()) await timeConcurrent(100, 1, (i) => c.call(`rewarm-${id}-${n}-${i}`));

    const results = new Map<string, LoadRound[]>();
    const push = (name: string, round: LoadRound) => results.set(name, [...(results.get(name) ?? []), round]);
    const shapes = [
      ["first execution", 1, options.calls.one],
      ["first execution", 50, options.calls.many],
      ["replay", 1, options.calls.one],
      ["replay", 50, options.calls.many],
    ] as const;
    for (let round = 0; round < options.rounds; round++) {
      const tag = `${round}-${randomUUID().slice(0, 6)}`;
      push("floor", await timeConcurrent(options.calls.one, 1, floor));
      push("minimal", await timeConcurrent(options.calls.one, 1, (i) => minimalCall(`minimal-${tag}-${i}`)));
      for (const [label, callers, calls] of shapes) {
        for (const [n, c] of contenders.entries()) {
          // the Idemgate contenders share the server: a first execution's key is each one's own
          const key = (i: number) => (label === "replay" ? `replayed-${id}` : `f-${tag}-${callers}-${n}-${i}`);
          push(`${label}|${callers}|${c.name}`, await timeConcurrent(calls, callers, (i) => c.call(key(i))));
        }
      }
    }

    const spans = await guardSpans(base, token, metricsToken, options.calls.one);

    const rows: Row[] = [];
    const added = new Map<string, { p50: number; p99: number }>();
    for (const [label, callers] of shapes) {
      const get = (name: string) => medianRound(results.get(`${label}|${callers}|${name}`)!);
      const direct = get(DIRECT);
      const theirs = get(POWERTOOLS);
      for (const name of [DIRECT, POWERTOOLS, POWERTOOLS_LOCAL, IDEMGATE, IDEMGATE_UNCACHED, IDEMGATE_FETCH]) {
        const m = get(name);
        const isDirect = name === DIRECT;
        const guarded = name === IDEMGATE || name === IDEMGATE_UNCACHED || name === IDEMGATE_FETCH;
        added.set(`${label}|${callers}|${name}`, { p50: m.p50 - direct.p50, p99: m.p99 - direct.p99 });
        rows.push({
          section: "client",
          name: `${label}, ${callers} caller${callers === 1 ? "" : "s"}: ${name}`,
          value: m.throughput,
          unit: "calls/s",
          p50: m.p50,
          tail: { label: "p99", ms: m.p99 },
          ...(guarded ? { baseline: "Powertools", ratio: m.throughput / theirs.throughput } : {}),
          note: isDirect ? "" : `added p50 ${(m.p50 - direct.p50).toFixed(2)} ms, p99 ${(m.p99 - direct.p99).toFixed(2)} ms`,
        });
      }
    }
    // the targets: one caller's added p50 on a first execution; replays of the default guard() (its
    // replay cache on) against Powertools' (added latency and calls/s), 1 and 50 callers, without
    // its local cache (as the target was set) and with it; the uncached guard() beside them
    const first = added.get(`first execution|1|${IDEMGATE}`)!;
    const firstFetch = added.get(`first execution|1|${IDEMGATE_FETCH}`)!;
    const floorRound = medianRound(results.get("floor")!);
    rows.push(
      {
        section: "client",
        name: "client floor: two keep-alive round trips to a bare node:http server + one committed INSERT, 1 caller",
        value: floorRound.throughput,
        unit: "calls/s",
        p50: floorRound.p50,
        tail: { label: "p99", ms: floorRound.p99 },
        note: `a round trip p50 ${quantile(floorParts.trip, 0.5).toFixed(2)} ms, the committed INSERT p50 ${quantile(floorParts.insert, 0.5).toFixed(2)} ms`,
      },
      {
        section: "client",
        name: "target: first execution, 1 caller, durable: added p50 of client.guard() against the client floor",
        value: first.p50,
        unit: "ms",
        baseline: "client floor p50",
        ratio: first.p50 / floorRound.p50,
        target: "≤ 2.0×",
        note: `${first.p50 <= 2 * floorRound.p50 ? "met" : "not met"}; floor p50 ${floorRound.p50.toFixed(2)} ms`,
      },
    );
    const minimalRound = medianRound(results.get("minimal")!);
    const minimalAdded = minimalRound.p50 - medianRound(results.get(`first execution|1|${DIRECT}`)!).p50;
    rows.push({
      section: "client",
      name: "guard() against a minimal gateway doing the same I/O (Redis SET NX, the INSERT committed, Redis SET, two short answers), first execution, 1 caller: added p50",
      value: minimalAdded,
      unit: "ms",
      baseline: "client floor p50",
      ratio: minimalAdded / floorRound.p50,
      note: `what this machine costs a guarded call; Idemgate's server adds ${(first.p50 - minimalAdded).toFixed(2)} ms to it (client.guard() ${(first.p50 / minimalAdded).toFixed(2)}× this)`,
    });
    const trip = quantile(floorParts.trip, 0.5);
    const unaccounted = spans.total - spans.serverStore - spans.serverAudit - 2 * trip;
    rows.push({
      section: "client",
      name: "guard() first execution, 1 caller, durable: where the time goes (means over the calls)",
      value: spans.total,
      unit: "ms",
      note:
        `reserve exchange ${spans.reserve.toFixed(2)} ms, complete exchange ${spans.complete.toFixed(2)} ms, the client between them ${spans.between.toFixed(2)} ms; ` +
        `on the server: key store (begin + complete scripts) ${spans.serverStore.toFixed(2)} ms, the intent's commit ${spans.serverAudit.toFixed(2)} ms, ` +
        `${spans.serverCpu.toFixed(2)} ms of the server process's CPU per call; the client's CPU ${spans.clientCpu.toFixed(2)} ms per call; ` +
        `2 bare round trips ${(2 * trip).toFixed(2)} ms; the rest (HTTP handling, the server's own work and waits) ${unaccounted.toFixed(2)} ms`,
    });
    rows.push({
      section: "client",
      name: "target: first execution, 1 caller, durable: added p50 of client.guard()",
      value: first.p50,
      unit: "ms",
      target: "≤ 2 ms",
      note: `${first.p50 <= 2 ? "met" : "not met"}; over fetch ${firstFetch.p50.toFixed(2)} ms`,
    });
    for (const callers of [1, 50]) {
      const rate = (name: string) => medianRound(results.get(`replay|${callers}|${name}`)!).throughput;
      const ours = added.get(`replay|${callers}|${IDEMGATE}`)!;
      for (const [against, label] of [
        [POWERTOOLS, "Powertools"],
        [POWERTOOLS_LOCAL, "Powertools with its local cache"],
      ] as const) {
        const theirs = added.get(`replay|${callers}|${against}`)!;
        const ratio = rate(IDEMGATE) / rate(against);
        rows.push({
          section: "client",
          name: `target: replay, ${callers} caller${callers === 1 ? "" : "s"}: calls/s of client.guard() (replay cache on) against ${label}`,
          value: rate(IDEMGATE),
          unit: "calls/s",
          baseline: label,
          ratio,
          target: `≥ 1.0× ${label}`,
          note:
            `${ratio >= 1 ? "met" : "not met"}; added p50 ${ours.p50.toFixed(2)} ms, ${label} ${theirs.p50.toFixed(2)} ms; ` +
            `without the replay cache ${(rate(IDEMGATE_UNCACHED) / rate(against)).toFixed(2)}×, and over fetch ${(rate(IDEMGATE_FETCH) / rate(against)).toFixed(2)}×`,
        });
      }
    }
    await client.close();
    return rows;
  } finally {
    await powertools?.close().catch(() => {});
    await powertoolsLocal?.close().catch(() => {});
    await killGroup(server);
    await killGroup(bare);
    await killGroup(minimal);
    floorAgent.destroy();
    await floorDb.end().catch(() => {});
    await deleteRedisPrefix(prefix);
    await admin(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`).catch(() => {});
    await rm(dataDir, { recursive: true, force: true });
  }
}

/**
 * One guarded first execution taken apart, over `calls` sequential calls of a client of its own: the
 * two exchanges as the client sees them (its transport timed around each request, answer read), and
 * from the server's own metrics (GET /api/metrics, read before and after) the key store's and the
 * intent's time per call (the engine's storeMs and auditMs, as each call reports them) and the server
 * process's CPU per call. Means, so the parts add up to the whole.
 */
async function guardSpans(base: string, token: string, metricsToken: string, calls: number) {
  const { nodeTransport } = await import("@/lib/client/node-transport");
  const transport = nodeTransport();
  const exchanges = { reserve: 0, complete: 0 };
  let lastEnd = 0;
  let between = 0;
  const timedFetch = (async (url: string, init: WireRequest) => {
    const t0 = performance.now();
    if (url.endsWith("/complete")) between += t0 - lastEnd;
    const res = await transport(url, init);
    const text = await res.text();
    lastEnd = performance.now();
    exchanges[url.endsWith("/reservations") ? "reserve" : "complete"] += lastEnd - t0;
    return { status: res.status, statusText: res.statusText, headers: res.headers, text: async () => text };
  }) as unknown as typeof fetch;
  const client = new IdemgateClient({ baseUrl: base, token, fetch: timedFetch });
  const metricsNow = async () => {
    const text = await (await fetch(`${base}/api/metrics`, { headers: { authorization: `Bearer ${metricsToken}` } })).text();
    const read = (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*tool="${TOOL}"[^}]*\\})? ([0-9.e+-]+)$`, "m").exec(text)?.[1] ?? NaN);
    return {
      store: read("idemgate_store_seconds_sum"),
      audit: read("idemgate_audit_seconds_sum"),
      cpu: read("idemgate_process_process_cpu_seconds_total"),
    };
  };
  const tag = randomUUID().slice(0, 8);
  for (let i = 0; i < 50; i++) await client.guard(TOOL, ARGS, fn, { key: `spans-warm-${tag}-${i}` });
  exchanges.reserve = exchanges.complete = between = 0;
  const before = await metricsNow();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < calls; i++) await client.guard(TOOL, ARGS, fn, { key: `spans-${tag}-${i}` });
  const total = (performance.now() - t0) / calls;
  const clientCpu = process.cpuUsage(cpu0);
  const after = await metricsNow();
  await client.close();
  return {
    total,
    reserve: exchanges.reserve / calls,
    complete: exchanges.complete / calls,
    between: between / calls,
    serverStore: ((after.store - before.store) * 1000) / calls,
    serverAudit: ((after.audit - before.audit) * 1000) / calls,
    serverCpu: ((after.cpu - before.cpu) * 1000) / calls,
    clientCpu: (clientCpu.user + clientCpu.system) / 1000 / calls,
  };
}

/**
 * A minimal gateway for guard(): a reservation is a Redis SET NX and, when it wins, one committed
 * INSERT of the intent (id, scope, key, time, arguments); a completion one Redis SET; both answered
 * with short JSON. No token check, validation, fingerprint, lease, audit outcome, metrics or Lua:
 * the I/O a guarded first execution cannot do without, served by node:http, ioredis and pg as
 * Idemgate's server uses them. (Run with `node -e` from the project root, which resolves the packages.)
 */
function minimalServerSource(port: number, redisUrl: string, databaseUrl: string, prefix: string): string {
  return `
    const http = require("node:http"), { randomUUID } = require("node:crypto");
    const Redis = require("ioredis"), pg = require("pg");
    const redis = new Redis(${JSON.stringify(redisUrl)});
    const db = new pg.Pool({ connectionString: ${JSON.stringify(databaseUrl)}, max: 4 });
    const answer = (res, status, value) => {
      const out = JSON.stringify(value);
      res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(out) });
      res.end(out);
    };
    http.createServer((req, res) => {
      const chunks = [];
      req.on("data", (c) => chunks.push(c));
      req.on("end", async () => {
        try {
          if (req.method !== "POST") return answer(res, 200, { ok: true });
          const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");
          if (req.url.endsWith("/reservations")) {
            const key = String(req.headers["idempotency-key"]), id = randomUUID(), leaseMs = 60000;
            if ((await redis.set(${JSON.stringify(prefix)} + key, id, "PX", leaseMs, "NX")) !== "OK") return answer(res, 409, { type: "/problems/conflict", title: "Conflict" });
            await db.query("INSERT INTO bench_minimal VALUES ($1, 'bench', $2, now(), $3)", [id, key, JSON.stringify(body.arguments ?? {})]);
            return answer(res, 201, { state: "reserved", executionId: id, token: 1, leaseUntil: new Date(Date.now() + leaseMs).toISOString(), leaseMs });
          }
          await redis.set(${JSON.stringify(prefix)} + "done:" + req.url, JSON.stringify(body), "PX", 60000);
          answer(res, 200, { state: "done", status: body.status ?? 200, body: body.body ?? null });
        } catch (err) {
          answer(res, 500, { type: "about:blank", title: String(err) });
        }
      });
    }).listen(${port}, "127.0.0.1");`;
}

const DIRECT = "the function called directly";
const POWERTOOLS = "Powertools makeIdempotent (in process, cache layer on the same Redis)";
const POWERTOOLS_LOCAL = "Powertools makeIdempotent with its local cache (useLocalCache: true)";
const IDEMGATE = "Idemgate client.guard(): reserve + complete over node:http keep-alive (audit durable), replays from its replay cache (the default)";
const IDEMGATE_UNCACHED = "Idemgate client.guard() with replayCache: false: every replay a request";
const IDEMGATE_FETCH = "Idemgate client.guard() over fetch's keep-alive (the client given fetch), replayCache: false";

/**
 * Powertools 2.35 outside Lambda (as the peers section runs it): its in-process wrapper, without
 * or with its local cache (an LRU of completed records in the process, default 256 entries).
 */
async function powertoolsWrapper(keyPrefix: string, useLocalCache: boolean) {
  const client = await createClient({ url: REDIS_TEST_URL }).connect();
  const config = new IdempotencyConfig({ eventKeyJmesPath: "key", expiresAfterSeconds: 86_400, throwOnNoIdempotencyKey: true, useLocalCache });
  config.registerLambdaContext({ getRemainingTimeInMillis: () => 60_000 } as Parameters<IdempotencyConfig["registerLambdaContext"]>[0]);
  const run = makeIdempotent(async (_event: { key: string; args: typeof ARGS }) => fn(), {
    persistenceStore: new CachePersistenceLayer({ client }),
    keyPrefix,
    config,
  });
  return { run, close: async () => void (await client.quit()) };
}

import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import autocannon from "autocannon";
import pg from "pg";
import { PrismaAuditWriter } from "@/lib/audit/audit-writer";
import { Engine } from "@/lib/idempotency/engine";
import { ReplayCache } from "@/lib/idempotency/replay-cache";
import type { RunTool, ToolPolicy } from "@/lib/idempotency/tool";
import { createRedisKeyStore } from "@/lib/store/redis/redis-key-store";
import { charge } from "@/lib/tools/demo/payments";
import { ToolRegistry } from "@/lib/tools/registry";
import { createTestPostgres, POSTGRES_ADMIN_URL, REDIS_TEST_URL } from "@/test/support/databases";
import { deleteRedisPrefix } from "@/test/support/stores";
import { medianRound, timeConcurrent, type LoadRound, type Row } from "./stats";

/** Every build and every server serving a build holds this lock: nobody rebuilds .next under it. */
export const BUILD_LOCK = process.env.IDEMGATE_BUILD_LOCK ?? "/tmp/idemgate-build.lock";
export const NEXT_BIN = path.join(process.cwd(), "node_modules", "next", "dist", "bin", "next");
/** the production server, as `npm start` runs it */
export const SERVE = path.join(process.cwd(), "scripts", "serve.mjs");

export interface GatewayOptions {
  /** seconds per autocannon run */
  durationS: number;
  connections: number;
  rounds: number;
  /** run `next build` first (under the lock, in the same lock hold as the server) */
  build: boolean;
  port: number;
  barePort: number;
  /** calls per round of the in-process engine baselines (50 callers, as the gateway's connections) */
  engineCalls: number;
  /** calls per round of the user's number, by callers */
  userCalls: { one: number; many: number };
}

/** The upstream HTTP tool of the user's number: the bare server, as the gateway forwards to it. */
const UPSTREAM_TOOL = "bench.upstream";

const ARGS = { customerId: "cus_bench", amountCents: 1_000, currency: "EUR" };

/**
 * The gateway as deployed: `next build` + `scripts/serve.mjs` on Redis and PostgreSQL, driven by
 * autocannon from this process. POST /api/v1/tools/payments.charge/invoke with a fresh
 * Idempotency-Key per request (first executions) and one fixed key (replays), next to
 *  - a bare node:http server answering the replay's JSON (the absolute floor: no framework), and
 *  - GET /api/v1/openapi.json, the lightest public route of the product (no I/O and no auth; the
 *    document is rendered once per tool set and served from memory, through the App Router).
 * The product has no constant route and this benchmark adds none.
 * First executions are also set against the engine's own durable throughput, measured in this
 * process in the same rounds with 50 callers: with a no-op tool (the peers' workload) and with the
 * gateway's tool itself (payments.charge, its row written through Prisma), so the second ratio is
 * what HTTP, the token check, parsing and validation cost.
 * The user's number: one tool call to an HTTP service (the bare server) made directly, and through
 * the gateway as an upstream tool (IDEMGATE_UPSTREAM_TOOLS, a fresh key per call, audit durable), by
 * 1 and by 50 callers of a keep-alive node:http client: the latency the gateway adds at p50 and p99.
 */
export async function benchGateway(options: GatewayOptions): Promise<Row[]> {
  const id = randomUUID().slice(0, 8);
  const dbName = `idemgate_bench_gw_${id}`;
  const prefix = `idgbench-gw-${id}`;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "idemgate-bench-gw-"));
  const servers: ChildProcess[] = [];
  const closers: (() => Promise<void>)[] = [];
  await admin(`CREATE DATABASE "${dbName}"`);
  try {
    const dbUrl = new URL(POSTGRES_ADMIN_URL);
    dbUrl.pathname = `/${dbName}`;
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      NODE_ENV: "production",
      NEXT_TELEMETRY_DISABLED: "1",
      PORT: String(options.port),
      REDIS_URL: REDIS_TEST_URL,
      DATABASE_URL: dbUrl.toString(),
      IDEMGATE_REDIS_PREFIX: prefix,
      IDEMGATE_DATA_DIR: dataDir,
      IDEMGATE_SECRET: randomUUID() + randomUUID(),
      IDEMGATE_RECONCILE_INTERVAL_MS: "0",
      // the bench calls the demo tools, which DATABASE_URL turns off by default
      IDEMGATE_DEMO_TOOLS: "1",
      IDEMGATE_UPSTREAM_TOOLS: JSON.stringify([{ name: UPSTREAM_TOOL, url: `http://127.0.0.1:${options.barePort}/tool`, timeoutMs: 5_000 }]),
    };
    const start = `exec node ${SERVE} -p ${options.port} -H 127.0.0.1`;
    const script = options.build ? `node ${NEXT_BIN} build >&2 && ${start}` : start;
    // flock holds the lock for as long as the build and the server run
    servers.push(spawnGroup("flock", [BUILD_LOCK, "sh", "-c", script], env));
    const base = `http://127.0.0.1:${options.port}`;
    await waitFor(`${base}/api/health`, servers[0], options.build ? 600_000 : 120_000);
    const token = /API token:\s*(\S+)/.exec(await readFile(path.join(dataDir, "credentials.txt"), "utf8"))?.[1];
    if (!token) throw new Error("no API token in credentials.txt");

    const invoke = `${base}/api/v1/tools/payments.charge/invoke`;
    const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
    const body = JSON.stringify(ARGS);
    const first = await fetch(invoke, { method: "POST", headers: { ...headers, "idempotency-key": "bench-replayed" }, body });
    const replayBody = await first.text();
    if (first.status !== 200) throw new Error(`invoke answered ${first.status}: ${replayBody}`);

    servers.push(spawnGroup(process.execPath, ["-e", bareServerSource(options.barePort, replayBody)], process.env));
    await waitFor(`http://127.0.0.1:${options.barePort}/`, servers[1], 10_000);

    const specs: Record<"bare" | "openapi" | "replay" | "first", Partial<autocannon.Options>> = {
      bare: { url: `http://127.0.0.1:${options.barePort}/` },
      openapi: { url: `${base}/api/v1/openapi.json` },
      replay: { url: invoke, method: "POST", headers: { ...headers, "idempotency-key": "bench-replayed" }, body },
      first: {
        url: invoke,
        requests: [{ method: "POST", headers, body, setupRequest: (req) => ({ ...req, headers: { ...req.headers, "idempotency-key": `bench-${randomUUID()}` } }) }],
      },
    };
    type Name = keyof typeof specs;
    const engines = await engineBaselines(id);
    closers.push(engines.close);
    const upstream = `${base}/api/v1/tools/${UPSTREAM_TOOL}/invoke`;
    const direct = `http://127.0.0.1:${options.barePort}/tool`;
    const userCalls = { direct: (agent: http.Agent) => postJson(agent, direct, headers, body), gateway: (agent: http.Agent) => postJson(agent, upstream, { ...headers, "idempotency-key": `user-${randomUUID()}` }, body) };
    const userRound = (via: keyof typeof userCalls, callers: number, calls: number) => withAgent(callers, (agent) => timeConcurrent(calls, callers, () => userCalls[via](agent)));

    // warm up: JIT, connection pools, the routes' first compilation
    for (const spec of Object.values(specs)) await cannon(spec, { ...options, durationS: 2 });
    for (const e of [engines.noop, engines.charge]) await timeConcurrent(500, 50, () => e(`warm-${randomUUID()}`));
    for (const via of ["direct", "gateway"] as const) await userRound(via, 50, 500);
    const results: Record<Name, LoadRound[]> = { bare: [], openapi: [], replay: [], first: [] };
    const engineResults: Record<"noop" | "charge", LoadRound[]> = { noop: [], charge: [] };
    const user: Record<"direct1" | "gateway1" | "direct50" | "gateway50", LoadRound[]> = { direct1: [], gateway1: [], direct50: [], gateway50: [] };
    const errors: Partial<Record<Name, number>> = {};
    for (let round = 0; round < options.rounds; round++) {
      for (const name of Object.keys(specs) as Name[]) {
        const r = await cannon(specs[name], options);
        results[name].push(r);
        if (r.errors > 0) errors[name] = (errors[name] ?? 0) + r.errors;
      }
      for (const kind of ["noop", "charge"] as const) {
        engineResults[kind].push(await timeConcurrent(options.engineCalls, 50, () => engines[kind](`r${round}-${randomUUID()}`)));
        await engines.settle();
      }
      for (const callers of [1, 50] as const) {
        const calls = callers === 1 ? options.userCalls.one : options.userCalls.many;
        user[`direct${callers}`].push(await userRound("direct", callers, calls));
        user[`gateway${callers}`].push(await userRound("gateway", callers, calls));
      }
    }
    const m = Object.fromEntries(Object.entries(results).map(([k, v]) => [k, medianRound(v)])) as Record<Name, LoadRound>;
    const e = { noop: medianRound(engineResults.noop), charge: medianRound(engineResults.charge) };
    const u = Object.fromEntries(Object.entries(user).map(([k, v]) => [k, medianRound(v)])) as Record<keyof typeof user, LoadRound>;
    const row = (name: string, r: LoadRound, extra: Partial<Row> = {}): Row => ({
      section: "gateway",
      name,
      value: r.throughput,
      unit: "req/s",
      p50: r.p50,
      tail: { label: "p99", ms: r.p99 },
      ...extra,
    });
    const note = (k: Name) => (errors[k] ? `${errors[k]} non-2xx or failed requests` : undefined);
    const added = (callers: 1 | 50): Row => {
      const [d, g] = [u[`direct${callers}`], u[`gateway${callers}`]];
      return {
        section: "gateway",
        name: `user's number, ${callers} caller${callers === 1 ? "" : "s"}: latency the gateway adds to one call of an HTTP tool (p50; p99 in note)`,
        value: g.p50 - d.p50,
        unit: "ms",
        p50: g.p50,
        tail: { label: "p99", ms: g.p99 },
        baseline: `direct call p50 ${d.p50.toFixed(2)} ms, p99 ${d.p99.toFixed(2)} ms`,
        note: `p99 +${(g.p99 - d.p99).toFixed(2)} ms; through the gateway ${Math.round(g.throughput).toLocaleString("en-US")} calls/s, direct ${Math.round(d.throughput).toLocaleString("en-US")}`,
      };
    };
    return [
      row("bare node:http server, same JSON (separate process)", m.bare),
      row("GET /api/v1/openapi.json (lightest product route, through the App Router)", m.openapi, { baseline: "bare server", ratio: m.openapi.throughput / m.bare.throughput }),
      row("replay: POST …/payments.charge/invoke, fixed key", m.replay, { baseline: "bare server", ratio: m.replay.throughput / m.bare.throughput, target: "≥ 0.4×", note: note("replay") }),
      row("replay (same) against the lightest product route", m.replay, { baseline: "openapi.json", ratio: m.replay.throughput / m.openapi.throughput }),
      row("first execution: fresh key per request, audit durable", m.first, { baseline: "bare server", ratio: m.first.throughput / m.bare.throughput, note: note("first") }),
      row("engine in this process, first execution, audit durable, no-op tool, 50 callers", e.noop),
      row("engine in this process, first execution, audit durable, payments.charge, 50 callers", e.charge),
      row("first execution through the gateway vs the engine's own durable throughput (no-op tool)", m.first, { baseline: "engine, no-op tool", ratio: m.first.throughput / e.noop.throughput, target: "≥ 0.5×" }),
      row("first execution through the gateway vs the engine running the same tool (the gateway's own cost)", m.first, { baseline: "engine, payments.charge", ratio: m.first.throughput / e.charge.throughput }),
      added(1),
      added(50),
    ];
  } finally {
    for (const close of closers) await close().catch(() => {});
    for (const s of servers.reverse()) await killGroup(s);
    // a request the server was still answering may write after its group got the signal
    await new Promise((r) => setTimeout(r, 2_000));
    await deleteRedisPrefix(prefix);
    await admin(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`).catch(() => {});
    await rm(dataDir, { recursive: true, force: true });
  }
}

/**
 * The engine's own durable first executions, in this process with its own database and Redis
 * prefix: a no-op tool (as the peers section runs it), and the gateway's tool (payments.charge
 * with its Prisma write), each called with a fresh key.
 */
async function engineBaselines(id: string) {
  const database = await createTestPostgres("bench_gw_engine");
  const prefix = `idgbench-gw-engine-${id}`;
  const store = createRedisKeyStore(REDIS_TEST_URL, { prefix });
  await store.waitUntilReady(5_000);
  const audit = new PrismaAuditWriter(database.db.prisma, { mode: "durable", execute: database.db.execute });
  // the server's default: a replay cache
  const engine = new Engine({ store, audit, replayCache: new ReplayCache() });
  const noop: ToolPolicy = { name: "bench.noop", kind: "write", ttlMs: 86_400_000, leaseMs: 60_000, stuckPolicy: "block", fallbackTtlMs: null, dedupes: false };
  const registry = new ToolRegistry([charge]);
  const chargeRun: RunTool = registry.runnerFor(charge, database.db.prisma);
  const noopRun: RunTool = async () => ({ body: { ok: true } });
  return {
    noop: (key: string) => engine.invoke(noop, noopRun, { scope: "bench", key, args: ARGS }),
    charge: (key: string) => engine.invoke(charge, chargeRun, { scope: "bench", key, args: registry.parseArgs(charge, ARGS) }),
    settle: () => audit.flush(),
    async close() {
      await audit.close();
      await store.close();
      await deleteRedisPrefix(prefix);
      await database.drop();
    },
  };
}

async function withAgent<T>(callers: number, fn: (agent: http.Agent) => Promise<T>): Promise<T> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: callers });
  try {
    return await fn(agent);
  } finally {
    agent.destroy();
  }
}

/** One POST with a keep-alive connection of `agent`; rejects unless the answer is a 200. */
function postJson(agent: http.Agent, url: string, headers: Record<string, string>, body: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: "POST", agent, headers: { ...headers, "content-length": String(Buffer.byteLength(body)) } }, (res) => {
      res.resume();
      res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error(`${url} answered ${res.statusCode}`))));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

interface CannonRound extends LoadRound {
  errors: number;
}

function cannon(spec: Partial<autocannon.Options>, options: GatewayOptions): Promise<CannonRound> {
  return new Promise((resolve, reject) => {
    autocannon({ connections: options.connections, duration: options.durationS, ...spec } as autocannon.Options, (err, result) => {
      if (err) return reject(err);
      resolve({
        throughput: result.requests.total / (result.duration || options.durationS),
        p50: result.latency.p50,
        p99: result.latency.p99,
        errors: result.non2xx + result.errors + result.timeouts,
      });
    });
  });
}

export function bareServerSource(port: number, body: string): string {
  return `require("node:http").createServer((req, res) => { req.resume(); req.on("end", () => {
    res.writeHead(200, { "content-type": "application/json", "idempotent-replayed": "true" }); res.end(${JSON.stringify(body)}); }); })
    .listen(${port}, "127.0.0.1");`;
}

export function spawnGroup(command: string, args: string[], env: NodeJS.ProcessEnv): ChildProcess {
  // its own process group, so the whole tree (flock, sh, next-server) can be killed together
  const child = spawn(command, args, { env, detached: true, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4_000);
  });
  (child as ChildProcess & { lastStderr: () => string }).lastStderr = () => stderr;
  return child;
}

export async function killGroup(child: ChildProcess): Promise<void> {
  if (child.pid === undefined || child.exitCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  try {
    process.kill(-child.pid, "SIGTERM");
  } catch {
    return;
  }
  const timer = setTimeout(() => {
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {
      // gone already
    }
  }, 5_000);
  await exited;
  clearTimeout(timer);
}

export async function waitFor(url: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      throw new Error(`server exited (${child.exitCode}): ${(child as ChildProcess & { lastStderr: () => string }).lastStderr()}`);
    }
    try {
      const res = await fetch(url);
      if (res.ok) return;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms`);
}

export async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

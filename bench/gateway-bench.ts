import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import autocannon from "autocannon";
import pg from "pg";
import { POSTGRES_ADMIN_URL, REDIS_TEST_URL } from "@/test/support/databases";
import { deleteRedisPrefix } from "@/test/support/stores";
import { medianRound, type LoadRound, type Row } from "./stats";

/** Every build and every server serving a build holds this lock: nobody rebuilds .next under it. */
export const BUILD_LOCK = process.env.IDEMGATE_BUILD_LOCK ?? "/tmp/idemgate-build.lock";
const NEXT_BIN = path.join(process.cwd(), "node_modules", "next", "dist", "bin", "next");
/** the production server, as `npm start` runs it */
const SERVE = path.join(process.cwd(), "scripts", "serve.mjs");

export interface GatewayOptions {
  /** seconds per autocannon run */
  durationS: number;
  connections: number;
  rounds: number;
  /** run `next build` first (under the lock, in the same lock hold as the server) */
  build: boolean;
  port: number;
  barePort: number;
}

const ARGS = { customerId: "cus_bench", amountCents: 1_000, currency: "EUR" };

/**
 * The gateway as deployed: `next build` + `scripts/serve.mjs` on Redis and PostgreSQL, driven by
 * autocannon from this process. POST /api/v1/tools/payments.charge/invoke with a fresh
 * Idempotency-Key per request (first executions) and one fixed key (replays), next to
 *  - a bare node:http server answering the replay's JSON (the absolute floor: no framework), and
 *  - GET /api/v1/openapi.json, the lightest public route of the product (no I/O and no auth, but
 *    not a constant: it renders the OpenAPI document from the tools' schemas on each request).
 * The product has no constant route and this benchmark adds none.
 */
export async function benchGateway(options: GatewayOptions): Promise<Row[]> {
  const id = randomUUID().slice(0, 8);
  const dbName = `idemgate_bench_gw_${id}`;
  const prefix = `idgbench-gw-${id}`;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "idemgate-bench-gw-"));
  const servers: ChildProcess[] = [];
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
    // warm up: JIT, connection pools, the routes' first compilation
    for (const spec of Object.values(specs)) await cannon(spec, { ...options, durationS: 2 });
    const results: Record<Name, LoadRound[]> = { bare: [], openapi: [], replay: [], first: [] };
    const errors: Partial<Record<Name, number>> = {};
    for (let round = 0; round < options.rounds; round++) {
      for (const name of Object.keys(specs) as Name[]) {
        const r = await cannon(specs[name], options);
        results[name].push(r);
        if (r.errors > 0) errors[name] = (errors[name] ?? 0) + r.errors;
      }
    }
    const m = Object.fromEntries(Object.entries(results).map(([k, v]) => [k, medianRound(v)])) as Record<Name, LoadRound>;
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
    return [
      row("bare node:http server, same JSON (separate process)", m.bare),
      row("GET /api/v1/openapi.json (lightest product route, renders a document)", m.openapi, { baseline: "bare server", ratio: m.openapi.throughput / m.bare.throughput }),
      row("replay: POST …/payments.charge/invoke, fixed key", m.replay, { baseline: "bare server", ratio: m.replay.throughput / m.bare.throughput, target: "≥ 0.7×", note: note("replay") }),
      row("replay (same) against the lightest product route", m.replay, { baseline: "openapi.json", ratio: m.replay.throughput / m.openapi.throughput }),
      row("first execution: fresh key per request, audit durable", m.first, { baseline: "bare server", ratio: m.first.throughput / m.bare.throughput, note: note("first") }),
    ];
  } finally {
    for (const s of servers.reverse()) await killGroup(s);
    // a request the server was still answering may write after its group got the signal
    await new Promise((r) => setTimeout(r, 2_000));
    await deleteRedisPrefix(prefix);
    await admin(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`).catch(() => {});
    await rm(dataDir, { recursive: true, force: true });
  }
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

function bareServerSource(port: number, body: string): string {
  return `require("node:http").createServer((req, res) => { req.resume(); req.on("end", () => {
    res.writeHead(200, { "content-type": "application/json", "idempotent-replayed": "true" }); res.end(${JSON.stringify(body)}); }); })
    .listen(${port}, "127.0.0.1");`;
}

function spawnGroup(command: string, args: string[], env: NodeJS.ProcessEnv): ChildProcess {
  // its own process group, so the whole tree (flock, sh, next-server) can be killed together
  const child = spawn(command, args, { env, detached: true, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4_000);
  });
  (child as ChildProcess & { lastStderr: () => string }).lastStderr = () => stderr;
  return child;
}

async function killGroup(child: ChildProcess): Promise<void> {
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

async function waitFor(url: string, child: ChildProcess, timeoutMs: number): Promise<void> {
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

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

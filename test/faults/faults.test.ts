import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import net from "node:net";
import path from "node:path";
import { promisify } from "node:util";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { IdemgateClient } from "@/lib/client/index";
import { runSimulation } from "@/cli/simulate";
import { createTestPostgres, REDIS_TEST_URL } from "@/test/support/databases";
import { RedisProcess } from "@/test/support/redis-process";
import { CuttableProxy } from "@/test/support/tcp-proxy";
import { ROOT, removeDataDir, startServer, type RunningServer } from "@/test/support/server";
import { deleteRedisPrefix } from "@/test/support/stores";
import { testPort } from "@/scripts/test-ports.mjs";

// Fault and abuse tests: real servers (production build), real processes killed, a real Redis
// stopped and flushed, PostgreSQL cut off. Every case counts side effects in the demo tools' own
// tables. Ports 3131–3136, 6391 and 5499 are this suite's (moved by IDEMGATE_TEST_PORT_BASE, scripts/test-ports.mjs).

type Pg = Awaited<ReturnType<typeof createTestPostgres>>;
const summary: { case: string; expected: number; counted: number }[] = [];

function invoke(server: RunningServer, token: string, tool: string, args: unknown, key?: string | null, extra: Record<string, string> = {}) {
  return fetch(`${server.url}/api/v1/tools/${tool}/invoke`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...(key ? { "idempotency-key": key } : {}), ...extra },
    body: JSON.stringify(args),
  });
}

async function waitFor<T>(what: string, probe: () => Promise<T | null | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const cli = (args: string[], env: Record<string, string>) =>
  promisify(execFile)(process.execPath, [path.join(ROOT, "bin", "idemgate.mjs"), ...args], { cwd: ROOT, env: { ...process.env, ...env } });

const charges = (pg: Pg, key: string) => pg.db.prisma.demoCharge.count({ where: { idempotencyKey: key } });

afterAll(() => {
  // the suite's summary: what each case expected to find in the tools' own tables, and what it found
  console.log("\nfault suite: side effects expected vs counted");
  for (const row of summary) console.log(`  ${row.case.padEnd(58)} expected ${row.expected}, counted ${row.counted}`);
});

describe("a gateway process killed after the side effect, before completion", () => {
  const prefix = `idgfault-kill-${randomUUID().slice(0, 6)}`;
  const dataDir = ".data/fault-kill";
  let pg: Pg;
  let server: RunningServer;
  let env: Record<string, string>;

  beforeAll(async () => {
    pg = await createTestPostgres("fault_kill");
    await removeDataDir(dataDir);
    env = { DATABASE_URL: pg.url, REDIS_URL: REDIS_TEST_URL, IDEMGATE_REDIS_PREFIX: prefix, IDEMGATE_DEMO_LEASE_MS: "2000", IDEMGATE_RECONCILE_INTERVAL_MS: "0" };
    server = await startServer({ port: testPort(3131), dataDir, env });
  });
  afterAll(async () => {
    await server?.stop();
    await deleteRedisPrefix(prefix);
    await pg?.drop();
    await removeDataDir(dataDir);
  });

  it("leaves the key stuck, is flagged as an unknown outcome, and a release lets the retry run once", async () => {
    const { apiToken } = await server.credentials();
    const key = `kill-${randomUUID()}`;
    const args = { customerId: "cus_kill", amountCents: 500, currency: "EUR", simulate: { afterEffectMs: 3_000 } };
    const lost = invoke(server, apiToken, "payments.charge", args, key).catch((err: Error) => err);
    await waitFor("the charge to be committed", async () => (await charges(pg, key)) === 1);
    await server.kill();
    expect(await lost).toBeInstanceOf(Error); // the connection died with the process

    server = await startServer({ port: testPort(3131), dataDir, env });
    const stuck = await waitFor("the key to be stuck", async () => {
      const res = await invoke(server, apiToken, "payments.charge", args, key);
      const body = await res.json();
      return res.status === 409 && body.type === "/problems/stuck" ? body : null;
    });
    expect(stuck.state).toBe("stuck");
    expect(await charges(pg, key)).toBe(1);

    const { stdout } = await cli(["reconcile", "--json"], env);
    const flagged = JSON.parse(stdout).flagged as { type: string; key: string }[];
    expect(flagged).toContainEqual(expect.objectContaining({ type: "orphan_unknown_outcome", key }));

    await cli(["key", "release", "--scope", "demo", "--key", key, "--reason", "checked the PSP: treat as not charged"], env);
    const retries = await Promise.all(Array.from({ length: 5 }, () => invoke(server, apiToken, "payments.charge", args, key)));
    const fresh = retries.filter((r) => r.status === 200 && r.headers.get("idempotent-replayed") !== "true");
    expect(fresh).toHaveLength(1);
    expect(retries.every((r) => r.status === 200 || r.status === 409)).toBe(true);
    const counted = await charges(pg, key);
    summary.push({ case: "SIGKILL after effect, release, 5 retries", expected: 2, counted });
    expect(counted).toBe(2);
  });
});

describe("the key store's Redis stopped, restarted and flushed", () => {
  const redis = new RedisProcess(testPort(6391));
  const dataDir = ".data/fault-redis";
  let pg: Pg;
  let server: RunningServer;
  let token: string;

  beforeAll(async () => {
    await redis.start();
    pg = await createTestPostgres("fault_redis");
    await removeDataDir(dataDir);
    server = await startServer({ port: testPort(3132), dataDir, env: { DATABASE_URL: pg.url, REDIS_URL: redis.url, IDEMGATE_RECONCILE_INTERVAL_MS: "0" } });
    token = (await server.credentials()).apiToken;
  });
  afterAll(async () => {
    await server?.stop();
    await redis.dispose();
    await pg?.drop();
    await removeDataDir(dataDir);
  });

  it("refuses writes with 503 while Redis is down, runs nothing, still serves reads, and recovers without a restart", async () => {
    const args = { customerId: "cus_redis_down", amountCents: 700, currency: "EUR" };
    expect((await invoke(server, token, "payments.charge", args, `warm-${randomUUID()}`)).status).toBe(200);
    await redis.stop();
    const keys = Array.from({ length: 10 }, () => `down-${randomUUID()}`);
    for (const key of keys) {
      const res = await invoke(server, token, "payments.charge", args, key);
      expect(res.status).toBe(503);
      expect(res.headers.get("content-type")).toContain("application/problem+json");
      expect((await res.json()).type).toBe("/problems/unavailable");
    }
    const read = await invoke(server, token, "payments.list_charges", { customerId: "cus_redis_down" });
    expect(read.status).toBe(200);
    expect((await read.json()).charges).toHaveLength(1);
    let counted = 0;
    for (const key of keys) counted += await charges(pg, key);
    summary.push({ case: "Redis down: 10 writes", expected: 0, counted });
    expect(counted).toBe(0);

    await redis.start();
    await waitFor("writes to succeed again", async () => (await invoke(server, token, "payments.charge", args, keys[0])).status === 200);
    const replay = await invoke(server, token, "payments.charge", args, keys[0]);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(await charges(pg, keys[0])).toBe(1);
  });

  it("runs no side effect twice when Redis is flushed while retries are in flight", async () => {
    const attempts = new Map<string, string[]>();
    const client = new IdemgateClient({
      baseUrl: server.url,
      token,
      timeoutMs: 250, // shorter than the tool: the client retries while the first call runs
      retry: { maxAttempts: 30, baseDelayMs: 50, maxDelayMs: 300 },
      onAttempt: (e) => attempts.set(e.key ?? "", [...(attempts.get(e.key ?? "") ?? []), `${e.outcome}:${e.status ?? ""}:${e.problemType ?? ""}`]),
    });
    const actions = Array.from({ length: 40 }, (_, i) => ({
      key: `flush-${randomUUID()}`,
      args: { customerId: `cus_flush_${i}`, amountCents: 100 + i, currency: "EUR", simulate: { latencyMs: 150 + (i % 5) * 100 } },
    }));
    const flushes = (async () => {
      for (const atMs of [150, 400, 900]) {
        await new Promise((r) => setTimeout(r, atMs));
        await redis.flushAll();
      }
    })();
    const results = await Promise.all(
      actions.map(async (a, i) => {
        await new Promise((r) => setTimeout(r, i * 15));
        const deadline = new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error(`action ${i} (${a.key}) unfinished after 45 s; attempts: ${attempts.get(a.key)?.join(" ")}\n${server.output().slice(-3000)}`)), 45_000).unref(),
        );
        return Promise.race([client.invoke("payments.charge", a.args, { key: a.key }), deadline]);
      }),
    );
    await flushes;
    expect(results.every((r) => r.status === 200)).toBe(true);
    const counts = await Promise.all(actions.map((a) => charges(pg, a.key)));
    const counted = counts.reduce((a, b) => a + b, 0);
    summary.push({ case: "Redis flushed 3× under 40 retried actions", expected: 40, counted });
    // a key charged twice: what the audit log and the client saw of it, to tell how
    const twice = actions.filter((_, i) => counts[i] !== 1).map((a) => a.key);
    const evidence = await pg.db.prisma.execution.findMany({ where: { key: { in: twice } }, orderBy: { startedAt: "asc" } });
    const seen = twice.map((k) => `${k}: ${attempts.get(k)?.join(" ")}`).join("\n");
    expect(counts, `${seen}\n${JSON.stringify(evidence, (_, v) => (typeof v === "bigint" ? Number(v) : v), 1)}`).toEqual(actions.map(() => 1));
  });
});

describe("PostgreSQL unreachable", () => {
  const prefix = `idgfault-pg-${randomUUID().slice(0, 6)}`;
  const dataDir = ".data/fault-pg";
  const proxy = new CuttableProxy(testPort(5499), 5432);
  let pg: Pg;
  let server: RunningServer;

  beforeAll(async () => {
    pg = await createTestPostgres("fault_pg");
    await proxy.open();
    await removeDataDir(dataDir);
    const url = new URL(pg.url);
    url.port = String(proxy.port);
    server = await startServer({
      port: testPort(3133),
      dataDir,
      env: { DATABASE_URL: url.toString(), REDIS_URL: REDIS_TEST_URL, IDEMGATE_REDIS_PREFIX: prefix, IDEMGATE_RECONCILE_INTERVAL_MS: "0" },
    });
  });
  afterAll(async () => {
    await server?.stop();
    await proxy.cut();
    await deleteRedisPrefix(prefix);
    await pg?.drop();
    await removeDataDir(dataDir);
  });

  it("fails writes closed with 503 and no side effect, and runs them once it is back", async () => {
    const { apiToken } = await server.credentials();
    const args = { customerId: "cus_pg_down", amountCents: 900, currency: "EUR" };
    expect((await invoke(server, apiToken, "payments.charge", args, `warm-${randomUUID()}`)).status).toBe(200);
    await proxy.cut();
    const keys = Array.from({ length: 5 }, () => `pgdown-${randomUUID()}`);
    for (const key of keys) {
      const res = await invoke(server, apiToken, "payments.charge", args, key);
      expect(res.status).toBe(503);
      expect((await res.json()).type).toBe("/problems/unavailable");
    }
    await proxy.open();
    let counted = 0;
    for (const key of keys) counted += await charges(pg, key);
    summary.push({ case: "PostgreSQL cut: 5 writes", expected: 0, counted });
    expect(counted).toBe(0);
    // nothing was left reserved: the same keys run now, once each
    for (const key of keys) {
      await waitFor("the write to succeed", async () => (await invoke(server, apiToken, "payments.charge", args, key)).status === 200);
      expect(await charges(pg, key)).toBe(1);
    }
  });
});

describe("10,000 generated bad requests", () => {
  const dataDir = ".data/fault-fuzz";
  let server: RunningServer;
  let pg: Pg;

  beforeAll(async () => {
    pg = await createTestPostgres("fault_fuzz");
    await removeDataDir(dataDir);
    server = await startServer({ port: testPort(3134), dataDir, env: { DATABASE_URL: pg.url, IDEMGATE_RECONCILE_INTERVAL_MS: "0" } });
  });
  afterAll(async () => {
    await server?.stop();
    await pg?.drop();
    await removeDataDir(dataDir);
  });

  /** One HTTP/1.1 request written byte for byte on a socket: nothing a client library would refuse to send is filtered. */
  function raw(port: number, request: Buffer[]): Promise<{ status: number; contentType: string }> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, "127.0.0.1");
      const chunks: Buffer[] = [];
      socket.setTimeout(15_000, () => socket.destroy(new Error("no answer in 15 s")));
      socket.on("data", (d) => chunks.push(d));
      // a server that answers before reading a refused body closes on the rest of it: the answer counts
      socket.on("error", (err) => (chunks.length ? undefined : reject(err)));
      socket.on("close", () => {
        const head = Buffer.concat(chunks).toString("latin1").split("\r\n\r\n")[0];
        const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
        const contentType = /\r\ncontent-type: *([^\r]*)/i.exec(head)?.[1] ?? "";
        resolve({ status, contentType });
      });
      socket.cork();
      for (const part of request) socket.write(part);
      socket.uncork();
    });
  }

  it("answers every one with a problem+json 4xx and runs no side effect", async () => {
    const { apiToken } = await server.credentials();
    const before = await Promise.all([pg.db.prisma.demoCharge.count(), pg.db.prisma.demoEmail.count(), pg.db.prisma.demoTicket.count()]);
    const printable = fc.string({ unit: fc.constantFrom(..."abcdefghijklmnopqrstuvwxyz0123456789-_.:/ "), maxLength: 40 });
    const goodCharge = { customerId: "cus_fuzz", amountCents: 100, currency: "EUR" };
    // Every request carries at least one defect, so none of them is a valid write.
    const defect = fc.oneof(
      fc.record({ kind: fc.constant("malformed_json"), body: fc.oneof(fc.constant('{"customerId": '), fc.constant("{,}"), fc.constant("[1,2"), printable.map((s) => `{${s}`)) }),
      fc.record({ kind: fc.constant("wrong_types"), body: fc.record({ customerId: fc.oneof(fc.integer(), fc.constant(null), fc.array(fc.string())), amountCents: fc.oneof(fc.string(), fc.double(), fc.constant(-1), fc.constant(0)), currency: fc.oneof(fc.integer(), fc.string({ maxLength: 8 }).filter((s) => !/^[A-Z]{3}$/.test(s))) }).map((b) => JSON.stringify(b)) }),
      fc.record({ kind: fc.constant("huge_key"), key: fc.integer({ min: 256, max: 6_000 }).map((n) => Buffer.alloc(n, "k")) }),
      fc.record({ kind: fc.constant("binary_key"), key: fc.uint8Array({ minLength: 1, maxLength: 64 }).map((b) => Buffer.from(b.map((x) => (x < 0x80 ? (x % 95) + 0x80 : x)))) }),
      fc.record({ kind: fc.constant("header_injection"), key: printable.map((s) => Buffer.from(`k${s}\r\nX-Injected: 1\r\nAuthorization: Bearer idg_forged`)) }),
      fc.record({ kind: fc.constant("unknown_tool"), tool: fc.string({ unit: fc.constantFrom(..."abcdefghijklmnopqrstuvwxyz0123456789-_:"), minLength: 1, maxLength: 40 }).map((s) => `no_${s}`) }),
      fc.record({ kind: fc.constant("oversized"), size: fc.integer({ min: 1024 * 1024 + 1, max: 1024 * 1024 + 4096 }) }),
      fc.record({ kind: fc.constant("wrong_token"), token: fc.oneof(fc.constant(""), printable.map((s) => `idg_${s}`), fc.constant("Basic dXNlcjpwYXNz"), fc.constant(`${apiToken}x`)) }),
      fc.record({ kind: fc.constant("missing_key"), body: fc.constant(JSON.stringify(goodCharge)) }),
    );
    const samples = fc.sample(defect, { numRuns: 10_000, seed: 20261129 });
    // an oversized body is the good charge with a long description, sent as slices of one buffer:
    // a thousand fresh megabyte strings and their copies cost more than the requests themselves
    const longest = Math.max(0, ...samples.map((d) => (d.kind === "oversized" ? (d as { size: number }).size : 0)));
    const descriptionAt = Buffer.from(JSON.stringify({ ...goodCharge, description: "" }).slice(0, -2));
    const filler = Buffer.alloc(longest, "x");
    const closing = Buffer.from('"}');
    const responses: { kind: string; status: number; contentType: string }[] = [];
    const queue = samples.entries();
    await Promise.all(
      Array.from({ length: 24 }, async () => {
        for (const [i, d] of queue) {
          const tool = d.kind === "unknown_tool" ? (d as { tool: string }).tool : "payments.charge";
          let body: Buffer[] = [Buffer.from(JSON.stringify(goodCharge))];
          const headers: (string | Buffer)[] = [];
          let auth = `Bearer ${apiToken}`;
          let key: Buffer | null = Buffer.from(`fuzz-${i}`);
          switch (d.kind) {
            case "malformed_json":
            case "wrong_types":
              body = [Buffer.from((d as { body: string }).body)];
              break;
            case "huge_key":
            case "binary_key":
            case "header_injection":
              key = (d as { key: Buffer }).key;
              break;
            case "oversized":
              body = [descriptionAt, filler.subarray(0, (d as { size: number }).size), closing];
              break;
            case "wrong_token":
              auth = (d as { token: string }).token;
              break;
            case "missing_key":
              key = null;
              break;
          }
          if (key) headers.push(Buffer.concat([Buffer.from("Idempotency-Key: "), key]));
          if (auth) headers.push(`Authorization: ${auth}`);
          const head = [`POST /api/v1/tools/${tool}/invoke HTTP/1.1`, `Host: 127.0.0.1:${server.port}`, "Content-Type: application/json", `Content-Length: ${body.reduce((n, b) => n + b.length, 0)}`, "Connection: close"];
          const request = [Buffer.from(head.join("\r\n") + "\r\n"), ...headers.map((h) => Buffer.concat([Buffer.from(h), Buffer.from("\r\n")])), Buffer.from("\r\n"), ...body];
          const res = await raw(server.port, request);
          responses.push({ kind: d.kind, ...res });
        }
      }),
    );
    expect(responses).toHaveLength(10_000);
    const serverErrors = responses.filter((r) => r.status >= 500 || r.status === 0);
    expect(serverErrors, JSON.stringify(serverErrors.slice(0, 5))).toEqual([]);
    const notProblems = responses.filter((r) => r.status >= 400 && !r.contentType.startsWith("application/problem+json"));
    expect(notProblems, JSON.stringify(notProblems.slice(0, 5))).toEqual([]);
    expect(responses.filter((r) => r.status < 400)).toEqual([]);
    const after = await Promise.all([pg.db.prisma.demoCharge.count(), pg.db.prisma.demoEmail.count(), pg.db.prisma.demoTicket.count()]);
    const counted = after.reduce((a, b) => a + b, 0) - before.reduce((a, b) => a + b, 0);
    summary.push({ case: "10,000 bad requests", expected: 0, counted });
    expect(counted).toBe(0);
  });
});

describe("simulated agent traffic", () => {
  const dataDir = ".data/fault-sim";
  const prefix = `idgfault-sim-${randomUUID().slice(0, 6)}`;
  let server: RunningServer;
  let pg: Pg;
  let env: Record<string, string>;

  beforeAll(async () => {
    pg = await createTestPostgres("fault_sim");
    await removeDataDir(dataDir);
    env = { DATABASE_URL: pg.url, REDIS_URL: REDIS_TEST_URL, IDEMGATE_REDIS_PREFIX: prefix, IDEMGATE_DEMO_LEASE_MS: "5000", IDEMGATE_RECONCILE_INTERVAL_MS: "0" };
    server = await startServer({ port: testPort(3135), dataDir, env });
  });
  afterAll(async () => {
    await server?.stop();
    await deleteRedisPrefix(prefix);
    await pg?.drop();
    await removeDataDir(dataDir);
  });

  const reconcile = async () => JSON.parse((await cli(["reconcile", "--json"], env)).stdout) as { flagged: { type: string; key: string | null; evidence: Record<string, unknown> }[] };

  it("flags nothing after a run without faults or fresh-key duplicates", async () => {
    const { apiToken } = await server.credentials();
    const run = await runSimulation({ url: server.url, token: apiToken, agents: 4, durationMs: 12_000, seed: 11, freshKeyDuplicates: false });
    expect(run.totals.executed).toBeGreaterThan(10);
    expect(run.totals.replayed).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 5_500)); // past every lease
    const report = await reconcile();
    expect(report.flagged).toEqual([]);
  });

  it("flags every crash as an orphan and every fresh-key duplicate, and no keyless repeat inside the fallback-dedupe window", async () => {
    const { apiToken } = await server.credentials();
    const run = await runSimulation({ url: server.url, token: apiToken, agents: 6, durationMs: 45_000, seed: 7, faults: true, genuineRepeats: true });
    expect(run.caused.crashes).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 5_500));
    const report = await reconcile();
    const orphans = new Set(report.flagged.filter((a) => a.type === "orphan_unknown_outcome").map((a) => a.key));
    for (const key of run.caused.expectedStuckKeys) expect(orphans.has(key), `crash under ${key} not flagged`).toBe(true);
    // One window judges a replay's gap, keyed or keyless: the tool's stale threshold, never under the
    // fallback-dedupe TTL (60 s by default). The simulation's keyless repeats all come within it (it
    // runs 45 s): they are the duplicates the tool's fallback dedupe is there to catch, not anomalies.
    const staleFallback = new Set(report.flagged.filter((a) => a.type === "stale_suppression" && a.evidence.fallback === true).map((a) => a.evidence.suppressionId));
    const keylessRepeats = await pg.db.prisma.suppression.findMany({ where: { kind: "replay", fallback: true, gapMs: { gt: 10_000 } }, select: { id: true } });
    expect(keylessRepeats.length).toBeGreaterThan(0);
    for (const s of keylessRepeats) expect(staleFallback.has(s.id), `keyless repeat ${s.id} inside the fallback window flagged`).toBe(false);
    summary.push({ case: `simulation: ${run.caused.crashes} crashes flagged as orphans`, expected: run.caused.expectedStuckKeys.length, counted: run.caused.expectedStuckKeys.filter((k) => orphans.has(k)).length });
    // fresh-key duplicates: each one ran again (orchestrator keys) and is flagged; nothing else is
    const fresh = new Set(report.flagged.filter((a) => a.type === "fresh_key_duplicate").map((a) => a.key));
    const ran = run.freshKeys.sent.filter((d) => d.outcome === "ran" || d.outcome === "unknown").map((d) => d.key);
    expect(run.freshKeys.caused).toBeGreaterThan(0);
    for (const key of ran) expect(fresh.has(key), `fresh-key duplicate under ${key} not flagged`).toBe(true);
    expect([...fresh].sort()).toEqual([...ran].sort());
    summary.push({ case: `simulation: ${run.freshKeys.caused} fresh-key duplicates caught`, expected: run.freshKeys.caused, counted: run.freshKeys.suppressed + ran.filter((k) => fresh.has(k)).length });
  });
});

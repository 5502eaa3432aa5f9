import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { testPort } from "@/scripts/test-ports.mjs";
import { createTestPostgres, REDIS_TEST_URL } from "@/test/support/databases";
import { removeDataDir, startServer, type RunningServer } from "@/test/support/server";
import { deleteRedisPrefix } from "@/test/support/stores";

// Prefer: wait=N (RFC 7240): a duplicate that meets its first call still running is held until that
// call ends, and answered as a retry arriving then would be. Real servers from the production
// build; on Redis and PostgreSQL the waiting duplicate goes to another server process than the
// call it waits for. Ports 3139–3140 and 3150 are this file's (moved by IDEMGATE_TEST_PORT_BASE).

const latencies: { configuration: string; ms: number }[] = [];

function call(server: RunningServer, token: string, key: string, args: unknown, headers: Record<string, string> = {}) {
  const started = performance.now();
  return fetch(`${server.url}/api/v1/tools/payments.charge/invoke`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json", "idempotency-key": key, ...headers },
    body: JSON.stringify(args),
  }).then(async (res) => ({ status: res.status, headers: res.headers, body: await res.text(), endedAt: performance.now(), tookMs: performance.now() - started }));
}

async function charges(server: RunningServer, token: string, customerId: string): Promise<number> {
  const res = await fetch(`${server.url}/api/v1/tools/payments.list_charges/invoke`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ customerId }),
  });
  return ((await res.json()) as { charges: unknown[] }).charges.length;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Waits until a call holds `key` (and at least `ms` more): a duplicate sent before the first call has
 * reserved the key would be the first call itself (on a loaded machine a request can take longer
 * than a fixed pause to arrive). Answers false when the call had already ended when first looked
 * at (a lookup slower than the call): that round shows nothing about waiting and is sent again.
 */
async function heldFor(server: RunningServer, token: string, key: string, ms: number): Promise<boolean> {
  for (let i = 0; i < 400; i++) {
    const res = await fetch(`${server.url}/api/v1/keys/demo/${encodeURIComponent(key)}`, { headers: { authorization: `Bearer ${token}` } });
    const state = res.ok ? ((await res.json()) as { record: { state: string } | null }).record?.state : undefined;
    if (state === "inflight") {
      await sleep(ms);
      return true;
    }
    if (state !== undefined) return false;
    await sleep(25);
  }
  throw new Error(`no call held ${key}`);
}

/** A round that missed the first call's run (see heldFor) is sent again, at most this many times per test. */
const MISSES_ALLOWED = 3;

const configurations = [
  { name: "embedded (PGlite), one process", ports: [testPort(3150)], servers: false },
  { name: "Redis and PostgreSQL, two processes", ports: [testPort(3139), testPort(3140)], servers: true },
] as const;

describe.each(configurations)("Prefer: wait on $name", (configuration) => {
  const prefix = `idgfault-wait-${randomUUID().slice(0, 6)}`;
  const secret = randomUUID() + randomUUID();
  let pg: Awaited<ReturnType<typeof createTestPostgres>> | null = null;
  let first: RunningServer;
  let second: RunningServer;
  let token: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    env = { IDEMGATE_RECONCILE_INTERVAL_MS: "0", IDEMGATE_DEMO_LEASE_MS: "3000", IDEMGATE_SECRET: secret };
    if (configuration.servers) {
      pg = await createTestPostgres("fault_wait");
      Object.assign(env, { DATABASE_URL: pg.url, REDIS_URL: REDIS_TEST_URL, IDEMGATE_REDIS_PREFIX: prefix });
    }
    const [a, b] = configuration.ports;
    await removeDataDir(`.data/fault-wait-${a}`);
    first = await startServer({ port: a, dataDir: `.data/fault-wait-${a}`, env });
    token = (await first.credentials()).apiToken;
    if (b) {
      await removeDataDir(`.data/fault-wait-${b}`);
      second = await startServer({ port: b, dataDir: `.data/fault-wait-${b}`, env });
    } else {
      second = first;
    }
    // a route's first request loads its modules: taken here, not inside a 1.5 s window under test
    for (const server of new Set([first, second])) {
      await fetch(`${server.url}/api/v1/keys/demo/warm-up`, { headers: { authorization: `Bearer ${token}` } });
      await charges(server, token, "cus_warm_up");
    }
  });

  let misses = 0;
  beforeEach(() => {
    misses = 0;
  });

  /**
   * Starts a charge that runs `latencyMs` on the first server and waits until it has held its key
   * `heldMs`; a round that missed the call's run (see heldFor) is started again, with a new key and a
   * new customer (the missed call charged its own).
   */
  async function startHeld(latencyMs: number, heldMs: number) {
    for (;;) {
      const key = `wait-${randomUUID()}`;
      const args = { customerId: `cus_${randomUUID().slice(0, 8)}`, amountCents: 1_000, currency: "EUR", simulate: { latencyMs } };
      const running = call(first, token, key, args);
      if (await heldFor(first, token, key, heldMs)) return { key, args, running };
      expect((await running).status).toBe(200);
      expect(++misses, "rounds whose call ended before it was seen held").toBeLessThanOrEqual(MISSES_ALLOWED);
    }
  }

  afterAll(async () => {
    await second?.stop();
    if (second !== first) await first?.stop();
    await deleteRedisPrefix(prefix);
    await pg?.drop();
    for (const port of configuration.ports) await removeDataDir(`.data/fault-wait-${port}`);
    if (latencies.length > 0 && configuration.servers) {
      const sorted = latencies.map((l) => l.ms).sort((x, y) => x - y);
      const pct = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)].toFixed(1);
      console.log(`\nPrefer: wait — from the first call's answer to the waiter's answer, ${sorted.length} calls: p50 ${pct(50)} ms, p99 ${pct(99)} ms`);
      for (const l of latencies) console.log(`  ${l.configuration}: ${l.ms.toFixed(1)} ms`);
    }
  });

  it("holds a duplicate sent 300 ms into a 1.5 s call and answers it with the same bytes, replayed; one charge", async () => {
    for (let i = 0; i < 10; i++) {
      const { key, args, running } = await startHeld(1_500, 300);
      // a bound, not a wait: the waiter is answered when the 1.5 s call ends; on two cores under the
      // whole suite that call once took over 10 s on the embedded database, and the waiter got its 409
      const waiter = await call(second, token, key, args, { prefer: "wait=30" });
      const original = await running;
      const timing = `first call ${original.tookMs.toFixed(0)} ms, waiter ${waiter.tookMs.toFixed(0)} ms: ${waiter.body.slice(0, 300)}`;
      expect(original.status, timing).toBe(200);
      expect(waiter.status, timing).toBe(200);
      expect(waiter.headers.get("idempotent-replayed")).toBe("true");
      expect(waiter.headers.get("preference-applied")).toBe("wait=30");
      expect(waiter.body).toBe(original.body);
      expect(await charges(first, token, args.customerId)).toBe(1);
      latencies.push({ configuration: configuration.name, ms: Math.max(0, waiter.endedAt - original.endedAt) });
    }
  });

  it("answers 409 after about the wait asked for when the call runs longer", async () => {
    const { key, args, running } = await startHeld(2_500, 200);
    const waiter = await call(second, token, key, args, { prefer: "wait=1" });
    expect(waiter.status).toBe(409);
    expect(JSON.parse(waiter.body).type).toBe("/problems/conflict");
    expect(waiter.headers.get("preference-applied")).toBe("wait=1");
    expect(waiter.tookMs).toBeGreaterThanOrEqual(900);
    expect((await running).status).toBe(200);
  });

  // needs the waiter on another process than the holder: only the servers configuration has two
  if (configuration.servers) it("ends the wait with the stuck answer when the first call's process is killed", async () => {
    const key = `wait-${randomUUID()}`;
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const args = { customerId, amountCents: 1_000, currency: "EUR", simulate: { afterEffectMs: 10_000 } };
    const lost = call(first, token, key, args).catch((err: Error) => err);
    for (let i = 0; i < 50 && (await charges(second, token, customerId)) === 0; i++) await sleep(100);
    const waiting = call(second, token, key, args, { prefer: "wait=10" });
    await sleep(200);
    await first.kill();
    expect(await lost).toBeInstanceOf(Error);
    const answer = await waiting;
    expect(answer.status).toBe(409);
    expect(JSON.parse(answer.body)).toMatchObject({ type: "/problems/stuck", state: "stuck" });
    expect(await charges(second, token, customerId)).toBe(1);
  });
});

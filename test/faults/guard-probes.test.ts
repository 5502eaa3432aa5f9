import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { appendFile, mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { testPort } from "@/scripts/test-ports.mjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { IdemgateClient, type HeldCall, type Resolver } from "@/lib/client/index";
import { bundledScript } from "@/test/support/bundled-script";
import { createTestPostgres } from "@/test/support/databases";
import { probeDecisions } from "@/test/support/probe-decisions";
import { RedisProcess } from "@/test/support/redis-process";
import { removeDataDir, ROOT, startServer, type RunningServer } from "@/test/support/server";
import { CuttableProxy } from "@/test/support/tcp-proxy";

// Held calls of a client-run tool resolved where the tool lives. Guarded functions (the demo
// `ledger.record`) run in worker processes (test/support/guard-worker.ts), SIGKILLed after their
// effect or before it, or throwing after it, while the gateway is SIGKILLed and restarted and, on
// Redis and PostgreSQL, Redis is killed (its data lost) and PostgreSQL cut off. Each action's
// effect is a line in its own ledger file: the counting service a probe asks. A resolver runs in
// this process (which survives every fault); after the faults heal, at least 95 % of the held keys
// must be resolved without an operator within 60 s, none wrongly (applied: exactly one effect; not
// applied: none), and a retry of each resolved key must replay its result or run once.
//
// Each resolver in RESOLVERS below is checked the same way, on both configurations: another
// client's resolver (the Python one) is one more entry whose start() runs it in a subprocess that
// probes the same ledger files, and returns { stop }.
// Ports 3188, 3189, 6388 and 5488 are this file's (moved by IDEMGATE_TEST_PORT_BASE).

type Mode = "ok" | "crash" | "crash_before" | "throw";

interface WorkerResult {
  ran?: boolean;
  outcome: string;
  signal: NodeJS.Signals | null;
}

const ACTIONS = 40;
const CONCURRENCY = 6;
const LEASE_MS = 3_000;
const RESOLVE_BOUND_MS = 60_000;

const summary: string[] = [];
afterAll(() => {
  console.log("\nprobes where the tool lives: held keys after healing, resolved without an operator");
  for (const row of summary) console.log(`  ${row}`);
});

const configurations = [
  { name: "embedded (PGlite)", port: testPort(3188), servers: false },
  { name: "Redis and PostgreSQL", port: testPort(3189), servers: true },
] as const;

/** the ledger line count for `key`: the effects that happened */
async function effects(dir: string, key: string): Promise<number> {
  const text = await readFile(path.join(dir, `${key}.jsonl`), "utf8").catch(() => "");
  return text.split("\n").filter(Boolean).length;
}

/** the probe the application registers: it asks the counting service whether the call's effect happened */
export function ledgerProbe(dir: string) {
  return async (call: HeldCall) => {
    const counted = await effects(dir, call.key);
    if (counted > 0) return { applied: true as const, result: { by: "probe", effects: counted } };
    // nothing yet, and the call may still be running: cannot tell
    return call.leaseEnded ? { applied: false as const } : null;
  };
}

/** A resolver under test, started in a process that survives every fault, probing the ledger files in `ledgerDir`. */
interface ResolverUnderTest {
  name: string;
  start(context: { url: string; token: string; ledgerDir: string }): Promise<{ stop(): Promise<void> }>;
}

const RESOLVERS: ResolverUnderTest[] = [
  {
    name: "TypeScript",
    async start({ url, token, ledgerDir }) {
      const client = new IdemgateClient({ baseUrl: url, token, replayCache: false, retry: { maxAttempts: 3, baseDelayMs: 100, maxDelayMs: 1_000 } });
      const resolver: Resolver = client.startResolver({ "ledger.record": ledgerProbe(ledgerDir) }, { holder: "survivor-ts", intervalMs: 500, probeTimeoutMs: 2_000, onError: () => {} });
      return { stop: () => resolver.stop() };
    },
  },
];

describe.each(configurations)("held calls of guarded functions resolved by a probe, on $name", (configuration) => {
  const dataDir = `.data/fault-probes-${configuration.port}`;
  const redis = new RedisProcess(testPort(6388));
  const proxy = new CuttableProxy(testPort(5488), 5432);
  let pg: Awaited<ReturnType<typeof createTestPostgres>> | null = null;
  let server: RunningServer;
  let env: Record<string, string>;
  let token: string;
  let dir: string;
  let tsWorker: string;

  beforeAll(async () => {
    tsWorker = await bundledScript("test/support/guard-worker.ts");
    dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-probes-"));
    await removeDataDir(dataDir);
    // the reconciler holds again, from the audit log, the calls whose records a Redis loss took
    env = { IDEMGATE_RECONCILE_INTERVAL_MS: "2000", IDEMGATE_DEMO_LEASE_MS: String(LEASE_MS), IDEMGATE_SECRET: randomUUID() + randomUUID() };
    if (configuration.servers) {
      pg = await createTestPostgres("fault_probes");
      await redis.start();
      await proxy.open();
      const url = new URL(pg.url);
      url.port = String(proxy.port);
      Object.assign(env, { DATABASE_URL: url.toString(), REDIS_URL: redis.url });
    }
    server = await startServer({ port: configuration.port, dataDir, env });
    token = (await server.credentials()).apiToken;
  });

  afterAll(async () => {
    await server?.stop();
    if (configuration.servers) {
      await proxy.cut();
      await redis.dispose();
    }
    await pg?.drop();
    await removeDataDir(dataDir);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const args = (key: string) => ({ account: `acct-${key.slice(0, 40)}`, amountCents: 100, currency: "EUR" });

  function worker(key: string, mode: Mode): Promise<WorkerResult> {
    const child = spawn(process.execPath, [tsWorker], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        ...process.env,
        IDEMGATE_URL: server.url,
        IDEMGATE_TOKEN: token,
        KEY: key,
        ACCOUNT: args(key).account,
        LEDGER: path.join(dir, `${key}.jsonl`),
        MODE: mode,
        MAX_ATTEMPTS: "4",
        FLUSH_ON_EXIT_MS: "3000",
      },
    });
    let stdout = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.resume();
    return new Promise((resolve) =>
      child.once("close", (code, signal) => {
        if (signal) return resolve({ ran: mode === "crash", outcome: "killed", signal });
        const line = stdout.trim().split("\n").at(-1);
        // a worker that failed outright (the gateway gone for all its attempts) reports nothing more
        if (code !== 0 || !line) return resolve({ outcome: `exit ${code}`, signal: null });
        resolve({ ...(JSON.parse(line) as Omit<WorkerResult, "signal">), signal: null });
      }),
    );
  }

  async function keyState(key: string): Promise<string> {
    const res = await fetch(`${server.url}/api/v1/keys/demo/${encodeURIComponent(key)}`, { headers: { authorization: `Bearer ${token}` } });
    if (res.status === 404) return "absent";
    if (res.status !== 200) return `http ${res.status}`;
    const body = (await res.json()) as { record?: { state: string } | null; state?: string };
    return body.record?.state ?? body.state ?? "absent";
  }

  /**
   * The actions, CONCURRENCY worker processes at a time, with the faults injected as the work
   * goes: each fault starts once a given number of actions have ended, and heals a few actions later.
   */
  async function runActions(keys: { key: string; mode: Mode }[]): Promise<Map<string, WorkerResult>> {
    const results = new Map<string, WorkerResult>();
    let ended = 0;
    const faults: { at: number; inject: () => Promise<void> }[] = [
      // the gateway SIGKILLed and started again
      { at: 6, inject: async () => {
        await server.kill();
        server = await startServer({ port: configuration.port, dataDir, env });
      } },
    ];
    if (configuration.servers) {
      faults.push(
        // Redis killed (its data gone), back after two more actions ended
        { at: 14, inject: () => redis.stop() },
        { at: 16, inject: () => redis.start() },
        // PostgreSQL cut off, back after two more actions ended
        { at: 24, inject: () => proxy.cut() },
        { at: 26, inject: () => proxy.open() },
      );
    }
    let faulting = Promise.resolve();
    const onEnded = () => {
      ended++;
      for (const fault of faults.filter((f) => f.at === ended)) faulting = faulting.then(fault.inject);
    };
    let next = 0;
    const lane = async () => {
      while (next < keys.length) {
        const { key, mode } = keys[next++];
        await faulting;
        results.set(key, await worker(key, mode));
        onEnded();
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, lane));
    await faulting;
    // whatever fault is still on heals now
    if (configuration.servers) {
      await redis.start().catch(() => {});
      await proxy.open();
    }
    return results;
  }

  const decisions = () => probeDecisions(pg, keyState);
  const probeDecision = (key: string) => decisions().probeDecision(key);
  const isDecided = (key: string) => decisions().isDecided(key);



  it.each(RESOLVERS)("the $name resolver in a surviving process resolves >= 95% of the held keys within 60 s of healing, none wrongly, and every retry replays or runs once", async (under) => {
    const modes: Mode[] = ["crash", "crash", "crash_before", "throw", "ok"];
    const keys = Array.from({ length: ACTIONS }, (_, i) => ({ key: `probe-${i}-${randomUUID()}`, mode: modes[i % modes.length] }));
    const client = new IdemgateClient({ baseUrl: server.url, token, replayCache: false, retry: { maxAttempts: 3, baseDelayMs: 100, maxDelayMs: 1_000 } });
    // started before the faults, in a process that survives them: it keeps going through each
    const resolver = await under.start({ url: server.url, token, ledgerDir: dir });
    let healedAt = 0;
    let held: string[] = [];
    try {
      const results = await runActions(keys);
      healedAt = Date.now();
      // held: every action whose function was reached and did not end cleanly, and any key the gateway still holds
      const states = new Map<string, string>();
      for (const { key } of keys) states.set(key, await keyState(key));
      held = keys
        .map(({ key }) => key)
        .filter((key) => {
          const r = results.get(key)!;
          return r.outcome === "killed" || r.outcome === "OutcomeUnknownError" || ["unknown", "stuck", "inflight"].includes(states.get(key)!);
        });
      expect(held.length).toBeGreaterThan(ACTIONS / 3);

      // wait for the resolver: until every held key is decided, 60 s at most
      const decided = async () => {
        let n = 0;
        for (const key of held) if (await isDecided(key)) n++;
        return n;
      };
      let resolved = await decided();
      while (resolved < held.length && Date.now() - healedAt < RESOLVE_BOUND_MS) {
        await new Promise((r) => setTimeout(r, 500));
        resolved = await decided();
      }
      const tookMs = Date.now() - healedAt;
      summary.push(`${configuration.name}, ${under.name} resolver: ${ACTIONS} actions, ${held.length} held after healing, ${resolved} resolved by the probe in ${(tookMs / 1000).toFixed(1)} s`);
      expect(resolved / held.length).toBeGreaterThanOrEqual(0.95);
    } finally {
      await resolver.stop();
    }

    // none wrongly: done (applied) has exactly one effect, released (not applied) none
    for (const key of held) {
      const state = await keyState(key);
      const counted = await effects(dir, key);
      if (state === "done") expect(counted, `${key} resolved applied`).toBe(1);
      if (state === "absent") {
        const decision = await probeDecision(key);
        if (decision === "release") expect(counted, `${key} released as not applied`).toBe(0);
        if (decision === "resolve") expect(counted, `${key} resolved applied (its record lost with Redis since)`).toBe(1);
      }
    }
    // every decision was the probe's (no operator acted): the trail names its token and process
    if (pg) {
      const decisionsLogged = await pg.db.prisma.operatorAction.findMany({ where: { key: { in: held }, action: { in: ["resolve", "release"] } } });
      expect(decisionsLogged.length).toBeGreaterThan(0);
      for (const d of decisionsLogged) expect(d.actor).toMatch(/^probe:token:.+@.+$/);
    }
    // a retry of each resolved key replays its result or runs once
    for (const key of held) {
      const state = await keyState(key);
      const decision = state === "absent" ? await probeDecision(key) : null;
      if (state !== "done" && decision === null) continue;
      let ran = 0;
      await client.guard("ledger.record", args(key), async () => {
        ran++;
        await appendFile(path.join(dir, `${key}.jsonl`), JSON.stringify({ by: "retry" }) + "\n");
        return { by: "retry" };
      }, { key, onWarning: () => {} });
      // applied (its record lost with Redis since or not): the result is replayed, from the log if need be
      expect(ran, key).toBe(state === "done" || decision === "resolve" ? 0 : 1);
      expect(await effects(dir, key), key).toBe(1);
    }
  });
});

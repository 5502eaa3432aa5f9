import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { testPort } from "@/scripts/test-ports.mjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestPostgres } from "@/test/support/databases";
import { probeDecisions } from "@/test/support/probe-decisions";
import { RedisProcess } from "@/test/support/redis-process";
import { removeDataDir, ROOT, startServer, type RunningServer } from "@/test/support/server";
import { CuttableProxy } from "@/test/support/tcp-proxy";

// The Python side of guard-probes.test.ts: held calls of a client-run tool (the demo
// `ledger.record`) guarded in Python worker processes (test/support/guard_worker.py), SIGKILLed after
// their effect or before it, or throwing after it, while the gateway is SIGKILLed and restarted and,
// on Redis and PostgreSQL, Redis is killed (its data lost) and PostgreSQL cut off. Each action's
// effect is a line in its own ledger file: the counting service the probe asks. The Python client's
// resolver runs in a process of its own that survives every fault (test/support/probe_resolver.py:
// its sync resolver thread on the embedded server, AsyncIdemgate's task on Redis and PostgreSQL).
// After the faults heal, at least 95 % of the held keys must be resolved without an operator within
// 60 s, none wrongly (applied: exactly one effect; not applied: none), and a retry of each resolved
// key (a Python worker) must replay its result or run once. Ports 3198, 3199, 6389 and 5489 are this
// file's (moved by IDEMGATE_TEST_PORT_BASE).

type Mode = "ok" | "crash" | "crash_before" | "throw";

interface WorkerResult {
  ran?: boolean;
  outcome: string;
  signal: NodeJS.Signals | null;
}

const PYTHON = process.env.PYTHON ?? "python3";
const ACTIONS = 40;
const CONCURRENCY = 6;
const LEASE_MS = 3_000;
const RESOLVE_BOUND_MS = 60_000;

const summary: string[] = [];
afterAll(() => {
  console.log("\nprobes where the tool lives (Python workers and resolver): held keys after healing, resolved without an operator");
  for (const row of summary) console.log(`  ${row}`);
});

const configurations = [
  { name: "embedded (PGlite)", port: testPort(3198), servers: false, resolverMode: "sync" },
  { name: "Redis and PostgreSQL", port: testPort(3199), servers: true, resolverMode: "async" },
] as const;

/** the ledger line count for `key`: the effects that happened */
async function effects(dir: string, key: string): Promise<number> {
  const text = await readFile(path.join(dir, `${key}.jsonl`), "utf8").catch(() => "");
  return text.split("\n").filter(Boolean).length;
}

/** The Python resolver process: started, ready once it says so; stop() sends SIGTERM and returns its stats and decisions. */
async function startPythonResolver(env: Record<string, string>): Promise<{ stop: () => Promise<{ stats: Record<string, unknown>; decisions: { key: string; said: string; decision: string }[]; log: string }> }> {
  const child: ChildProcess = spawn(PYTHON, [path.join(ROOT, "test", "support", "probe_resolver.py")], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, PYTHONPATH: path.join(ROOT, "clients", "python"), PYTHONDONTWRITEBYTECODE: "1", ...env },
  });
  let stdout = "";
  let stderr = "";
  child.stderr!.on("data", (d) => (stderr += d));
  const closed = new Promise<void>((resolve) => child.once("close", () => resolve()));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (d) => {
      stdout += d;
      if (stdout.includes('"ready": true')) resolve();
    });
    child.once("close", (code) => reject(new Error(`the Python resolver exited ${code} before it was ready:\n${stdout}\n${stderr}`)));
  });
  return {
    async stop() {
      child.kill("SIGTERM");
      await closed;
      const lines = stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      const last = lines.at(-1) ?? {};
      if (!("stats" in last)) throw new Error(`the Python resolver ended without its stats (exit ${child.exitCode}):\n${stdout}\n${stderr.slice(-4000)}`);
      return { stats: last.stats as Record<string, unknown>, decisions: lines.filter((l) => "decision" in l) as { key: string; said: string; decision: string }[], log: stderr };
    },
  };
}

describe.each(configurations)("held calls of Python guarded functions resolved by the Python resolver's probe, on $name", (configuration) => {
  const dataDir = `.data/fault-probes-py-${configuration.port}`;
  const redis = new RedisProcess(testPort(6389));
  const proxy = new CuttableProxy(testPort(5489), 5432);
  let pg: Awaited<ReturnType<typeof createTestPostgres>> | null = null;
  let server: RunningServer;
  let env: Record<string, string>;
  let token: string;
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-probes-py-"));
    await removeDataDir(dataDir);
    // the reconciler holds again, from the audit log, the calls whose records a Redis loss took
    env = { IDEMGATE_RECONCILE_INTERVAL_MS: "2000", IDEMGATE_DEMO_LEASE_MS: String(LEASE_MS), IDEMGATE_SECRET: randomUUID() + randomUUID() };
    if (configuration.servers) {
      pg = await createTestPostgres("fault_probes_py");
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

  const account = (key: string) => `acct-${key.slice(0, 40)}`;

  function worker(key: string, mode: Mode): Promise<WorkerResult> {
    const child = spawn(PYTHON, [path.join(ROOT, "test", "support", "guard_worker.py")], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        ...process.env,
        PYTHONPATH: path.join(ROOT, "clients", "python"),
        PYTHONDONTWRITEBYTECODE: "1",
        IDEMGATE_URL: server.url,
        IDEMGATE_TOKEN: token,
        KEY: key,
        ACCOUNT: account(key),
        LEDGER: path.join(dir, `${key}.jsonl`),
        MODE: mode,
        MAX_ATTEMPTS: "4",
        FLUSH_TIMEOUT: "3",
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
      {
        at: 6,
        inject: async () => {
          await server.kill();
          server = await startServer({ port: configuration.port, dataDir, env });
        },
      },
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



  it("a Python resolver in a surviving process resolves >= 95% of the held keys within 60 s of healing, none wrongly, and every retry replays or runs once", async () => {
    const modes: Mode[] = ["crash", "crash", "crash_before", "throw", "ok"];
    const keys = Array.from({ length: ACTIONS }, (_, i) => ({ key: `probe-py-${i}-${randomUUID()}`, mode: modes[i % modes.length] }));
    // started before the faults, in a process of its own that survives them: it keeps going through each
    const resolver = await startPythonResolver({
      IDEMGATE_URL: server.url,
      IDEMGATE_TOKEN: token,
      LEDGER_DIR: dir,
      MODE: configuration.resolverMode,
      INTERVAL: "0.5",
      PROBE_TIMEOUT: "2",
      HOLDER: "py-survivor",
    });
    let healedAt = 0;
    let held: string[] = [];
    let stopped: Awaited<ReturnType<typeof resolver.stop>> | null = null;
    let ratio = 0;
    const unresolved: string[] = [];
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
      summary.push(`${configuration.name} (${configuration.resolverMode} resolver): ${ACTIONS} actions, ${held.length} held after healing, ${resolved} resolved by the probe in ${(tookMs / 1000).toFixed(1)} s`);
      ratio = resolved / held.length;
      for (const key of held) {
        const state = await keyState(key);
        if (!(await isDecided(key))) unresolved.push(`${key}: ${state} (worker ${results.get(key)!.outcome}, ${await effects(dir, key)} effects)`);
      }
    } finally {
      stopped = await resolver.stop();
    }
    const told = (key: string) => stopped!.decisions.filter((d) => d.key === key.split(":")[0]).map((d) => `${d.said}/${d.decision}`);
    // what was left, and what the resolver said of it, in the run's summary
    for (const u of unresolved) summary.push(`  left held: ${u}; the resolver: ${told(u).join(", ") || "never answered"}`);
    if (unresolved.length) summary.push(`  resolver stats: ${JSON.stringify(stopped!.stats)}; its log:\n${stopped!.log.slice(-3000)}`);
    expect(ratio, `unresolved:\n${unresolved.map((u) => `${u} resolver: ${told(u).join(", ") || "never answered"}`).join("\n")}\nresolver stats: ${JSON.stringify(stopped!.stats)}\nresolver log:\n${stopped!.log.slice(-6000)}`).toBeGreaterThanOrEqual(0.95);

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
      for (const d of decisionsLogged) expect(d.actor).toMatch(/^probe:token:.+@py-survivor$/);
    }
    // a retry of each resolved key (a Python worker, CONCURRENCY at a time) replays its result or runs once
    const retried: string[] = [];
    const queue = [...held];
    const retryLane = async () => {
      for (let key = queue.shift(); key !== undefined; key = queue.shift()) {
        const state = await keyState(key);
        const decision = state === "absent" ? await probeDecision(key) : null;
        if (state !== "done" && decision === null) continue;
        const retry = await worker(key, "ok");
        // applied (its record lost with Redis since or not): the result is replayed, from the log if need be
        expect(retry, key).toMatchObject({ outcome: state === "done" || decision === "resolve" ? "replayed" : "ran" });
        expect(await effects(dir, key), key).toBe(1);
        retried.push(key);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, retryLane));
    expect(retried.length / held.length).toBeGreaterThanOrEqual(0.95);
    // the resolver's own account: it decided keys of this run, and said applied only where the ledger had the effect
    const ours = stopped!.decisions.filter((d) => held.includes(d.key) && (d.decision === "resolved" || d.decision === "released"));
    expect(ours.length).toBeGreaterThan(0);
  }, 300_000);
});

import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestPostgres } from "@/test/support/databases";
import { probeDecisions } from "@/test/support/probe-decisions";
import { RedisProcess } from "@/test/support/redis-process";
import { removeDataDir, ROOT, startServer, type RunningServer } from "@/test/support/server";
import { CuttableProxy } from "@/test/support/tcp-proxy";

// The probes fault run, shared by the TypeScript and Python files (test/faults/guard-probes*.test.ts):
// held calls of a client-run tool (the demo `ledger.record`) guarded in worker processes, SIGKILLed
// after their effect or before it, or throwing after it, while the gateway is SIGKILLed and restarted
// and, on Redis and PostgreSQL, Redis is killed (its data lost) and PostgreSQL cut off. Each action's
// effect is a line in its own ledger file: the counting service a probe asks. A resolver runs in a
// process that survives every fault; after the faults heal, at least 95 % of the held keys must be
// resolved without an operator within 60 s, none wrongly (applied: exactly one effect; not applied:
// none), and a retry of each resolved key (a worker of the same language) must replay or run once.

export type Mode = "ok" | "crash" | "crash_before" | "throw";

export interface WorkerResult {
  ran?: boolean;
  outcome: string;
  signal: NodeJS.Signals | null;
}

/** A worker process: the guarded function in one language (test/support/guard-worker.ts or guard_worker.py). */
export interface WorkerCommand {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/** What a resolver knew when it stopped, for the failure message: its answers and its log. */
export interface ResolverAccount {
  decisions?: { key: string; said: string; decision: string }[];
  stats?: Record<string, unknown>;
  log?: string;
}

/** A resolver under test, started in a process that survives every fault, probing the ledger files in `ledgerDir`. */
export interface ResolverUnderTest {
  name: string;
  /** the holder name it claims with: the operator trail names `probe:token:<id>@<holder>` */
  holder: string;
  start(context: { url: string; token: string; ledgerDir: string; servers: boolean }): Promise<{ stop(): Promise<ResolverAccount> }>;
}

export interface ProbeFaultRun {
  title: string;
  /** names the data directory, the database and the keys */
  slug: string;
  worker: WorkerCommand;
  resolvers: ResolverUnderTest[];
  /** the gateway's port on each configuration, the Redis port and the PostgreSQL proxy's port (all through testPort()) */
  ports: { embedded: number; servers: number; redis: number; postgresProxy: number };
}

const ACTIONS = 40;
const CONCURRENCY = 6;
const LEASE_MS = 3_000;
const RESOLVE_BOUND_MS = 60_000;

/** the ledger line count for `key`: the effects that happened */
export async function effects(dir: string, key: string): Promise<number> {
  const text = await readFile(path.join(dir, `${key}.jsonl`), "utf8").catch(() => "");
  return text.split("\n").filter(Boolean).length;
}

export function describeProbeFaultRun(run: ProbeFaultRun): void {
  const summary: string[] = [];
  afterAll(() => {
    console.log(`\n${run.title}: held keys after healing, resolved without an operator`);
    for (const row of summary) console.log(`  ${row}`);
  });

  const configurations = [
    { name: "embedded (PGlite)", port: run.ports.embedded, servers: false },
    { name: "Redis and PostgreSQL", port: run.ports.servers, servers: true },
  ] as const;

  describe.each(configurations)(`${run.title}, on $name`, (configuration) => {
    const dataDir = `.data/fault-${run.slug}-${configuration.port}`;
    const redis = new RedisProcess(run.ports.redis);
    const proxy = new CuttableProxy(run.ports.postgresProxy, 5432);
    let pg: Awaited<ReturnType<typeof createTestPostgres>> | null = null;
    let server: RunningServer;
    let env: Record<string, string>;
    let token: string;
    let dir: string;

    beforeAll(async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), `idemgate-${run.slug}-`));
      await removeDataDir(dataDir);
      // the reconciler holds again, from the audit log, the calls whose records a Redis loss took
      env = { IDEMGATE_RECONCILE_INTERVAL_MS: "2000", IDEMGATE_DEMO_LEASE_MS: String(LEASE_MS), IDEMGATE_SECRET: randomUUID() + randomUUID() };
      if (configuration.servers) {
        pg = await createTestPostgres(`fault_${run.slug.replaceAll("-", "_")}`);
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

    function worker(key: string, mode: Mode): Promise<WorkerResult> {
      const child = spawn(run.worker.command, run.worker.args, {
        cwd: ROOT,
        stdio: ["ignore", "pipe", "pipe"],
        env: {
          ...process.env,
          ...run.worker.env,
          IDEMGATE_URL: server.url,
          IDEMGATE_TOKEN: token,
          KEY: key,
          ACCOUNT: `acct-${key.slice(0, 40)}`,
          LEDGER: path.join(dir, `${key}.jsonl`),
          MODE: mode,
          MAX_ATTEMPTS: "4",
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

    const { probeDecision, isDecided } = probeDecisions(() => pg, keyState);

    it.each(run.resolvers)(
      "the $name resolver in a surviving process resolves >= 95% of the held keys within 60 s of healing, none wrongly, and every retry replays or runs once",
      async (under) => {
        const modes: Mode[] = ["crash", "crash", "crash_before", "throw", "ok"];
        const keys = Array.from({ length: ACTIONS }, (_, i) => ({ key: `${run.slug}-${i}-${randomUUID()}`, mode: modes[i % modes.length] }));
        // started before the faults, in a process that survives them: it keeps going through each
        const resolver = await under.start({ url: server.url, token, ledgerDir: dir, servers: configuration.servers });
        let held: string[] = [];
        let account: ResolverAccount = {};
        let ratio = 0;
        const unresolved: string[] = [];
        try {
          const results = await runActions(keys);
          const healedAt = Date.now();
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
          summary.push(`${configuration.name}, ${under.name} resolver: ${ACTIONS} actions, ${held.length} held after healing, ${resolved} resolved by the probe in ${((Date.now() - healedAt) / 1000).toFixed(1)} s`);
          ratio = resolved / held.length;
          for (const key of held) {
            if (!(await isDecided(key))) unresolved.push(`${key}: ${await keyState(key)} (worker ${results.get(key)!.outcome}, ${await effects(dir, key)} effects)`);
          }
        } finally {
          account = await resolver.stop();
        }
        const told = (line: string) =>
          (account.decisions ?? [])
            .filter((d) => d.key === line.split(":")[0])
            .map((d) => `${d.said}/${d.decision}`)
            .join(", ") || "no answer recorded";
        for (const u of unresolved) summary.push(`  left held: ${u}; the resolver: ${told(u)}`);
        const diagnosis = `unresolved:\n${unresolved.map((u) => `${u} resolver: ${told(u)}`).join("\n")}\nresolver stats: ${JSON.stringify(account.stats ?? {})}\nresolver log:\n${(account.log ?? "").slice(-6000)}`;
        expect(ratio, diagnosis).toBeGreaterThanOrEqual(0.95);

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
          const logged = await pg.db.prisma.operatorAction.findMany({ where: { key: { in: held }, action: { in: ["resolve", "release"] } } });
          expect(logged.length).toBeGreaterThan(0);
          for (const d of logged) expect(d.actor.startsWith("probe:token:") && d.actor.endsWith(`@${under.holder}`), d.actor).toBe(true);
        }
        // a retry of each resolved key (a worker, CONCURRENCY at a time) replays its result or runs once
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
        // the resolver's own account, where it keeps one: it decided keys of this run
        if (account.decisions) expect(account.decisions.filter((d) => held.includes(d.key) && (d.decision === "resolved" || d.decision === "released")).length).toBeGreaterThan(0);
      },
      300_000,
    );
  });
}

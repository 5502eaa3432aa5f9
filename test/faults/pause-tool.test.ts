import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { bundledScript } from "@/test/support/bundled-script";
import { testPort } from "@/scripts/test-ports.mjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestPostgres, REDIS_TEST_URL } from "@/test/support/databases";
import { removeDataDir, ROOT, startServer, type RunningServer } from "@/test/support/server";
import { deleteRedisPrefix } from "@/test/support/stores";

// Two production server processes on one PostgreSQL and one Redis. The command line pauses a write
// tool (opening the database directly, as it does on PostgreSQL): each server process then refuses
// the tool's new first executions (503 tool_paused, nothing reserved), and by its own clock no call
// of the tool started on either process later than a second after the pause was committed; a retry
// of a done key still answers on both; after resume both run new calls again. The test waits for
// each refusal (it sends calls until one is refused), never for a fixed time.
// Ports 3128 and 3129 are this file's.

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const PORTS = [testPort(3128), testPort(3129)];
const TOOL = "payments.charge";

/** One guarded call of ledger.record from a worker process (test/support/guard-worker.ts, guard_worker.py): what it printed. */
function guardWorker(lang: "ts" | "python", script: string, env: Record<string, string>): Promise<{ ran: boolean; outcome: string; status?: number; type?: string }> {
  const [command, args] = lang === "ts" ? [process.execPath, [script]] : [process.env.PYTHON ?? "python3", [path.join(ROOT, "test", "support", "guard_worker.py")]];
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: ROOT, env: { ...process.env, PYTHONPATH: path.join(ROOT, "clients", "python"), MODE: "ok", ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) => {
      const line = stdout.split("\n").find((l) => l.startsWith("{"));
      if (code !== 0 || !line) return reject(new Error(`${lang} worker exited ${code}:\n${stdout}\n${stderr}`));
      resolve(JSON.parse(line));
    });
  });
}

function cli(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(ROOT, "bin", "idemgate.mjs"), ...args], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("a pause reaches every server process within a second (Redis and PostgreSQL, two processes)", () => {
  const prefix = `idgfault-pause-${randomUUID().slice(0, 6)}`;
  let pg: Awaited<ReturnType<typeof createTestPostgres>>;
  let env: Record<string, string>;
  const servers: RunningServer[] = [];
  let token: string;

  beforeAll(async () => {
    pg = await createTestPostgres("fault_pause");
    env = { DATABASE_URL: pg.url, REDIS_URL: REDIS_TEST_URL, IDEMGATE_REDIS_PREFIX: prefix, IDEMGATE_RECONCILE_INTERVAL_MS: "0", IDEMGATE_SECRET: randomUUID() + randomUUID() };
    for (const port of PORTS) {
      await removeDataDir(`.data/fault-pause-${port}`);
      servers.push(await startServer({ port, dataDir: `.data/fault-pause-${port}`, env }));
    }
    const created = await cli(["token", "create", "--scope", "pause-tenant", "--json"], { ...env, IDEMGATE_DEMO_TOOLS: "1" });
    expect(created.code, created.stderr).toBe(0);
    token = JSON.parse(created.stdout).token;
  }, 300_000);

  afterAll(async () => {
    for (const server of servers) await server.stop();
    await deleteRedisPrefix(prefix);
    await pg?.drop();
    for (const port of PORTS) await removeDataDir(`.data/fault-pause-${port}`);
  });

  const charge = async (server: RunningServer, key: string) => {
    const res = await fetch(`${server.url}/api/v1/tools/${TOOL}/invoke`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "idempotency-key": key, "content-type": "application/json" },
      body: JSON.stringify({ customerId: "cus_pause", amountCents: 500, currency: "EUR" }),
    });
    return { status: res.status, replayed: res.headers.get("idempotent-replayed") === "true", body: (await res.json()) as Json };
  };

  /** Sends new calls to `server` until one is refused as paused; the keys of the calls that ran. */
  const untilRefused = async (server: RunningServer, label: string) => {
    const ran: string[] = [];
    for (let i = 0; ; i++) {
      const key = `${label}-${i}`;
      const answer = await charge(server, key);
      if (answer.status === 503 && answer.body.type === "/problems/tool_paused") return { ran, refusedKey: key, answer };
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
      ran.push(key);
    }
  };

  it("is honoured by both processes within a second, done keys still answer, and resume restores both", async () => {
    const done = await charge(servers[1], "done-before");
    expect(done.status).toBe(200);

    const paused = await cli(["tool", "pause", TOOL, "--reason", "provider double-charges", "--json"], { ...env, IDEMGATE_DEMO_TOOLS: "1" });
    expect(paused.code, paused.stderr).toBe(0);
    const row = await pg.db.prisma.pausedTool.findUniqueOrThrow({ where: { tool: TOOL } });

    const outcomes = await Promise.all(servers.map((server, i) => untilRefused(server, `paused-${i}`)));
    for (const [i, outcome] of outcomes.entries()) {
      expect(outcome.answer.body).toMatchObject({ tool: TOOL, reason: "provider double-charges" });
      // refused before anything was reserved: no record, no execution under that key
      const raw = await fetch(`${servers[i].url}/api/v1/keys/pause-tenant/${outcome.refusedKey}`, { headers: { authorization: `Bearer ${token}` } });
      expect(raw.status).toBe(200);
      expect(await raw.json()).toMatchObject({ state: "absent", record: null, timeline: [] });
    }
    // by the servers' own clocks: no call of the tool started later than a second after the pause
    const late = await pg.db.prisma.execution.findMany({ where: { tool: TOOL, startedAt: { gt: new Date(row.pausedAt.getTime() + 1_000) } }, select: { key: true, startedAt: true } });
    expect(late).toEqual([]);
    const refusedKeys = outcomes.map((o) => o.refusedKey);
    expect(await pg.db.prisma.execution.count({ where: { key: { in: refusedKeys } } })).toBe(0);

    // a done key replays on both processes; a refused call is refused again while paused
    for (const server of servers) {
      const replay = await charge(server, "done-before");
      expect(replay).toMatchObject({ status: 200, replayed: true, body: done.body });
    }

    const resumed = await cli(["tool", "resume", TOOL, "--reason", "provider fixed it"], { ...env, IDEMGATE_DEMO_TOOLS: "1" });
    expect(resumed.code, resumed.stderr).toBe(0);
    // each process runs the refused call once it has read the resume (sent again until it runs)
    for (const [i, server] of servers.entries()) {
      for (;;) {
        const again = await charge(server, refusedKeys[i]);
        if (again.status === 200) break;
        expect(again.body.type).toBe("/problems/tool_paused");
      }
    }
    const trail = await pg.db.prisma.operatorAction.findMany({ where: { action: { in: ["tool_pause", "tool_resume"] } }, orderBy: { at: "asc" } });
    expect(trail.map((a) => a.action)).toEqual(["tool_pause", "tool_resume"]);
  }, 180_000);

  it("the reservation API refuses a paused client-run tool: the TypeScript and Python guards do not run the function", async () => {
    const tsWorker = await bundledScript("test/support/guard-worker.ts");
    const dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-pause-"));
    try {
      const ledger = path.join(dir, "ledger.jsonl");
      const run = (lang: "ts" | "python", server: RunningServer, key: string) =>
        guardWorker(lang, tsWorker, { IDEMGATE_URL: server.url, IDEMGATE_TOKEN: token, KEY: key, ACCOUNT: `acct-${key}`, LEDGER: ledger, MAX_ATTEMPTS: "2" });
      const paused = await cli(["tool", "pause", "ledger.record", "--reason", "ledger migration"], { ...env, IDEMGATE_DEMO_TOOLS: "1" });
      expect(paused.code, paused.stderr).toBe(0);
      // each process, once it has read the pause, refuses the reservation: sent with new keys until refused
      for (const [i, server] of servers.entries()) {
        for (const lang of ["ts", "python"] as const) {
          for (let n = 0; ; n++) {
            const out = await run(lang, server, `guard-${lang}-${i}-${n}`);
            if (!out.ran) {
              expect(out).toMatchObject({ outcome: "ToolPausedError", status: 503, type: "/problems/tool_paused" });
              break;
            }
          }
        }
      }
      const before = (await readFile(ledger, "utf8").catch(() => "")).split("\n").filter(Boolean).length;
      // nothing more runs while paused
      for (const lang of ["ts", "python"] as const) expect(await run(lang, servers[1], `guard-${lang}-while-paused`)).toMatchObject({ ran: false, outcome: "ToolPausedError" });
      expect((await readFile(ledger, "utf8").catch(() => "")).split("\n").filter(Boolean).length).toBe(before);
      const resumed = await cli(["tool", "resume", "ledger.record", "--reason", "migration done"], { ...env, IDEMGATE_DEMO_TOOLS: "1" });
      expect(resumed.code, resumed.stderr).toBe(0);
      for (const lang of ["ts", "python"] as const) {
        for (;;) {
          const out = await run(lang, servers[1], `guard-${lang}-while-paused`);
          if (out.ran) break;
          expect(out.outcome).toBe("ToolPausedError");
        }
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 240_000);
});

import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { chromium, type APIRequestContext, type Browser } from "@playwright/test";
import { testPort } from "@/scripts/test-ports.mjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestPostgres, REDIS_TEST_URL } from "@/test/support/databases";
import { removeDataDir, ROOT, startServer, type RunningServer } from "@/test/support/server";
import { bundledScript } from "@/test/support/bundled-script";
import { deleteRedisPrefix } from "@/test/support/stores";

// A client-run tool (the demo `ledger.record`) guarded in many processes at once, in TypeScript
// (test/support/guard-worker.ts) and Python (test/support/guard_worker.py), against production
// servers on both configurations (on Redis and PostgreSQL the TypeScript processes talk to one
// server process and the Python ones to another). Every process's function appends one line to a
// ledger file (O_APPEND) when it takes effect: the lines counted are the effects. Ports 3178-3180
// are this file's.

const CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

type Lang = "ts" | "python";
type Mode = "ok" | "crash" | "throw" | "not_applied";

interface WorkerResult {
  lang: Lang;
  ran: boolean;
  outcome: string;
  status?: number;
  type?: string;
  body?: unknown;
  /** the signal that ended the process (SIGKILL for a crash) */
  signal: NodeJS.Signals | null;
}

const summary: { case: string; expected: number; counted: number }[] = [];

afterAll(() => {
  console.log("\nclient-run tools across processes: effects expected vs counted");
  for (const row of summary) console.log(`  ${row.case.padEnd(86)} expected ${row.expected}, counted ${row.counted}`);
});

const configurations = [
  { name: "embedded (PGlite)", ports: [testPort(3178)], servers: false },
  { name: "Redis and PostgreSQL, two server processes", ports: [testPort(3179), testPort(3180)], servers: true },
] as const;

describe.each(configurations)("guarded functions in 12 processes on $name", (configuration) => {
  const prefix = `idgfault-procs-${randomUUID().slice(0, 6)}`;
  let pg: Awaited<ReturnType<typeof createTestPostgres>> | null = null;
  const servers: RunningServer[] = [];
  let token: string;
  let dir: string;
  let browser: Browser;
  /** an operator signed in to the console: releases and resolutions are operators' decisions, not an API token's */
  let operator: APIRequestContext;

  /** the TypeScript worker, bundled once (a node process of its own, so a SIGKILL is the worker's) */
  let tsWorker: string;

  beforeAll(async () => {
    tsWorker = await bundledScript("test/support/guard-worker.ts");
    dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-procs-"));
    // a short lease, so a crashed process's key is stuck within the test; not shorter: twelve
    // processes starting at once on two cores can hold a live caller's heartbeat back for seconds,
    // and its key then looks stuck to the callers waiting on it (seen at 2 s and 3 s in CI)
    const env: Record<string, string> = { IDEMGATE_RECONCILE_INTERVAL_MS: "0", IDEMGATE_DEMO_LEASE_MS: "8000", IDEMGATE_SECRET: randomUUID() + randomUUID() };
    if (configuration.servers) {
      pg = await createTestPostgres("fault_procs");
      Object.assign(env, { DATABASE_URL: pg.url, REDIS_URL: REDIS_TEST_URL, IDEMGATE_REDIS_PREFIX: prefix });
    }
    for (const port of configuration.ports) {
      await removeDataDir(`.data/fault-procs-${port}`);
      servers.push(await startServer({ port, dataDir: `.data/fault-procs-${port}`, env }));
    }
    const credentials = await servers[0].credentials();
    token = credentials.apiToken;

    browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium", args: CHROMIUM_ARGS });
    const page = await browser.newPage({ baseURL: servers[0].url });
    await page.goto("/login");
    await page.getByLabel("Email").fill(credentials.email);
    await page.getByLabel("Password").fill(credentials.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL((url) => !url.pathname.startsWith("/login"));
    operator = page.request;
  });

  afterAll(async () => {
    await browser?.close();
    for (const server of servers) await server.stop();
    await deleteRedisPrefix(prefix);
    await pg?.drop();
    for (const port of configuration.ports) await removeDataDir(`.data/fault-procs-${port}`);
    await rm(dir, { recursive: true, force: true });
  });

  const serverFor = (lang: Lang) => servers[lang === "python" ? servers.length - 1 : 0];

  function worker(lang: Lang, key: string, ledger: string, mode: Mode = "ok", delayMs = 0): Promise<WorkerResult> {
    const [command, args] =
      lang === "ts" ? [process.execPath, [tsWorker]] : [process.env.PYTHON ?? "python3", [path.join(ROOT, "test", "support", "guard_worker.py")]];
    const child = spawn(command, args, {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        ...process.env,
        PYTHONPATH: path.join(ROOT, "clients", "python"),
        IDEMGATE_URL: serverFor(lang).url,
        IDEMGATE_TOKEN: token,
        KEY: key,
        ACCOUNT: `acct-${key.slice(0, 40)}`,
        LEDGER: ledger,
        MODE: mode,
        DELAY_MS: String(delayMs),
      },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    // "close", not "exit": exit can come before the last of stdout has been read
    return new Promise((resolve, reject) =>
      child.once("close", (code, signal) => {
        if (signal) return resolve({ lang, ran: true, outcome: "killed", signal });
        const line = stdout.trim().split("\n").at(-1);
        if (code !== 0 || !line) return reject(new Error(`${lang} worker exited ${code}:\n${stdout}\n${stderr}`));
        resolve({ ...(JSON.parse(line) as Omit<WorkerResult, "signal">), signal: null });
      }),
    );
  }

  async function effects(ledger: string): Promise<number> {
    const text = await readFile(ledger, "utf8").catch(() => "");
    return text.split("\n").filter(Boolean).length;
  }

  const api = (pathname: string, init: RequestInit = {}) =>
    fetch(serverFor("ts").url + pathname, { ...init, headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...init.headers } });

  async function keyState(key: string): Promise<string> {
    const res = await api(`/api/v1/keys/demo/${encodeURIComponent(key)}`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { record?: { state: string }; state?: string };
    return body.record?.state ?? body.state ?? "";
  }

  async function waitForStuck(key: string): Promise<void> {
    const deadline = Date.now() + 40_000;
    for (;;) {
      if ((await keyState(key)) === "stuck") return;
      if (Date.now() > deadline) throw new Error(`key ${key} did not become stuck`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  /** What an operator does in the console: POST the key's release or resolve as the signed-in session. */
  async function decide(key: string, action: "release" | "resolve", data: Record<string, unknown>): Promise<void> {
    const url = `${servers[0].url}/api/v1/keys/demo/${encodeURIComponent(key)}/${action}`;
    const res = await operator.post(url, { data, headers: { origin: servers[0].url } });
    expect(res.status(), await res.text()).toBe(200);
  }

  const record = (name: string, expected: number, counted: number) => summary.push({ case: `${configuration.servers ? "redis+pg" : "embedded"}: ${name}`, expected, counted });

  it("8 TypeScript and 4 Python processes with one key at once: one effect; the others replay the same result", async () => {
    const key = `race-${randomUUID()}`;
    const ledger = path.join(dir, `${key}.jsonl`);
    const langs: Lang[] = [...Array<Lang>(8).fill("ts"), ...Array<Lang>(4).fill("python")];
    const results = await Promise.all(langs.map((lang) => worker(lang, key, ledger, "ok", 800)));
    const counted = await effects(ledger);
    record("8 TS + 4 Python processes, one key at once", 1, counted);
    expect(counted).toBe(1);
    expect(results.filter((r) => r.ran)).toHaveLength(1);
    expect(results.map((r) => r.outcome).sort(), JSON.stringify(results)).toEqual([...Array(11).fill("replayed"), "ran"].sort());
    const bodies = new Set(results.map((r) => JSON.stringify(r.body)));
    expect(bodies.size).toBe(1);
    expect(await keyState(key)).toBe("done");
  });

  it.each<Lang>(["python", "ts"])("a %s process SIGKILLed after the effect: stuck after its lease; an operator's resolve is replayed to both clients, nothing runs again", async (lang) => {
    const key = `kill-resolve-${lang}-${randomUUID()}`;
    const ledger = path.join(dir, `${key}.jsonl`);
    const crashed = await worker(lang, key, ledger, "crash");
    expect(crashed.signal).toBe("SIGKILL");
    expect(await effects(ledger)).toBe(1);
    await waitForStuck(key);
    for (const other of ["ts", "python"] as const) {
      const retry = await worker(other, key, ledger);
      expect(retry).toMatchObject({ ran: false, status: 409, type: "/problems/stuck" });
    }
    await decide(key, "resolve", { reason: "the ledger has the entry", result: { by: "operator" } });
    expect(await keyState(key)).toBe("done");
    for (const other of ["ts", "python"] as const) expect(await worker(other, key, ledger)).toMatchObject({ ran: false, outcome: "replayed", body: { by: "operator" } });
    const counted = await effects(ledger);
    record(`${lang} process SIGKILLed after the effect, stuck, resolved, 2 retries + 2 after`, 1, counted);
    expect(counted).toBe(1);
  });

  it("a process SIGKILLed after the effect, released by an operator: the next retry runs once", async () => {
    const key = `kill-release-${randomUUID()}`;
    const ledger = path.join(dir, `${key}.jsonl`);
    expect((await worker("python", key, ledger, "crash")).signal).toBe("SIGKILL");
    await waitForStuck(key);
    await decide(key, "release", { reason: "checked: treat as not booked" });
    const retries = await Promise.all([worker("ts", key, ledger, "ok", 300), worker("ts", key, ledger, "ok", 300), worker("python", key, ledger, "ok", 300), worker("python", key, ledger, "ok", 300)]);
    expect(retries.filter((r) => r.ran)).toHaveLength(1);
    const counted = await effects(ledger);
    record("SIGKILL after the effect, released by an operator, 4 retries (the release says 'not done')", 2, counted);
    expect(counted).toBe(2);
  });

  it.each<Lang>(["ts", "python"])("the function throws after the effect in %s: unknown, never run again by either client", async (lang) => {
    const key = `throw-${lang}-${randomUUID()}`;
    const ledger = path.join(dir, `${key}.jsonl`);
    const first = await worker(lang, key, ledger, "throw");
    expect(first).toMatchObject({ ran: true, outcome: "OutcomeUnknownError" });
    const retries = await Promise.all([worker("ts", key, ledger), worker("ts", key, ledger), worker("python", key, ledger), worker("python", key, ledger)]);
    for (const retry of retries) expect(retry).toMatchObject({ ran: false, outcome: "OutcomeUnknownError", status: 409, type: "/problems/outcome_unknown" });
    expect(await keyState(key)).toBe("unknown");
    const counted = await effects(ledger);
    record(`${lang} function throws after the effect, 4 retries (2 TS, 2 Python)`, 1, counted);
    expect(counted).toBe(1);
  });

  it.each<[Lang, Lang]>([
    ["python", "ts"],
    ["ts", "python"],
  ])("not applied in %s: released, and the retry in %s runs once", async (lang, other) => {
    const key = `not-applied-${lang}-${randomUUID()}`;
    const ledger = path.join(dir, `${key}.jsonl`);
    expect(await worker(lang, key, ledger, "not_applied")).toMatchObject({ ran: false, outcome: "NotAppliedError" });
    expect(await effects(ledger)).toBe(0);
    expect(await worker(other, key, ledger)).toMatchObject({ ran: true, outcome: "ran" });
    expect(await worker(lang, key, ledger)).toMatchObject({ ran: false, outcome: "replayed" });
    const counted = await effects(ledger);
    record(`not applied in ${lang}, retried in ${other}, then in ${lang}`, 1, counted);
    expect(counted).toBe(1);
  });
});

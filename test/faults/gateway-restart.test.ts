import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { testPort } from "@/scripts/test-ports.mjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bundledScript } from "@/test/support/bundled-script";
import { createTestPostgres, REDIS_TEST_URL } from "@/test/support/databases";
import { removeDataDir, ROOT, startServer, type RunningServer, type ServerOptions } from "@/test/support/server";
import { deleteRedisPrefix } from "@/test/support/stores";

// A guarded function's effect happens, then the gateway (a production server process) is killed
// before the function's completion reaches it, and started again only once the caller has its
// result (seconds later, past the lease): the caller gets its result at once, the completion is delivered in the background with the same token once the
// gateway is back (the key had gone stuck meanwhile: nobody took it over), and a retry with the same
// key replays the result. Effects are counted in a ledger file the workers append to. The worker
// processes: test/support/guard-worker.ts (TypeScript) and test/support/guard_worker.py (Python).
// Ports 3193 and 3194 are this file's.

type Lang = "ts" | "python";

interface WorkerResult {
  lang: Lang;
  ran: boolean;
  outcome: string;
  status?: number;
  type?: string;
  body?: unknown;
  warnings?: string[];
}

/** how long a worker's normal exit may wait for its completion: a restart on a busy machine has taken over a minute */
const EXIT_FLUSH_MS = 170_000;

const configurations = [
  { name: "embedded (PGlite)", port: testPort(3193), servers: false },
  { name: "Redis and PostgreSQL", port: testPort(3194), servers: true },
] as const;

const summary: { case: string; expected: number; counted: number }[] = [];
afterAll(() => {
  console.log("\ngateway killed between a guarded effect and its completion: effects expected vs counted");
  for (const row of summary) console.log(`  ${row.case.padEnd(70)} expected ${row.expected}, counted ${row.counted}`);
});

describe.each(configurations)("a gateway killed before a guarded call's completion, on $name", (configuration) => {
  const dataDir = `.data/fault-restart-${configuration.port}`;
  const prefix = `idgfault-restart-${randomUUID().slice(0, 6)}`;
  let pg: Awaited<ReturnType<typeof createTestPostgres>> | null = null;
  let options: ServerOptions;
  let server: RunningServer;
  let token: string;
  let dir: string;
  let tsWorker: string;

  beforeAll(async () => {
    tsWorker = await bundledScript("test/support/guard-worker.ts");
    dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-restart-"));
    await removeDataDir(dataDir);
    // a short lease: the key is stuck (its lease passed, nobody took it over) while the gateway is down
    const env: Record<string, string> = { IDEMGATE_RECONCILE_INTERVAL_MS: "0", IDEMGATE_DEMO_LEASE_MS: "1500", IDEMGATE_SECRET: randomUUID() + randomUUID() };
    if (configuration.servers) {
      pg = await createTestPostgres("fault_restart");
      Object.assign(env, { DATABASE_URL: pg.url, REDIS_URL: REDIS_TEST_URL, IDEMGATE_REDIS_PREFIX: prefix });
    }
    options = { port: configuration.port, dataDir, env };
    server = await startServer(options);
    token = (await server.credentials()).apiToken;
  });

  afterAll(async () => {
    await server?.stop();
    await deleteRedisPrefix(prefix);
    await pg?.drop();
    await removeDataDir(dataDir);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** A worker process; `printed` resolves when it has printed what guard() gave it (it may still be delivering). */
  function worker(lang: Lang, key: string, ledger: string, delayMs = 0): { printed: Promise<WorkerResult>; exited: Promise<number | null>; running: () => boolean } {
    const [command, args] = lang === "ts" ? [process.execPath, [tsWorker]] : [process.env.PYTHON ?? "python3", [path.join(ROOT, "test", "support", "guard_worker.py")]];
    const child = spawn(command, args, {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        ...process.env,
        PYTHONPATH: path.join(ROOT, "clients", "python"),
        IDEMGATE_URL: server.url,
        IDEMGATE_TOKEN: token,
        KEY: key,
        ACCOUNT: `acct-${key.slice(0, 40)}`,
        LEDGER: ledger,
        MODE: "ok",
        DELAY_MS: String(delayMs),
        // the client's own retries of one request (as the TypeScript client's default), then the background's
        MAX_ATTEMPTS: "5",
        // the first call's process may have to wait for the gateway when it exits
        ...(delayMs > 0 ? { FLUSH_ON_EXIT_MS: String(EXIT_FLUSH_MS), FLUSH_TIMEOUT: String(EXIT_FLUSH_MS / 1000) } : {}),
      },
    });
    let stdout = "";
    let stderr = "";
    let resolvePrinted!: (r: WorkerResult) => void;
    const printed = new Promise<WorkerResult>((resolve) => (resolvePrinted = resolve));
    child.stdout.on("data", (d) => {
      stdout += d;
      const line = stdout.split("\n").find((l) => l.startsWith("{"));
      if (line && stdout.includes("\n", stdout.indexOf(line))) resolvePrinted(JSON.parse(line) as WorkerResult);
    });
    child.stderr.on("data", (d) => (stderr += d));
    let closed = false;
    const exited = new Promise<number | null>((resolve, reject) =>
      child.once("close", (code) => {
        closed = true;
        if (code !== 0) return reject(new Error(`${lang} worker exited ${code}:\n${stdout}\n${stderr}`));
        resolve(code);
      }),
    );
    const result = { printed: Promise.race([printed, exited.then(() => printed)]), exited, running: () => !closed };
    // awaited by the test; a failure it does not reach yet is reported where it awaits
    result.printed.catch(() => {});
    exited.catch(() => {});
    return result;
  }

  async function effects(ledger: string): Promise<number> {
    const text = await readFile(ledger, "utf8").catch(() => "");
    return text.split("\n").filter(Boolean).length;
  }

  async function keyState(key: string): Promise<string> {
    const res = await fetch(`${server.url}/api/v1/keys/demo/${encodeURIComponent(key)}`, { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { record?: { state: string }; state?: string };
    return body.record?.state ?? body.state ?? "";
  }

  it.each<Lang>(["ts", "python"])("%s: the caller gets its result at once, the completion is stored once the gateway is back, and the retry replays it", async (lang) => {
    const key = `restart-${lang}-${randomUUID()}`;
    const ledger = path.join(dir, `${key}.jsonl`);
    // the function takes effect, then takes 2 s more to return: the gateway is killed in between
    const first = worker(lang, key, ledger, 2_000);
    while ((await effects(ledger)) === 0 && first.running()) await new Promise((r) => setTimeout(r, 20));
    if (!first.running()) await first.exited;
    await server.kill();
    // the gateway is started again only once the caller has its result: it returned while the
    // gateway was down (it did not wait for it), whatever the machine's speed
    const result = await first.printed;
    server = await startServer(options);
    await first.exited;
    expect(result, JSON.stringify(result)).toMatchObject({ ran: true, outcome: "ran", body: { by: lang } });
    // the process delivered the completion before it exited
    expect(await keyState(key)).toBe("done");
    if (lang === "ts") expect(result.warnings).toEqual(["settle_pending"]);
    // a retry in the other language too: both replay the stored result, nothing runs again
    for (const other of [lang, lang === "ts" ? "python" : "ts"] as const) {
      const again = worker(other, key, ledger);
      const retry = await again.printed;
      await again.exited;
      expect(retry, JSON.stringify(retry)).toMatchObject({ ran: false, outcome: "replayed", body: { by: lang } });
    }
    const counted = await effects(ledger);
    summary.push({ case: `${configuration.servers ? "redis+pg" : "embedded"}: ${lang} worker, gateway killed, back after the caller returned`, expected: 1, counted });
    expect(counted).toBe(1);
  });
});

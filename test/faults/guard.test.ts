import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { testPort } from "@/scripts/test-ports.mjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FinalResultError, IdemgateClient, NotAppliedError, OutcomeUnknownError, type GuardWarning } from "@/lib/client/index";
import { createTestPostgres, REDIS_TEST_URL } from "@/test/support/databases";
import { removeDataDir, ROOT, startServer, type RunningServer } from "@/test/support/server";
import { deleteRedisPrefix } from "@/test/support/stores";

// guard() from outside: a function in this process (it appends to a ledger, standing in for a
// payment SDK) guarded through a production server's reservation API, on both configurations.
// Effects are counted where they happen: in the ledger. Ports 3182 and 3183 are this file's (moved by IDEMGATE_TEST_PORT_BASE).

const run = promisify(execFile);
const LEASE_MS = 1_500;
const configurations = [
  { name: "embedded (PGlite)", port: testPort(3182), servers: false },
  { name: "Redis and PostgreSQL", port: testPort(3183), servers: true },
] as const;

describe.each(configurations)("guard() against the $name configuration", (configuration) => {
  const dataDir = `.data/fault-guard-${configuration.port}`;
  const prefix = `idgfault-guard-${randomUUID().slice(0, 6)}`;
  let pg: Awaited<ReturnType<typeof createTestPostgres>> | null = null;
  let server: RunningServer;
  let token: string;
  let client: IdemgateClient;

  beforeAll(async () => {
    await removeDataDir(dataDir);
    const env: Record<string, string> = { IDEMGATE_RECONCILE_INTERVAL_MS: "0", IDEMGATE_DEMO_LEASE_MS: String(LEASE_MS) };
    if (configuration.servers) {
      pg = await createTestPostgres("fault_guard");
      Object.assign(env, { DATABASE_URL: pg.url, REDIS_URL: REDIS_TEST_URL, IDEMGATE_REDIS_PREFIX: prefix });
    }
    server = await startServer({ port: configuration.port, dataDir, env });
    token = (await server.credentials()).apiToken;
    client = new IdemgateClient({ baseUrl: server.url, token, retry: { baseDelayMs: 20, maxDelayMs: 100 } });
  });

  afterAll(async () => {
    await server?.stop();
    await deleteRedisPrefix(prefix);
    await pg?.drop();
    await removeDataDir(dataDir);
  });

  const entry = (memo: string) => ({ account: "acct-guard", amountCents: 1250, currency: "EUR", memo });

  it("runs once and replays the stored result to every retry without running", async () => {
    const ledger: string[] = [];
    const key = `g-${randomUUID()}`;
    const record = async () => {
      ledger.push(key);
      return { entryId: `e-${ledger.length}` };
    };
    const results = [];
    for (let i = 0; i < 5; i++) results.push(await client.guard("ledger.record", entry("once"), record, { key }));
    expect(results).toEqual(Array(5).fill({ entryId: "e-1" }));
    expect(ledger).toHaveLength(1);
    // idempotent(): the key made from the arguments
    const charge = client.idempotent("ledger.record", async (args: { account: string; amountCents: number; currency: string; memo: string }) => record(), {
      key: (args) => `order-${args.memo}-${key}`,
    });
    const a = await charge(entry("o-1"));
    expect(await charge(entry("o-1"))).toEqual(a);
    expect(ledger).toHaveLength(2);
  });

  it("fn throws after its effect: unknown (OutcomeUnknownError), and no retry runs it again", async () => {
    const ledger: string[] = [];
    const key = `g-${randomUUID()}`;
    const failing = async () => {
      ledger.push(key);
      throw new Error("the SDK's connection reset after sending");
    };
    await expect(client.guard("ledger.record", entry("unknown"), failing, { key })).rejects.toBeInstanceOf(OutcomeUnknownError);
    for (let i = 0; i < 3; i++) {
      await expect(client.guard("ledger.record", entry("unknown"), failing, { key })).rejects.toBeInstanceOf(OutcomeUnknownError);
    }
    expect(ledger).toHaveLength(1);
  });

  it("fn throws NotAppliedError: released, and the retry runs once", async () => {
    const ledger: string[] = [];
    const key = `g-${randomUUID()}`;
    let attempt = 0;
    const flaky = async () => {
      if (attempt++ === 0) throw new NotAppliedError("the SDK refused before sending");
      ledger.push(key);
      return { entryId: "e-after-retry" };
    };
    await expect(client.guard("ledger.record", entry("not-applied"), flaky, { key })).rejects.toBeInstanceOf(NotAppliedError);
    expect(await client.guard("ledger.record", entry("not-applied"), flaky, { key })).toEqual({ entryId: "e-after-retry" });
    expect(await client.guard("ledger.record", entry("not-applied"), flaky, { key })).toEqual({ entryId: "e-after-retry" });
    expect(ledger).toHaveLength(1);
  });

  it("an error with a 4xx status is the stored result: rethrown, then replayed as FinalResultError without running", async () => {
    const ledger: string[] = [];
    const key = `g-${randomUUID()}`;
    const declined = async () => {
      ledger.push(key);
      throw Object.assign(new Error("card declined"), { status: 402 });
    };
    await expect(client.guard("ledger.record", entry("declined"), declined, { key })).rejects.toThrow("card declined");
    const replay = await client.guard("ledger.record", entry("declined"), declined, { key }).catch((e) => e);
    expect(replay).toBeInstanceOf(FinalResultError);
    expect(replay).toMatchObject({ status: 402, body: { error: { message: "card declined" } } });
    expect(ledger).toHaveLength(1);
  });

  it("heartbeats keep a call three times its lease alive; without them the reservation is stuck after its lease", async () => {
    const key = `g-${randomUUID()}`;
    const warnings: GuardWarning[] = [];
    let duplicate: unknown;
    const slow = async () => {
      await new Promise((r) => setTimeout(r, LEASE_MS * 3));
      // still running past three leases: a duplicate meets a running call, not a stuck one
      duplicate = await client.guard("ledger.record", entry("slow"), async () => "ran twice", { key, waitSeconds: 0 }).catch((e) => e);
      return { entryId: "e-slow" };
    };
    expect(await client.guard("ledger.record", entry("slow"), slow, { key, onWarning: (w) => warnings.push(w) })).toEqual({ entryId: "e-slow" });
    expect(warnings).toEqual([]);
    // the duplicate waited out the running call (client retries on conflict) and got its result, or gave up with a conflict
    expect(duplicate === undefined || (duplicate as { code?: string }).code !== "stuck").toBe(true);

    const idleKey = `g-${randomUUID()}`;
    const res = await fetch(`${server.url}/api/v1/tools/ledger.record/reservations`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", "idempotency-key": idleKey },
      body: JSON.stringify({ arguments: entry("idle") }),
    });
    expect(res.status).toBe(201);
    await new Promise((r) => setTimeout(r, LEASE_MS + 300));
    const stuck = await client.guard("ledger.record", entry("idle"), async () => "must not run", { key: idleKey }).catch((e) => e);
    expect(stuck).toMatchObject({ status: 409, type: "/problems/stuck" });
  });

  // what it checks is the package, not the store: defined once, on the first configuration
  if (configuration === configurations[0]) {
    it("the packed client installs offline into an empty project on Node and guards a function there", async () => {
      const dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-client-"));
      try {
        const clientDir = path.join(ROOT, "lib", "client");
        const { stdout } = await run("npm", ["pack", "--silent", "--pack-destination", dir], { cwd: clientDir });
        const tarball = path.join(dir, stdout.trim().split("\n").at(-1)!);
        const project = path.join(dir, "app");
        await run("mkdir", ["-p", project]);
        await writeFile(path.join(project, "package.json"), JSON.stringify({ name: "guarded-app", version: "1.0.0", type: "module", private: true }));
        await run("npm", ["install", "--offline", "--no-audit", "--no-fund", tarball], { cwd: project });
        expect(await readdir(path.join(project, "node_modules", "@idemgate", "client", "dist"))).toEqual(expect.arrayContaining(["index.js", "index.d.ts"]));
        const key = `pkg-${randomUUID()}`;
        await writeFile(
          path.join(project, "main.mjs"),
          `import { IdemgateClient } from "@idemgate/client";
const client = new IdemgateClient({ baseUrl: process.env.URL, token: process.env.TOKEN });
let effects = 0;
const args = { account: "acct-pkg", amountCents: 10, currency: "EUR" };
const first = await client.guard("ledger.record", args, async () => ({ entryId: "pkg-" + ++effects }), { key: process.env.KEY });
const again = await client.guard("ledger.record", args, async () => ({ entryId: "pkg-" + ++effects }), { key: process.env.KEY });
console.log(JSON.stringify({ first, again, effects }));
`,
        );
        const out = await run(process.execPath, ["main.mjs"], { cwd: project, env: { ...process.env, URL: server.url, TOKEN: token, KEY: key } });
        expect(JSON.parse(out.stdout.trim())).toEqual({ first: { entryId: "pkg-1" }, again: { entryId: "pkg-1" }, effects: 1 });
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    }, 240_000);
  }
});
